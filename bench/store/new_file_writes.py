#!/usr/bin/python3
"""What storing a chunk in a new data file costs, written through the page cache
against written with O_DIRECT, by size: the choice behind the store's
direct_write_min_bytes (cache_server/store/chunk_store.h).

Each round writes --mib MiB as new files of one size in DIR (in 256
subdirectories, as the store lays out its data files), one pwrite each, then
syncs outside the clock; O_DIRECT goes through a descriptor of its own, as the
store's does. CPU is the whole machine's (/proc/stat), so the kernel's work on
behalf of the writes (page cache, block allocation, I/O completion) counts
wherever it runs; the machine should be otherwise idle. Writeback of the
buffered files happens in the sync, outside the clock, as it does after the
store's writes.

Usage: new_file_writes.py DIR [--sizes-kib 64,128,...] [--mib 256] [--rounds 2] [--json]
"""
import argparse
import json
import mmap
import os
import shutil
import time


def busy_seconds():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def write_files(root, size, count, direct, buffer):
    blocks = size // 4096 * 4096 if direct else 0
    for i in range(count):
        sub = os.path.join(root, "%02x" % (i & 255))
        os.makedirs(sub, exist_ok=True)
        path = os.path.join(sub, "%d.dat" % i)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        if blocks:
            direct_fd = os.open(path, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
            os.pwrite(direct_fd, memoryview(buffer)[:blocks], 0)
            os.close(direct_fd)
        if size > blocks:
            os.pwrite(fd, memoryview(buffer)[blocks:size], blocks)
        os.close(fd)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="an empty directory on the filesystem to measure")
    p.add_argument("--sizes-kib", default="64,128,256,512,1024,2048,4096")
    p.add_argument("--mib", type=int, default=256, help="bytes written per size and mode")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    sizes = [int(s) * 1024 for s in args.sizes_kib.split(",")]
    buffer = mmap.mmap(-1, max(sizes))
    buffer.write(os.urandom(max(sizes)))
    results = []
    for round_number in range(1, args.rounds + 1):
        for size in sizes:
            count = max(1, args.mib * 1024 * 1024 // size)
            row = {"round": round_number, "size_kib": size // 1024, "files": count}
            for mode, direct in (("buffered", False), ("direct", True)):
                root = os.path.join(args.dir, "files")
                os.mkdir(root)
                os.sync()
                cpu, wall = busy_seconds(), time.monotonic()
                write_files(root, size, count, direct, buffer)
                cpu, wall = busy_seconds() - cpu, time.monotonic() - wall
                os.sync()
                shutil.rmtree(root)
                row[mode + "_cpu_us"] = cpu * 1e6 / count
                row[mode + "_wall_us"] = wall * 1e6 / count
            row["direct_over_buffered_cpu"] = row["direct_cpu_us"] / max(row["buffered_cpu_us"], 1e-9)
            results.append(row)
            if not args.json:
                print("round %d, %5d KiB x %5d: CPU per file %7.0f us buffered, %7.0f us O_DIRECT "
                      "(%.2f); wall %7.0f / %7.0f us" %
                      (round_number, row["size_kib"], count, row["buffered_cpu_us"],
                       row["direct_cpu_us"], row["direct_over_buffered_cpu"],
                       row["buffered_wall_us"], row["direct_wall_us"]), flush=True)
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
