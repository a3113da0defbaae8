"""The nemesis: faults on a schedule drawn from the run's seed, on two tracks
that overlap. The node track breaks processes and machines (granaryd
SIGKILLed and restarted, granary-fuse SIGKILLed and its mount taken over, a
node's link cut and healed, a cache disk filled and freed, a node leaving
and joining through etcd, a rolling restart of every node with a new
granaryd and granary-fuse --takeover, etcd restarted); the data track
changes datasets under the readers (a refresh of files that changed, a
dataset removed and added again).

Every fault is recorded as fault_start and fault_end with its kind and
target; the checker knows what each kind may explain.
"""
import random
import threading
import time

from .stale import serve_stale

NODE_KINDS = ["kill_granaryd", "kill_fuse", "cut_link", "fill_disk", "leave_join",
              "rolling_restart", "restart_etcd"]
DATA_KINDS = ["refresh", "remove_add"]
# How long a fault holds (down, cut, full, away, between removal and return).
HOLD_SECONDS = {"cut_link": (6, 12), "fill_disk": (6, 12), "leave_join": (8, 14),
                "remove_add": (2, 5), "kill_granaryd": (0.2, 2.0), "kill_fuse": (0.1, 1.0),
                "restart_etcd": (1, 4)}
# Faults that take long themselves push the next start back by this much more.
LONG_FAULTS = {"rolling_restart": 20, "leave_join": 10}


def plan(seed, fault_seconds, node_count, mount_count, dataset_names, s3_names):
    """[(start second, track, kind, target, hold seconds)], in order of start.

    Every kind happens at least once; a longer run repeats them at random.
    The first of each data kind is of an S3 dataset (of `s3_names`), so that
    every run rewrites objects and registers a bucket again.
    """
    rng = random.Random(seed)
    schedule = []
    s3_first = set(DATA_KINDS)
    for track, kinds, gap in (("node", NODE_KINDS, (6, 14)), ("data", DATA_KINDS, (8, 20))):
        order = rng.sample(kinds, len(kinds))
        at = rng.uniform(2, 6)
        # Each fault takes some time itself; the gaps are between starts.
        while order or at < fault_seconds:
            kind = order.pop(0) if order else rng.choice(kinds)
            if kind == "kill_fuse":
                target = rng.randrange(mount_count)
            elif kind in s3_first:
                s3_first.remove(kind)
                target = rng.choice(s3_names)
            elif kind in DATA_KINDS:
                target = rng.choice(dataset_names)
            elif kind in ("rolling_restart", "restart_etcd"):
                target = None
            else:
                target = rng.randrange(node_count)
            hold = round(rng.uniform(*HOLD_SECONDS.get(kind, (0, 0))), 2)
            schedule.append((round(at, 2), track, kind, target, hold))
            at += rng.uniform(*gap) + LONG_FAULTS.get(kind, 0)
    return sorted(schedule, key=lambda event: event[0])


class Nemesis:
    """Carries a schedule out, one thread a track; run() returns when both end."""

    def __init__(self, context, schedule, seed):
        self.context = context
        self.schedule = schedule
        self.rng = random.Random(seed ^ 0x6E656D)

    def run(self):
        tracks = [threading.Thread(target=self._track, args=(name,), daemon=True)
                  for name in ("node", "data")]
        for thread in tracks:
            thread.start()
        for thread in tracks:
            thread.join()

    def _track(self, name):
        history = self.context.history
        for number, (at, track, kind, target, hold) in enumerate(self.schedule):
            if track != name:
                continue
            while history.now() < at:
                time.sleep(0.05)
            fault = {"id": number, "kind": kind, "target": self._name(kind, target)}
            history.record("fault_start", **fault)
            try:
                detail = getattr(self, kind)(target, hold) or {}
                history.record("fault_end", **fault, **detail)
            except Exception as error:  # Recorded; the checker fails the run for it.
                history.record("fault_end", **fault, nemesis_error=repr(error))

    def _name(self, kind, target):
        cluster = self.context.cluster
        if kind in ("kill_fuse", "serve_stale"):
            return cluster.mounts[target].node.id
        if kind in DATA_KINDS:
            return target
        return None if target is None else cluster.nodes[target].id

    # The faults. Each returns what the record of its end should add.

    def kill_granaryd(self, i, hold):
        node = self.context.cluster.nodes[i]
        node.child.kill()
        time.sleep(hold)
        node.start()

    def kill_fuse(self, i, hold):
        mount = self.context.cluster.mounts[i]
        mount.kill()
        time.sleep(hold)
        mount.restart(self.context.ready_dataset())

    def cut_link(self, i, hold):
        self.context.cluster.network.cut(i)
        time.sleep(hold)
        self.context.cluster.network.heal(i)

    def fill_disk(self, i, hold):
        disk = self.context.cluster.nodes[i].disk
        written = disk.fill()
        time.sleep(hold)
        disk.free()
        return {"filled_bytes": written}

    def leave_join(self, i, hold):
        node = self.context.cluster.nodes[i]
        code = node.child.terminate()
        time.sleep(hold)
        node.start()
        return {"exit": code}

    def rolling_restart(self, _, __):
        cluster = self.context.cluster
        for node in cluster.nodes:
            code = node.child.terminate()
            if code != 0:
                raise RuntimeError(f"granaryd {node.id} exited {code} on SIGTERM")
            node.start()
            for mount in cluster.mounts:
                if mount.node is node:
                    mount.take_over(self.context.ready_dataset())
            time.sleep(1)

    def restart_etcd(self, _, hold):
        etcd = self.context.cluster.etcd
        etcd.child.terminate()
        time.sleep(hold)
        etcd.start()

    def refresh(self, name, _):
        ctx = self.context
        since = ctx.history.now()  # New revisions are written to the source from then on.
        changed = ctx.world.change(name, self.rng)
        ctx.history.record("source_changed", dataset=name, changed=changed, since=since)
        node = ctx.admin(["dataset", "refresh", name], self.rng)
        return {"node": node.id, "changed": changed}

    def remove_add(self, name, hold):
        ctx = self.context
        removed_on = ctx.admin(["dataset", "rm", name], self.rng)
        time.sleep(hold)
        added_on = ctx.add_dataset(name, self.rng)
        return {"removed_on": removed_on.id, "added_on": added_on.id}

    def serve_stale(self, i, _):
        """Only in the run that proves the checker (see stale.py)."""
        return serve_stale(self.context, i)
