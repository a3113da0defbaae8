#!/usr/bin/env python3
"""End-to-end benchmark of granary-fuse, in one run on the same files.

  1 MiB sequential and 128 KiB random reads of one file
    - through granary-fuse, chunks in granaryd's local cache, the mount's page
      cache dropped (posix_fadvise DONTNEED on the mount's file); also through
      two more mounts with one part of the read path turned off, to show what
      each is worth: --no-local-reads (every chunk over gRPC) and
      --no-page-store (fetched chunks not copied into the page cache);
    - through bindfs over the source (its page cache dropped the same way);
    - straight from the source file, warm in the page cache;
  a repeated read through granary-fuse (keep_cache: the kernel's page cache);
  stat latency: the first stat of a file (a FUSE lookup; bindfs's lookup over
  the same files as the floor), a cached stat, and the first stat of a file
  whose directory was listed;
  time to mount a dataset of FILES files until a file in it can be stat()ed.
Every read measurement is taken --rounds times, the systems in turn within a
round; speeds are the median over rounds, ratios the median of the ratios
within each round (the machine is shared and noisy).

Usage (as root; installs bindfs if missing):
  /usr/bin/python3 bench/fuse/fuse_bench.py [--build build] [--size-mib 1024]
      [--files 1000000] [--rounds 3] [--workdir /var/tmp/granary-fuse-bench]
      [--only-mount]
--only-mount measures just the many-file mount and stat latencies.
Prints one line per measurement and the ratios against the targets.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import free_port, wait_for  # noqa: E402

MIB = 1 << 20


def log(text):
    print(text, flush=True)



def drop_file_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def sequential_read(path, block):
    buf = bytearray(block)
    view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY)
    total = 0
    start = time.perf_counter()
    while True:
        n = os.readv(fd, [view])
        if n == 0:
            break
        total += n
    elapsed = time.perf_counter() - start
    os.close(fd)
    return total / elapsed / 1e9


def random_read(path, block, seed=7):
    size = os.path.getsize(path)
    offsets = [i * block for i in range(size // block)]
    random.Random(seed).shuffle(offsets)
    buf = bytearray(block)
    fd = os.open(path, os.O_RDONLY)
    start = time.perf_counter()
    total = 0
    for offset in offsets:
        total += os.preadv(fd, [buf], offset)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return total / elapsed / 1e9


def stat_latency_us(paths):
    start = time.perf_counter()
    for path in paths:
        os.stat(path)
    return (time.perf_counter() - start) / len(paths) * 1e6


class Granaryd:
    def __init__(self, build, workdir):
        self.socket = os.path.join(workdir, "granaryd.sock")
        self.address = "unix:" + self.socket
        self.log = open(os.path.join(workdir, "granaryd.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(build, "granaryd"), "--data-dir", os.path.join(workdir, "data"),
             "--socket", self.socket,
             "--metrics-listen", "127.0.0.1:%d" % free_port(), "--capacity", "16GiB",
             # Benchmarks register sources from wherever they made them.
             "--source-root", "/"],
            stderr=self.log, stdout=self.log)
        self.cli = [os.path.join(build, "granary"), "--server", self.address]
        wait_for(lambda: subprocess.run(self.cli + ["status"], capture_output=True).returncode == 0,
                 30, "granaryd")

    def add(self, name, source, chunk_size):
        subprocess.run(self.cli + ["dataset", "add", name, source, "--chunk-size", chunk_size],
                       check=True, capture_output=True)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def unmount(path):
    if subprocess.run(["fusermount3", "-u", path], capture_output=True).returncode != 0:
        subprocess.run(["fusermount", "-u", path], capture_output=True)
        subprocess.run(["fusermount3", "-uz", path], capture_output=True)


def mount_granary(build, server, mountpoint, dataset, extra=()):
    """Mounts (the process detaches once ready) and returns seconds taken."""
    os.makedirs(mountpoint, exist_ok=True)
    start = time.perf_counter()
    subprocess.run([os.path.join(build, "granary-fuse"), mountpoint, "--server", server,
                    "--dataset", dataset, *extra], check=True)
    return time.perf_counter() - start


RATIOS = {
    "seq_vs_bindfs": ("granary_seq", "bindfs_seq"),
    "rand_vs_bindfs": ("granary_rand", "bindfs_rand"),
    "repeat_vs_direct": ("granary_repeat", "direct_seq"),
    "local_vs_grpc_seq": ("granary_seq", "no_local_reads_seq"),
    "local_vs_grpc_rand": ("granary_rand", "no_local_reads_rand"),
    "store_vs_none_seq": ("granary_seq", "no_page_store_seq"),
    "store_vs_none_rand": ("granary_rand", "no_page_store_rand"),
}


def read_speeds(args, build, server, work, data_file, mounts, bind, results):
    """Sequential, repeated and random reads: the granary mounts vs bindfs vs direct."""
    server.add("bench", os.path.join(work, "src"), "4MiB")
    for extra, mountpoint in mounts.values():
        mount_granary(build, server.address, mountpoint, "bench", extra)
    os.makedirs(bind)
    subprocess.run(["bindfs", os.path.join(work, "src"), bind], check=True)
    paths = {name: os.path.join(mountpoint, "bench", "data.bin")
             for name, (_, mountpoint) in mounts.items()}
    paths["bindfs"] = os.path.join(bind, "data.bin")

    # Fill granaryd's cache (the first read goes through to the source),
    # the source's page cache, and each mount's chunk cache as a job's
    # earlier epochs would.
    for name in mounts:
        sequential_read(paths[name], MIB)
    sequential_read(data_file, MIB)

    samples = {}

    def measure(key, function):
        samples.setdefault(key, []).append(function())

    def cold(path, read):
        drop_file_cache(path)
        return read(path)

    for _ in range(args.rounds):
        measure("direct_seq", lambda: sequential_read(data_file, MIB))
        measure("direct_rand", lambda: random_read(data_file, 128 << 10))
        for name, path in paths.items():
            measure(name + "_seq", lambda: cold(path, lambda p: sequential_read(p, MIB)))
            if name == "granary":
                measure("granary_repeat", lambda: sequential_read(path, MIB))
            measure(name + "_rand", lambda: cold(path, lambda p: random_read(p, 128 << 10)))
    for key, values in samples.items():
        results[key] = statistics.median(values)
        log("%-22s %6.2f GB/s  (median of %s)" %
            (key, results[key], ", ".join("%.2f" % v for v in values)))
    # Ratios are taken within each round (the systems ran back to back), then
    # their median: the load on a shared machine drifts between rounds.
    for key, (numerator, denominator) in RATIOS.items():
        results[key] = statistics.median(
            a / b for a, b in zip(samples[numerator], samples[denominator]))


def stat_latencies(mounted, source, names, bind, results):
    """stat() latency through the mount of the many-file dataset.

    first: a file the kernel has not seen (one FUSE lookup); bindfs_first: the
    same files through bindfs, the lookup round trip of a minimal FUSE
    filesystem; cached: the same files again (the kernel's caches); listed: files
    the kernel has not looked up but whose directory was listed, as a DataLoader
    does before reading (readdirplus hands the kernel every entry's attributes).
    """
    rng = random.Random(3)
    shuffled = rng.sample(names, min(len(names), 20000))
    looked_up, listed = shuffled[:len(shuffled) // 2], shuffled[len(shuffled) // 2:]
    results["stat_first_us"] = stat_latency_us([os.path.join(mounted, n) for n in looked_up])
    results["stat_cached_us"] = stat_latency_us([os.path.join(mounted, n) for n in looked_up])
    os.makedirs(bind, exist_ok=True)
    subprocess.run(["bindfs", source, bind], check=True)
    results["stat_bindfs_first_us"] = stat_latency_us([os.path.join(bind, n) for n in looked_up])
    directories = sorted({os.path.dirname(n) for n in names})
    start = time.perf_counter()
    entries = sum(len(os.listdir(os.path.join(mounted, d))) for d in directories)
    results["list_us_per_entry"] = (time.perf_counter() - start) / entries * 1e6
    results["stat_listed_us"] = stat_latency_us([os.path.join(mounted, n) for n in listed])
    log("stat, first (FUSE lookup): %.1f us (bindfs: %.1f us); cached: %.1f us; "
        "after listing the directory: %.1f us (listing: %.1f us per entry)" %
        (results["stat_first_us"], results["stat_bindfs_first_us"], results["stat_cached_us"],
         results["stat_listed_us"], results["list_us_per_entry"]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=1000000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", default="/var/tmp/granary-fuse-bench")
    parser.add_argument("--only-mount", action="store_true",
                        help="skip the read measurements: only mount FILES files and stat them")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    if shutil.which("bindfs") is None:
        subprocess.run(["apt-get", "install", "-y", "-qq", "bindfs"], check=True)

    work = args.workdir
    for mnt in ("mnt", "mnt-grpc", "mnt-nostore", "bindfs", "mnt1m", "bindfs-small"):
        unmount(os.path.join(work, mnt))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "src"))
    data_file = os.path.join(work, "src", "data.bin")
    with open(data_file, "wb") as f:
        for _ in range(0 if args.only_mount else args.size_mib):
            f.write(os.urandom(MIB))
    server = Granaryd(build, work)
    mounts = {"granary": ((), os.path.join(work, "mnt")),
              "no_local_reads": (("--no-local-reads",), os.path.join(work, "mnt-grpc")),
              "no_page_store": (("--no-page-store",), os.path.join(work, "mnt-nostore"))}
    bind = os.path.join(work, "bindfs")
    mnt1m = os.path.join(work, "mnt1m")
    bind_small = os.path.join(work, "bindfs-small")
    results = {}
    try:
        if not args.only_mount:
            read_speeds(args, build, server, work, data_file, mounts, bind, results)

        # Stat latency over a many-file dataset.
        small = os.path.join(work, "small")
        names = ["d%03d/f%05d" % (i % 100, i) for i in range(args.files)]
        for d in range(min(100, args.files)):
            os.makedirs(os.path.join(small, "d%03d" % d), exist_ok=True)
        for name in names:
            os.close(os.open(os.path.join(small, name), os.O_CREAT | os.O_WRONLY, 0o644))
        start = time.perf_counter()
        server.add("many", small, "4MiB")
        log("registering %d files took %.1f s" % (args.files, time.perf_counter() - start))
        results["mount_s"] = mount_granary(build, server.address, mnt1m, "many")
        start = time.perf_counter()
        os.stat(os.path.join(mnt1m, "many", names[-1]))
        results["mount_s"] += time.perf_counter() - start
        log("mount of %d files until the first stat: %.3f s" % (args.files, results["mount_s"]))
        stat_latencies(os.path.join(mnt1m, "many"), small, names, bind_small, results)
    finally:
        for m in [mountpoint for _, mountpoint in mounts.values()] + [bind, mnt1m, bind_small]:
            unmount(m)
        server.stop()

    log("")
    stats = ("stat %.1f us first, %.1f us after listing, %.1f us cached (target < 20)" %
             (results["stat_first_us"], results["stat_listed_us"], results["stat_cached_us"]))
    if args.only_mount:
        log("ratios: mount %.2f s (target < 2); %s" % (results["mount_s"], stats))
        return
    log("ratios: seq vs bindfs %.2fx (target >= 2); random vs bindfs %.2fx (target >= 2); "
        "repeated vs page cache %.2fx (target >= 0.8); mount %.2f s (target < 2); %s" %
        (results["seq_vs_bindfs"], results["rand_vs_bindfs"], results["repeat_vs_direct"],
         results["mount_s"], stats))
    log("parts of the read path: local reads vs gRPC %.2fx sequential, %.2fx random; "
        "page store vs none %.2fx sequential, %.2fx random" %
        (results["local_vs_grpc_seq"], results["local_vs_grpc_rand"],
         results["store_vs_none_seq"], results["store_vs_none_rand"]))


if __name__ == "__main__":
    sys.exit(main())
