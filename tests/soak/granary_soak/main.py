"""One soak run: sets the cluster and its datasets up, runs the workload and
the nemesis for the run's length, checks that the cluster converges after
the last fault, stops everything, judges the history and writes the report.
Exit status 0 when the verdict is what the run expects (clean; or, with
--stale-fault, not clean and naming the stale read).
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

from . import (checker, cluster as cluster_mod, datasets, history as history_mod, jobs, report, s3,
               source_reads)
from .nemesis import Nemesis, plan as plan_faults
from .network import BRIDGE_ADDRESS, Network

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MIB = 1 << 20
TAIL_SECONDS = 20  # Workload after the last fault (and the convergence check).


class Context:
    """What jobs and faults share."""

    def __init__(self, root, world, cluster, history):
        self.root, self.world, self.cluster, self.history = root, world, cluster, history
        self.stop = threading.Event()

    def ready_dataset(self):
        return sorted(self.world.datasets)[0]

    def admin(self, args, rng):
        """`granary ARGS` on a node picked by `rng`, or on the next one while
        they fail (a node may be down), as an administrator would; the node.
        A call cut off by its node's death may have taken effect: a dataset
        added or removed then is found so by the next node, which is the
        call done (by the node that died)."""
        errors = []
        cut_off = None
        done_already = {"add": "already exists", "rm": "does not exist"}.get(args[1] if len(args) > 1 else "")
        for node in rng.sample(self.cluster.nodes, len(self.cluster.nodes)):
            done, _ = self.cluster.cli(node, args, timeout=120)
            if done.returncode == 0:
                return node
            error = done.stderr.decode(errors="replace").strip()
            if cut_off and done_already and done_already in error:
                return cut_off
            if "unavailable" in error and cut_off is None:
                cut_off = node
            errors.append(f"{node.id}: {error}")
        raise RuntimeError(f"granary {' '.join(args)} failed on every node: {'; '.join(errors)}")

    def add_dataset(self, name, rng):
        dataset = self.world.datasets[name]
        return self.admin(["dataset", "add", name, *self.world.source(name), "--chunk-size",
                           str(dataset.chunk_size)], rng)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=4.0, help="length of the whole run")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default=None, help="where the history and report go")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--stale-fault", action="store_true",
                        help="have a node serve a stale version on purpose; the run must be "
                             "judged not clean")
    parser.add_argument("--judge", metavar="OUT",
                        help="judge the history of the run in OUT again and rewrite its report "
                             "(run nothing)")
    return parser.parse_args(argv)


def wait_for_members(ctx, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(members_up(ctx, node) == {n.id for n in ctx.cluster.nodes}
               for node in ctx.cluster.nodes):
            return
        time.sleep(0.5)
    raise TimeoutError("the four nodes did not see each other within 60 s")


def members_up(ctx, node):
    done, _ = ctx.cluster.cli(node, ["status", "--json"], timeout=30)
    if done.returncode != 0:
        return set()
    return {n["node_id"] for n in json.loads(done.stdout)["nodes"] if n["state"] == "up"}


def catalog(ctx, node):
    done, _ = ctx.cluster.cli(node, ["dataset", "ls", "--json"], timeout=30)
    if done.returncode != 0:
        return None
    return {d["name"]: d["version"] for d in json.loads(done.stdout)["datasets"]}


def check_convergence(ctx):
    """Records how long after the last fault every node agreed on members and catalog."""
    started = time.monotonic()
    expected_members = {n.id for n in ctx.cluster.nodes}
    why = "not checked"
    while time.monotonic() - started < checker.CONVERGE_BOUND:
        views = [(members_up(ctx, node), catalog(ctx, node)) for node in ctx.cluster.nodes]
        catalogs = [c for _, c in views]
        if any(m != expected_members for m, _ in views):
            why = "members seen up: " + "; ".join(
                f"{node.id}: {sorted(m)}" for node, (m, _) in zip(ctx.cluster.nodes, views))
        elif any(c is None or c != catalogs[0] for c in catalogs) or \
                set(catalogs[0]) != set(ctx.world.datasets):
            why = "catalogs differ: " + "; ".join(
                f"{node.id}: {c}" for node, c in zip(ctx.cluster.nodes, catalogs))
        else:
            ctx.history.record("converged", seconds=round(time.monotonic() - started, 2))
            return
        time.sleep(1)
    ctx.history.record("not_converged", why=why)


def final_scrape(ctx):
    probe = jobs.Probe("final", ctx, 0, (0, 0))
    for node in ctx.cluster.nodes:
        probe.scrape(node)


def run(args):
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    out = args.out or f"/tmp/granary-soak-{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    os.makedirs(out, exist_ok=True)
    root = os.path.join(out, "run")
    # A run replayed into the same directory starts afresh: the checker
    # reads the nodes' journals there, which granaryd appends to.
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    wall_start = time.monotonic()
    commit = git_commit()  # What runs: the tree may change while a long run goes on.
    command = f"bash tests/soak/run.sh --minutes {args.minutes:g} --seed {seed}" + (
        " --stale-fault" if args.stale_fault else "")
    print(f"soak: seed {seed}, output in {out}", flush=True)
    binaries = cluster_mod.Binaries(args.build)
    cache_bytes = len(cluster_mod.GROUPS) * 64 * MIB
    network = Network(len(cluster_mod.GROUPS))
    store, cluster = None, None
    try:
        store = s3.ObjectStore(binaries.object_store, root, BRIDGE_ADDRESS)
        world = datasets.World(os.path.join(root, "sources"), datasets.plan(seed, 3 * cache_bytes),
                               store)
        world.write_all()
        cluster = cluster_mod.Cluster(root, network, binaries, world.root, store)
        cluster.start()
        history = history_mod.History(os.path.join(out, "history.jsonl"))
        ctx = Context(root, world, cluster, history)
        wait_for_members(ctx)
        rng = random.Random(seed)
        for name in sorted(world.datasets):
            ctx.add_dataset(name, rng)
        for mount in cluster.mounts:
            mount.start(ctx.ready_dataset())
        setup_seconds = time.monotonic() - wall_start
        history.start = time.monotonic()
        history.record("clock", unix=time.time())  # How journals' times map to the run's.
        history.record("datasets", s3=world.s3_names(), s3_endpoint=store.endpoint)
        workload_seconds = max(60.0, args.minutes * 60 - setup_seconds - 30)
        fault_seconds = workload_seconds - TAIL_SECONDS - 40
        if args.stale_fault:
            # Before the jobs fill the caches with data in use, which no new
            # chunk displaces (eviction_policy.h): the file must be stored.
            schedule = [(0.5, "node", "refresh", "images0", 0), (1.0, "node", "serve_stale", 0, 0)]
            Nemesis(ctx, schedule, seed).run()
        else:
            schedule = plan_faults(seed, fault_seconds, len(cluster.nodes), len(cluster.mounts),
                                   sorted(world.datasets), world.s3_names())
        workers = [jobs.RandomReader(f"random-{i}", ctx, seed + i, (0.02, 0.2)) for i in range(2)]
        workers += [jobs.LoaderJob("loader-0", ctx, seed + 10, (0.5, 2)),
                    jobs.CatJob("cat-0", ctx, seed + 11, (0.5, 2)),
                    jobs.PrewarmJob("prewarm-0", ctx, seed + 12, (4, 10)),
                    jobs.Probe("probe-0", ctx, seed + 13, (1.5, 2.5)),
                    jobs.Sampler("sampler-0", ctx, seed + 14, (2, 2))]
        for worker in workers:
            worker.start()
        threading.Thread(target=jobs.watch_for_hangs, args=(ctx, workers), daemon=True).start()
        if not args.stale_fault:
            Nemesis(ctx, schedule, seed).run()
        check_convergence(ctx)
        while history.now() < workload_seconds:
            time.sleep(0.5)
        ctx.stop.set()
        for worker in workers:
            worker.join(timeout=jobs.HANG_SECONDS)
        jobs.check_hangs(ctx, workers)
        final_scrape(ctx)
        history.record("object_store", **store.close())
        history.close()
    finally:
        if cluster is not None:
            cluster.close()
        if store is not None:
            store.close()
        network.close()
        remove_bulk(root)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump({"seed": seed, "command": command, "commit": commit,
                   "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(
                       time.time() - (time.monotonic() - wall_start))),
                   "wall_seconds": time.monotonic() - wall_start, "setup_seconds": setup_seconds,
                   "dataset_count": len(world.datasets), "dataset_bytes": world.total_bytes(),
                   "cache_bytes": cache_bytes, "stale_fault": args.stale_fault}, f, indent=1)
    return judge(out)


def judge(out):
    """Judges the history under `out` and writes its report; the exit status."""
    records = history_mod.load(os.path.join(out, "history.jsonl"))
    with open(os.path.join(out, "run.json")) as f:
        run_info = json.load(f)
    groups = {f"n{i + 1}": group for i, group in enumerate(cluster_mod.GROUPS)}
    journals = source_reads.load(os.path.join(out, "run"), groups)
    verdict = checker.judge(records, journals, groups)
    with open(os.path.join(out, "verdict.json"), "w") as f:
        json.dump(verdict, f, indent=1)
    report.write(out, records, verdict, run_info)
    print(f"soak: {'CLEAN' if verdict['clean'] else 'NOT CLEAN'}; "
          f"{len(verdict['violations'])} violations; report {out}/report.md; "
          f"wall {run_info['wall_seconds']:.0f} s", flush=True)
    for violation in verdict["violations"][:20]:
        print(f"  {violation}", flush=True)
    if run_info["stale_fault"]:
        return 0 if stale_read_named(records, verdict) else 1
    return 0 if verdict["clean"] else 1


def stale_read_named(records, verdict):
    """Whether the verdict names a read of the file served stale on purpose."""
    stale = [r["stale_file"] for r in records
             if r["type"] == "fault_end" and r["kind"] == "serve_stale" and "stale_file" in r]
    found = bool(stale) and any(f"of {stale[0]} " in v and "stale version" in v
                                for v in verdict["violations"])
    print(f"soak: the stale read of {stale[0] if stale else '(none served)'} was "
          f"{'named' if found else 'NOT named'} by the checker", flush=True)
    return found


def remove_bulk(root):
    """The sources, objects and cache disks (a GiB); the logs stay beside the report."""
    for bulk in ("sources", "s3"):
        shutil.rmtree(os.path.join(root, bulk), ignore_errors=True)
    for node in os.listdir(root):
        for bulk in ("cache.img", "data", "cache", "mnt"):
            path = os.path.join(root, node, bulk)
            if os.path.isdir(path) and not os.path.ismount(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.isfile(path):
                os.unlink(path)


def git_commit():
    done = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True)
    return done.stdout.strip() or "unknown"


def interrupted(*_):
    """SIGTERM (ctest's timeout) tears the cluster down as an interrupt does."""
    raise KeyboardInterrupt


def main(argv=None):
    args = parse_args(argv)
    if args.judge:
        return judge(args.judge)
    if os.geteuid() != 0:
        print("soak: needs root (network namespaces, loop devices, FUSE)", file=sys.stderr)
        return 77
    signal.signal(signal.SIGTERM, interrupted)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
