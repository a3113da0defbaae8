#!/usr/bin/env python3
"""What enforcing the source's ACLs costs warm reads through the mount.

With ACLs on, the kernel asks granary-fuse for an inode's
system.posix_acl_access once (GETXATTR) before it lets a caller who is not the
file's owner in; the answer is cached with the inode. This benchmark reads a
dataset of small files, warm in granaryd's cache, as a user who owns none of
them (nobody), with the dentry and inode caches dropped before every epoch so
that every inode is asked again: the worst case. It runs two granary-fuse
binaries against one granaryd in alternating order, round by round: the one
under test and a baseline built without ACL enforcement (an older build), and
prints each round's epoch times and the ratio baseline/tested (1.0: no cost).

Usage (root):
  bench/security/acl_mount_bench.py --build build --baseline-fuse OLD/granary-fuse
      [--files 4000] [--size 16384] [--rounds 5] [--acl-fraction 0.5]
      [--workdir /var/tmp/granary-acl-bench]

--acl-fraction of the files get an ACL entry for another user (u:daemon:---),
which the kernel parses and evaluates for the reader; the rest have none (the
kernel still asks, and hears none). The reader may read every file.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuse"))
from fuse_bench import Granaryd, unmount  # noqa: E402

READER = "nobody"


def make_source(root, files, size, acl_fraction):
    os.makedirs(root, exist_ok=True)
    payload = os.urandom(size)
    with_acl = []
    for i in range(files):
        directory = os.path.join(root, "d%02d" % (i % 40))
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "f%06d.bin" % i)
        with open(path, "wb") as f:
            f.write(payload)
        if i < files * acl_fraction:
            with_acl.append(path)
    for start in range(0, len(with_acl), 500):
        subprocess.run(["setfacl", "-m", "u:daemon:---", *with_acl[start:start + 500]], check=True)
    subprocess.run(["chmod", "-R", "a+rX", root], check=True)


def epoch(mounted):
    """Seconds to read every file once as READER, caches of names and inodes
    dropped first (the page cache too: the mount keeps none across it)."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    reader = ("import os,sys\n"
              "n=0\n"
              "for d,_,fs in os.walk(sys.argv[1]):\n"
              "  for f in fs:\n"
              "    with open(os.path.join(d,f),'rb') as h: n+=len(h.read())\n"
              "print(n)\n")
    start = time.perf_counter()
    out = subprocess.run(["setpriv", "--reuid", READER, "--regid", "nogroup", "--clear-groups",
                          sys.executable, "-c", reader, mounted],
                         check=True, capture_output=True, text=True).stdout
    seconds = time.perf_counter() - start
    return seconds, int(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--baseline-fuse", required=True)
    parser.add_argument("--files", type=int, default=4000)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--acl-fraction", type=float, default=0.5)
    parser.add_argument("--workdir", default="/var/tmp/granary-acl-bench")
    args = parser.parse_args()

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    os.chmod(args.workdir, 0o755)
    source = os.path.join(args.workdir, "src")
    make_source(source, args.files, args.size, args.acl_fraction)
    server = Granaryd(args.build, args.workdir)
    try:
        server.add("acl", source, "4MiB")
        subprocess.run(server.cli + ["prewarm", "acl", "--json"], check=True,
                       capture_output=True)
        binaries = {"tested": os.path.join(args.build, "granary-fuse"),
                    "baseline": os.path.abspath(args.baseline_fuse)}
        times = {name: [] for name in binaries}
        for round_number in range(args.rounds):
            order = list(binaries) if round_number % 2 == 0 else list(reversed(binaries))
            for name in order:
                mountpoint = os.path.join(args.workdir, "mnt-" + name)
                os.makedirs(mountpoint, exist_ok=True)
                subprocess.run([binaries[name], mountpoint, "--server", server.address,
                                "-o", "allow_other"], check=True)
                try:
                    epoch(os.path.join(mountpoint, "acl"))  # Fills the mount's own caches.
                    seconds, read = epoch(os.path.join(mountpoint, "acl"))
                finally:
                    unmount(mountpoint)
                expected = args.size * args.files
                if read != expected:
                    raise RuntimeError("%s read %d bytes, expected %d" % (name, read, expected))
                times[name].append(seconds)
                print("round %d %-8s %.3f s" % (round_number + 1, name, seconds), flush=True)
    finally:
        server.stop()
    ratios = [b / t for b, t in zip(times["baseline"], times["tested"])]
    print("files %d x %d bytes, %.0f%% with an ACL entry, read as %s" %
          (args.files, args.size, 100 * args.acl_fraction, READER))
    print("median epoch: tested %.3f s, baseline %.3f s" %
          (statistics.median(times["tested"]), statistics.median(times["baseline"])))
    print("baseline/tested per round: %s; median %.2f" %
          (", ".join("%.2f" % r for r in ratios), statistics.median(ratios)))


if __name__ == "__main__":
    main()
