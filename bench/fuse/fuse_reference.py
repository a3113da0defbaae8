#!/usr/bin/env python3
"""Warm small-file DataLoader epochs: Granary's mount, libfuse's own
passthrough_hp example and the local disk, over the same files.

passthrough_hp with FUSE passthrough is about the least a FUSE daemon can do
for a file: it answers OPEN with the backing file's id and RELEASE with
nothing, and the kernel reads the file itself. What it costs against the local
disk is the price of FUSE's round trips per open on this machine, which no
daemon behind a FUSE mount avoids; what Granary costs beyond it is Granary's.

The files (--files, log-normal sizes around 110 KiB, in 100 class
directories) lie on the local disk; they are the local copy, passthrough_hp's
source, and the source of a dataset one granaryd prewarms and granary-fuse
mounts. Each round runs bench/e2e's DataLoader client (4 workers, a seeded
shuffle per epoch, every sample's XXH3 checked, `echo 3 > drop_caches` before
each epoch) for --epochs epochs on each of the three, in an order that
alternates from round to round; ratios are of files/s within a round.

passthrough_hp is built from Debian 13's fuse3 3.17.2 source package (Debian
12's libfuse 3.14 has no passthrough API), downloaded from Debian's archive
and checked against its SHA-256, in --cache on first use.

Usage (root): /usr/bin/python3 bench/fuse/fuse_reference.py [--build build]
    [--files 10000] [--epochs 3] [--rounds 3]
    [--workdir /var/tmp/granary-fuse-reference] [--json] [--build-reference-only]
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys

import xxhash

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from bench_util import free_port, fuse_server_pid, wait_for  # noqa: E402
from passthrough_hp import build as passthrough_hp_build  # noqa: E402

E2E_CLIENT = os.path.join(HERE, "..", "e2e", "e2e_bench.py")


def write_files(root, count, samples_path):
    """Writes `count` files of random bytes under root/images and their
    samples list (path, offset 0, length, XXH3-64) for the DataLoader client."""
    rng = random.Random(20261206)
    rows = []
    for i in range(count):
        rel = "images/class_%03d/img_%06d.bin" % (i % 100, i)
        size = max(1, int(rng.lognormvariate(11.4, 0.5)))
        data = rng.randbytes(size)
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        rows.append("%s\t0\t%d\t%s\n" % (rel, size, xxhash.xxh3_64_hexdigest(data)))
    with open(samples_path, "w") as f:
        f.writelines(rows)


def epochs(root, samples, count, pids):
    """files/s of each epoch of the DataLoader client over `root`."""
    out = subprocess.run(
        [sys.executable, E2E_CLIENT, "client", "--root", root, "--samples", samples,
         "--epochs", str(count), "--workers", "4", "--batch-size", "32", "--seed", "20261130",
         "--watch-pids", ",".join(str(p) for p in pids)],
        check=True, capture_output=True, text=True).stdout
    results = [json.loads(line) for line in out.splitlines()]
    for r in results:
        if r["bad"] or r["samples"] == 0:
            raise SystemExit("fuse_reference: %s read %d bad samples" % (root, r["bad"]))
    return [r["samples"] / r["wall"] for r in results], sum(r["system_cpu"] for r in results)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--workdir", default="/var/tmp/granary-fuse-reference")
    p.add_argument("--cache", default="/var/tmp/granary-libfuse-3.17")
    p.add_argument("--files", type=int, default=10000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--build-reference-only", action="store_true",
                   help="build passthrough_hp if needed, print its path and stop")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("fuse_reference: run as root (drop_caches, mounts)")
    build = os.path.abspath(args.build)
    passthrough_hp = passthrough_hp_build(args.cache, "3.17.2")
    if args.build_reference_only:
        print(passthrough_hp)
        return 0
    work = args.workdir
    local = os.path.join(work, "local")
    samples = os.path.join(work, "samples.tsv")
    if not os.path.exists(samples) or sum(1 for _ in open(samples)) != args.files:
        shutil.rmtree(local, ignore_errors=True)
        write_files(local, args.files, samples)
    subprocess.run(["rm", "-rf", os.path.join(work, "data")], check=True)
    granary_mnt, reference_mnt = os.path.join(work, "granary"), os.path.join(work, "reference")
    for d in (granary_mnt, reference_mnt):
        os.makedirs(d, exist_ok=True)
    sock = os.path.join(work, "granaryd.sock")
    log = open(os.path.join(work, "granaryd.log"), "w")
    server = subprocess.Popen(
        [os.path.join(build, "granaryd"), "--data-dir", os.path.join(work, "data"),
         "--socket", sock, "--metrics-listen", "127.0.0.1:%d" % free_port(),
         "--capacity", "16GiB", "--source-root", local], stdout=log, stderr=log)
    cli = [os.path.join(build, "granary"), "--server", "unix:" + sock]
    reference = None
    mounted = []
    try:
        wait_for(lambda: subprocess.run(cli + ["status"], capture_output=True).returncode == 0,
                 30, "granaryd")
        subprocess.run(cli + ["dataset", "add", "files", local], check=True, capture_output=True)
        subprocess.run(cli + ["prewarm", "files"], check=True, capture_output=True)
        subprocess.run([os.path.join(build, "granary-fuse"), granary_mnt, "--server",
                        "unix:" + sock, "--dataset", "files",
                        "--log-file", os.path.join(work, "fuse.log")], check=True)
        mounted.append(granary_mnt)
        fuse_pid = fuse_server_pid(granary_mnt)
        reference = subprocess.Popen([passthrough_hp, "--foreground", local, reference_mnt])
        wait_for(lambda: os.path.ismount(reference_mnt), 30, "passthrough_hp")
        mounted.append(reference_mnt)
        readers = {
            "granary": (os.path.join(granary_mnt, "files"), [server.pid, fuse_pid]),
            "passthrough_hp": (reference_mnt, [reference.pid]),
            "local": (local, []),
        }
        wait_for(lambda: os.path.isdir(os.path.join(granary_mnt, "files", "images")), 30,
                 "the mount")
        rounds = []
        for round_index in range(args.rounds):
            order = list(readers) if round_index % 2 == 0 else list(reversed(readers))
            measured = {}
            for name in order:
                root, pids = readers[name]
                speeds, daemon_cpu = epochs(root, samples, args.epochs, pids)
                measured[name] = {"files_per_s": speeds,
                                  "mean_files_per_s": statistics.mean(speeds),
                                  "daemon_cpu_s": daemon_cpu}
            mean = {name: m["mean_files_per_s"] for name, m in measured.items()}
            rounds.append({"order": order, "readers": measured,
                           "granary/local": mean["granary"] / mean["local"],
                           "passthrough_hp/local": mean["passthrough_hp"] / mean["local"],
                           "granary/passthrough_hp": mean["granary"] / mean["passthrough_hp"]})
    finally:
        for d in mounted:
            subprocess.run(["fusermount3", "-u", d], capture_output=True)
        if reference is not None:
            reference.wait()
        server.terminate()
        server.wait()

    if args.json:
        print(json.dumps(rounds, indent=1))
        return 0
    print("%d files, %d epochs per reader and round, files/s averaged over the epochs" %
          (args.files, args.epochs))
    print("| round | order | granary files/s | passthrough_hp files/s | local files/s "
          "| granary / local | passthrough_hp / local | granary / passthrough_hp "
          "| daemons' CPU s: granary, passthrough_hp |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rounds):
        speeds = {n: m["mean_files_per_s"] for n, m in r["readers"].items()}
        print("| %d | %s | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f, %.2f |" % (
            i + 1, ", ".join(r["order"]), speeds["granary"], speeds["passthrough_hp"],
            speeds["local"], r["granary/local"], r["passthrough_hp/local"],
            r["granary/passthrough_hp"], r["readers"]["granary"]["daemon_cpu_s"],
            r["readers"]["passthrough_hp"]["daemon_cpu_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
