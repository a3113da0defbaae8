#!/usr/bin/python3
"""Aggregate prewarm throughput of a Granary cache group of 1, 2 and 4 servers
against a source with a bandwidth limit.

The source is the throttled loop-device filesystem of bench/e2e (imported from
e2e_bench.py, not copied): ext4 on a loop device with direct I/O, reads limited
by the block I/O controller (cgroup v1 blkio.throttle.read_bps_device, or v2
io.max rbps). Two limits, chosen with --limits:

  shared:   one cgroup limited to --shared-mib MiB/s holds every granaryd: the
            shared storage's own limit. Aggregate prewarm should approach it
            with any N (target: >= 0.9 x the source's measured bandwidth).
  per-node: one cgroup per granaryd, each limited to --per-node-mib MiB/s: a
            per-node link limit. Aggregate should grow with N.

Per N and repetition: a fresh group of N granaryd on loopback (--members file,
one group, own data directories), `granary dataset add` on node 0, a wait
until every node has the catalog, the page cache dropped, then `granary
prewarm NAME --json` on node 0 (it fans out to the group), timed. After it: the
sum over nodes of granary_source_reads_total must equal the dataset's chunk
count (each chunk read from the source exactly once across the group), and
the bytes the cgroups read from the loop device are reported.

The reference in the same repetition: fio reading 4 source files in parallel
(1 MiB sequential reads, 128 MiB of each, page cache dropped) from inside one
throttled cgroup, i.e. what the source gives through one limit. Ratios:
shared: prewarm / fio; per-node: prewarm / (N x fio).

--second-group adds, per repetition, two groups of 2 servers behind the shared
limit: group "a" is prewarmed (from the source), then group "b" (which copies
from "a" while that is faster than the source, cache_server/read_path/fetch_speeds.h),
each timed; reported are both rates, their ratio, and how group "b" filled
its chunks: source reads and peer copies.

Usage (root):
  /usr/bin/python3 bench/cluster/prewarm_bench.py [--build build-bench]
      [--dataset-gib 2] [--servers 1,2,4] [--limits shared,per-node]
      [--shared-mib 200] [--per-node-mib 100] [--repetitions 3] [--second-group]
Writes results.json, results.md and prewarm_scaling.png to --out-dir.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "e2e"))
from e2e_bench import (LoopSource, Throttle, drop_caches, free_port, log, run,  # noqa: E402
                       stop_process, wait_for)

MIB = 1 << 20
GIB = 1 << 30
DATASET = "prewarm"
FILE_MIB = 256


def generate(source, total_bytes):
    """total_bytes of pseudo-random files of FILE_MIB MiB under source/data."""
    import numpy as np
    os.makedirs(os.path.join(source, "data"), exist_ok=True)
    for i in range(total_bytes // (FILE_MIB * MIB)):
        path = os.path.join(source, "data", "part_%03d.bin" % i)
        gen = np.random.Generator(np.random.SFC64([7, i]))
        with open(path, "wb") as f:
            for _ in range(FILE_MIB // 16):
                f.write(gen.bit_generator.random_raw(16 * MIB // 8).tobytes())
    os.sync()


def enter_cgroup(path):
    """A preexec_fn moving the child into cgroup `path`; None: stay put."""
    if path is None:
        return None

    def enter():
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()) + "\n")
    return enter


def source_rate(files, cgroup):
    """Bytes/s the source gives through one limit: fio, one sequential 1 MiB
    reader per file (the first 128 MiB of each), from inside `cgroup`, page
    cache dropped. Parallel readers, as a prewarm reads; one reader alone is
    latency-bound here and does not reach the limit."""
    drop_caches()
    cmd = ["fio", "--output-format=json", "--group_reporting", "--ioengine=psync",
           "--rw=read", "--bs=1M", "--size=128m", "--invalidate=1"]
    for i, path in enumerate(files):
        cmd += ["--name=r%d" % i, "--filename=" + path]
    out = run(cmd, capture_output=True, text=True, preexec_fn=enter_cgroup(cgroup))
    return float(json.loads(out.stdout)["jobs"][0]["read"]["bw_bytes"])


def metric(port, name):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


class Group:
    """N granaryd on loopback, each in the cgroup given, in cache group "g" or
    in the groups given (one name per node)."""

    def __init__(self, build, work, n, cgroups, capacity_bytes, groups=None):
        self.build = build
        self.dir = os.path.join(work, "cluster-%d" % n)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.nodes = []
        for i, group in enumerate(groups or ["g"] * n):
            self.nodes.append({"id": "n%d" % i, "tcp": free_port(), "metrics": free_port(),
                               "group": group, "data": os.path.join(self.dir, "n%d" % i),
                               "sock": os.path.join(self.dir, "n%d.sock" % i)})
        members = os.path.join(self.dir, "members.yaml")
        with open(members, "w") as f:
            f.write("members:\n")
            for node in self.nodes:
                f.write("  - id: %s\n    address: 127.0.0.1:%d\n    group: %s\n    weight: 1\n"
                        % (node["id"], node["tcp"], node["group"]))
        self.procs = []
        for node, cgroup in zip(self.nodes, cgroups):
            os.makedirs(node["data"])
            logf = open(os.path.join(self.dir, node["id"] + ".log"), "w")
            self.procs.append(subprocess.Popen(
                [os.path.join(build, "granaryd"), "--data-dir", node["data"],
                 "--socket", node["sock"], "--listen", "127.0.0.1:%d" % node["tcp"],
                 "--metrics-listen", "127.0.0.1:%d" % node["metrics"],
                 "--capacity", str(capacity_bytes), "--node-id", node["id"],
                 "--group", node["group"],
                 # Benchmarks register sources from wherever they made them.
                 "--source-root", "/",
                 "--members", members, "--insecure-tcp"],
                stdout=logf, stderr=subprocess.STDOUT, preexec_fn=enter_cgroup(cgroup)))
        for i in range(n):
            wait_for(lambda i=i: self.procs[i].poll() is not None or self.members_up(i) == n,
                     60, "node %d to see %d members" % (i, n))
            if self.procs[i].poll() is not None:
                raise RuntimeError("granaryd n%d exited; see %s" % (i, self.dir))

    def cli(self, i):
        return [os.path.join(self.build, "granary"), "--server", "unix:" + self.nodes[i]["sock"]]

    def members_up(self, i):
        out = run(self.cli(i) + ["status", "--json"], check=False, capture_output=True,
                  text=True)
        if out.returncode != 0:
            return -1
        doc = json.loads(out.stdout)
        members = doc.get("members") or doc.get("nodes") or []
        return sum(1 for m in members if m.get("state", "up") == "up")

    def has_dataset(self, i):
        out = run(self.cli(i) + ["dataset", "ls", "--json"], check=False, capture_output=True,
                  text=True)
        return out.returncode == 0 and ('"%s"' % DATASET) in out.stdout

    def sum_metric(self, name, group=None):
        return sum(metric(node["metrics"], name) for node in self.nodes
                   if group is None or node["group"] == group)

    def stop(self):
        for proc in self.procs:
            stop_process(proc)
        shutil.rmtree(self.dir, ignore_errors=True)


def one_run(args, build, work, source, n, limit, throttles, chunks, dataset_bytes):
    cgroups = [throttles[0].path] * n if limit == "shared" else \
        [throttles[i].path for i in range(n)]
    before = [t.bytes_read() for t in throttles]
    group = Group(build, work, n, cgroups, 2 * dataset_bytes + GIB)
    try:
        run(group.cli(0) + ["dataset", "add", DATASET, source, "--chunk-size", "4MiB"],
            capture_output=True)
        for i in range(n):
            wait_for(lambda i=i: group.has_dataset(i), 60, "the catalog on node %d" % i)
        drop_caches()
        start = time.perf_counter()
        out = run(group.cli(0) + ["prewarm", DATASET, "--json"], capture_output=True, text=True)
        wall = time.perf_counter() - start
        report = json.loads(out.stdout)
        source_reads = group.sum_metric("granary_source_reads_total")
        source_bytes = group.sum_metric("granary_bytes_from_source_total")
        peer_copies = group.sum_metric("granary_peer_copies_total")
        per_node_reads = [metric(node["metrics"], "granary_source_reads_total")
                          for node in group.nodes]
    finally:
        group.stop()
    device_bytes = sum(t.bytes_read() - b for t, b in zip(throttles, before))
    return {"servers": n, "limit": limit, "wall": wall, "bytes": report.get("bytes_done"),
            "rate": dataset_bytes / wall, "reported_rate": report.get("bytes_per_second"),
            "nodes_reported": report.get("nodes"), "source_reads": source_reads,
            "per_node_source_reads": per_node_reads, "chunks": chunks,
            "source_bytes": source_bytes, "peer_copies": peer_copies,
            "device_bytes": device_bytes, "exactly_once": int(source_reads) == chunks}


def second_group_run(build, work, source, throttle, chunks, dataset_bytes):
    """Groups "a" and "b" of 2 servers each behind one shared limit: "a" warms
    from the source, then "b" from "a" or the source, whichever is faster."""
    group = Group(build, work, 4, [throttle.path] * 4, 2 * dataset_bytes + GIB,
                  groups=["a", "a", "b", "b"])
    try:
        run(group.cli(0) + ["dataset", "add", DATASET, source, "--chunk-size", "4MiB"],
            capture_output=True)
        for i in range(4):
            wait_for(lambda i=i: group.has_dataset(i), 60, "the catalog on node %d" % i)
        walls = {}
        for name in ("a", "b"):
            drop_caches()
            start = time.perf_counter()
            run(group.cli(0) + ["prewarm", DATASET, "--group", name, "--json"],
                capture_output=True, text=True)
            walls[name] = time.perf_counter() - start
        return {"rate_a": dataset_bytes / walls["a"], "rate_b": dataset_bytes / walls["b"],
                "source_reads_a": group.sum_metric("granary_source_reads_total", "a"),
                "source_reads_b": group.sum_metric("granary_source_reads_total", "b"),
                "peer_copies_b": group.sum_metric("granary_peer_copies_total", "b"),
                "chunks": chunks}
    finally:
        group.stop()


def report_second_group(args, runs):
    lines = ["| run | group a (from the source) MiB/s | group b (from a or the source) MiB/s | "
             "b / a | source reads a / b | peer copies b / chunks |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        lines.append("| %d | %.1f | %.1f | %.2f | %d / %d | %d / %d |" % (
            i, r["rate_a"] / MIB, r["rate_b"] / MIB, r["rate_b"] / r["rate_a"],
            r["source_reads_a"], r["source_reads_b"], r["peer_copies_b"], r["chunks"]))
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(args.out_dir, "second_group.md"), "w") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(REPO, "build-bench"))
    p.add_argument("--dataset-gib", type=float, default=2)
    p.add_argument("--servers", default="1,2,4")
    p.add_argument("--limits", default="shared,per-node")
    p.add_argument("--shared-mib", type=int, default=200)
    p.add_argument("--per-node-mib", type=int, default=100)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--workdir", default="/var/tmp/granary-cluster-bench")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--data-root", default="",
                   help="where the nodes' data directories go (default: --workdir); e.g. "
                        "/dev/shm to take the cache's writes off the source's disk")
    p.add_argument("--second-group", action="store_true",
                   help="also time a second group warming from the first (shared limit)")
    p.add_argument("--generate-only", action="store_true",
                   help="generate the source (kept in --workdir for later runs) and stop")
    args = p.parse_args()
    build = os.path.abspath(args.build)
    servers = [int(s) for s in args.servers.split(",")]
    limits = [limit for limit in args.limits.split(",") if limit]
    os.makedirs(args.workdir, exist_ok=True)
    os.makedirs(args.out_dir, exist_ok=True)

    files = int(args.dataset_gib * GIB) // (FILE_MIB * MIB)
    dataset_bytes = files * FILE_MIB * MIB
    chunks = dataset_bytes // (4 * MIB)
    source = os.path.join(args.workdir, "source")
    image = os.path.join(args.workdir, "source.img")
    stamp = os.path.join(args.workdir, "generated-%d" % files)
    fresh = not os.path.exists(stamp)
    if os.path.ismount(source):
        run(["umount", source], check=False)
    loop = LoopSource(image, source, dataset_bytes + dataset_bytes // 8 + 512 * MIB, fresh)
    throttles, node_throttles = [], []
    try:
        if fresh:
            log("generating %d files of %d MiB" % (files, FILE_MIB))
            generate(source, dataset_bytes)
            open(stamp, "w").close()
        if args.generate_only:
            return
        ref_files = [os.path.join(source, "data", "part_%03d.bin" % i)
                     for i in range(min(4, files))]
        if "shared" in limits or args.second_group:
            throttles.append(Throttle("granary-cluster-shared", loop.device,
                                      args.shared_mib * MIB))
        if "per-node" in limits:
            node_throttles = [Throttle("granary-cluster-node%d" % i, loop.device,
                                       args.per_node_mib * MIB) for i in range(max(servers))]
        log("source %s on %s (%s), %s; dataset %d chunks, %.2f GiB" %
            (source, loop.loop, loop.device, throttles[0].kind if throttles else
             node_throttles[0].kind, chunks, dataset_bytes / GIB))
        results, second_group = [], []
        for rep in range(1, args.repetitions + 1):
            if args.second_group:
                r = second_group_run(build, args.data_root or args.workdir, source,
                                     throttles[0], chunks, dataset_bytes)
                log("rep %d second group: a %.1f MiB/s from the source, b %.1f MiB/s, "
                    "b source reads %d, b peer copies %d" %
                    (rep, r["rate_a"] / MIB, r["rate_b"] / MIB, r["source_reads_b"],
                     r["peer_copies_b"]))
                second_group.append(r)
            for limit in limits:
                ts = throttles if limit == "shared" else node_throttles
                ref = source_rate(ref_files, ts[0].path)
                log("rep %d %s: fio through one limit %.1f MiB/s" % (rep, limit, ref / MIB))
                for n in servers:
                    r = one_run(args, build, args.data_root or args.workdir, source, n, limit,
                                ts, chunks, dataset_bytes)
                    r.update(rep=rep, source_rate=ref,
                             ratio=r["rate"] / (ref if limit == "shared" else n * ref))
                    log("rep %d %s N=%d: %.1f s, %.1f MiB/s, ratio %.3f, source reads %d/%d, "
                        "device %.0f MiB, peer copies %d" %
                        (rep, limit, n, r["wall"], r["rate"] / MIB, r["ratio"],
                         r["source_reads"], chunks, r["device_bytes"] / MIB, r["peer_copies"]))
                    results.append(r)
                    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
                        json.dump({"args": vars(args), "results": results}, f, indent=1)
        if second_group:
            report_second_group(args, second_group)
        if limits:
            report(args, results, servers, limits, dataset_bytes, chunks)
    finally:
        for t in throttles + node_throttles:
            t.remove()
        loop.close()


def report(args, results, servers, limits, dataset_bytes, chunks):
    lines = ["| limit | N | prewarm MiB/s (median) | fio through one limit MiB/s | ratio "
             "(median) | source reads / chunks | runs |", "|---|---|---|---|---|---|---|"]
    medians = {}
    for limit in limits:
        for n in servers:
            rs = [r for r in results if r["limit"] == limit and r["servers"] == n]
            rate = statistics.median(r["rate"] for r in rs)
            ratio = statistics.median(r["ratio"] for r in rs)
            medians[(limit, n)] = rate
            reads = sorted({int(r["source_reads"]) for r in rs})
            lines.append("| %s | %d | %.1f | %.1f | %.3f | %s / %d | %d |" % (
                limit, n, rate / MIB, statistics.median(r["source_rate"] for r in rs) / MIB, ratio,
                ",".join(map(str, reads)), chunks, len(rs)))
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(text)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for limit in limits:
        ax.plot(servers, [medians[(limit, n)] / MIB for n in servers], marker="o",
                label="%s limit (%d MiB/s%s)" % (
                    limit, args.shared_mib if limit == "shared" else args.per_node_mib,
                    "" if limit == "shared" else " per node"))
    if "shared" in limits:
        ax.axhline(args.shared_mib, color="gray", linestyle=":", label="shared limit")
    if "per-node" in limits:
        ax.plot(servers, [n * args.per_node_mib for n in servers], color="gray",
                linestyle="--", label="N x per-node limit")
    ax.set_xlabel("granaryd servers in the group (N)")
    ax.set_ylabel("aggregate prewarm MiB/s (median)")
    ax.set_xticks(servers)
    ax.set_title("Granary prewarm of %.1f GiB vs servers" % (dataset_bytes / GIB))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out_dir, "prewarm_scaling.png"), dpi=100)


if __name__ == "__main__":
    main()
