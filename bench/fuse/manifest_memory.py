#!/usr/bin/env python3
"""Memory of many large datasets in granaryd and granary-fuse, and what a
mount of them costs before anything is read.

One source tree of FILES empty files (in directories of 1,000; paths of 13-14
bytes, or of 37 with --long-names) is registered
as DATASETS datasets (each name makes another version, so every one has a
manifest of its own). For each build given (--build, and --baseline if given,
run in turn on the same tree), in order:
  - register the datasets (seconds) and read granaryd's resident memory;
  - restart granaryd on the same catalog, and read its memory again;
  - mount every dataset with one granary-fuse (seconds until the mount is
    ready), list the mount's root (seconds), and read granary-fuse's memory;
  - stat and read one file of every dataset, and read both memories again,
    with the budgets' gauges (granary_manifest_memory_bytes, when granaryd
    exports it).
Budgets: --server-budget-mib for granaryd (--manifest-memory-mib) and
--fuse-budget for granary-fuse (--manifest-memory), passed only to builds
that take them; --max-dataset-entries raises granaryd's limit on a dataset's
entries (5,000,000 by default) for trees larger than that. Peak figures are
the processes' VmHWM: the most they held at once, registration included. Prints one line per figure and a table in Markdown.

Usage (as root):
  /usr/bin/python3 bench/fuse/manifest_memory.py --build build \\
      [--baseline OLD_BUILD] [--datasets 8] [--files 250000] \\
      [--server-budget-mib 256] [--fuse-budget 256MiB] \\
      [--max-dataset-entries N] [--workdir /var/tmp/granary-manifest-memory] \\
      [--long-names]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import free_port, fuse_server_pid, wait_for  # noqa: E402

MIB = 1 << 20


def log(text):
    print(text, flush=True)


def memory_mib(pid, field):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no %s for pid %d" % (field, pid))


def rss_mib(pid):
    return memory_mib(pid, "VmRSS")


def peak_mib(pid):
    return memory_mib(pid, "VmHWM")


def tree_paths(files, long_names):
    """(directory, file) of every file: d0001/f001234, or, with long_names,
    paths as long as an image dataset's (train/n00000001/n00000001_001234.JPEG,
    37 bytes, which no string holds in place)."""
    for i in range(files):
        if long_names:
            directory = "train/n%08d" % (i // 1000)
            yield directory, "%s/n%08d_%06d.JPEG" % (directory, i // 1000, i)
        else:
            directory = "d%04d" % (i // 1000)
            yield directory, "%s/f%06d" % (directory, i)


def make_tree(source, files, long_names):
    marker = os.path.join(source, ".complete-%d%s" % (files, "-long" if long_names else ""))
    if os.path.exists(marker):
        return
    shutil.rmtree(source, ignore_errors=True)
    first = None
    for i, (directory, path) in enumerate(tree_paths(files, long_names)):
        if i % 1000 == 0:
            os.makedirs(os.path.join(source, directory))
        os.close(os.open(os.path.join(source, path), os.O_CREAT | os.O_WRONLY, 0o644))
        first = first or path
    with open(os.path.join(source, first), "w") as out:
        out.write("granary\n")
    open(marker, "w").close()


def takes_flag(binary, flag):
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    return flag in help_text


class Server:
    def __init__(self, build, work, budget_mib, max_entries):
        self.binary = os.path.join(build, "granaryd")
        self.work = work
        self.socket = os.path.join(work, "granaryd.sock")
        self.metrics_port = free_port()
        self.extra = []
        if takes_flag(self.binary, "--manifest-memory-mib"):
            self.extra = ["--manifest-memory-mib", str(budget_mib)]
        if max_entries:
            config = os.path.join(work, "granaryd.yaml")
            with open(config, "w") as out:
                out.write("max_dataset_entries: %d\n" % max_entries)
            self.extra += ["--config", config]
        self.cli = [os.path.join(build, "granary"), "--server", "unix:" + self.socket]
        self.proc = None

    def start(self):
        self.log = open(os.path.join(self.work, "granaryd.log"), "a")
        self.proc = subprocess.Popen(
            [self.binary, "--data-dir", os.path.join(self.work, "data"), "--socket", self.socket,
             "--metrics-listen", "127.0.0.1:%d" % self.metrics_port, "--capacity", "4GiB",
             "--source-root", "/", "--fill", "none", *self.extra],
            stderr=self.log, stdout=self.log)
        wait_for(lambda: subprocess.run(self.cli + ["status"], capture_output=True).returncode == 0,
                 120, "granaryd")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()

    def gauge(self, name):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        try:
            text = urllib.request.urlopen(url, timeout=5).read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None


def unmount(path):
    subprocess.run(["fusermount3", "-u", path], capture_output=True)


def run(label, build, args, source, names):
    work = os.path.join(args.workdir, label)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    figures = {}
    server = Server(build, work, args.server_budget_mib, args.max_dataset_entries)
    server.start()
    start = time.perf_counter()
    for name in names:
        subprocess.run(server.cli + ["dataset", "add", name, source], check=True,
                       capture_output=True)
    figures["register_s"] = time.perf_counter() - start
    figures["granaryd_after_register"] = rss_mib(server.proc.pid)
    figures["granaryd_peak_register"] = peak_mib(server.proc.pid)
    server.stop()
    server.start()
    figures["granaryd_after_restart"] = rss_mib(server.proc.pid)

    mountpoint = os.path.join(work, "mnt")
    os.makedirs(mountpoint)
    fuse = [os.path.join(build, "granary-fuse"), mountpoint, "--server", "unix:" + server.socket,
            "--log-file", os.path.join(work, "fuse.log")]
    if takes_flag(fuse[0], "--manifest-memory"):
        fuse += ["--manifest-memory", args.fuse_budget]
    start = time.perf_counter()
    subprocess.run(fuse, check=True)
    figures["mount_s"] = time.perf_counter() - start
    start = time.perf_counter()
    listed = os.listdir(mountpoint)
    figures["ls_root_s"] = time.perf_counter() - start
    assert sorted(listed) == sorted(names), listed
    pid = fuse_server_pid(mountpoint)
    figures["fuse_after_mount"] = rss_mib(pid)

    start = time.perf_counter()
    for name in names:
        _, first_path = next(tree_paths(1, args.long_names))
        with open(os.path.join(mountpoint, name, first_path)) as first:
            assert first.read() == "granary\n"
    figures["first_read_each_s"] = time.perf_counter() - start
    figures["fuse_after_reads"] = rss_mib(pid)
    figures["granaryd_after_reads"] = rss_mib(server.proc.pid)
    figures["fuse_peak"] = peak_mib(pid)
    figures["granaryd_peak_after_restart"] = peak_mib(server.proc.pid)
    gauge = server.gauge("granary_manifest_memory_bytes")
    figures["granaryd_manifest_gauge"] = gauge / MIB if gauge is not None else None
    held = server.gauge("granary_manifests_in_memory")
    figures["granaryd_manifests_held"] = held
    # Every dataset's manifest lists the same tree: its files, a directory
    # per 1,000 of them, and the root.
    entries = args.files + (args.files + 999) // 1000 + 1
    figures["granaryd_bytes_per_entry"] = gauge / (held * entries) if gauge and held else None
    unmount(mountpoint)
    server.stop()
    for key, value in figures.items():
        log("%s %s: %s" % (label, key, "n/a" if value is None else "%.2f" % value))
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--baseline")
    parser.add_argument("--datasets", type=int, default=8)
    parser.add_argument("--files", type=int, default=250000)
    parser.add_argument("--server-budget-mib", type=int, default=256)
    parser.add_argument("--fuse-budget", default="256MiB")
    parser.add_argument("--max-dataset-entries", type=int, default=0)
    parser.add_argument("--workdir", default="/var/tmp/granary-manifest-memory")
    parser.add_argument("--long-names", action="store_true",
                        help="paths of 37 bytes, as an image dataset has, not 13-14")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    source = os.path.join(args.workdir, "source")
    start = time.perf_counter()
    make_tree(source, args.files, args.long_names)
    log("source of %d files ready in %.1f s" % (args.files, time.perf_counter() - start))
    names = ["ds%02d" % i for i in range(args.datasets)]
    builds = [("after", args.build)] + ([("before", args.baseline)] if args.baseline else [])
    results = {label: run(label, build, args, source, names) for label, build in builds}

    rows = [("register_s", "register %d datasets, s" % args.datasets),
            ("granaryd_after_register", "granaryd RSS after registering, MiB"),
            ("granaryd_peak_register", "granaryd peak RSS while registering, MiB"),
            ("granaryd_after_restart", "granaryd RSS after a restart, MiB"),
            ("mount_s", "mount of every dataset until ready, s"),
            ("ls_root_s", "`ls` of the mount's root, s"),
            ("fuse_after_mount", "granary-fuse RSS after mounting, MiB"),
            ("first_read_each_s", "first read of one file in every dataset, s"),
            ("fuse_after_reads", "granary-fuse RSS after those reads, MiB"),
            ("granaryd_after_reads", "granaryd RSS after those reads, MiB"),
            ("granaryd_peak_after_restart", "granaryd peak RSS from its restart to here, MiB"),
            ("fuse_peak", "granary-fuse peak RSS, MiB"),
            ("granaryd_manifest_gauge", "granary_manifest_memory_bytes, MiB"),
            ("granaryd_manifests_held", "granary_manifests_in_memory"),
            ("granaryd_bytes_per_entry", "manifest bytes per entry in granaryd")]
    labels = list(results)
    print("\n| %d datasets of %d files | %s |" % (args.datasets, args.files, " | ".join(labels)))
    print("|---|" + "---|" * len(labels))
    for key, title in rows:
        cells = []
        for label in labels:
            value = results[label][key]
            cells.append("n/a" if value is None else ("%.2f" % value if key.endswith("_s")
                                                       else "%.0f" % value))
        print("| %s | %s |" % (title, " | ".join(cells)))


if __name__ == "__main__":
    main()
