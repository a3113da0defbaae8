#!/usr/bin/env python3
"""`ls -l` of one large directory: through the mount against the source.

`ls -l` asks every entry for its attributes, its POSIX ACL and its SELinux
label (getxattr of system.posix_acl_access and security.selinux). Through a
FUSE mount each question the kernel cannot answer from its caches is a
request to granary-fuse. This benchmark lists a directory of --files empty
files on the local disk (the source) and through two granary-fuse binaries
mounting it from one granaryd, the one under test and --baseline-fuse, in an
order that alternates from round to round. Each round mounts afresh and drops
the kernel's dentries and inodes, then lists twice: the first listing
(every inode new to the kernel) and the next one (the kernel's caches warm).
It prints each listing's seconds, granary-fuse's CPU seconds for the two,
and per round the ratios source/mount (1.0: as fast as the source).

Usage (root):
  bench/fuse/ls_long_bench.py --build build --baseline-fuse OLD/granary-fuse
      [--files 100000] [--rounds 3] [--workdir /var/tmp/granary-ls-bench]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from bench_util import fuse_server_pid  # noqa: E402
from fuse_bench import Granaryd, unmount  # noqa: E402


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listing_seconds(directory, files):
    start = time.perf_counter()
    out = subprocess.run(["ls", "-l", directory], check=True, capture_output=True).stdout
    seconds = time.perf_counter() - start
    lines = out.count(b"\n")
    if lines != files + 1:  # The "total" line, then one line an entry.
        raise RuntimeError("ls -l %s listed %d lines, expected %d" % (directory, lines, files + 1))
    return seconds


def drop_dentries_and_inodes():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--baseline-fuse", required=True)
    parser.add_argument("--files", type=int, default=100000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", default="/var/tmp/granary-ls-bench")
    args = parser.parse_args()

    shutil.rmtree(args.workdir, ignore_errors=True)
    source = os.path.join(args.workdir, "src", "dir")
    os.makedirs(source)
    for i in range(args.files):
        open(os.path.join(source, "img-%09d.jpg" % i), "wb").close()
    server = Granaryd(args.build, args.workdir)
    binaries = {"tested": os.path.abspath(os.path.join(args.build, "granary-fuse")),
                "baseline": os.path.abspath(args.baseline_fuse)}
    results = {name: {"first": [], "again": [], "cpu": []} for name in ["source", *binaries]}
    try:
        server.add("ls", os.path.dirname(source), "4MiB")
        for round_number in range(args.rounds):
            order = ["source", *binaries]
            if round_number % 2:
                order.reverse()
            for name in order:
                mountpoint = os.path.join(args.workdir, "mnt-" + name)
                directory = source
                pid = None
                if name != "source":
                    os.makedirs(mountpoint, exist_ok=True)
                    subprocess.run([binaries[name], mountpoint, "--server", server.address,
                                    "--dataset", "ls"], check=True)
                    directory = os.path.join(mountpoint, "ls", "dir")
                    pid = fuse_server_pid(mountpoint)
                try:
                    drop_dentries_and_inodes()
                    cpu_before = cpu_seconds(pid) if pid else 0.0
                    first = listing_seconds(directory, args.files)
                    again = listing_seconds(directory, args.files)
                    cpu = cpu_seconds(pid) - cpu_before if pid else 0.0
                finally:
                    if pid:
                        unmount(mountpoint)
                results[name]["first"].append(first)
                results[name]["again"].append(again)
                results[name]["cpu"].append(cpu)
                print("round %d %-8s first %.3f s, again %.3f s, granary-fuse CPU %.2f s" %
                      (round_number + 1, name, first, again, cpu), flush=True)
    finally:
        server.stop()
    print("ls -l of %d entries; ratios source/mount per round, then the median" % args.files)
    for name in binaries:
        for listing in ("first", "again"):
            ratios = [s / m for s, m in zip(results["source"][listing], results[name][listing])]
            print("%-8s %-5s %s; median %.2f" % (name, listing, ", ".join("%.2f" % r for r in ratios),
                                                statistics.median(ratios)))
        print("%-8s granary-fuse CPU for both listings, median %.2f s" %
              (name, statistics.median(results[name]["cpu"])))


if __name__ == "__main__":
    main()
