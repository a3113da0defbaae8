#!/usr/bin/python3
"""Granary at cluster size, on one machine (issue 23).

members: granaryd n0 with a members file of --members members (racks of
  --rack, each rack its own cache group, weights 1-1000 drawn with seed 7),
  n0 real and every other member an address nobody listens on (127.0.0.2,
  closed ports), as a node sees a cluster whose other members it cannot yet
  reach. Measured: seconds from exec to the "serving" log line, peak RSS
  (VmHWM) then and --settle seconds later (the catalog keeps retrying the
  unreachable members behind), and seconds from SIGTERM to exit. Baseline in
  the same repetition: the same granaryd with a members file of itself alone.

stopped-peer: three granaryd in one cache group (members file). Per
  repetition: `granary dataset add` of a fresh dataset with every peer
  running (the baseline), then n2 is SIGSTOPped, another dataset is added
  through n0 (timed), n2 is SIGCONTed, and the seconds until n2 lists that
  dataset are measured.

dead-peer: three granaryd in one cache group with a dataset; `granary locate`
  (read from what the nodes published), `granary locate --fresh` (every node
  asked) and `granary status` through n0, each timed --repetitions times with
  every peer running (the baseline), with n1 SIGSTOPped (its connections open,
  nothing answers), and after n2 is SIGKILLed (still listed in the members
  file, its port closed).

Usage (root): /usr/bin/python3 bench/cluster/scale_bench.py [--build build-bench]
    [--members 10000] [--rack 40] [--settle 30] [--repetitions 3]
    [--parts members,stopped-peer,dead-peer]
Prints a JSON document of every repetition and the medians.
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE)))
from bench_util import free_port, wait_for  # noqa: E402
from prewarm_bench import Group  # noqa: E402


def write_members(path, count, rack, port):
    rnd = random.Random(7)
    with open(path, "w") as f:
        f.write("members:\n")
        for i in range(count):
            address = ("127.0.0.1:%d" % port if i == 0
                       else "127.0.0.2:%d" % (20000 + i % 30000))
            f.write("  - id: n%d\n    address: %s\n    group: rack-%d\n    weight: %d\n"
                    % (i, address, i // rack, rnd.randint(1, 1000)))


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return 0.0


def start_with_members(build, work, count, rack, settle):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    port = free_port()
    members = os.path.join(work, "members.yaml")
    write_members(members, count, rack, port)
    log_path = os.path.join(work, "log")
    started = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [os.path.join(build, "granaryd"), "--data-dir", os.path.join(work, "data"),
             "--socket", os.path.join(work, "s.sock"), "--listen", "127.0.0.1:%d" % port,
             "--metrics-listen", "127.0.0.1:0", "--capacity", str(1 << 30),
             "--node-id", "n0", "--group", "rack-0", "--members", members, "--insecure-tcp"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: proc.poll() is not None or "serving unix" in open(log_path).read(),
                 240, "granaryd to serve")
        if proc.poll() is not None:
            raise RuntimeError("granaryd exited: " + open(log_path).read()[-2000:])
        ready = time.time() - started
        rss_ready = peak_rss_mib(proc.pid)
        time.sleep(settle)
        rss_settled = peak_rss_mib(proc.pid)
        stopping = time.time()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        return {"members": count, "ready_s": ready, "peak_rss_ready_mib": rss_ready,
                "peak_rss_settled_mib": rss_settled, "stop_s": time.time() - stopping}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def timed(command):
    started = time.time()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.time() - started


def add_dataset(group, name, source):
    return timed(group.cli(0) + ["dataset", "add", name, source])


def make_source(work):
    source = os.path.join(work, "source")
    os.makedirs(source, exist_ok=True)
    for i in range(100):
        with open(os.path.join(source, "f%d" % i), "wb") as f:
            f.write(os.urandom(4096))
    return source


def lists(group, i, name):
    out = subprocess.run(group.cli(i) + ["dataset", "ls", "--json"], capture_output=True,
                         text=True)
    return out.returncode == 0 and ('"%s"' % name) in out.stdout


def stopped_peer(build, work, repetitions):
    source = make_source(work)
    group = Group(build, work, 3, [None] * 3, 1 << 30)
    rows = []
    try:
        for r in range(repetitions):
            running = add_dataset(group, "running-%d" % r, source)
            stopped_pid = group.procs[2].pid
            os.kill(stopped_pid, signal.SIGSTOP)
            try:
                stopped = add_dataset(group, "stopped-%d" % r, source)
            finally:
                os.kill(stopped_pid, signal.SIGCONT)
            woke = time.time()
            wait_for(lambda: lists(group, 2, "stopped-%d" % r), 120, "n2 to get the dataset")
            rows.append({"add_all_running_s": running, "add_peer_stopped_s": stopped,
                         "ratio": stopped / running, "on_waking_peer_after_s": time.time() - woke})
    finally:
        group.stop()
    return rows


def dead_peer(build, work, repetitions):
    source = make_source(work)
    group = Group(build, work, 3, [None] * 3, 1 << 30)
    ask = {"locate": group.cli(0) + ["locate", "located", "--json"],
           "locate_fresh": group.cli(0) + ["locate", "located", "--fresh", "--json"],
           "status": group.cli(0) + ["status", "--json"]}

    def time_each():
        return [{what: timed(command) for what, command in ask.items()}
                for _ in range(repetitions)]

    try:
        add_dataset(group, "located", source)
        running = time_each()
        stopped_pid = group.procs[1].pid
        os.kill(stopped_pid, signal.SIGSTOP)
        try:
            stopped = time_each()
        finally:
            os.kill(stopped_pid, signal.SIGCONT)
        group.procs[2].kill()
        group.procs[2].wait()
        dead = time_each()
    finally:
        group.stop()
    median = lambda rows, key: statistics.median(row[key] for row in rows)  # noqa: E731
    conditions = (("all_running", running), ("peer_stopped", stopped), ("peer_dead", dead))
    return {"runs_s": {when: rows for when, rows in conditions},
            "median_s": {"%s_%s" % (what, when): median(rows, what)
                         for what in ask for when, rows in conditions},
            "over_all_running": {"%s_%s" % (what, when): median(rows, what) /
                                 median(running, what)
                                 for what in ask for when, rows in conditions[1:]}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-bench")
    parser.add_argument("--members", type=int, default=10000)
    parser.add_argument("--rack", type=int, default=40)
    parser.add_argument("--settle", type=float, default=30)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--parts", default="members,stopped-peer,dead-peer")
    args = parser.parse_args()
    parts = args.parts.split(",")
    median = lambda rows, key: statistics.median(row[key] for row in rows)  # noqa: E731
    work = tempfile.mkdtemp(prefix="granary-scale-")
    result = {"median": {}}
    try:
        if "members" in parts:
            members = []
            for _ in range(args.repetitions):
                alone = start_with_members(args.build, os.path.join(work, "alone"), 1, args.rack, 0)
                large = start_with_members(args.build, os.path.join(work, "large"), args.members,
                                           args.rack, args.settle)
                large["ready_over_alone"] = large["ready_s"] / alone["ready_s"]
                members.append({"alone": alone, "large": large})
            large_rows = [m["large"] for m in members]
            result["members"] = members
            for key in ("ready_s", "ready_over_alone", "peak_rss_ready_mib",
                        "peak_rss_settled_mib", "stop_s"):
                result["median"][key] = median(large_rows, key)
        if "stopped-peer" in parts:
            peer = stopped_peer(args.build, os.path.join(work, "peer"), args.repetitions)
            result["stopped_peer"] = peer
            result["median"].update({
                "add_peer_stopped_s": median(peer, "add_peer_stopped_s"),
                "add_over_all_running": median(peer, "ratio"),
                "on_waking_peer_after_s": median(peer, "on_waking_peer_after_s")})
        if "dead-peer" in parts:
            result["dead_peer"] = dead_peer(args.build, os.path.join(work, "dead"),
                                            args.repetitions)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
