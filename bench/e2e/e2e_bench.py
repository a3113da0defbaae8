#!/usr/bin/python3
"""End-to-end benchmark: Granary against what users do today.

Shared storage is emulated by an ext4 filesystem on a loop device (backed by a file
on the root disk, opened with direct I/O) whose reads are throttled to --bandwidth
by the block I/O controller: cgroup v1 `blkio.throttle.read_bps_device`, or cgroup
v2 `io.max rbps=` where that is what the machine has. The benchmark moves itself
into the throttled cgroup before it reads anything, so every process it starts (cp,
rclone, granaryd, granary-fuse, the DataLoader and its workers, fio) reads the
source through the same limit. The limit applies to the loop device only: the local
copy and rclone's cache live on the root disk, and each Granary system's cache on an
ext4 filesystem of its own (with a journal, on another loop device backed by the root
disk, made afresh for the system), and are not limited.

Datasets (deterministic, generated once per configuration and reused):
  images: --image-files files (default 20,000) of log-normal sizes (mean
          --image-mean-kib KiB) in --classes class directories, random bytes from a
          seeded SFC64 generator; the generator records each file's XXH3-64.
  shards: --shards files of --shard-mib MiB written by fio itself (randwrite,
          8 KiB-1 MiB blocks, fixed randseed, xxhash verify headers) so that fio can
          verify every piece it reads back; the blocks are the "documents" of a
          Megatron-like indexed dataset, listed from fio's write log, each with its
          XXH3-64 recorded by the generator.

Clients, every epoch after `sync; echo 3 > /proc/sys/vm/drop_caches` (with
--drop-caches 1, `echo 1`: only the page cache, as a dataset larger than memory
evicts it while the kernel keeps its dentries and inodes):
  images:        a PyTorch DataLoader (RandomSampler seeded per epoch, persistent
                 workers); each worker reads a whole file and checks its XXH3-64.
  shards:        fio replaying every document of every shard once, in a seeded
                 random order, 8 KiB-1 MiB pieces at random offsets, --verify=xxhash.
  shards-loader: (optional) the DataLoader over the shards' documents, checksummed.

Systems: direct (the source), local-copy (cp first, timed), rclone (mount
--vfs-cache-mode full), granary-cold (read-through: epoch 1 cold, later epochs
warm), granary-prewarm (`granary prewarm` timed and sampled, then warm epochs),
granary-cluster-prewarm and (not by default) granary-cluster-cold: the same with
--cluster-servers granaryd (default 3) on loopback as one cache group, prewarm
fanned out to all of them, granary-fuse mounted against the first. The same with
"-client" after "granary" or "granary-cluster" (granary-client-cold, ...) read the
images with the Python client (`import granary`: granary.torch's batched dataset, one
read_many per DataLoader batch and the next read ahead) from the first granaryd, with
no mount. With
--reference PASSTHROUGH_HP (libfuse's example daemon, built by
bench/fuse/fuse_reference.py --build-reference-only), also fuse-passthrough: that
daemon mounted over the source with FUSE passthrough (the kernel reads the source
files itself), and fuse-served: the same daemon answering every read itself
(--nopassthrough); neither caches anything, so every epoch reads the source: what a
FUSE mount alone costs each workload here.

A dataset larger than the cache (--dataset-per-cache 2,4): per workload, the direct
source once, then each caching system (rclone, granary-*) started afresh for each ratio
with a cache of the workload's bytes / ratio (granaryd --capacity, rclone
--vfs-cache-max-size); per epoch the hit ratio (1 − bytes read from the source device /
bytes read), the source bytes and the most the cache held on disk; tables and plots
(larger_than_cache_epochs.png, larger_than_cache_hits.png) of their own.

Usage (root):
  /usr/bin/python3 bench/e2e/e2e_bench.py [--build build-e2e] [--bandwidth-mib 200]
      [--image-files 20000] [--shards 2] [--shard-mib 1024] [--epochs 3]
      [--systems direct,local-copy,rclone,granary-cold,granary-prewarm,granary-cluster-prewarm]
      [--workloads images,shards] [--profile] [--out-dir bench/e2e/results]
Writes results.md, results.json and plots (epoch_time.png, prewarm_throughput.png)
to --out-dir; see bench/README.md.
"""
import argparse
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import free_port, wait_for  # noqa: E402

MIB = 1 << 20
KIB = 1 << 10
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATASET = "e2e"
FORMAT_VERSION = 1  # bump when the generated data changes


def log(text):
    print("[e2e %s] %s" % (time.strftime("%H:%M:%S"), text), file=sys.stderr, flush=True)


def run(cmd, **kwargs):
    kwargs.setdefault("check", True)
    return subprocess.run(cmd, **kwargs)


# What drop_caches() drops: "1" the page cache, "3" dentries and inodes too, "0"
# nothing (epochs read what the epoch before left in the page cache).
DROP_CACHES = "3"


def drop_caches():
    if DROP_CACHES == "0":
        return
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write(DROP_CACHES + "\n")


# ---------------------------------------------------------------- processes


def proc_cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds; 0 if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def proc_hwm_bytes(pid):
    """Peak resident set size (VmHWM) since start or the last reset."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * KIB
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def reset_hwm(pid):
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5\n")  # resets VmHWM to the current RSS
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass


def descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class Usage:
    """CPU seconds and summed peak RSS of a set of processes over an interval."""

    def __init__(self, pids):
        self.pids = [p for p in pids if p]
        for pid in self.pids:
            reset_hwm(pid)
        self.cpu0 = {pid: proc_cpu_seconds(pid) for pid in self.pids}

    def finish(self, pids_now=None):
        """pids_now: the set at the end, when processes were born meanwhile
        (the DataLoader starts its workers in its first epoch)."""
        pids = self.pids if pids_now is None else pids_now
        cpu = sum(max(0.0, proc_cpu_seconds(p) - self.cpu0.get(p, 0.0)) for p in pids)
        peak = sum(proc_hwm_bytes(p) for p in pids)
        return cpu, peak


def metrics(url):
    """granaryd's /metrics as {name: value} (lines without labels)."""
    import urllib.request
    values = {}
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            parts = line.split()
            if len(parts) == 2 and not line.startswith("#"):
                values[parts[0]] = float(parts[1])
    return values


def metric_value(url, name):
    return metrics(url).get(name, 0.0)


def granary_counters(urls):
    """Chunk reads the granaryd of `urls` (comma-separated /metrics addresses) answered,
    the bytes they read for them (whole chunks), the chunks they read from the source
    (readers' misses and fills alike) and the chunks they served but did not store, summed
    over the servers."""
    if not urls:
        return None
    total = {"reads": 0.0, "bytes": 0.0, "bytes_from_source": 0.0, "source_reads": 0.0,
             "not_stored": 0.0}
    for url in urls.split(","):
        values = metrics(url)
        total["reads"] += values.get("granary_cache_hits_total", 0) + \
            values.get("granary_cache_misses_total", 0)
        total["bytes"] += values.get("granary_bytes_from_cache_total", 0) + \
            values.get("granary_bytes_from_source_total", 0) + \
            values.get("granary_bytes_from_peers_total", 0)
        total["bytes_from_source"] += values.get("granary_bytes_from_source_total", 0)
        total["source_reads"] += values.get("granary_source_reads_total", 0)
        total["not_stored"] += values.get("granary_write_behind_dropped_total", 0) + \
            values.get("granary_store_admissions_refused_total", 0) + \
            values.get("granary_store_insert_errors_total", 0)
    return total


def disk_bytes(path):
    """Bytes allocated on disk under `path` (files may vanish while it walks)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


class CacheDiskPeak:
    """The most a cache's data held on disk over an epoch, sampled every second."""

    def __init__(self, cache_dirs):
        """cache_dirs: comma-separated directories whose bytes the cache's data are."""
        dirs = [d for d in cache_dirs.split(",") if d]
        self.sampler = Sampler(lambda: sum(disk_bytes(d) for d in dirs), period=1.0) \
            if dirs else None

    def finish(self):
        """{"cache_disk_peak": bytes}, or {} without a cache."""
        if not self.sampler:
            return {}
        base = self.sampler.samples[0][1]
        return {"cache_disk_peak": base + max(b for _, b in self.sampler.stop())}


def source_reads_cell(server):
    """The chunks granaryd read from the source, and of them those it served but did not
    store (write-behind queue full, admission refused, insert failed), when any."""
    if not server or "source_reads" not in server:
        return "–"
    cell = "%.0f" % server["source_reads"]
    if server.get("not_stored"):
        cell += " (%.0f not stored)" % server["not_stored"]
    return cell


def counter_delta(before, after):
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in before}


# ---------------------------------------------------------------- throttled source


class Throttle:
    """A cgroup that limits reads from one block device to `bps` bytes/s."""

    def __init__(self, name, device, bps):
        self.device = device  # "MAJ:MIN"
        self.bps = bps
        v1 = "/sys/fs/cgroup/blkio"
        v2 = "/sys/fs/cgroup"
        if os.path.exists(os.path.join(v1, "blkio.throttle.read_bps_device")):
            self.kind = "cgroup v1 blkio.throttle.read_bps_device"
            self.root = v1
            self.path = os.path.join(v1, name)
            os.makedirs(self.path, exist_ok=True)
            self._write("blkio.throttle.read_bps_device", "%s %d" % (device, bps))
        elif os.path.exists(os.path.join(v2, "cgroup.controllers")) and \
                "io" in open(os.path.join(v2, "cgroup.controllers")).read().split():
            self.kind = "cgroup v2 io.max rbps"
            self.root = v2
            with open(os.path.join(v2, "cgroup.subtree_control"), "w") as f:
                f.write("+io")
            self.path = os.path.join(v2, name)
            os.makedirs(self.path, exist_ok=True)
            self._write("io.max", "%s rbps=%d" % (device, bps))
        else:
            raise RuntimeError("no block I/O throttle here: neither cgroup v1 blkio with "
                               "throttling nor cgroup v2 with the io controller")

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value + "\n")

    def enter(self):
        """Moves this process (and so every process it starts later) in."""
        self._write("cgroup.procs", str(os.getpid()))

    def leave(self):
        with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()) + "\n")

    def bytes_read(self):
        """Bytes this cgroup has read from the throttled device."""
        if self.kind.startswith("cgroup v1"):
            with open(os.path.join(self.path, "blkio.throttle.io_service_bytes")) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 3 and parts[0] == self.device and parts[1] == "Read":
                        return int(parts[2])
            return 0
        with open(os.path.join(self.path, "io.stat")) as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] == self.device:
                    for kv in parts[1:]:
                        if kv.startswith("rbytes="):
                            return int(kv[7:])
        return 0

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


class Sampler:
    """Samples a byte counter every `period` seconds in a thread."""

    def __init__(self, counter, period=0.25):
        self.counter = counter
        self.period = period
        self.samples = []
        self.stop_event = threading.Event()
        self.start = time.perf_counter()
        self.samples.append((0.0, counter()))
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop_event.wait(self.period):
            self.samples.append((time.perf_counter() - self.start, self.counter()))

    def stop(self):
        self.stop_event.set()
        self.thread.join()
        self.samples.append((time.perf_counter() - self.start, self.counter()))
        base = self.samples[0][1]
        return [(t, b - base) for t, b in self.samples]


class LoopFilesystem:
    """An ext4 filesystem, with its journal, on a loop device (direct I/O to its backing
    file): the emulated shared storage, and each Granary system's cache directory, as on a
    GPU node's NVMe. The cache is not made on the root disk, whose filesystem here may have
    no journal: ext4 without one skips, inode by inode, those deleted in the last minute
    when it creates a file, which the removal of the previous system's data files makes
    thousands."""

    def __init__(self, image, mountpoint, size_bytes, fresh):
        self.image = image
        self.mountpoint = mountpoint
        for line in run(["losetup", "-j", image], capture_output=True, text=True,
                        check=False).stdout.splitlines():
            run(["losetup", "-d", line.split(":")[0]], check=False)  # left by a killed run
        if fresh and os.path.exists(image):
            os.remove(image)
        created = not os.path.exists(image)
        if created:
            with open(image, "wb") as f:
                f.truncate(size_bytes)
        self.loop = run(["losetup", "-f", "--show", "--direct-io=on", image],
                        capture_output=True, text=True).stdout.strip()
        if created:
            run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                 self.loop])
        os.makedirs(mountpoint, exist_ok=True)
        run(["mount", "-o", "noatime", self.loop, mountpoint])
        with open("/sys/block/%s/dev" % os.path.basename(self.loop)) as f:
            self.device = f.read().strip()

    def close(self, discard=False):
        """Unmounts and detaches the filesystem; with `discard`, deletes its image too."""
        for _ in range(20):
            if run(["umount", self.mountpoint], check=False,
                   capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        run(["losetup", "-d", self.loop], check=False)
        if discard:
            os.remove(self.image)


# ---------------------------------------------------------------- datasets


def image_sizes(args):
    import numpy as np
    rng = np.random.default_rng(args.seed)
    sigma = args.image_sigma
    mu = np.log(args.image_mean_kib * KIB) - sigma * sigma / 2
    sizes = rng.lognormal(mu, sigma, args.image_files)
    return [int(s) for s in np.clip(sizes, 4 * KIB, 4 * MIB)]


def generate_images(args, source, meta):
    import numpy as np
    import xxhash
    sizes = image_sizes(args)
    rows = []
    for i, size in enumerate(sizes):
        rel = "images/train/class_%03d/img_%06d.bin" % (i % args.classes, i)
        path = os.path.join(source, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        words = (size + 7) // 8
        data = np.random.Generator(np.random.SFC64([args.seed, i])).bit_generator \
            .random_raw(words).tobytes()[:size]
        with open(path, "wb") as f:
            f.write(data)
        rows.append((rel, 0, size, xxhash.xxh3_64_hexdigest(data)))
        if i % 5000 == 4999:
            log("  %d / %d image files" % (i + 1, len(sizes)))
    write_samples(os.path.join(meta, "images.tsv"), rows)


def generate_shards(args, source, meta):
    import xxhash
    os.makedirs(os.path.join(source, "shards"), exist_ok=True)
    rows = []
    for s in range(args.shards):
        rel = "shards/shard_%02d.bin" % s
        path = os.path.join(source, rel)
        wlog = os.path.join(meta, "shard_%02d.wlog" % s)
        for stale in (path, wlog):
            if os.path.exists(stale):
                os.remove(stale)
        run(["fio", "--name=gen", "--filename=" + path, "--size=%dm" % args.shard_mib,
             "--rw=randwrite", "--bsrange=8k-1m", "--randseed=%d" % (args.seed + s),
             "--verify=xxhash", "--do_verify=0", "--verify_state_save=0",
             "--ioengine=psync", "--write_iolog=" + wlog, "--output=/dev/null"])
        docs = []
        with open(wlog) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 5 and parts[2] == "write":
                    docs.append((int(parts[3]), int(parts[4])))
        covered = sum(length for _, length in docs)
        if covered != args.shard_mib * MIB:
            raise RuntimeError("fio wrote %d bytes of %s, expected %d" %
                               (covered, rel, args.shard_mib * MIB))
        with open(path, "rb") as f:
            for offset, length in docs:
                f.seek(offset)
                rows.append((rel, offset, length, xxhash.xxh3_64_hexdigest(f.read(length))))
        log("  %s: %d documents" % (rel, len(docs)))
    write_samples(os.path.join(meta, "shards.tsv"), rows)


def write_samples(path, rows):
    with open(path, "w") as f:
        for rel, offset, length, digest in rows:
            f.write("%s\t%d\t%d\t%s\n" % (rel, offset, length, digest))


def read_samples(path):
    rows = []
    with open(path) as f:
        for line in f:
            rel, offset, length, digest = line.rstrip("\n").split("\t")
            rows.append((rel, int(offset), int(length), digest))
    return rows


def dataset_config(args):
    return {"format": FORMAT_VERSION, "seed": args.seed, "image_files": args.image_files,
            "image_mean_kib": args.image_mean_kib, "image_sigma": args.image_sigma,
            "classes": args.classes, "shards": args.shards, "shard_mib": args.shard_mib}


# ---------------------------------------------------------------- clients


def client_main(argv):
    """The DataLoader client: all epochs in one process, persistent workers.

    Prints one JSON line per epoch on stdout."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--samples", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--watch-pids", default="")
    parser.add_argument("--throttle-stat", default="")
    parser.add_argument("--throttle-device", default="")
    parser.add_argument("--metrics-url", default="")
    parser.add_argument("--drop-caches", choices=("0", "1", "3"), default="3")
    parser.add_argument("--granary-socket", default="",
                        help="read with the Python client from this granaryd, not from --root")
    parser.add_argument("--cache-dirs", default="",
                        help="report the most these directories (comma-separated) held on "
                        "disk in each epoch")
    a = parser.parse_args(argv)
    global DROP_CACHES
    DROP_CACHES = a.drop_caches
    import warnings
    import torch
    import xxhash
    from torch.utils.data import DataLoader, Dataset, Sampler
    warnings.filterwarnings("ignore", message="This DataLoader will create")

    rows = read_samples(a.samples)

    class Samples(Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, index):
            if index < 0:  # the warm-up pass that starts the workers
                return index, 0, 1, 0.0
            rel, offset, length, digest = rows[index]
            start = time.perf_counter()
            with open(os.path.join(a.root, rel), "rb", buffering=0) as f:
                if offset:
                    f.seek(offset)
                data = f.read(length) if offset else f.read()
            seconds = time.perf_counter() - start
            ok = len(data) == length and xxhash.xxh3_64_hexdigest(data) == digest
            return index, len(data), int(ok), seconds

    class EpochSampler(Sampler):
        """torch.randperm with a seed per epoch, as RandomSampler draws it; `order`
        may be set to a warm-up list that reads nothing."""

        def __init__(self):
            self.order = []

        def __iter__(self):
            return iter(self.order)

        def __len__(self):
            return len(self.order)

    sampler = EpochSampler()
    if a.granary_socket:
        loader = granary_client_loader(a, rows, sampler)
    else:
        loader = DataLoader(Samples(), batch_size=a.batch_size, num_workers=a.workers,
                            persistent_workers=a.workers > 0, sampler=sampler,
                            prefetch_factor=4 if a.workers > 0 else 2)
    # Start the persistent workers before the first timed epoch.
    sampler.order = [-1] * (a.batch_size * max(1, a.workers))
    for _ in loader:
        pass
    watched = [int(p) for p in a.watch_pids.split(",") if p]
    source_bytes = make_source_counter(a.throttle_stat, a.throttle_device)
    for epoch in range(a.epochs):
        generator = torch.Generator()
        generator.manual_seed(a.seed + epoch)
        sampler.order = torch.randperm(len(rows), generator=generator).tolist()
        drop_caches()
        mine = [os.getpid()] + descendants(os.getpid())
        client_usage, system_usage = Usage(mine), Usage(watched)
        read0 = source_bytes()
        server0 = granary_counters(a.metrics_url)
        cache_peak = CacheDiskPeak(a.cache_dirs)
        start = time.perf_counter()
        seen = nbytes = bad = 0
        latencies = []
        for indices, lengths, oks, seconds in loader:
            seen += len(indices)
            nbytes += int(lengths.sum())
            bad += int((oks == 0).sum())
            latencies += seconds.tolist()
        wall = time.perf_counter() - start
        latencies.sort()
        client_cpu, client_peak = client_usage.finish()
        system_cpu, system_peak = system_usage.finish()
        r = {"epoch": epoch + 1, "samples": seen, "bytes": nbytes, "bad": bad,
             "wall": wall, "client_cpu": client_cpu, "client_peak": client_peak,
             "system_cpu": system_cpu, "system_peak": system_peak,
             "source_bytes": source_bytes() - read0,
             "read_p50": percentile(latencies, 0.50),
             "read_p99": percentile(latencies, 0.99),
             "server": counter_delta(server0, granary_counters(a.metrics_url))}
        r.update(cache_peak.finish())
        print(json.dumps(r), flush=True)
        if seen != len(rows):
            raise RuntimeError("epoch %d saw %d of %d samples" % (epoch + 1, seen, len(rows)))
    return 0


def granary_client_loader(a, rows, sampler):
    """The same DataLoader reading with the Python client: each worker is handed a whole
    batch (granary.torch.BatchSampler as the sampler), reads it with one read_many and the
    batch after it ahead, and checks every file's XXH3-64 as the file reader does. A
    sample's read time is its batch's divided by the batch's files."""
    import granary
    import granary.torch
    import xxhash
    from torch.utils.data import DataLoader, default_collate

    class CheckedBatches(granary.torch.FileListDataset):
        def __getitem__(self, item):
            batch = item[0] if isinstance(item, tuple) else item
            if batch[0] < 0:  # the warm-up pass that starts the workers
                return default_collate([(i, 0, 1, 0.0) for i in batch])
            start = time.perf_counter()
            read = super().__getitem__(item)
            seconds = (time.perf_counter() - start) / len(batch)
            return default_collate([
                (i, len(data), int(len(data) == rows[i][2] and
                                   xxhash.xxh3_64_hexdigest(data) == rows[i][3]), seconds)
                for i, data in zip(batch, read)])

    client = granary.Client(a.granary_socket)
    dataset = CheckedBatches(DATASET, [rel for rel, _, _, _ in rows], client=client)
    batches = granary.torch.BatchSampler(sampler, a.batch_size,
                                         lookahead=max(1, a.workers))
    return DataLoader(dataset, batch_size=None, sampler=batches, num_workers=a.workers,
                      persistent_workers=a.workers > 0,
                      prefetch_factor=4 if a.workers > 0 else 2)


def percentile(sorted_values, fraction):
    """The value `fraction` of the way through `sorted_values` (nearest rank)."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, int(round(fraction * len(sorted_values))) - 1))
    return sorted_values[rank]


def make_source_counter(stat_path, device):
    if not stat_path:
        return lambda: 0

    def counter():
        with open(stat_path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == device and parts[1] == "Read":
                    return int(parts[2])
                if parts and parts[0] == device:
                    for kv in parts[1:]:
                        if kv.startswith("rbytes="):
                            return int(kv[7:])
        return 0
    return counter


def run_dataloader(bench, system, workload, epochs, first_label, later_label):
    samples = os.path.join(bench.meta, "images.tsv" if workload == "images" else "shards.tsv")
    stat = os.path.join(bench.throttle.path, "blkio.throttle.io_service_bytes"
                        if bench.throttle.kind.startswith("cgroup v1") else "io.stat")
    cmd = [sys.executable, os.path.abspath(__file__), "client", "--root", system.root,
           "--samples", samples, "--epochs", str(epochs), "--workers", str(bench.args.workers),
           "--batch-size", str(bench.args.batch_size), "--seed", str(bench.args.seed),
           "--watch-pids", ",".join(str(p) for p in system.pids()),
           "--throttle-stat", stat, "--throttle-device", bench.throttle.device,
           "--metrics-url", system.metrics_url(), "--drop-caches", DROP_CACHES]
    if getattr(system, "client", False):
        cmd += ["--granary-socket", system.nodes[0]["sock"]]
    if bench.args.dataset_per_cache:
        cmd += ["--cache-dirs", system.cache_dirs()]
    env = dict(os.environ, PYTHONPATH=os.path.join(bench.build, "python"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    results = []
    for line in proc.stdout:
        r = json.loads(line)
        r.update(system=system.name, workload=workload, dataset_per_cache=system.dataset_per_cache,
                 label=first_label if r["epoch"] == 1 else later_label)
        report_epoch(r)
        results.append(r)
    if proc.wait() != 0:
        raise RuntimeError("DataLoader client failed on %s/%s" % (system.name, workload))
    return results


def write_fio_logs(bench, root, epoch, jobs):
    """Every document of every shard once, in a seeded random order, split over jobs."""
    docs = [(rel, off, length) for rel, off, length, _ in
            read_samples(os.path.join(bench.meta, "shards.tsv"))]
    random.Random(bench.args.seed * 1000 + epoch).shuffle(docs)
    files = sorted({rel for rel, _, _ in docs})
    paths = []
    for j in range(jobs):
        path = os.path.join(bench.work, "fio-job%d.iolog" % j)
        with open(path, "w") as f:
            f.write("fio version 2 iolog\n")
            for rel in files:
                f.write("%s add\n%s open\n" % (os.path.join(root, rel), os.path.join(root, rel)))
            for rel, off, length in docs[j::jobs]:
                f.write("%s read %d %d\n" % (os.path.join(root, rel), off, length))
            for rel in files:
                f.write("%s close\n" % os.path.join(root, rel))
        paths.append(path)
    return paths


def run_fio(bench, system, epochs, first_label, later_label):
    results = []
    n_docs = len(read_samples(os.path.join(bench.meta, "shards.tsv")))
    for epoch in range(1, epochs + 1):
        logs = write_fio_logs(bench, system.root, epoch, bench.args.fio_jobs)
        out = os.path.join(bench.work, "fio.json")
        cmd = ["fio", "--thread", "--group_reporting", "--output-format=json",
               "--output=" + out]
        for j, path in enumerate(logs):
            cmd += ["--name=reader%d" % j, "--rw=randread", "--bsrange=8k-1m",
                    "--ioengine=psync", "--read_iolog=" + path, "--verify=xxhash",
                    "--verify_state_save=0"]
        drop_caches()
        system_usage = Usage(system.pids())
        read0 = bench.throttle.bytes_read()
        server0 = granary_counters(system.metrics_url())
        cache_peak = CacheDiskPeak(system.cache_dirs() if bench.args.dataset_per_cache else "")
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        stderr = proc.stderr.read()
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        system_cpu, system_peak = system_usage.finish()
        job = json.load(open(out))["jobs"][0]
        nbytes = job["read"]["io_bytes"]
        bad = stderr.count("verify failed") + stderr.count("bad header")
        if proc.returncode != 0 and bad == 0:
            bad = -1
            log("fio failed on %s: %s" % (system.name, stderr.strip()[-2000:]))
        r = {"epoch": epoch, "samples": job["read"]["total_ios"], "bytes": nbytes, "bad": bad,
             "wall": wall, "client_cpu": rusage.ru_utime + rusage.ru_stime,
             "client_peak": rusage.ru_maxrss * KIB, "system_cpu": system_cpu,
             "system_peak": system_peak, "source_bytes": bench.throttle.bytes_read() - read0,
             "server": counter_delta(server0, granary_counters(system.metrics_url())),
             "system": system.name, "workload": "shards",
             "dataset_per_cache": system.dataset_per_cache,
             "label": first_label if epoch == 1 else later_label}
        r.update(cache_peak.finish())
        if r["samples"] != n_docs:
            r["bad"] = r["bad"] if r["bad"] else -1
            log("fio read %d of %d documents on %s" % (r["samples"], n_docs, system.name))
        report_epoch(r)
        results.append(r)
    return results


def report_epoch(r):
    log("  %-16s %-13s epoch %d (%s): %.1f s, %.0f samples/s, %.1f MiB/s, source %.0f MiB, "
        "cpu %.1f+%.1f s, %s" %
        (r["system"], r["workload"], r["epoch"], r["label"], r["wall"],
         r["samples"] / r["wall"], r["bytes"] / MIB / r["wall"], r["source_bytes"] / MIB,
         r["client_cpu"], r["system_cpu"], "verified" if r["bad"] == 0 else
         "WRONG/FAILED %d" % r["bad"]))


# ---------------------------------------------------------------- systems



def unmount(path):
    if os.path.ismount(path):
        if run(["fusermount3", "-u", path], check=False, capture_output=True).returncode:
            run(["umount", "-l", path], check=False, capture_output=True)


def stop_process(proc, timeout=30):
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class System:
    name = ""
    first_label = "cold"
    later_label = "cold"
    caches = False  # whether it keeps what it read in a cache of its own (cache_mib)

    def __init__(self, bench):
        self.bench = bench
        self.root = None
        self.setup_info = {}
        self.cache_mib = bench.cache_mib
        self.dataset_per_cache = None

    def size_cache(self, dataset_bytes, dataset_per_cache):
        """Gives the cache room for 1 / dataset_per_cache of a dataset of dataset_bytes."""
        self.cache_mib = int(dataset_bytes / dataset_per_cache / MIB)
        self.dataset_per_cache = dataset_per_cache

    def cache_dirs(self):
        """Where the cache's data lie, comma-separated (none without a cache)."""
        return ""

    def pids(self):
        return []

    def describe_pids(self):
        return ", ".join("%d %s" % (pid, name) for pid, name in
                         zip(self.pids(), self.pid_names()))

    def pid_names(self):
        return []

    def metrics_url(self):
        return ""

    def start(self):
        pass

    def stop(self):
        pass


class Direct(System):
    name = "direct"
    first_label = later_label = "source"

    def start(self):
        self.root = self.bench.source


class LocalCopy(System):
    name = "local-copy"
    first_label = later_label = "local disk"

    def start(self):
        b = self.bench
        self.root = os.path.join(b.work, "localcopy")
        shutil.rmtree(self.root, ignore_errors=True)
        drop_caches()
        sampler = Sampler(b.throttle.bytes_read)
        start = time.perf_counter()
        proc = subprocess.Popen(["cp", "-a", b.source + "/.", self.root])
        _, status, rusage = os.wait4(proc.pid, 0)
        os.sync()  # the copy is only made once it is on disk
        wall = time.perf_counter() - start
        samples = sampler.stop()
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("cp failed")
        self.setup_info = {"what": "cp -a (then sync)", "wall": wall,
                           "bytes": b.dataset_bytes, "source_bytes": samples[-1][1],
                           "cpu": rusage.ru_utime + rusage.ru_stime,
                           "peak": rusage.ru_maxrss * KIB, "samples": samples}
        log("  cp: %.1f s, %.1f MiB/s" % (wall, b.dataset_bytes / MIB / wall))

    def stop(self):
        shutil.rmtree(self.root, ignore_errors=True)


class DaemonMount(System):
    """A system read through a FUSE daemon (self.proc, named `daemon`) mounted at self.mnt."""
    daemon = ""

    def mount(self, cmd):
        """Starts `cmd`, which mounts the daemon at self.mnt, and reads through it."""
        self.proc = subprocess.Popen(cmd)
        wait_for(lambda: os.path.ismount(self.mnt), 30, self.daemon + " mount")
        self.root = self.mnt

    def pids(self):
        return [self.proc.pid]

    def pid_names(self):
        return [self.daemon]

    def stop(self):
        unmount(self.mnt)
        stop_process(self.proc)


class Rclone(DaemonMount):
    name = "rclone"
    daemon = "rclone"
    first_label = "cold"
    later_label = "warm"
    caches = True

    def start(self):
        b = self.bench
        self.mnt = os.path.join(b.work, "rclone-mnt")
        self.cache = os.path.join(b.work, "rclone-cache")
        unmount(self.mnt)
        shutil.rmtree(self.cache, ignore_errors=True)
        os.makedirs(self.mnt, exist_ok=True)
        self.cmd = ["rclone", "mount", b.source, self.mnt, "--vfs-cache-mode", "full",
                    "--cache-dir", self.cache, "--read-only",
                    "--vfs-cache-max-size", "%dM" % self.cache_mib,
                    "--vfs-cache-max-age", "24h", "--config", "/dev/null",
                    "--log-file", os.path.join(b.work, "rclone.log")]
        if self.dataset_per_cache:
            # rclone trims its cache to the maximum only when it polls it (every minute by
            # default): poll every second, so that it holds to the size it is given as
            # closely as it can (files still open are never evicted).
            self.cmd += ["--vfs-cache-poll-interval", "1s"]
        self.mount(self.cmd)
        self.setup_info = {"what": " ".join(self.cmd[:2] + ["SOURCE", "MNT"] + self.cmd[4:9])}

    def cache_dirs(self):
        return self.cache

    def stop(self):
        super().stop()
        shutil.rmtree(self.cache, ignore_errors=True)


class FuseReference(DaemonMount):
    """libfuse's passthrough_hp over the source: a FUSE mount that caches nothing."""
    first_label = later_label = "source"
    daemon = "passthrough_hp"

    def __init__(self, bench, served):
        super().__init__(bench)
        self.served = served
        self.name = "fuse-served" if served else "fuse-passthrough"

    def start(self):
        b = self.bench
        if not b.args.reference:
            raise SystemExit("%s needs --reference PASSTHROUGH_HP" % self.name)
        self.mnt = os.path.join(b.work, self.name + "-mnt")
        unmount(self.mnt)
        os.makedirs(self.mnt, exist_ok=True)
        cmd = [b.args.reference, "--foreground"] + (["--nopassthrough"] if self.served else [])
        self.mount(cmd + [b.source, self.mnt])
        self.setup_info = {"what": " ".join(["passthrough_hp"] + cmd[1:] + ["SOURCE", "MNT"])}


class Granary(System):
    """Granary on this node: one granaryd, or `servers` granaryd on loopback forming one
    cache group, and granary-fuse mounted against the first (the local) one.

    With several servers every granaryd has its own data directory, Unix socket, TCP
    port, metrics port and --node-id, and all share a static members file (one group
    "e2e") and a cluster token. The dataset is registered on the first server (the
    catalog is replicated to the others), `granary prewarm` on it fans out to every
    owner in the group, and granary-fuse reads each chunk from its owner: over the Unix
    socket from the local server, over TCP (with the token) from the other two. All of
    them were started by this process and so sit in the throttled cgroup."""
    caches = True
    # granary-fuse's in-process chunk cache when the cache under test is smaller than the
    # dataset: it survives drop_caches, and at its default (512 MiB) it would keep more of
    # these few hundred MiB than the cache under test, which no real dataset larger than a
    # node's NVMe lets it do. Room for its readahead (32 MiB) and a few chunks more.
    FUSE_MEMORY_BESIDE_SMALL_CACHE = "64MiB"

    def __init__(self, bench, prewarm, servers=1, client=False):
        super().__init__(bench)
        self.prewarm = prewarm
        self.servers = servers
        self.client = client
        stem = "granary" if servers == 1 else "granary-cluster"
        self.name = stem + ("-client" if client else "") + ("-prewarm" if prewarm else "-cold")
        self.first_label = "warm" if prewarm else "cold"
        self.later_label = "warm"
        self.procs = []
        self.nodes = []
        self.fuse = self.cli = self.cache_fs = None

    def node_cli(self, i):
        return [os.path.join(self.bench.build, "granary"), "--server",
                "unix:" + self.nodes[i]["sock"]]

    def _status(self, i):
        out = run(self.node_cli(i) + ["status", "--json"], check=False, capture_output=True,
                  text=True)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def _members_up(self, i):
        status = self._status(i)
        if status is None:
            return -1
        return sum(1 for node in status.get("nodes", []) if node.get("state") == "up")

    def _has_dataset(self, i):
        out = run(self.node_cli(i) + ["dataset", "ls", "--json"], check=False,
                  capture_output=True, text=True)
        return out.returncode == 0 and any(
            d["name"] == DATASET for d in json.loads(out.stdout)["datasets"])

    def _check_running(self):
        for node, proc in zip(self.nodes, self.procs):
            if proc.poll() is not None:
                raise RuntimeError("granaryd %s exited; see %s" % (node["id"], node["log"]))

    def start(self):
        b = self.bench
        build = b.build
        self.data = os.path.join(b.work, "granary-data")
        self.mnt = os.path.join(b.work, "granary-mnt")
        unmount(self.mnt)
        unmount(self.data)
        shutil.rmtree(self.data, ignore_errors=True)
        capacity = "%dMiB" % self.cache_mib
        # Room beside the capacity for RocksDB and the filesystem's own metadata.
        self.cache_fs = LoopFilesystem(os.path.join(b.work, "granary-cache.img"), self.data,
                                       (self.cache_mib + 1024) * MIB, fresh=True)
        os.makedirs(self.mnt, exist_ok=True)
        for i in range(self.servers):
            node_dir = os.path.join(self.data, "n%d" % i) if self.servers > 1 else self.data
            os.makedirs(node_dir, exist_ok=True)
            self.nodes.append({
                "id": "n%d" % i, "dir": node_dir, "tcp": free_port(), "metrics": free_port(),
                "sock": os.path.join(node_dir, "granaryd.sock"),
                "log": os.path.join(b.work, "granaryd-%s%s.log" % (
                    self.name, "-n%d" % i if self.servers > 1 else ""))})
        cluster_args = []
        self.token_file = None
        if self.servers > 1:
            members = os.path.join(self.data, "members.yaml")
            with open(members, "w") as f:
                f.write("members:\n")
                for node in self.nodes:
                    f.write("  - id: %s\n    address: 127.0.0.1:%d\n    group: e2e\n" %
                            (node["id"], node["tcp"]))
            self.token_file = os.path.join(self.data, "token")
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(os.urandom(24).hex() + "\n")
            cluster_args = ["--group", "e2e", "--members", members,
                            "--token-file", self.token_file]
        for node in self.nodes:
            cmd = [os.path.join(build, "granaryd"), "--data-dir", node["dir"],
                   "--socket", node["sock"],
                   "--metrics-listen", "127.0.0.1:%d" % node["metrics"],
                   "--capacity", capacity,
                   # Benchmarks register sources from wherever they made them.
                   "--source-root", "/"]
            if self.servers > 1:
                cmd += ["--listen", "127.0.0.1:%d" % node["tcp"], "--node-id", node["id"]]
                cmd += cluster_args
            with open(node["log"], "w") as logf:
                self.procs.append(subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT))
        for i in range(self.servers):
            wait_for(lambda i=i: self.procs[i].poll() is not None or
                     self._members_up(i) >= self.servers, 60,
                     "granaryd %s to see %d members up" % (self.nodes[i]["id"], self.servers))
            self._check_running()
        self.cli = self.node_cli(0)
        drop_caches()
        start = time.perf_counter()
        add = self.cli + ["dataset", "add", DATASET, b.source, "--chunk-size", b.args.chunk_size]
        if b.args.fill:
            add += ["--fill", b.args.fill]
        run(add, capture_output=True)
        for i in range(1, self.servers):
            wait_for(lambda i=i: self._has_dataset(i), 60,
                     "the catalog on granaryd %s" % self.nodes[i]["id"])
        self.setup_info["add_wall"] = time.perf_counter() - start
        self.setup_info["servers"] = self.servers
        log("  granary dataset add: %.1f s%s" % (
            self.setup_info["add_wall"], " (on n0, until every node has it)"
            if self.servers > 1 else ""))
        if self.prewarm:
            self._prewarm()
        if self.client:
            self.root = self.nodes[0]["sock"]
            return
        fuse_cmd = [os.path.join(build, "granary-fuse"), self.mnt, "--server", self.address(),
                    "--dataset", DATASET, "--foreground",
                    "--log-file", os.path.join(b.work, "granary-fuse-%s.log" % self.name)]
        if self.token_file:
            fuse_cmd += ["--token-file", self.token_file]
        if self.dataset_per_cache:
            fuse_cmd += ["--cache-size", self.FUSE_MEMORY_BESIDE_SMALL_CACHE]
        fuse_cmd += b.args.fuse_args.split()
        with open(os.path.join(b.work, "granary-fuse-%s.err" % self.name), "w") as err:
            self.fuse = subprocess.Popen(fuse_cmd, stdout=subprocess.DEVNULL, stderr=err)
        self.root = os.path.join(self.mnt, DATASET)
        wait_for(lambda: self.fuse.poll() is not None or os.path.isdir(
            os.path.join(self.root, "images")), 60, "granary-fuse mount")
        if self.fuse.poll() is not None:
            raise RuntimeError("granary-fuse exited; see its log in " + b.work)

    def _prewarm(self):
        b = self.bench
        drop_caches()
        usage = Usage([p.pid for p in self.procs])
        sampler = Sampler(b.throttle.bytes_read)
        fetched0 = [metric_value(self._metrics_url(n), "granary_prewarm_chunks_fetched_total")
                    for n in self.nodes]
        perf = None
        if b.args.profile_prewarm:
            perf_data = os.path.join(b.work, "perf-prewarm-%s.data" % self.name)
            perf = subprocess.Popen(["perf", "record", "-g", "-F", "199", "-p",
                                     ",".join(str(p.pid) for p in self.procs), "-o", perf_data],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        start = time.perf_counter()
        out = run(self.cli + ["prewarm", DATASET, "--json"], capture_output=True, text=True)
        wall = time.perf_counter() - start
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
            b.write_profile(perf_data, "prewarm-" + self.name,
                            "perf record -g -F 199 -p <granaryd pids> during `granary prewarm` "
                            "on %s (%.1f s)" % (self.name, wall))
        samples = sampler.stop()
        cpu, peak = usage.finish()
        report = json.loads(out.stdout)
        per_node = [metric_value(self._metrics_url(n), "granary_prewarm_chunks_fetched_total")
                    - f0 for n, f0 in zip(self.nodes, fetched0)]
        self.setup_info.update(
            what="granary prewarm", wall=wall, bytes=report["bytes_done"],
            source_bytes=samples[-1][1], cpu=cpu, peak=peak, samples=samples,
            reported_bytes_per_second=report["bytes_per_second"],
            reported_nodes=report.get("nodes"), chunks=report.get("chunks_done"),
            chunks_per_node=per_node)
        log("  prewarm: %.1f s, %.1f MiB/s, chunks fetched per node %s" % (
            wall, report["bytes_done"] / MIB / wall, "/".join("%d" % c for c in per_node)))

    def address(self):
        if self.bench.args.fuse_server == "tcp":
            return "127.0.0.1:%d" % self.nodes[0]["tcp"]
        return "unix:" + self.nodes[0]["sock"]

    @staticmethod
    def _metrics_url(node):
        return "http://127.0.0.1:%d/metrics" % node["metrics"]

    def pids(self):
        return [p.pid for p in self.procs] + ([self.fuse.pid] if self.fuse else [])

    def describe_pids(self):
        return ", ".join(["%d granaryd %s" % (p.pid, n["id"]) for p, n in
                          zip(self.procs, self.nodes)] +
                         (["%d granary-fuse" % self.fuse.pid] if self.fuse else []))

    def pid_names(self):
        return ["granaryd" if self.servers == 1 else "%d granaryd" % self.servers] + (
            ["granary-fuse"] if self.fuse else [])

    def metrics_url(self):
        return ",".join(self._metrics_url(n) for n in self.nodes)

    def cache_dirs(self):
        return ",".join(os.path.join(node["dir"], "cache") for node in self.nodes)

    def stop(self):
        if self.fuse:
            unmount(self.mnt)
            stop_process(self.fuse)
        if self.cli and self.procs[0].poll() is None:
            status = run(self.cli + ["status", "--json"], check=False, capture_output=True,
                         text=True)
            if status.returncode == 0:
                with open(os.path.join(self.bench.work, "status-%s.json" % self.name), "w") as f:
                    f.write(status.stdout)
        for proc in self.procs:
            stop_process(proc)
        if self.cache_fs:
            self.cache_fs.close(discard=True)


# ---------------------------------------------------------------- the benchmark


def build_origin(build):
    """Where the binaries in `build` were compiled from: the source directory in its
    CMakeCache.txt and that directory's commit (git, or a COMMIT file left by an export
    with `git archive`), with "+changes" when a git checkout had uncommitted edits."""
    source = ""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    source = line.split("=", 1)[1].strip()
    except FileNotFoundError:
        return {"source": "", "commit": ""}
    commit = ""
    if os.path.exists(os.path.join(source, "COMMIT")):
        commit = open(os.path.join(source, "COMMIT")).read().strip()
    else:
        out = run(["git", "-C", source, "rev-parse", "--short", "HEAD"], capture_output=True,
                  text=True, check=False)
        if out.returncode == 0:
            commit = out.stdout.strip()
            dirty = run(["git", "-C", source, "status", "--porcelain", "--untracked-files=no"],
                        capture_output=True, text=True, check=False).stdout.strip()
            commit += "+changes" if dirty else ""
    return {"source": source, "commit": commit}


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.work = args.workdir
        self.out = os.path.abspath(args.out_dir)
        self.source = os.path.join(self.work, "source")
        self.meta = os.path.join(self.work, "meta")
        self.results = []
        self.profiles = []
        self.setups = {}
        self.loop = self.throttle = None

    def prepare(self):
        a = self.args
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.meta, exist_ok=True)
        for leftover in ("rclone-mnt", "granary-mnt", "fuse-passthrough-mnt", "fuse-served-mnt"):
            unmount(os.path.join(self.work, leftover))
        if os.path.ismount(self.source):
            run(["umount", self.source], check=False)
        stamp_path = os.path.join(self.meta, "config.json")
        config = dataset_config(a)
        fresh = not (os.path.exists(stamp_path) and json.load(open(stamp_path)) == config
                     and os.path.exists(os.path.join(self.work, "source.img")))
        image_bytes = sum(image_sizes(a))
        total = image_bytes + a.shards * a.shard_mib * MIB
        img_size = int(total * 1.15) + a.image_files * 8 * KIB + 512 * MIB
        self.loop = LoopFilesystem(os.path.join(self.work, "source.img"), self.source, img_size,
                               fresh)
        if fresh:
            if os.path.exists(stamp_path):
                os.remove(stamp_path)
            log("generating %d image files (%.0f MiB) and %d shards of %d MiB" %
                (a.image_files, image_bytes / MIB, a.shards, a.shard_mib))
            start = time.perf_counter()
            generate_images(a, self.source, self.meta)
            generate_shards(a, self.source, self.meta)
            os.sync()
            with open(stamp_path, "w") as f:
                json.dump(config, f)
            log("generated in %.0f s" % (time.perf_counter() - start))
        else:
            log("reusing the generated source in %s" % self.work)
        self.dataset_bytes = total
        shard_bytes = a.shards * a.shard_mib * MIB
        self.workload_bytes = {"images": image_bytes, "shards": shard_bytes,
                               "shards-loader": shard_bytes}
        # What a caching system (rclone, each granaryd) may keep: the dataset twice over.
        self.cache_mib = 2 * total // MIB + 1024
        self.throttle = Throttle("granary-e2e", self.loop.device, a.bandwidth_mib * MIB)
        self.throttle.enter()
        log("source: %s on %s (%s), reads limited to %d MiB/s by %s" %
            (self.source, self.loop.loop, self.loop.device, a.bandwidth_mib, self.throttle.kind))

    def measure_source_bandwidth(self):
        """Sequential 1 MiB reads of one shard through the limit, cache dropped."""
        path = os.path.join(self.source, "shards", "shard_00.bin")
        drop_caches()
        buf = bytearray(MIB)
        start = time.perf_counter()
        total = 0
        with open(path, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                total += n
        wall = time.perf_counter() - start
        mibs = total / MIB / wall
        log("source sequential read: %.1f MiB/s" % mibs)
        return mibs

    def make_systems(self):
        systems = []
        for name in self.args.systems.split(","):
            if name == "direct":
                systems.append(Direct(self))
            elif name == "local-copy":
                systems.append(LocalCopy(self))
            elif name == "rclone":
                systems.append(Rclone(self))
            elif name in ("fuse-passthrough", "fuse-served"):
                systems.append(FuseReference(self, served=name == "fuse-served"))
            elif name == "granary-cold":
                systems.append(Granary(self, prewarm=False))
            elif name == "granary-prewarm":
                systems.append(Granary(self, prewarm=True))
            elif name == "granary-cluster-cold":
                systems.append(Granary(self, prewarm=False, servers=self.args.cluster_servers))
            elif name == "granary-cluster-prewarm":
                systems.append(Granary(self, prewarm=True, servers=self.args.cluster_servers))
            elif name in ("granary-client-cold", "granary-client-prewarm"):
                systems.append(Granary(self, prewarm=name.endswith("prewarm"), client=True))
            elif name in ("granary-cluster-client-cold", "granary-cluster-client-prewarm"):
                systems.append(Granary(self, prewarm=name.endswith("prewarm"),
                                       servers=self.args.cluster_servers, client=True))
            else:
                raise SystemExit("unknown system " + name)
        return systems

    def run_workloads(self, system, workloads):
        a = self.args
        for workload in workloads:
            if workload == "images":
                self.results += run_dataloader(self, system, "images", a.epochs,
                                               system.first_label, system.later_label)
            elif workload == "shards" and getattr(system, "client", False):
                log("  shards: fio reads files; the Python client has no fio engine (skipped)")
            elif workload == "shards":
                self.results += run_fio(self, system, a.epochs, system.first_label,
                                        system.later_label)
            elif workload == "shards-loader":
                rs = run_dataloader(self, system, "shards-loader", a.epochs,
                                    system.first_label, system.later_label)
                self.results += rs
            else:
                raise SystemExit("unknown workload " + workload)

    def profile(self, system, workload):
        """One more warm epoch of `workload` (images: the DataLoader; shards: fio) on
        `system` with perf recording its daemons (granaryd and granary-fuse, or rclone)."""
        name = "%s-%s" % (system.name, workload)
        data = os.path.join(self.work, "perf-%s.data" % name)
        pids = ",".join(str(p) for p in system.pids())
        cmd = ["perf", "record", "-g", "-F", "199", "-p", pids, "-o", data]
        perf = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        if workload == "images":
            rs = run_dataloader(self, system, "images", 1, "profiled", "profiled")
        else:
            rs = run_fio(self, system, 1, "profiled", "profiled")
        perf.send_signal(signal.SIGINT)
        perf.wait()
        r = rs[0]
        self.profiles.append(dict(r, command=" ".join(cmd[:6]) + " <%s pids>" %
                                  " + ".join(system.pid_names())))
        self.write_profile(data, name, "perf record -g -F 199 -p <%s pids> during one extra "
                           "warm %s epoch on %s (%s; %.1f s, %.0f samples/s, %.1f MiB/s; "
                           "client CPU %.1f s, daemons' CPU %.1f s). Processes: %s. perf.data "
                           "kept in the workdir as %s." %
                           (" + ".join(system.pid_names()), workload, system.name,
                            "DataLoader" if workload == "images" else "fio", r["wall"],
                            r["samples"] / r["wall"], r["bytes"] / MIB / r["wall"],
                            r["client_cpu"], r["system_cpu"], system.describe_pids(),
                            os.path.basename(data)))

    def write_profile(self, data, name, title):
        text = []
        reports = [["--no-children", "-g", "none", "--sort", "pid,comm"],
                   ["--no-children", "-g", "none", "--sort", "comm,dso"],
                   ["--no-children", "-g", "none", "--sort", "sym", "--percent-limit", "0.5"],
                   # Where the kernel time goes: whole call chains, callers first.
                   ["--children", "-g", "caller,2,callee,function,percent", "--sort", "sym",
                    "--percent-limit", "4"]]
        for options in reports:
            out = run(["perf", "report", "-i", data, "--stdio"] + options, capture_output=True,
                      text=True, check=False).stdout
            kept = [l for l in out.splitlines() if l.strip() and not l.startswith("#")]
            text.append("\n".join(kept[:250]))
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, "profile-%s.txt" % name)
        with open(path, "w") as f:
            f.write(title + "\n\n" + "\n\n".join(text) + "\n")
        log("profile written to %s" % path)

    def run(self):
        a = self.args
        self.meta_info = {
            "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "commit": run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip(),
            "binaries": build_origin(self.build),
            "kernel": os.uname().release, "cpus": os.cpu_count(),
            "load_start": os.getloadavg()[0], "command": " ".join(sys.argv),
            "config": vars(a)}
        load = Sampler(lambda: os.getloadavg()[0], period=10)
        self.prepare()
        self.meta_info["throttle"] = self.throttle.kind
        self.meta_info["source_seq_mibs"] = self.measure_source_bandwidth()
        profiled = False
        if a.dataset_per_cache:
            self.run_larger_than_cache()
        else:
            for system in self.make_systems():
                profile = a.profile and system.name in a.profile_systems.split(",")
                profiled |= self.run_system(system, a.workloads.split(","), system.name,
                                            profile)
        self.meta_info["load_end"] = os.getloadavg()[0]
        self.meta_info["load_samples"] = [(t, v + load.samples[0][1]) for t, v in load.stop()]
        self.meta_info["source_seq_mibs_end"] = self.measure_source_bandwidth()
        self.meta_info["profiled"] = profiled

    def run_system(self, system, workloads, setup_key, profile=False):
        """Starts `system`, runs `workloads` on it and, with `profile`, the profiled epochs
        (if it has daemons to profile), and stops it; True if it profiled."""
        log("== %s" % setup_key)
        try:
            system.start()
            self.setups[setup_key] = system.setup_info
            self.run_workloads(system, workloads)
            profile = profile and bool(system.pids())
            if profile:
                for workload in self.args.profile_workloads.split(","):
                    self.profile(system, workload)
        finally:
            system.stop()
        return profile

    def run_larger_than_cache(self):
        """Each workload against caches smaller than it: every caching system afresh per
        workload and ratio, its cache the workload's bytes / ratio; the systems that keep no
        cache (the direct source) once per workload."""
        ratios = [float(x) for x in self.args.dataset_per_cache.split(",")]
        for workload in self.args.workloads.split(","):
            for i, ratio in enumerate(ratios):
                for system in self.make_systems():
                    if system.caches:
                        system.size_cache(self.workload_bytes[workload], ratio)
                        key = "%s, %s, dataset %g × cache (%d MiB)" % (
                            system.name, workload, ratio, system.cache_mib)
                    elif i == 0:
                        key = "%s, %s" % (system.name, workload)
                    else:
                        continue
                    self.run_system(system, [workload], key)

    def close(self):
        if self.throttle:
            self.throttle.leave()
            self.throttle.remove()
        if self.loop:
            self.loop.close()


# ---------------------------------------------------------------- report


def group(results, system, workload, labels=None):
    return [r for r in results if r["system"] == system and r["workload"] == workload
            and (labels is None or r["label"] in labels)]


def throughput(rs):
    """MiB/s over a set of epochs: total bytes / total wall."""
    if not rs:
        return None
    return sum(r["bytes"] for r in rs) / MIB / sum(r["wall"] for r in rs)


def granary_variants(args):
    """(cold system, prewarm system, servers) of the Granary set-ups compared."""
    return [("granary-cold", "granary-prewarm", 1),
            ("granary-cluster-cold", "granary-cluster-prewarm",
             getattr(args, "cluster_servers", 3))]


def fmt(x, digits=2):
    return "–" if x is None else ("%.*f" % (digits, x))


def report_header(bench):
    """The run's lines every report starts with: when, what, the command, the configuration."""
    info, a = bench.meta_info, bench.args
    lines = []
    binaries = info.get("binaries") or {}
    lines.append("Run %s, checkout at commit %s, binaries built from %s (%s), kernel %s, %d "
                 "CPUs, load average %.1f at the start and %.1f at the end." % (
                     info["date"], info["commit"], binaries.get("commit") or "?",
                     binaries.get("source") or "?", info["kernel"], info["cpus"],
                     info["load_start"], info["load_end"]))
    loads = [v for _, v in info.get("load_samples", [])]
    if loads:
        lines[-1] += (" One-minute load average sampled every 10 s during the run: mean %.1f, "
                      "min %.1f, max %.1f." % (sum(loads) / len(loads), min(loads), max(loads)))
    lines.append("")
    lines.append("Command: `%s`" % info["command"])
    lines.append("")
    lines.append("Configuration: source limited to %d MiB/s (%s on a loop device with direct "
                 "I/O); measured sequential read of a shard through the limit: %.1f MiB/s at "
                 "the start, %.1f MiB/s at the end. images: %d files, mean %d KiB log-normal "
                 "(sigma %.2f), %d classes; shards: %d × %d MiB, fio-written 8 KiB–1 MiB "
                 "documents; %d epochs per system; DataLoader %d workers, batch %d; fio %d "
                 "jobs; Granary chunk size %s; granary-cluster-*: %d granaryd on loopback in one "
                 "cache group (static members file, cluster token), granary-fuse against the "
                 "first. Page cache dropped before every epoch." %
                 (a.bandwidth_mib, info["throttle"], info["source_seq_mibs"],
                  info["source_seq_mibs_end"], a.image_files, a.image_mean_kib, a.image_sigma,
                  a.classes, a.shards, a.shard_mib, a.epochs, a.workers, a.batch_size,
                  a.fio_jobs, a.chunk_size, getattr(a, "cluster_servers", 3)))
    lines.append("")
    return lines


def checked_cell(r):
    if r["bad"] == 0:
        return "all %d ok" % r["samples"]
    return "**%s**" % ("FAILED" if r["bad"] < 0 else "%d WRONG" % r["bad"])


def write_report(bench, out):
    results, setups, info = bench.results, bench.setups, bench.meta_info
    a = bench.args
    lines = report_header(bench)
    lines.append("| system | workload | epoch | kind | wall s | samples/s | MiB/s | / direct | "
                 "/ local copy | / rclone same epoch | source MiB read | client CPU s | system "
                 "CPU s | client peak RSS MiB | system peak RSS MiB | granaryd chunk reads | "
                 "granaryd bytes read / bytes delivered | granaryd chunks read from the source | "
                 "sample read p50, p99 ms | checked |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if r["label"] == "profiled":
            continue
        server = r.get("server")
        mibs = r["bytes"] / MIB / r["wall"]
        direct = throughput(group(results, "direct", r["workload"]))
        local = throughput(group(results, "local-copy", r["workload"]))
        rclone = throughput([x for x in group(results, "rclone", r["workload"])
                             if x["epoch"] == r["epoch"]])
        lines.append("| %s | %s | %d | %s | %.1f | %.0f | %.1f | %s | %s | %s | %.0f | %.1f | "
                     "%.1f | %.0f | %.0f | %s | %s | %s | %s | %s |" % (
                         r["system"], r["workload"], r["epoch"], r["label"], r["wall"],
                         r["samples"] / r["wall"], mibs,
                         fmt(mibs / direct if direct else None),
                         fmt(mibs / local if local else None),
                         fmt(mibs / rclone if rclone else None),
                         r["source_bytes"] / MIB, r["client_cpu"], r["system_cpu"],
                         r["client_peak"] / MIB, r["system_peak"] / MIB,
                         "%.0f" % server["reads"] if server else "–",
                         "%.2f" % (server["bytes"] / r["bytes"]) if server else "–",
                         source_reads_cell(server),
                         "%.2f, %.2f" % (r["read_p50"] * 1e3, r["read_p99"] * 1e3)
                         if r.get("read_p99") is not None else "–",
                         checked_cell(r)))
    lines.append("")
    lines.append("\"/ direct\", \"/ local copy\": the epoch's MiB/s against the throughput "
                 "over all epochs of the direct source and of the local copy on the same "
                 "workload; \"/ rclone same epoch\": against rclone's epoch of the same number "
                 "(1 cold, later warm). \"system\" CPU and RSS: rclone, or granaryd (all %d of "
                 "them for granary-cluster-*) + granary-fuse (peaks summed); \"client\": the "
                 "DataLoader's main process and workers (peaks summed), or fio. \"source MiB "
                 "read\": bytes read from the throttled device in the epoch. granaryd chunk "
                 "reads and bytes read: from the servers' /metrics, summed (hits + misses; "
                 "bytes from cache + source + peers), against the bytes the client "
                 "received. Sample read: a DataLoader worker's open and read of one sample." %
                 getattr(a, "cluster_servers", 3))
    lines.append("")

    # Setup phases.
    seq = info["source_seq_mibs"]
    variants = granary_variants(a)
    lines.append("| setup step | wall s | MiB/s | / source sequential | source MiB read | "
                 "CPU s | chunks fetched per server |")
    lines.append("|---|---|---|---|---|---|---|")
    if "local-copy" in setups:
        s = setups["local-copy"]
        lines.append("| local copy: `cp -a` + sync | %.1f | %.1f | %.2f | %.0f | %.1f | |" % (
            s["wall"], s["bytes"] / MIB / s["wall"], s["bytes"] / MIB / s["wall"] / seq,
            s["source_bytes"] / MIB, s["cpu"]))
    for cold, _, _ in variants:
        for name in (cold, cold.replace("-cold", "-prewarm")):
            if name in setups and "add_wall" in setups[name]:
                lines.append("| %s: `granary dataset add` (scan%s) | %.1f | | | | | |" %
                             (name, ", until every server has it" if
                              setups[name].get("servers", 1) > 1 else "",
                              setups[name]["add_wall"]))
    prewarm_mibs = {}
    for _, warm, servers in variants:
        if warm in setups and "samples" in setups[warm]:
            s = setups[warm]
            prewarm_mibs[warm] = s["bytes"] / MIB / s["wall"]
            per_node = s.get("chunks_per_node") or []
            lines.append("| %s: `granary prewarm` (CPU of %s) | %.1f | %.1f | %.2f | %.0f | "
                         "%.1f | %s |" % (
                             warm, "granaryd" if servers == 1 else "the %d granaryd" % servers,
                             s["wall"], prewarm_mibs[warm], prewarm_mibs[warm] / seq,
                             s["source_bytes"] / MIB, s["cpu"],
                             " / ".join("%d" % c for c in per_node)))
    lines.append("")

    # Ratios.
    lines.append("| workload | Granary | warm / direct | warm / local copy | warm / rclone warm "
                 "| cold / direct | cold / rclone cold | rclone cold / direct | rclone warm / "
                 "direct | local copy / direct |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    verdicts = []

    def ratio(x, y):
        return None if x is None or y is None else x / y
    for workload in ("images", "shards", "shards-loader"):
        direct = throughput(group(results, "direct", workload))
        local = throughput(group(results, "local-copy", workload))
        rwarm = throughput(group(results, "rclone", workload, ("warm",)))
        rcold = throughput(group(results, "rclone", workload, ("cold",)))
        for cold, warm, servers in variants:
            gwarm = throughput(group(results, warm, workload))
            gcold = throughput(group(results, cold, workload, ("cold",)))
            if gwarm is None and gcold is None:
                continue
            row = [ratio(gwarm, direct), ratio(gwarm, local), ratio(gwarm, rwarm),
                   ratio(gcold, direct), ratio(gcold, rcold), ratio(rcold, direct),
                   ratio(rwarm, direct), ratio(local, direct)]
            who = "1 server" if servers == 1 else "%d servers" % servers
            lines.append("| %s | %s | %s |" % (workload, who, " | ".join(fmt(x) for x in row)))
            if workload in ("images", "shards"):
                verdicts.append(("%s, %s: warm epochs ≥ 3 × the direct source" %
                                 (workload, who), row[0], 3.0))
                verdicts.append(("%s, %s: warm epochs ≥ 0.9 × the local copy" %
                                 (workload, who), row[1], 0.9))
                verdicts.append(("%s, %s: warm epochs ahead of rclone's warm epochs (> 1)" %
                                 (workload, who), row[2], 1.0))
    lines.append("")
    lines.append("Ratios are throughputs (total bytes / total wall time over the epochs "
                 "named): Granary warm = every epoch after `granary prewarm` (the "
                 "granary-prewarm or granary-cluster-prewarm system); Granary cold = epoch 1 "
                 "of the read-through run (granary-cold, granary-cluster-cold); rclone cold = "
                 "its epoch 1, warm = its later epochs; direct and local copy = all their "
                 "epochs. The DESIGN.md targets are stated for the small-file DataLoader "
                 "(images); the shards rows are held to the same bounds here.")
    lines.append("")
    for _, warm, servers in variants:
        if warm in prewarm_mibs:
            who = "1 server" if servers == 1 else "%d servers" % servers
            verdicts.append(("prewarm, %s: ≥ 0.9 × the source's bandwidth (sequential read, "
                             "start of run)" % who, prewarm_mibs[warm] / seq, 0.9))
            verdicts.append(("prewarm, %s: ≥ 0.9 × the configured limit" % who,
                             prewarm_mibs[warm] / a.bandwidth_mib, 0.9))
    lines.append("| target (DESIGN.md) | measured | met? |")
    lines.append("|---|---|---|")
    for what, value, bound in verdicts:
        if value is None:
            verdict = "not measured"
        elif value > bound if "ahead" in what else value >= bound:
            verdict = "met"
        else:
            verdict = "**missed**"
        lines.append("| %s | %s | %s |" % (what, fmt(value), verdict))
    lines.append("")
    profiles = getattr(bench, "profiles", [])
    if profiles:
        lines.append("Profiled extra epochs (not in the tables above; perf slows them):")
        lines.append("")
        for r in profiles:
            lines.append("- %s %s: %.1f s, %.0f samples/s, %.1f MiB/s, daemons' CPU %.1f s, "
                         "%s; `%s`" % (r["system"], r["workload"], r["wall"],
                                       r["samples"] / r["wall"], r["bytes"] / MIB / r["wall"],
                                       r["system_cpu"], "all %d ok" % r["samples"]
                                       if r["bad"] == 0 else "WRONG/FAILED", r["command"]))
        lines.append("")
    bad = [r for r in results if r["bad"] != 0]
    lines.append("Every sample of every epoch was checked (DataLoader: XXH3-64 against the "
                 "generator's; fio: --verify=xxhash)%s." %
                 (": all correct" if not bad else "; **%d epochs had wrong or failed reads**"
                  % len(bad)))
    return save_report(bench, out, lines)


def save_report(bench, out, lines):
    """Writes results.md (`lines`) and results.json (every measurement) to `out`."""
    text = "\n".join(lines) + "\n"
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"info": bench.meta_info, "setups": bench.setups, "results": bench.results,
                   "profiles": getattr(bench, "profiles", [])}, f, indent=1)
    return text


# ------------------------------------------------------ report: dataset larger than the cache


def share_of_promise(r):
    """An epoch's hit ratio against the cache / dataset ratio its cache was given."""
    ratio = r.get("dataset_per_cache")
    return epoch_hit_ratio(r) * ratio if ratio else None


def epoch_hit_ratio(r):
    """The share of an epoch's bytes that did not come from the source, for every system
    alike: 1 − the bytes read from the source device in the epoch (by readers, fills and
    read-ahead alike) / the bytes the client read; at least 0."""
    return max(0.0, 1 - r["source_bytes"] / r["bytes"])


def larger_than_cache_rows(results, workload):
    """(ratio, system, epochs) for every run of `workload`, the direct source first."""
    runs = {}
    for r in results:
        if r["workload"] == workload and r["label"] != "profiled":
            runs.setdefault((r.get("dataset_per_cache"), r["system"]), []).append(r)
    return sorted(((ratio, system, rs) for (ratio, system), rs in runs.items()),
                  key=lambda x: (x[0] is not None, x[0] or 0))


def write_larger_than_cache_report(bench, out):
    results, a = bench.results, bench.args
    lines = report_header(bench)
    lines.append("Each caching system started afresh per workload and ratio, its cache the "
                 "workload's bytes / ratio: `granaryd --capacity` and rclone "
                 "`--vfs-cache-max-size` (with `--vfs-cache-poll-interval 1s`), both in MiB; "
                 "granary-fuse's in-process chunk cache %s. The direct source once per "
                 "workload." % Granary.FUSE_MEMORY_BESIDE_SMALL_CACHE)
    lines.append("")
    lines.append("| workload | dataset / cache | system | epoch | wall s | / direct | / rclone "
                 "same epoch | hit ratio | hit ratio / (cache / dataset) | source MiB read | "
                 "granaryd source MiB | source / bytes read | cache on disk, peak MiB | "
                 "checked |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for workload in a.workloads.split(","):
        rows = larger_than_cache_rows(results, workload)
        direct = throughput(group(results, "direct", workload))
        for ratio, system, rs in rows:
            rclone = {r["epoch"]: r for _, s, xs in rows if s == "rclone" for r in xs
                      if r.get("dataset_per_cache") == ratio}
            for r in rs:
                mibs = r["bytes"] / MIB / r["wall"]
                hits = epoch_hit_ratio(r)
                server = r.get("server") or {}
                other = rclone.get(r["epoch"])
                lines.append("| %s | %s | %s | %d | %.1f | %s | %s | %s | %s | %.0f | %s | %.2f "
                             "| %s | %s |" % (
                                 workload, "%g" % ratio if ratio else "–", system, r["epoch"],
                                 r["wall"], fmt(mibs / direct if direct else None),
                                 fmt(other["wall"] / r["wall"] if other else None),
                                 fmt(hits), fmt(share_of_promise(r)),
                                 r["source_bytes"] / MIB,
                                 "%.0f" % (server["bytes_from_source"] / MIB)
                                 if "bytes_from_source" in server else "–",
                                 r["source_bytes"] / r["bytes"],
                                 "%.0f" % (r["cache_disk_peak"] / MIB)
                                 if r.get("cache_disk_peak") else "–", checked_cell(r)))
            if system.startswith("granary") and ratio:
                verdicts += larger_than_cache_verdicts(workload, ratio, system, rs, direct,
                                                       rclone)
    lines.append("")
    lines.append("\"/ direct\": the epoch's MiB/s against the direct source's over its epochs; "
                 "\"/ rclone same epoch\": rclone's wall time of the epoch of the same number "
                 "with the same cache against this one's (above 1: faster than rclone). Hit "
                 "ratio: 1 − source MiB read / MiB the client read, at least 0, for every "
                 "system. \"source MiB read\": bytes read from the throttled device in the "
                 "epoch (the cgroup's counter: readers, fills, read-ahead, everything); "
                 "\"granaryd source MiB\": what granaryd counts it read from the source, "
                 "through the source's page cache (so more than the device may serve). "
                 "Cache on disk: the most the cache's data held on disk, sampled every second "
                 "(rclone's cache directory; granaryd's data files, not its RocksDB indexes, "
                 "whose logs are preallocated).")
    lines.append("")
    lines.append("| target (DESIGN.md, issue 49) | measured | met? |")
    lines.append("|---|---|---|")
    for what, value, bound in verdicts:
        if bound is None:
            verdict = ""
        elif value is not None and (value > bound if "ahead" in what else value >= bound):
            verdict = "met"
        else:
            verdict = "**missed**"
        lines.append("| %s | %s | %s |" % (what, fmt(value), verdict))
    lines.append("")
    return save_report(bench, out, lines)


def larger_than_cache_verdicts(workload, ratio, system, rs, direct, rclone):
    """The targets of a dataset larger than the cache, for one Granary run: from the
    second epoch on (the first reads a cold cache), hit ratio ≥ 0.9 × cache / dataset
    and, with the dataset at most twice the cache, each epoch ≥ 1.3 × the direct source
    (beyond, an epoch bound by the source gains at most 1 / (1 − cache / dataset), under
    1.3 from 4 × on: the figure is shown without a target); every epoch ahead of
    rclone's."""
    warm = [r for r in rs if r["epoch"] > 1]
    who = "%s, %s, dataset %g × cache" % (system, workload, ratio)

    def worst(values):
        values = [v for v in values if v is not None]
        return min(values) if values else None
    speed = "%s: epochs 2+, the slowest / direct" % who
    if ratio <= 2:
        speed += " ≥ 1.3"
    else:
        speed += " (no target: at most %.2f where only misses cost)" % (1 / (1 - 1 / ratio))
    return [
        (speed, worst(r["bytes"] / MIB / r["wall"] / direct for r in warm) if direct else None,
         1.3 if ratio <= 2 else None),
        ("%s: epochs 2+, the lowest hit ratio / (cache / dataset) ≥ 0.9" % who,
         worst(share_of_promise(r) for r in warm), 0.9),
        ("%s: every epoch ahead of rclone's (rclone's wall / this one's, the least)" % who,
         worst(rclone[r["epoch"]]["wall"] / r["wall"] for r in rs if r["epoch"] in rclone),
         1.0)]


def plot_larger_than_cache(bench, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results, a = bench.results, bench.args
    workloads = a.workloads.split(",")
    ratios = [float(x) for x in a.dataset_per_cache.split(",")]
    systems = a.systems.split(",")
    colors = {s: "C%d" % i for i, s in enumerate(systems)}

    fig, axes = plt.subplots(len(workloads), len(ratios), squeeze=False,
                             figsize=(5 * len(ratios), 3.6 * len(workloads)))
    width = 0.8 / len(systems)
    for row, workload in zip(axes, workloads):
        for ax, ratio in zip(row, ratios):
            for i, system in enumerate(systems):
                rs = [r for r in group(results, system, workload)
                      if r.get("dataset_per_cache") in (None, ratio)]
                ax.bar([r["epoch"] + (i - (len(systems) - 1) / 2) * width for r in rs],
                       [r["wall"] for r in rs], width, label=system, color=colors[system])
            ax.set_xticks(range(1, a.epochs + 1))
            ax.set_xlabel("epoch")
            ax.set_ylabel("wall time (s)")
            ax.set_title("%s, dataset %g × cache" % (workload, ratio), fontsize=10)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "larger_than_cache_epochs.png"), dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(workloads), squeeze=False, figsize=(5 * len(workloads), 4))
    shares = [1 / r for r in ratios]
    for ax, workload in zip(axes[0], workloads):
        line = [0, max(shares) * 1.1]
        ax.plot(line, line, color="grey", label="cache / dataset (the promise)")
        ax.plot(line, [0.9 * x for x in line], color="grey", linestyle="--",
                label="0.9 × cache / dataset (the target)")
        for system in systems:
            for epoch, marker in zip(range(2, a.epochs + 1), "os^vD"):
                points = [(1 / r["dataset_per_cache"], epoch_hit_ratio(r))
                          for r in group(results, system, workload)
                          if r.get("dataset_per_cache") and r["epoch"] == epoch]
                if points:
                    ax.scatter(*zip(*points), color=colors[system], marker=marker,
                               label="%s, epoch %d" % (system, epoch))
        ax.set_xticks(shares)
        ax.set_xticklabels(["%g (dataset %g ×)" % (1 / r, r) for r in ratios])
        ax.set_xlabel("cache / dataset")
        ax.set_ylabel("hit ratio")
        ax.set_ylim(0, 1)
        ax.set_title("%s: hit ratio from the second epoch on" % workload, fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "larger_than_cache_hits.png"), dpi=110)
    plt.close(fig)


def plot(bench, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results, setups, a = bench.results, bench.setups, bench.args
    workloads = [w for w in ("images", "shards", "shards-loader")
                 if any(r["workload"] == w for r in results)]
    systems = [s for s in a.systems.split(",") if any(r["system"] == s for r in results)]
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4.2), squeeze=False)
    for ax, workload in zip(axes[0], workloads):
        width = 0.8 / a.epochs
        for e in range(1, a.epochs + 1):
            xs, ys = [], []
            for i, s in enumerate(systems):
                rs = [r for r in group(results, s, workload) if r["epoch"] == e
                      and r["label"] != "profiled"]
                if rs:
                    xs.append(i + (e - 1 - (a.epochs - 1) / 2) * width)
                    ys.append(rs[0]["wall"])
            ax.bar(xs, ys, width, label="epoch %d" % e)
        ax.set_xticks(range(len(systems)))
        ax.set_xticklabels(systems, rotation=20, ha="right")
        ax.set_ylabel("epoch wall time (s)")
        ax.set_title("%s (page cache dropped before every epoch)" % workload, fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "epoch_time.png"), dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, label in (("granary-prewarm", "granary prewarm, 1 server"),
                        ("granary-cluster-prewarm", "granary prewarm, %d servers" %
                         getattr(a, "cluster_servers", 3)),
                        ("local-copy", "cp -a")):
        if name in setups and setups[name].get("samples"):
            ts, rates = rates_over_time(setups[name]["samples"], 1.0)
            ax.plot(ts, rates, label=label + " (source reads)")
    ax.axhline(a.bandwidth_mib, color="grey", linestyle="--", label="limit %d MiB/s" %
               a.bandwidth_mib)
    ax.axhline(bench.meta_info["source_seq_mibs"], color="black", linestyle=":",
               label="source sequential read %.0f MiB/s" % bench.meta_info["source_seq_mibs"])
    ax.set_xlabel("seconds")
    ax.set_ylabel("MiB/s read from the source (1 s windows)")
    ax.set_title("Filling the cache: prewarm against cp", fontsize=10)
    ax.set_ylim(0, a.bandwidth_mib * 1.5)
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "prewarm_throughput.png"), dpi=110)
    plt.close(fig)


def rates_over_time(samples, window):
    ts, rates = [], []
    j = 0
    for i in range(1, len(samples)):
        while samples[i][0] - samples[j][0] > window and j < i - 1:
            j += 1
        dt = samples[i][0] - samples[j][0]
        if dt > 0:
            ts.append(samples[i][0])
            rates.append((samples[i][1] - samples[j][1]) / MIB / dt)
    return ts, rates


def report_main(argv):
    """Renders results.md and the plots again from a results.json."""
    parser = argparse.ArgumentParser(prog="e2e_bench.py report")
    parser.add_argument("results_json")
    parser.add_argument("--out-dir", required=True)
    a = parser.parse_args(argv)
    saved = json.load(open(a.results_json))
    bench = Bench.__new__(Bench)
    bench.args = argparse.Namespace(**saved["info"]["config"])
    bench.meta_info = saved["info"]
    bench.results = saved["results"]
    bench.setups = saved["setups"]
    bench.profiles = saved.get("profiles", [])
    write_reports(bench, a.out_dir)
    return 0


def write_reports(bench, out):
    """The tables (printed, and saved with every measurement) and the plots of a run."""
    if getattr(bench.args, "dataset_per_cache", ""):
        print(write_larger_than_cache_report(bench, out))
        plot_larger_than_cache(bench, out)
    else:
        print(write_report(bench, out))
        plot(bench, out)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        return client_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        return report_main(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(REPO, "build-e2e"))
    p.add_argument("--workdir", default="/var/tmp/granary-e2e")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--bandwidth-mib", type=int, default=200, help="source read limit, MiB/s")
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--image-files", type=int, default=20000)
    p.add_argument("--image-mean-kib", type=int, default=110)
    p.add_argument("--image-sigma", type=float, default=0.5)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--shard-mib", type=int, default=1024)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--dataset-per-cache", default="",
                   help="comma-separated ratios of each workload's bytes to the cache (e.g. "
                   "2,4): every caching system runs afresh per workload and ratio with a cache "
                   "of the workload's bytes / ratio (granaryd --capacity, rclone "
                   "--vfs-cache-max-size); tables and plots of epoch times and hit ratios")
    p.add_argument("--workers", type=int, default=4, help="DataLoader workers")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--fio-jobs", type=int, default=4)
    p.add_argument("--chunk-size", default="4MiB", help="Granary chunk size")
    p.add_argument("--systems", default="direct,local-copy,rclone,granary-cold,granary-prewarm,"
                   "granary-cluster-prewarm",
                   help="direct, local-copy, rclone, granary-cold, granary-prewarm, "
                   "granary-cluster-cold, granary-cluster-prewarm, fuse-passthrough, fuse-served, "
                   "and the Python client's: granary-client-cold, granary-client-prewarm, "
                   "granary-cluster-client-cold, granary-cluster-client-prewarm")
    p.add_argument("--workloads", default="images,shards",
                   help="images (DataLoader), shards (fio), shards-loader (DataLoader)")
    p.add_argument("--profile-prewarm", action="store_true",
                   help="perf record granaryd during `granary prewarm` (slows the prewarm)")
    p.add_argument("--fuse-server", choices=("socket", "tcp"), default="socket",
                   help="how granary-fuse reaches the local granaryd: its Unix socket or its "
                   "TCP address on loopback")
    p.add_argument("--fuse-args", default="",
                   help="more flags for granary-fuse, space-separated (e.g. "
                   "--fuse-args=--cold-open-memory=0)")
    p.add_argument("--reference", default="",
                   help="passthrough_hp's path, for the fuse-passthrough and fuse-served systems")
    p.add_argument("--fill", choices=("on-read", "none"), default="",
                   help="the dataset's fill policy (default: granaryd's, on-read)")
    p.add_argument("--cluster-servers", type=int, default=3,
                   help="granaryd in the granary-cluster-* systems' cache group (on loopback)")
    p.add_argument("--profile", action="store_true",
                   help="perf record the daemons during one extra warm epoch per workload")
    p.add_argument("--profile-systems", default="granary-prewarm",
                   help="systems that --profile profiles (those with daemons: rclone, granary-*)")
    p.add_argument("--profile-workloads", default="images,shards",
                   help="workloads that --profile runs an extra epoch of: images, shards")
    p.add_argument("--drop-caches", choices=("0", "1", "3"), default="3",
                   help="written to /proc/sys/vm/drop_caches before every epoch: 1 drops the "
                   "page cache only, 3 dentries and inodes too; 0 drops nothing")
    args = p.parse_args()
    global DROP_CACHES
    DROP_CACHES = args.drop_caches
    if os.geteuid() != 0:
        raise SystemExit("e2e_bench: run as root (loop device, cgroup, drop_caches, mounts)")
    for tool in ("fio", "rclone", "perf" if args.profile else "fio"):
        if shutil.which(tool) is None:
            raise SystemExit("e2e_bench: %s is missing; run scripts/install-deps.sh" % tool)
    for binary in ("granaryd", "granary", "granary-fuse"):
        if not os.access(os.path.join(args.build, binary), os.X_OK):
            raise SystemExit("e2e_bench: %s/%s is missing; build it first" % (args.build, binary))
    bench = Bench(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        bench.run()
    finally:
        bench.close()
    write_reports(bench, bench.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
