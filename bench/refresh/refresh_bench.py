#!/usr/bin/python3
"""Memory across refreshes: RSS of granary-fuse and granaryd while a large dataset is
refreshed again and again.

One granaryd (single node, --fill none) serves a generated dataset of --files files
(default 150,000: --dirs class directories of small files) and one granary-fuse mounts
it. The run walks the whole tree through the mount once (every directory listed, every
entry stat'ed, as a job's file index does), then makes --refreshes refreshes. Each
round:

  1. opens a file of the current version through the mount and reads it (a reader that
     is still busy when the refresh comes);
  2. changes one file of the source and writes round.txt, then `granary dataset refresh`;
  3. waits until the mount shows the new version (round.txt reads the round number);
  4. closes the file of the old version and waits --settle seconds (default: both grace
     periods and a few seconds more), then samples VmRSS of both processes and the
     versions granaryd still lists (`granary dataset show --json`).

Builds whose binaries know --version-grace-seconds get --fuse-grace and --server-grace
(defaults 2 s and 5 s); older builds run with their own behaviour (no release), so that
--old-build measures the same rounds on the binaries before version release.

Usage (root: it mounts):
  /usr/bin/python3 bench/refresh/refresh_bench.py --build build [--old-build DIR]
      [--files 150000] [--refreshes 20] [--out-dir bench/refresh/results]
Writes results.md, results.json and rss.png to --out-dir.
"""
import argparse
import datetime
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import free_port, wait_for  # noqa: E402

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATASET = "refresh"


def log(text):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), text), flush=True)


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS for pid %d" % pid)


def generate(source, files, dirs):
    marker = os.path.join(source, ".generated-%d-%d" % (files, dirs))
    if os.path.exists(marker):
        return
    shutil.rmtree(source, ignore_errors=True)
    for i in range(files):
        d = os.path.join(source, "class%04d" % (i % dirs))
        if i < dirs:
            os.makedirs(d)
        with open(os.path.join(d, "img%07d.jpg" % i), "wb") as f:
            f.write(b"%07d\n" % i * 8)
    open(marker, "w").close()


def knows_version_grace(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return "--version-grace-seconds" in out.stdout + out.stderr


class Setup:
    def __init__(self, build, work, args):
        self.build = os.path.abspath(build)
        self.work = work
        self.args = args
        self.granaryd = os.path.join(self.build, "granaryd")
        self.fuse = os.path.join(self.build, "granary-fuse")
        self.cli = os.path.join(self.build, "granary")
        self.releases = knows_version_grace(self.granaryd)
        self.socket = os.path.join(work, "granaryd.sock")
        self.mount = os.path.join(work, "mnt")
        self.server = None
        self.mounted = None

    def granary(self, *words):
        out = subprocess.run([self.cli, "--server", "unix:" + self.socket, *words],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("granary %s: %s" % (" ".join(words), out.stderr.strip()))
        return out.stdout

    def start(self, source):
        data = os.path.join(self.work, "data")
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(self.mount, exist_ok=True)
        cmd = [self.granaryd, "--data-dir", data, "--socket", self.socket,
               "--metrics-listen", "127.0.0.1:%d" % free_port(), "--fill", "none",
               "--source-root", os.path.dirname(source)]
        if self.releases:
            cmd += ["--version-grace-seconds", str(self.args.server_grace)]
        log = open(os.path.join(self.work, "granaryd.log"), "w")
        self.server = subprocess.Popen(cmd, stderr=log)
        wait_for(lambda: os.path.exists(self.socket), 30, "granaryd's socket")
        wait_for(lambda: subprocess.run([self.cli, "--server", "unix:" + self.socket, "status"],
                                        capture_output=True).returncode == 0, 30, "granaryd")
        self.granary("dataset", "add", DATASET, source)
        cmd = [self.fuse, self.mount, "--server", "unix:" + self.socket, "--foreground",
               "--dataset", DATASET]
        if self.releases:
            cmd += ["--version-grace-seconds", str(self.args.fuse_grace)]
        self.mounted = subprocess.Popen(cmd, stderr=open(os.path.join(self.work, "fuse.log"), "w"))
        wait_for(lambda: os.path.exists(os.path.join(self.mount, DATASET, "round.txt")), 60,
                 "the mount")

    def stop(self):
        if self.mounted is not None:
            subprocess.run(["fusermount3", "-u", self.mount], capture_output=True)
            try:
                self.mounted.wait(30)
            except subprocess.TimeoutExpired:
                self.mounted.kill()
                subprocess.run(["fusermount3", "-uz", self.mount], capture_output=True)
        if self.server is not None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(30)
            except subprocess.TimeoutExpired:
                self.server.kill()

    def sample(self):
        shown = json.loads(self.granary("dataset", "show", DATASET, "--json"))
        return {"fuse_rss": rss_bytes(self.mounted.pid), "granaryd_rss": rss_bytes(self.server.pid),
                "older_versions": len(shown.get("older_versions", []))}


def walk(root):
    entries = 0
    for path, dirs, files in os.walk(root):
        for name in files:
            os.stat(os.path.join(path, name))
            entries += 1
    return entries


def shows_round(mounted, r):
    # For up to a second (the kernel's timeout of the dataset's name), a path
    # still leads to the old version, whose round.txt the source changed since.
    try:
        with open(os.path.join(mounted, "round.txt")) as f:
            return f.read() == str(r)
    except OSError as e:
        if e.errno == errno.ESTALE:
            return False
        raise


def run(label, build, source, args):
    work = os.path.join(args.work_dir, label)
    os.makedirs(work, exist_ok=True)
    setup = Setup(build, work, args)
    settle = args.settle if args.settle is not None else (
        args.server_grace + args.fuse_grace + 4 if setup.releases else 4)
    samples = []
    try:
        with open(os.path.join(source, "round.txt"), "w") as f:
            f.write("0")
        setup.start(source)
        mounted = os.path.join(setup.mount, DATASET)
        started = time.time()
        walked = walk(mounted)
        log("%s: walked %d files through the mount in %.1f s" % (label, walked,
                                                                  time.time() - started))
        samples.append(dict(setup.sample(), round=0))
        for r in range(1, args.refreshes + 1):
            held = open(os.path.join(mounted, "class%04d" % (r % args.dirs),
                                     "img%07d.jpg" % (r % args.dirs)), "rb")
            held.read()
            changed = os.path.join(source, "class0000", "img0000000.jpg")
            with open(changed, "wb") as f:
                f.write(b"round %d\n" % r)
            with open(os.path.join(source, "round.txt"), "w") as f:
                f.write(str(r))
            began = time.time()
            setup.granary("dataset", "refresh", DATASET)
            refreshed = time.time() - began
            wait_for(lambda: shows_round(mounted, r), 60, "round %d on the mount" % r)
            held.close()
            time.sleep(settle)
            s = dict(setup.sample(), round=r, refresh_seconds=refreshed)
            samples.append(s)
            log("%s round %2d: granary-fuse %4d MiB, granaryd %4d MiB, older versions %d "
                "(refresh %.1f s)" % (label, r, s["fuse_rss"] // MIB, s["granaryd_rss"] // MIB,
                                      s["older_versions"], refreshed))
        released = open(os.path.join(work, "fuse.log")).read().count("released dataset")
    finally:
        setup.stop()
    return {"label": label, "build": build, "releases": setup.releases, "settle": settle,
            "fuse_versions_released": released, "samples": samples}


def write_report(results, args, out):
    lines = []
    for r in results:
        s = r["samples"]
        first, last = s[1], s[-1]
        lines.append("| %s | %s | %d | %d | %.2f | %d | %d | %.2f | %d |" % (
            r["label"], "yes" if r["releases"] else "no", s[0]["fuse_rss"] // MIB,
            first["fuse_rss"] // MIB, last["fuse_rss"] / first["fuse_rss"],
            s[0]["granaryd_rss"] // MIB, first["granaryd_rss"] // MIB,
            last["granaryd_rss"] / first["granaryd_rss"], last["older_versions"]))
    header = ("| build | releases versions | granary-fuse MiB after the walk | after refresh 1 | "
              "after refresh %d / after 1 | granaryd MiB after the walk | after refresh 1 | "
              "after refresh %d / after 1 | older versions listed at the end |\n"
              "|---|---|---|---|---|---|---|---|---|\n") % (args.refreshes, args.refreshes)
    per_round = ["| round | " + " | ".join("%s fuse MiB | %s granaryd MiB | %s older" % (
        r["label"], r["label"], r["label"]) for r in results) + " |",
        "|---|" + "---|---|---|" * len(results)]
    for i in range(args.refreshes + 1):
        row = ["%d" % i]
        for r in results:
            s = r["samples"][i]
            row += ["%d" % (s["fuse_rss"] // MIB), "%d" % (s["granaryd_rss"] // MIB),
                    "%d" % s["older_versions"]]
        per_round.append("| " + " | ".join(row) + " |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(header + "\n".join(lines) + "\n\n" + "\n".join(per_round) + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"when": datetime.datetime.utcnow().isoformat() + "Z", "args": vars(args),
                   "results": results}, f, indent=1)


def plot(results, args, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in ((axes[0], "fuse_rss", "granary-fuse"),
                           (axes[1], "granaryd_rss", "granaryd")):
        for r in results:
            xs = [s["round"] for s in r["samples"]]
            ys = [s[key] / MIB for s in r["samples"]]
            ax.plot(xs, ys, marker="o", markersize=3, label=r["label"])
        ax.set_xlabel("refreshes (0: after the first walk of the tree)")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(bottom=0)
        ax.set_title("%s, %d-file dataset" % (title, args.files), fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rss.png"), dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--old-build", help="also run the same rounds on these binaries")
    p.add_argument("--files", type=int, default=150000)
    p.add_argument("--dirs", type=int, default=300)
    p.add_argument("--refreshes", type=int, default=20)
    p.add_argument("--fuse-grace", type=int, default=2)
    p.add_argument("--server-grace", type=int, default=5)
    p.add_argument("--settle", type=int, help="seconds after each refresh before sampling")
    p.add_argument("--work-dir", default="/var/tmp/granary-refresh")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    source = os.path.join(args.work_dir, "source")
    started = time.time()
    generate(source, args.files, args.dirs)
    log("source of %d files ready in %.1f s" % (args.files, time.time() - started))
    results = []
    if args.old_build:
        results.append(run("before", args.old_build, source, args))
    results.append(run("now", args.build, source, args))
    write_report(results, args, args.out_dir)
    plot(results, args, args.out_dir)
    log("wrote %s" % args.out_dir)


if __name__ == "__main__":
    main()
