#!/usr/bin/python3
"""Descriptors of a granaryd whose cache holds more files than it may open.

The cache keeps one data file per source file. Per granaryd binary given:
a fresh data directory, a dataset of --files files of --file-bytes random
bytes (25 folders), `granary prewarm`, then a restart. Measured: the
process's open-file limit, whether the prewarm succeeded and how many files
it listed as failed, granaryd's open descriptors after the prewarm and
after the restart, and the chunks the store recovered.

Usage (root): /usr/bin/python3 bench/store/many_files_bench.py [--build build-release]
    [--files 25000] [--granaryd NAME=PATH ...]
Without --granaryd, the build's own granaryd is measured. Prints JSON.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from bench_util import free_port, wait_for  # noqa: E402


def make_source(root, files, file_bytes):
    for i in range(files):
        folder = os.path.join(root, "d%02d" % (i % 25))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "f%06d" % i), "wb") as f:
            f.write(os.urandom(file_bytes))


def descriptors(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def open_file_limit(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return 0


class Server:
    def __init__(self, granaryd, cli, work, source):
        self.granaryd, self.cli, self.work, self.source = granaryd, cli, work, source
        self.env = dict(os.environ, GRANARY_SERVER="unix:%s/g.sock" % work)
        self.process = None

    def start(self):
        self.log = open(os.path.join(self.work, "granaryd.log"), "a")
        self.process = subprocess.Popen(
            [self.granaryd, "--source-root", self.source, "--data-dir", self.work + "/data",
             "--socket", self.work + "/g.sock", "--metrics-listen",
             "127.0.0.1:%d" % free_port()], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.granary("status").returncode == 0, 60, "granaryd to answer")

    def stop(self):
        self.process.terminate()
        self.process.wait()
        self.log.close()

    def granary(self, *args):
        return subprocess.run([self.cli, *args], env=self.env, capture_output=True, text=True)


def measure(granaryd, cli, source):
    work = tempfile.mkdtemp(prefix="granary-many-", dir="/var/tmp")
    try:
        server = Server(granaryd, cli, work, source)
        server.start()
        result = {"open_file_limit": open_file_limit(server.process.pid)}
        added = server.granary("dataset", "add", "many", source, "--fill", "none")
        if added.returncode != 0:
            raise RuntimeError(added.stderr)
        prewarm = server.granary("prewarm", "many", "--json")
        result["prewarm_exit"] = prewarm.returncode
        progress = json.loads(prewarm.stdout)
        result["prewarm_chunks_done"] = progress["chunks_done"]
        result["prewarm_failed_files"] = len(progress["failures"])
        result["first_failure"] = (progress["failures"][0]["error"]
                                   if progress["failures"] else None)
        result["descriptors_after_prewarm"] = descriptors(server.process.pid)
        server.stop()
        server.start()
        result["descriptors_after_restart"] = descriptors(server.process.pid)
        with open(os.path.join(work, "granaryd.log")) as f:
            recovered = re.findall(r"chunk store: (\d+) chunks", f.read())
        result["chunks_after_restart"] = int(recovered[-1])
        server.stop()
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-release")
    parser.add_argument("--files", type=int, default=25000)
    parser.add_argument("--file-bytes", type=int, default=4096)
    parser.add_argument("--granaryd", action="append", default=[],
                        help="NAME=PATH of a granaryd to measure; repeatable")
    args = parser.parse_args()
    binaries = [entry.split("=", 1) for entry in args.granaryd] or [
        ["build", os.path.join(args.build, "granaryd")]]
    source = tempfile.mkdtemp(prefix="granary-many-src-", dir="/var/tmp")
    try:
        make_source(source, args.files, args.file_bytes)
        results = {name: measure(path, os.path.join(args.build, "granary"), source)
                   for name, path in binaries}
    finally:
        shutil.rmtree(source, ignore_errors=True)
    json.dump({"files": args.files, "file_bytes": args.file_bytes, "results": results},
              sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
