#!/usr/bin/env python3
"""Cached files through the mount against the same files on the local disk.

One granaryd holds a dataset whole (prewarmed, then opened once through the
mount so that granaryd has verified every file); the same files, the dataset's
source, lie on the local disk beside the cache. Each round measures, the two
in turn:
  seq-cold    1 MiB sequential reads of a --size-mib file, page cache dropped
              (echo 3 > /proc/sys/vm/drop_caches) before each read;
  seq-warm    the same with the file's pages already in the page cache;
  rand-cold   128 KiB reads at shuffled offsets of that file, caches dropped;
  rand-warm   the same with the page cache warm;
  tar-random  Python's tarfile: --members members of a tar archive read at
              random (extractfile().read()), caches dropped, the archive's
              index (getmembers) built before the clock starts.
granary-fuse's CPU time over the mount's reads is read from /proc; --mode
plain mounts with --no-passthrough for comparison. The ratio reported is the
geometric mean over --rounds of the ratio within a round: which of the two
goes first alternates from round to round, and on this machine whichever
reads the disk second in a round is often faster, so an even number of rounds
cancels that out (the machine is shared and noisy; every round's ratio is
listed too).

Usage (root): /usr/bin/python3 bench/fuse/native_bench.py [--build build]
    [--size-mib 2048] [--members 400] [--rounds 6] [--mode passthrough|plain]
    [--workdir /var/tmp/granary-native-bench] [--json]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import free_port, fuse_server_pid, wait_for  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sequential(path, block=MIB):
    buf = bytearray(block)
    fd = os.open(path, os.O_RDONLY)
    total, start = 0, time.perf_counter()
    while True:
        n = os.readv(fd, [buf])
        if n == 0:
            break
        total += n
    elapsed = time.perf_counter() - start
    os.close(fd)
    return total / elapsed


def random_reads(path, block=128 << 10, seed=7):
    size = os.path.getsize(path)
    offsets = [i * block for i in range(size // block)]
    random.Random(seed).shuffle(offsets)
    buf = bytearray(block)
    fd = os.open(path, os.O_RDONLY)
    total, start = 0, time.perf_counter()
    for offset in offsets:
        total += os.preadv(fd, [buf], offset)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return total / elapsed


def tar_random(path, count, seed=11):
    with tarfile.open(path) as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        picks = random.Random(seed).choices(members, k=count)
        drop_caches()
        total, start = 0, time.perf_counter()
        for member in picks:
            total += len(archive.extractfile(member).read())
        return total / (time.perf_counter() - start)


def write_random_file(path, size):
    rng = random.Random(1)
    with open(path, "wb") as f:
        for _ in range(size // (4 * MIB)):
            f.write(rng.randbytes(4 * MIB))


def write_tar(path, members):
    rng = random.Random(2)
    staging = path + ".d"
    os.makedirs(staging, exist_ok=True)
    names = []
    for i in range(members):
        name = "sample-%05d.npy" % i
        with open(os.path.join(staging, name), "wb") as f:
            f.write(rng.randbytes(int(rng.lognormvariate(11.6, 0.6))))
        names.append(name)
    with tarfile.open(path, "w") as archive:
        for name in names:
            archive.add(os.path.join(staging, name), arcname=name)
    subprocess.run(["rm", "-rf", staging], check=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--workdir", default="/var/tmp/granary-native-bench")
    p.add_argument("--size-mib", type=int, default=2048)
    p.add_argument("--tar-members", type=int, default=3000)
    p.add_argument("--members", type=int, default=400, help="tar members read per round")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--mode", choices=("passthrough", "plain"), default="passthrough")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("native_bench: run as root (drop_caches, mounts)")
    build = os.path.abspath(args.build)
    work = args.workdir
    source = os.path.join(work, "source")
    os.makedirs(source, exist_ok=True)
    big = os.path.join(source, "big.bin")
    if not os.path.exists(big) or os.path.getsize(big) != args.size_mib * MIB:
        write_random_file(big, args.size_mib * MIB)
    tar_path = os.path.join(source, "samples.tar")
    if not os.path.exists(tar_path):
        write_tar(tar_path, args.tar_members)

    subprocess.run(["rm", "-rf", os.path.join(work, "data")], check=True)
    sock = os.path.join(work, "granaryd.sock")
    log = open(os.path.join(work, "granaryd.log"), "w")
    server = subprocess.Popen(
        [os.path.join(build, "granaryd"), "--data-dir", os.path.join(work, "data"),
         "--socket", sock, "--metrics-listen", "127.0.0.1:%d" % free_port(),
         "--capacity", "%dMiB" % (args.size_mib * 2 + 4096), "--source-root", work],
        stdout=log, stderr=log)
    cli = [os.path.join(build, "granary"), "--server", "unix:" + sock]
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    fuse_pid = None
    try:
        wait_for(lambda: subprocess.run(cli + ["status"], capture_output=True).returncode == 0,
                 30, "granaryd")
        subprocess.run(cli + ["dataset", "add", "native", source], check=True,
                       capture_output=True)
        subprocess.run(cli + ["prewarm", "native"], check=True, capture_output=True)
        extra = ["--no-passthrough"] if args.mode == "plain" else []
        subprocess.run([os.path.join(build, "granary-fuse"), mnt, "--server", "unix:" + sock,
                        "--dataset", "native", "--log-file", os.path.join(work, "fuse.log"),
                        *extra], check=True)
        fuse_pid = fuse_server_pid(mnt)
        mounted = os.path.join(mnt, "native")
        # Opened once: granaryd verifies each file before it hands it out whole.
        for name in ("big.bin", "samples.tar"):
            os.close(os.open(os.path.join(mounted, name), os.O_RDONLY))

        cases = {
            "seq-cold": lambda path: (drop_caches(), sequential(path))[1],
            "seq-warm": lambda path: (sequential(path), sequential(path))[1],
            "rand-cold": lambda path: (drop_caches(), random_reads(path))[1],
            "rand-warm": lambda path: (sequential(path), random_reads(path))[1],
        }
        results = {case: {"granary": [], "local": [], "ratio": []} for case in cases}
        results["tar-random"] = {"granary": [], "local": [], "ratio": []}
        fuse_cpu = 0.0
        fuse_bytes = 0
        def mount_then_local(case, measure_mount, measure_local, mount_first):
            if mount_first:
                through, local = measure_mount(), measure_local()
            else:
                local, through = measure_local(), measure_mount()
            results[case]["granary"].append(through)
            results[case]["local"].append(local)
            results[case]["ratio"].append(through / local)

        def through_mount(measure):
            nonlocal fuse_cpu
            before = cpu_seconds(fuse_pid)
            speed = measure(os.path.join(mounted, "big.bin"))
            fuse_cpu += cpu_seconds(fuse_pid) - before
            return speed

        for round_index in range(args.rounds):
            # Which goes first alternates: the disk's speed drifts within a round.
            mount_first = round_index % 2 == 0
            for case, measure in cases.items():
                fuse_bytes += (2 if case.endswith("warm") else 1) * args.size_mib * MIB
                mount_then_local(case, lambda m=measure: through_mount(m),
                                 lambda m=measure: m(big), mount_first)
            mount_then_local(
                "tar-random",
                lambda: tar_random(os.path.join(mounted, "samples.tar"), args.members),
                lambda: tar_random(tar_path, args.members), mount_first)
    finally:
        if fuse_pid is not None:
            subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        server.terminate()
        server.wait()

    summary = {case: {"granary_mb_s": statistics.median(r["granary"]) / 1e6,
                      "local_mb_s": statistics.median(r["local"]) / 1e6,
                      "ratio": statistics.geometric_mean(r["ratio"]),
                      "ratios": r["ratio"]} for case, r in results.items()}
    summary["fuse_cpu_s_per_gib"] = fuse_cpu / (fuse_bytes / GIB)
    summary["mode"] = args.mode
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print("mode: %s (%d rounds, %d MiB file, %d tar members read per round)" %
          (args.mode, args.rounds, args.size_mib, args.members))
    print("| read | through the mount MB/s (median) | local disk MB/s (median) | ratio (geometric mean) "
          "| ratios, round by round |")
    print("|---|---|---|---|---|")
    for case, r in summary.items():
        if isinstance(r, dict):
            print("| %s | %.0f | %.0f | %.2f | %s |" % (
                case, r["granary_mb_s"], r["local_mb_s"], r["ratio"],
                " ".join("%.2f" % x for x in r["ratios"])))
    print("granary-fuse CPU: %.3f s per GiB read through the mount" %
          summary["fuse_cpu_s_per_gib"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
