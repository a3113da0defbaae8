"""The soak's workload: jobs that run until the run ends, each recording what
it did in the history.

- random readers: a few ranges at random offsets of a random file, through a
  random mount (fio-style);
- DataLoader jobs: loader_job.py, a PyTorch DataLoader reading files of one
  dataset whole through a mount;
- `granary cat` of a random file on a random node;
- prewarms of a dataset, of the node's own group or of a named group;
- probes: `granary status` and a /metrics scrape of a random node, timed;
- a sampler of every process's resident memory and open descriptors.

Each job marks what it is doing, so that a call still running past
HANG_SECONDS is recorded as a hang (and the run does not wait for it).
"""
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request

from . import datasets, reads

HANG_SECONDS = 120
# Counters of granaryd's /metrics the report adds up across restarts.
COUNTERS = ["granary_cache_hits_total", "granary_cache_misses_total",
            "granary_bytes_from_cache_total", "granary_bytes_from_source_total",
            "granary_bytes_from_peers_total", "granary_store_evicted_chunks_total",
            "granary_store_insert_errors_total", "granary_store_checksum_failures_total",
            "granary_store_admissions_refused_total"]
SOAK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Job(threading.Thread):
    """A job's thread: once() again and again, `pause` (min, max) seconds apart,
    until the run stops; an exception is recorded as a job_error."""

    def __init__(self, name, context, seed, pause):
        super().__init__(name=name, daemon=True)
        self.context = context
        self.rng = random.Random(seed)
        self.pause = pause
        self.doing = None  # (what, since) of the call under way.
        self.hang_recorded = False

    def run(self):
        stop = self.context.stop
        while not stop.is_set():
            self.doing = (self.name, time.monotonic())
            try:
                self.once()
            except Exception as error:  # A harness error is a finding, not a crash.
                self.context.history.record("job_error", job=self.name, error=repr(error))
            self.doing = None
            stop.wait(self.rng.uniform(*self.pause))

    def pick_file(self):
        world = self.context.world
        dataset = world.datasets[self.rng.choice(sorted(world.datasets))]
        path = self.rng.choice(dataset.paths)
        return dataset, path


class RandomReader(Job):
    """1-4 ranges of up to 512 KiB at random offsets of a random file."""

    def once(self):
        ctx = self.context
        mount = self.rng.choice(ctx.cluster.mounts)
        dataset, path = self.pick_file()
        size = dataset.files[path]
        ranges = []
        for _ in range(self.rng.randint(1, 4)):
            length = self.rng.randint(1, min(size, 512 << 10))
            ranges.append((self.rng.randrange(0, max(1, size - length + 1)), length))
        record = reads.read_file(mount.path, dataset.name, path, size, ranges,
                                 ctx.world.current(dataset.name, path), ctx.history.now)
        ctx.history.record("read", job=self.name, via=f"mount {mount.node.id}", **record)


class LoaderJob(Job):
    """loader_job.py over 24 files of a random dataset, through a random mount."""

    def once(self):
        ctx = self.context
        mount = self.rng.choice(ctx.cluster.mounts)
        dataset = ctx.world.datasets[self.rng.choice(sorted(ctx.world.datasets))]
        paths = self.rng.sample(dataset.paths, min(24, len(dataset.paths)))
        files = [[p, dataset.files[p], ctx.world.current(dataset.name, p)] for p in paths]
        argv = [sys.executable, f"{SOAK_DIR}/loader_job.py", str(ctx.history.start), mount.path,
                dataset.name, json.dumps(files)]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as loader:
            for line in loader.stdout:
                ctx.history.record("read", job=self.name, via=f"mount {mount.node.id}",
                                   **json.loads(line))
            code = loader.wait()
            if code != 0:
                error = loader.stderr.read()[-400:]
                ctx.history.record("job_error", job=self.name,
                                   error=f"loader_job.py exited {code}: {error}")


class CatJob(Job):
    """`granary cat` of a random file on a random node, checked whole."""

    def once(self):
        ctx = self.context
        node = self.rng.choice(ctx.cluster.nodes)
        dataset, path = self.pick_file()
        size = dataset.files[path]
        record = {"dataset": dataset.name, "path": path, "t_open": ctx.history.now(), "ops": 1,
                  "bytes": 0, "revisions": []}
        try:
            done, seconds = ctx.cluster.cli(node, ["cat", f"{dataset.name}/{path}"],
                                            timeout=HANG_SECONDS)
            record["slowest"] = seconds
            if done.returncode != 0:
                record["error"] = "exit %d" % done.returncode
                record["error_text"] = done.stderr.decode(errors="replace").strip()[-300:]
            elif len(done.stdout) != size:
                record["wrong"] = {"offset": len(done.stdout),
                                   "why": f"{len(done.stdout)} of {size} bytes"}
            else:
                record["bytes"] = size
                revision = datasets.identify(dataset.name, path, 0, done.stdout,
                                             ctx.world.current(dataset.name, path))
                if revision is None:
                    record["wrong"] = {"offset": 0, "why": "bytes of no revision"}
                else:
                    record["revisions"] = [revision]
        except subprocess.TimeoutExpired:
            record["error"] = "timeout"
        record["t_end"] = ctx.history.now()
        ctx.history.record("read", job=self.name, via=f"cat {node.id}", **record)


class PrewarmJob(Job):
    """A prewarm of a random dataset on a random node: of its group, or of a named one."""

    def once(self):
        ctx = self.context
        node = self.rng.choice(ctx.cluster.nodes)
        name = self.rng.choice(sorted(ctx.world.datasets))
        args = ["prewarm", name, "--json"]
        if self.rng.random() < 0.5:
            args += ["--group", self.rng.choice(sorted({n.group for n in ctx.cluster.nodes}))]
        t_start = ctx.history.now()
        try:
            done, seconds = ctx.cluster.cli(node, args, timeout=HANG_SECONDS)
            error = done.stderr.decode(errors="replace").strip()[-300:] if done.returncode else None
        except subprocess.TimeoutExpired:
            seconds, error = HANG_SECONDS, "timeout"
        ctx.history.record("prewarm", job=self.name, node=node.id, args=args[2:], dataset=name,
                           t_start=t_start, seconds=seconds, error=error)


class Probe(Job):
    """`granary status` and a /metrics scrape of a random node, timed."""

    def once(self):
        self.scrape(self.rng.choice(self.context.cluster.nodes))

    def scrape(self, node):
        ctx = self.context
        t_start = ctx.history.now()
        try:
            done, seconds = ctx.cluster.cli(node, ["status", "--json"], timeout=HANG_SECONDS)
            error = done.stderr.decode(errors="replace").strip()[-300:] if done.returncode else None
        except subprocess.TimeoutExpired:
            seconds, error = HANG_SECONDS, "timeout"
        ctx.history.record("status", node=node.id, t_start=t_start, seconds=seconds, error=error)
        t_start = ctx.history.now()
        started = time.monotonic()
        error, counters = None, {}
        try:
            url = f"http://{node.metrics}/metrics"
            with urllib.request.urlopen(url, timeout=HANG_SECONDS) as answer:
                text = answer.read().decode()
            for line in text.splitlines():
                name, _, value = line.partition(" ")
                if name in COUNTERS:
                    counters[name] = float(value)
        except OSError as failure:
            error = str(failure)
        ctx.history.record("metrics", node=node.id, t_start=t_start,
                           seconds=time.monotonic() - started, error=error, counters=counters)


class Sampler(Job):
    """Resident memory and open descriptors of every process of the run."""

    def once(self):
        ctx = self.context
        for pid, name in _processes_of(ctx.root):
            try:
                with open(f"/proc/{pid}/status") as status:
                    rss = next(int(line.split()[1]) * 1024 for line in status
                               if line.startswith("VmRSS:"))
                fds = len(os.listdir(f"/proc/{pid}/fd"))
            except (OSError, StopIteration):
                continue
            ctx.history.record("sample", pid=pid, name=name, rss=rss, fds=fds)


def _processes_of(root):
    """(pid, "program node") of the run's granaryd, granary-fuse and etcd."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        program = os.path.basename(argv[0])
        if program not in ("granaryd", "granary-fuse", "etcd") or root not in " ".join(argv):
            continue
        node = next((arg[len(root) + 1:].split("/")[0] for arg in argv
                     if arg.startswith(root + "/n")), "")
        found.append((int(entry), f"{program} {node}".strip()))
    return found


def watch_for_hangs(context, jobs):
    """Records a hang for every job whose call has run past HANG_SECONDS."""
    while not context.stop.wait(2):
        check_hangs(context, jobs)


def check_hangs(context, jobs):
    for job in jobs:
        doing = job.doing
        if doing and not job.hang_recorded and time.monotonic() - doing[1] > HANG_SECONDS:
            job.hang_recorded = True
            context.history.record("hang", job=job.name, since=doing[1] - context.history.start)
