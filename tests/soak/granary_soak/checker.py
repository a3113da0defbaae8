"""The checker: judges a run's whole history (history.py) after the fact.

A run is clean when all of these hold, and each violation names the record:
- no read returned a byte of no revision, or of a revision other than those
  current when it opened (a refresh is seen by mounts within SETTLE s), and
  no open mixed two revisions;
- a read failed only where the schedule explains it, with a named error:
  ESTALE for a changed file between its source changing and the refresh
  (+ SETTLE); ENOENT, ESTALE or EIO for a dataset removed until it is back
  (+ SETTLE); `granary cat`, status and metrics of a node while that node is
  down or cut off (+ RECOVERY). A read through a mount is never explained by
  a node's fault: the mount falls back to other owners and the source; but
  the object store is across the network, so a read of an S3 dataset through
  the mount of a node cut off may fail with EIO (+ RECOVERY). A
  refresh or removal made on a node that was down or cut off then reaches
  the others once it is back, and a node that was down, cut off or
  restarted then sees it within RECOVERY of its return: the windows (and
  the old revision's) last until then;
- prewarms fail only while a fault is open (+ RECOVERY), or because a node's
  cache is full of data of datasets in use (CACHE_FULL, counted);
- nothing waited longer than HANG_SECONDS; outside fault windows no read
  call waited longer than READ_BOUND, and no status or metrics scrape longer
  than PROBE_BOUND;
- every process's resident memory and descriptors stayed within
  RESOURCE_BOUNDS;
- after the last fault, every node saw every member up and the same
  datasets and versions within CONVERGE_BOUND;
- the object store's front end refused no request for its signature (every
  request granaryd and granary-fuse sign must be signed right);
- every kind of job did its work (a run that read nothing is not clean);
- each byte of a dataset version was read from the source at most once per
  cache group outside the windows that lose it (source_reads.py).
"""
import collections

from . import source_reads
from .jobs import HANG_SECONDS

INF = float("inf")
SETTLE = 5.0
RECOVERY = 20.0
READ_BOUND = 10.0
PROBE_BOUND = 5.0
PREWARM_BOUND = 100.0
CONVERGE_BOUND = 60.0
MIB = 1 << 20
# granary-fuse's: its chunk cache (--cache-size, 512 MiB by default) and its
# copies for cold opens (--cold-open-memory, 256 MiB), and 128 MiB for the rest.
RESOURCE_BOUNDS = {"granaryd": (512 * MIB, 1024), "granary-fuse": (896 * MIB, 1024),
                   "etcd": (512 * MIB, 256)}
NODE_DOWN_KINDS = {"kill_granaryd", "leave_join", "cut_link"}
# A prewarm's share refused because the node's cache is full of data of
# datasets in use (which it keeps): what a cache three times too small for
# the data read meets, named as such.
CACHE_FULL = "the cache did not keep what it fetched"


class Windows:
    """The fault windows of a history, and what each explains."""

    def __init__(self, history):
        starts = {}
        self.s3_datasets = set()
        self.faults = []  # (start, end, kind, target, end record)
        # (dataset, path) -> {revision: [t its source was written, the refresh's fault]}
        self.revisions = collections.defaultdict(dict)
        for record in history:
            if record["type"] == "fault_start":
                starts[record["id"]] = record["t"]
            elif record["type"] == "fault_end":
                self.faults.append((starts[record["id"]], record["t"], record["kind"],
                                    record["target"], record))
            elif record["type"] == "source_changed":
                written = record.get("since", record["t"])
                for path, revision in record["changed"].items():
                    self.revisions[(record["dataset"], path)][revision] = [written, None]
            elif record["type"] == "datasets":
                self.s3_datasets = set(record["s3"])
        self.faults = [self._spread(fault) for fault in self.faults]
        for fault in self.faults:
            changed = fault[4].get("changed", {}) if fault[2] == "refresh" else {}
            for path, revision in changed.items():
                self.revisions[(fault[3], path)][revision][1] = fault
        self.last_fault_end = max((f[1] for f in self.faults), default=0.0)

    def _spread(self, fault):
        """`fault`, a catalog change made on a node that was down or cut off
        around then ending when that node is back: only then do the others
        learn of it."""
        start, end, kind, target, record = fault
        nodes = {record.get(key) for key in ("node", "removed_on", "added_on")} - {None}
        if kind not in ("refresh", "remove_add") or not nodes:
            return fault
        back = [f[1] for f in self.faults if f[2] in NODE_DOWN_KINDS and f[3] in nodes
                and f[0] <= end + SETTLE and start <= f[1]]
        return (start, max([end] + back), kind, target, record)

    def seen_by(self, node, change):
        """When `node` has surely seen catalog change `change` (a fault): SETTLE
        after it, or RECOVERY after the node was back if it was down, cut off
        or restarted around then."""
        start, end = change[0], change[1]
        seen = end + SETTLE
        for f in self.faults:
            if (f[2] in NODE_DOWN_KINDS and f[3] == node or f[2] == "rolling_restart") and \
                    f[0] <= end + SETTLE and start <= f[1]:
                seen = max(seen, f[1] + RECOVERY)
        return seen

    def allowed_revisions(self, dataset, path, node, t_open):
        """Revisions an open on `node` at `t_open` may see: each from when its
        source was written until `node` has seen the refresh of the next."""
        times = self.revisions.get((dataset, path), {})
        allowed = set()
        for revision in range(max(times, default=0) + 1):
            appears = times[revision][0] if revision in times else -INF
            refresh = times[revision + 1][1] if revision + 1 in times else None
            replaced = self.seen_by(node, refresh) if refresh else INF
            if appears <= t_open < replaced:
                allowed.add(revision)
        return allowed

    def stale_window(self, dataset, path, node, t0, t1):
        """Whether [t0, t1] overlaps a change of the file's source until `node` saw its refresh."""
        return any(written <= t1 and (refresh is None or t0 <= self.seen_by(node, refresh))
                   for written, refresh in self.revisions.get((dataset, path), {}).values())

    def open_at(self, t0, t1, kinds=None, target=None, slack=RECOVERY):
        """The faults open during [t0, t1] (+ slack after their end)."""
        return [f for f in self.faults
                if f[0] <= t1 and t0 <= f[1] + slack and (kinds is None or f[2] in kinds)
                and (target is None or f[3] in (target, None))]

    def explains_read_error(self, read):
        via, error = read["via"], read.get("error")
        t0, t1 = read["t_open"], read["t_end"]
        if via.startswith("mount") and error not in ("ESTALE", "ENOENT", "EIO"):
            return False
        if not via.startswith("mount") and not read.get("error_text"):
            return False  # A CLI failure must say why.
        dataset, path, node = read["dataset"], read["path"], via.split()[1]
        if self.stale_window(dataset, path, node, t0, t1) and (error == "ESTALE" or
                                                               via.startswith("cat")):
            return True
        if any(f[2] == "remove_add" and f[3] == dataset and f[0] <= t1 and
               t0 <= self.seen_by(node, f) for f in self.faults):
            return True
        if via.startswith("cat"):
            return bool(self.open_at(t0, t1, NODE_DOWN_KINDS, node) or
                        self.open_at(t0, t1, {"rolling_restart"}))
        return (dataset in self.s3_datasets and error == "EIO" and
                bool(self.open_at(t0, t1, {"cut_link"}, node)))


def judge(history, journals, groups):
    """The verdict: {"clean": bool, "violations": [str], "figures": {...}}, of
    `history` and the nodes' source journals (source_reads.py) `journals`
    (node id -> lines), the nodes in `groups` (node id -> cache group)."""
    windows = Windows(history)
    violations, source_figures = source_reads.judge(windows, history, journals, groups)
    node_faults = {"kill_granaryd", "leave_join", "cut_link", "rolling_restart", "restart_etcd",
                   "fill_disk", "kill_fuse"}
    done_by_kind = collections.Counter()
    reads = [r for r in history if r["type"] == "read"]
    refused_full = 0

    def describe(r):
        return (f"read by {r['job']} via {r['via']} of {r['dataset']}/{r['path']} "
                f"opened at t={r['t_open']:.2f}")

    for r in reads:
        if "wrong" in r:
            violations.append(f"{describe(r)}: wrong bytes at offset {r['wrong']['offset']} "
                              f"({r['wrong']['why']})")
        if len(r["revisions"]) > 1:
            violations.append(f"{describe(r)}: revisions {r['revisions']} mixed in one open")
        allowed = windows.allowed_revisions(r["dataset"], r["path"], r["via"].split()[1],
                                            r["t_open"])
        for revision in r["revisions"]:
            if revision not in allowed:
                violations.append(f"{describe(r)}: bytes of revision {revision}, but only "
                                  f"{sorted(allowed)} may be seen then (stale version)")
        if "error" in r and not windows.explains_read_error(r):
            violations.append(f"{describe(r)}: failed ({r['error']}: "
                              f"{r.get('error_text', '')}) outside any window that explains it")
        if "error" not in r and "wrong" not in r:
            done_by_kind[r["job"].split("-")[0]] += 1
        if r.get("slowest", 0) > READ_BOUND and not windows.open_at(r["t_open"], r["t_end"],
                                                                     node_faults):
            violations.append(f"{describe(r)}: a call took {r['slowest']:.2f} s "
                              f"(bound {READ_BOUND} s outside faults)")
        if r.get("slowest", 0) > HANG_SECONDS:
            violations.append(f"{describe(r)}: a call took {r['slowest']:.2f} s (hang)")

    for r in history:
        kind = r["type"]
        if kind == "prewarm":
            t1 = r["t_start"] + r["seconds"]
            faulted = windows.open_at(r["t_start"], t1, node_faults) or windows.open_at(
                r["t_start"], t1, {"refresh", "remove_add"}, r["dataset"])
            if r["error"] and CACHE_FULL in r["error"]:
                refused_full += 1
                done_by_kind["prewarm"] += 1  # It answered, and said why.
            elif r["error"] and not faulted:
                violations.append(f"prewarm {r['dataset']} {r['args']} on {r['node']} at "
                                  f"t={r['t_start']:.2f} failed outside faults: {r['error']}")
            elif not r["error"]:
                done_by_kind["prewarm"] += 1
            if r["seconds"] > PREWARM_BOUND and not faulted:
                violations.append(f"prewarm {r['dataset']} on {r['node']} at t={r['t_start']:.2f}"
                                  f" took {r['seconds']:.1f} s (bound {PREWARM_BOUND} s)")
        elif kind in ("status", "metrics"):
            t1 = r["t_start"] + r["seconds"]
            down = windows.open_at(r["t_start"], t1, NODE_DOWN_KINDS, r["node"]) or \
                windows.open_at(r["t_start"], t1, {"rolling_restart"})
            if r["error"] and not down:
                violations.append(f"{kind} of {r['node']} at t={r['t_start']:.2f} failed while it "
                                  f"was up: {r['error']}")
            elif not r["error"]:
                done_by_kind[kind] += 1
            if r["seconds"] > PROBE_BOUND and not windows.open_at(r["t_start"], t1, node_faults):
                violations.append(f"{kind} of {r['node']} at t={r['t_start']:.2f} took "
                                  f"{r['seconds']:.2f} s (bound {PROBE_BOUND} s outside faults)")
        elif kind == "hang":
            violations.append(f"{r['job']}: a call started at t={r['since']:.2f} still ran after "
                              f"{HANG_SECONDS} s (hang)")
        elif kind == "job_error":
            violations.append(f"{r['job']} at t={r['t']:.2f}: {r['error']}")
        elif kind == "fault_end" and "nemesis_error" in r:
            violations.append(f"fault {r['kind']} {r['target']} at t={r['t']:.2f} could not be "
                              f"carried out: {r['nemesis_error']}")
        elif kind == "not_converged":
            violations.append(f"no convergence within {CONVERGE_BOUND} s after the last fault: "
                              f"{r['why']}")
        elif kind == "object_store" and r.get("signature_refusals"):
            violations.append(f"the object store's front end refused {r['signature_refusals']} "
                              f"requests for their signature")

    peaks = {}
    for r in history:
        if r["type"] == "sample":
            program = r["name"].split()[0]
            rss_bound, fd_bound = RESOURCE_BOUNDS[program]
            peak = peaks.setdefault(r["name"], {"rss": 0, "fds": 0})
            peak["rss"], peak["fds"] = max(peak["rss"], r["rss"]), max(peak["fds"], r["fds"])
            if r["rss"] > rss_bound or r["fds"] > fd_bound:
                violations.append(f"{r['name']} (pid {r['pid']}) at t={r['t']:.2f}: "
                                  f"{r['rss'] / MIB:.0f} MiB resident, {r['fds']} descriptors "
                                  f"(bounds {rss_bound / MIB:.0f} MiB, {fd_bound})")
    converged = [r for r in history if r["type"] == "converged"]
    if not converged and not any(r["type"] == "not_converged" for r in history):
        violations.append("convergence was never checked")
    for needed in ("random", "loader", "cat", "prewarm", "status", "metrics"):
        if done_by_kind[needed] == 0:
            violations.append(f"no {needed} job succeeded: the run proves nothing about it")
    return {"clean": not violations, "violations": violations,
            "figures": {"reads": len(reads), "ok_by_kind": dict(done_by_kind),
                        "failed_reads": sum(1 for r in reads if "error" in r),
                        "prewarms_refused_cache_full": refused_full,
                        "bytes_verified": sum(r["bytes"] for r in reads if "wrong" not in r),
                        "converged_seconds": converged[0]["seconds"] if converged else None,
                        "peaks": peaks, "last_fault_end": windows.last_fault_end,
                        "source_reads": source_figures}}
