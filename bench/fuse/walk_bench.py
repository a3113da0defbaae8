#!/usr/bin/env python3
"""Small files walked and read ImageFolder-style, page cache hot: the local
directory, Granary's mount, and libfuse 3.18.3's passthrough_hp over /dev/fuse
and over io_uring (issue 52).

With every byte in the page cache, what a file costs through a FUSE mount is
its requests (OPEN, an IOCTL from Python's isatty(), RELEASE; LOOKUPs and
attributes are cached), so this is the benchmark of the transport. The files
(--files, 20-28 KiB each, in 100 class directories; passthrough_hp holds
a descriptor per inode, so they must stay below RLIMIT_NOFILE) lie on the local disk;
they are the local copy, passthrough_hp's source (FUSE passthrough, entries
and attributes cached for a day: its defaults), and the source of a dataset
that one granaryd prewarms and granary-fuse mounts. Each round walks each
tree twice in an order that alternates from round to round, with one reader
(os.walk, then open() and read() of every file in name order), and times the
second walk; ratios are of the local directory's time within a round.

The kernel parameter /sys/module/fuse/parameters/enable_uring is set to Y
while passthrough_hp over io_uring mounts, and put back as it was.

Usage (root): /usr/bin/python3 bench/fuse/walk_bench.py [--build build]
    [--files 18000] [--rounds 3] [--workdir /var/tmp/granary-walk-bench]
    [--cache /var/tmp/granary-libfuse-3.18]
"""
import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from bench_util import fuse_server_pid, wait_for  # noqa: E402
from fuse_bench import Granaryd, unmount  # noqa: E402
from passthrough_hp import build as passthrough_hp_build  # noqa: E402

ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"
WALK = ("import os, sys, time\n"
        "start = time.perf_counter()\n"
        "files = size = 0\n"
        "for directory, subdirectories, names in os.walk(sys.argv[1]):\n"
        "    subdirectories.sort()\n"
        "    for name in sorted(names):\n"
        "        with open(os.path.join(directory, name), 'rb') as f:\n"
        "            size += len(f.read())\n"
        "        files += 1\n"
        "print(files, size, time.perf_counter() - start)\n")


def write_files(root, count):
    rng = random.Random(20261207)
    for i in range(count):
        directory = os.path.join(root, "class%03d" % (i % 100))
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "img%06d.jpg" % i), "wb") as f:
            f.write(os.urandom(rng.randint(20 << 10, 28 << 10)))


def walk(root):
    files, size, seconds = subprocess.run([sys.executable, "-c", WALK, root], check=True,
                                          capture_output=True, text=True).stdout.split()
    return int(files), int(size), float(seconds)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mount_passthrough_hp(binary, source, mountpoint, uring):
    os.makedirs(mountpoint, exist_ok=True)
    process = subprocess.Popen([binary, "--foreground", source, mountpoint],
                               env=dict(os.environ, FUSE_URING_ENABLE="1" if uring else "0"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: os.path.ismount(mountpoint), 30, "passthrough_hp on " + mountpoint)
    os.stat(mountpoint)  # INIT done, and with it the rings' registration.
    rings = sum(1 for fd in os.listdir("/proc/%d/fd" % process.pid)
                if os.readlink("/proc/%d/fd/%s" % (process.pid, fd)) == "anon_inode:[io_uring]")
    if uring != (rings > 0):
        raise SystemExit("walk_bench: passthrough_hp on %s has %d io_uring instances" %
                         (mountpoint, rings))
    return process


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--files", type=int, default=18000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workdir", default="/var/tmp/granary-walk-bench")
    p.add_argument("--cache", default="/var/tmp/granary-libfuse-3.18")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("walk_bench: run as root (mounts, the kernel parameter)")
    # passthrough_hp holds a descriptor for every inode the kernel knows.
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if args.files + 1000 > limit:
        raise SystemExit("walk_bench: passthrough_hp would need more than %d descriptors "
                         "(RLIMIT_NOFILE) for %d files" % (limit, args.files))
    build = os.path.abspath(args.build)
    passthrough_hp = passthrough_hp_build(args.cache, "3.18.3")
    shutil.rmtree(args.workdir, ignore_errors=True)
    local = os.path.join(args.workdir, "local")
    write_files(local, args.files)
    with open(ENABLE_URING) as f:
        enable_uring_before = f.read().strip()
    server = Granaryd(build, args.workdir)
    daemons = []
    mountpoints = []
    try:
        server.add("images", local, "4MiB")
        subprocess.run(server.cli + ["prewarm", "images", "--json"], check=True,
                       capture_output=True)
        granary_mnt = os.path.join(args.workdir, "mnt-granary")
        os.makedirs(granary_mnt)
        subprocess.run([os.path.join(build, "granary-fuse"), granary_mnt, "--server",
                        server.address, "--dataset", "images"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        mountpoints.append(granary_mnt)
        hp_dev_mnt = os.path.join(args.workdir, "mnt-hp-dev")
        daemons.append(mount_passthrough_hp(passthrough_hp, local, hp_dev_mnt, uring=False))
        mountpoints.append(hp_dev_mnt)
        with open(ENABLE_URING, "w") as f:
            f.write("Y")
        hp_uring_mnt = os.path.join(args.workdir, "mnt-hp-uring")
        daemons.append(mount_passthrough_hp(passthrough_hp, local, hp_uring_mnt, uring=True))
        mountpoints.append(hp_uring_mnt)
        systems = {
            "local": (local, None),
            "granary": (os.path.join(granary_mnt, "images"), fuse_server_pid(granary_mnt)),
            "hp-dev": (hp_dev_mnt, daemons[0].pid),
            "hp-uring": (hp_uring_mnt, daemons[1].pid),
        }
        seconds = {name: [] for name in systems}
        cpu_us = {name: [] for name in systems}
        expected = None
        for round_number in range(args.rounds):
            order = list(systems) if round_number % 2 == 0 else list(reversed(systems))
            for name in order:
                root, pid = systems[name]
                walk(root)  # Every cache warm: pages, dentries, inodes, the daemon's own.
                cpu_before = cpu_seconds(pid) if pid else 0.0
                files, size, taken = walk(root)
                cpu = cpu_seconds(pid) - cpu_before if pid else 0.0
                if expected is None:
                    expected = (files, size)
                if (files, size) != expected:
                    raise SystemExit("walk_bench: %s read %d files of %d bytes, not %d of %d" %
                                     (name, files, size, *expected))
                seconds[name].append(taken)
                cpu_us[name].append(cpu * 1e6 / files)
                print("round %d %-8s %.3f s, %.1f us/file, daemon CPU %.1f us/file" %
                      (round_number + 1, name, taken, taken * 1e6 / files, cpu_us[name][-1]),
                      flush=True)
    finally:
        for mountpoint in mountpoints:
            unmount(mountpoint)
        for daemon in daemons:
            daemon.wait()
        with open(ENABLE_URING, "w") as f:
            f.write(enable_uring_before)
        server.stop()
    print("%d files of 20-28 KiB in 100 directories, page cache hot, one reader" % args.files)
    for name in systems:
        if name == "local":
            continue
        ratios = [l / s for l, s in zip(seconds["local"], seconds[name])]
        print("%-8s / local: %s; median %.2f; daemon CPU median %.1f us/file" %
              (name, ", ".join("%.2f" % r for r in ratios), statistics.median(ratios),
               statistics.median(cpu_us[name])))
    ratios = [u / g for u, g in zip(seconds["hp-uring"], seconds["granary"])]
    print("granary / hp-uring: %s; median %.2f" %
          (", ".join("%.2f" % r for r in ratios), statistics.median(ratios)))


if __name__ == "__main__":
    main()
