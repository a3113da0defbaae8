"""What counting each job's reads costs warm reads, and whether the wait
Granary counts for a job matches the time its readers spent in open and read.

One granaryd holds a dataset of small files whole (prewarmed); two granary-fuse
mounts of it run side by side, one counting jobs' reads (the default) and one
with --no-job-accounting. Each round reads every file through each mount in
turn (which goes first alternates), with 4 reader threads, after evicting the
files from the mounts' page caches (posix_fadvise DONTNEED), so every read
reaches granary-fuse. --mode plain mounts with --no-passthrough (every read is
a FUSE read, counted: the worst case); passthrough leaves the kernel to read
files held whole (only their opens are counted). The ratio is
time(counting) / time(not counting), per round and as the median.

The benchmark runs in a cgroup of its own named like a Slurm job's
(job_<pid>), so `granary jobs` lists its reads apart from any other reader's;
the wait granaryd lists for it is compared with the time the readers measured
inside their open and read calls on the counting mount.

Usage (root): /usr/bin/python3 bench/jobs/accounting_cost.py [--build build]
    [--files 2000] [--file-kib 110] [--rounds 8] [--mode plain|passthrough]
    [--workdir /var/tmp/granary-jobs-bench]
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import free_port, wait_for  # noqa: E402


def enter_own_cgroup():
    """Moves this process into a new cgroup v2 named job_<pid>; its job's
    name, the cgroup, and the cgroup to return to."""
    with open("/proc/self/cgroup") as f:
        was = [line.split(":", 2)[2].strip() for line in f if line.startswith("0::")][0]
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(root, "cgroup.controllers")):
            path = os.path.join(root, "granary-jobs-bench-%d" % os.getpid(), "job_%d" % os.getpid())
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            return "slurm:%d" % os.getpid(), path, root + was
    raise SystemExit("accounting_cost: no cgroup v2 hierarchy to run in")


def listed_job(cli, job):
    listed = json.loads(subprocess.run(cli + ["jobs", "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    mine = [entry for entry in listed["jobs"] if entry["job"] == job]
    return mine[0] if mine else None


def read_all(paths, threads):
    """Reads every file whole with `threads` readers; the wall time, and the
    time the readers spent inside open() and read() calls, summed."""
    def read_one(path):
        start = time.perf_counter()
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
        spent = time.perf_counter() - start
        os.close(fd)
        return spent
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        inside = sum(pool.map(read_one, paths))
    return time.perf_counter() - start, inside


def evict(paths):
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--workdir", default="/var/tmp/granary-jobs-bench")
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--file-kib", type=int, default=110)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--mode", choices=("plain", "passthrough"), default="plain")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("accounting_cost: run as root (mounts, cgroups)")
    build = os.path.abspath(args.build)
    work = args.workdir
    source = os.path.join(work, "source")
    os.makedirs(source, exist_ok=True)
    names = ["%05d.jpg" % i for i in range(args.files)]
    for name in names:
        path = os.path.join(source, name)
        if not os.path.exists(path) or os.path.getsize(path) != args.file_kib << 10:
            with open(path, "wb") as f:
                f.write(os.urandom(args.file_kib << 10))
    job, cgroup, home = enter_own_cgroup()

    subprocess.run(["rm", "-rf", os.path.join(work, "data")], check=True)
    sock = os.path.join(work, "granaryd.sock")
    log = open(os.path.join(work, "granaryd.log"), "w")
    server = subprocess.Popen(
        [os.path.join(build, "granaryd"), "--data-dir", os.path.join(work, "data"),
         "--socket", sock, "--metrics-listen", "127.0.0.1:%d" % free_port(),
         "--capacity", "4GiB", "--source-root", work],
        stdout=log, stderr=log)
    cli = [os.path.join(build, "granary"), "--server", "unix:" + sock]
    mounts = {}
    try:
        wait_for(lambda: subprocess.run(cli + ["status"], capture_output=True).returncode == 0,
                 30, "granaryd")
        subprocess.run(cli + ["dataset", "add", "images", source], check=True,
                       capture_output=True)
        subprocess.run(cli + ["prewarm", "images"], check=True, capture_output=True)
        for kind, extra in (("counting", []), ("not-counting", ["--no-job-accounting"])):
            mnt = os.path.join(work, "mnt-" + kind)
            os.makedirs(mnt, exist_ok=True)
            if args.mode == "plain":
                extra = extra + ["--no-passthrough"]
            subprocess.run([os.path.join(build, "granary-fuse"), mnt, "--server", "unix:" + sock,
                            "--dataset", "images", "--log-file",
                            os.path.join(work, "fuse-%s.log" % kind), *extra], check=True)
            mounts[kind] = [os.path.join(mnt, "images", name) for name in names]
            # Opened once: granaryd verifies each file before it hands it out whole.
            read_all(mounts[kind], args.threads)

        time.sleep(2.5)  # granary-fuse reports every second.
        before = listed_job(cli, job)
        times = {kind: [] for kind in mounts}
        inside_counted = 0.0
        ratios = []
        for round_index in range(args.rounds):
            order = list(mounts) if round_index % 2 == 0 else list(reversed(list(mounts)))
            round_times = {}
            for kind in order:
                evict(mounts[kind])
                wall, inside = read_all(mounts[kind], args.threads)
                round_times[kind] = wall
                times[kind].append(wall)
                if kind == "counting":
                    inside_counted += inside
            ratios.append(round_times["counting"] / round_times["not-counting"])
            print("round %d: counting %.3f s, not counting %.3f s, ratio %.3f" %
                  (round_index, round_times["counting"], round_times["not-counting"],
                   ratios[-1]))
        time.sleep(2.5)
        after = listed_job(cli, job)
        print("mode %s, %d files of %d KiB, %d readers, %d rounds" %
              (args.mode, args.files, args.file_kib, args.threads, args.rounds))
        print("median time counting / not counting: %.3f (per-round median %.3f)" %
              (statistics.median(times["counting"]) / statistics.median(times["not-counting"]),
               statistics.median(ratios)))
        if before and after:
            bytes_read = after["bytes_read"] - before["bytes_read"]
            opens = after["files_opened"] - before["files_opened"]
            wait = after["wait_seconds"] - before["wait_seconds"]
            by_origin = {origin: after["bytes"][origin] - before["bytes"][origin]
                         for origin in after["bytes"]}
            print("granary jobs, over the rounds: %s read %d bytes in %d opens; bytes by origin "
                  "%s; wait %.3f s" % (job, bytes_read, opens, json.dumps(by_origin), wait))
            print("readers' own time inside open and read on the counting mount: %.3f s; "
                  "Granary's wait / readers' time: %.3f" % (inside_counted, wait / inside_counted))
    finally:
        for kind in mounts:
            subprocess.run(["fusermount3", "-u", os.path.join(work, "mnt-" + kind)])
        server.terminate()
        server.wait()
        with open(os.path.join(home, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        os.rmdir(cgroup)
        os.rmdir(os.path.dirname(cgroup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
