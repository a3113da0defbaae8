#!/usr/bin/python3
"""Warm epochs of a PyTorch DataLoader over the mount: an S3 dataset against a
POSIX dataset holding the same files.

One run: --files files of random sizes around --file-kib KiB, written to a
POSIX directory and PUT under the same names into a bucket of one s3rver
(tests/support/s3rver, installed by scripts/install-deps.sh) on loopback. One
granaryd registers both (`posix`, from the directory; `s3`, from the bucket)
and prewarms both; one granary-fuse mounts both. Then one DataLoader process
(persistent workers, a seeded random order per epoch, every sample's length
checked) reads the `posix` tree and the `s3` tree once each untimed, then
--rounds rounds of one timed epoch of each, in alternating order, with the
page cache dropped before every epoch. The ratio of a round is the S3
dataset's samples/s over the POSIX dataset's; the median of the rounds is
reported.

Usage (root: it mounts and drops the page cache):
  /usr/bin/python3 bench/s3/s3_dataloader_bench.py [--build build] [--files 2000]
      [--file-kib 100] [--rounds 7] [--workers 2] [--batch-size 32]
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from s3rver_util import KEY, REPO, free_port, signed_curl, start_s3rver, wait_for  # noqa: E402
sys.path.insert(0, os.path.join(REPO, "bench", "e2e"))
from e2e_bench import drop_caches  # noqa: E402

BUCKET = "bench"
UPLOADS_PER_CURL = 200


def client_main(argv):
    """All epochs in one process; prints one JSON line per timed epoch."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mount", required=True)
    parser.add_argument("--files", required=True)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    a = parser.parse_args(argv)
    import torch
    from torch.utils.data import DataLoader, Dataset

    with open(a.files) as f:
        files = [line.rstrip("\n").split("\t") for line in f]

    class Files(Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, key):
            # Keys name the dataset too: the persistent workers are shared by
            # the epochs of both.
            dataset, index = key
            rel, size = files[index]
            with open(os.path.join(a.mount, dataset, rel), "rb", buffering=0) as f:
                data = f.read()
            return len(data), int(len(data) == int(size))

    order = []  # The sampler: each epoch's keys, replaced in place.
    loader = DataLoader(Files(), batch_size=a.batch_size, num_workers=a.workers,
                        persistent_workers=True, sampler=order, prefetch_factor=4)

    def epoch(dataset, seed):
        generator = torch.Generator()
        generator.manual_seed(seed)
        order[:] = [(dataset, i) for i in torch.randperm(len(files), generator=generator).tolist()]
        drop_caches()
        start = time.perf_counter()
        samples = nbytes = bad = 0
        for lengths, oks in loader:
            samples += len(lengths)
            nbytes += int(lengths.sum())
            bad += int((oks == 0).sum())
        wall = time.perf_counter() - start
        if samples != len(files) or bad:
            raise RuntimeError("%s: %d of %d samples, %d wrong" % (dataset, samples, len(files),
                                                                    bad))
        return {"dataset": dataset, "wall": wall, "samples_s": samples / wall,
                "mib_s": nbytes / wall / (1 << 20)}

    for dataset in ("posix", "s3"):
        epoch(dataset, 0)
    for round_ in range(a.rounds):
        pair = ("posix", "s3") if round_ % 2 == 0 else ("s3", "posix")
        print(json.dumps([epoch(dataset, round_ + 1) for dataset in pair]), flush=True)
    return 0


def run_granary(a, work, endpoint, posix_root, listing):
    """granaryd with both datasets prewarmed, granary-fuse over them, and the
    client's timed rounds (a list of pairs of epochs)."""
    procs = []
    try:
        data = os.path.join(work, "granaryd")
        os.makedirs(data)
        config = os.path.join(data, "granaryd.yaml")
        with open(config, "w") as f:
            f.write("s3_endpoints: [%s]\nsource_roots: [%s]\nfill: none\n"
                    % (endpoint, posix_root))
        socket_path = os.path.join(data, "granaryd.sock")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=KEY)
        procs.append(subprocess.Popen(
            [os.path.join(a.build, "granaryd"), "--config", config, "--data-dir", data,
             "--socket", socket_path, "--metrics-listen", "127.0.0.1:%d" % free_port()],
            env=env, stderr=open(os.path.join(data, "log"), "w")))
        wait_for(lambda: os.path.exists(socket_path), 30, "granaryd")
        time.sleep(0.5)
        cli = [os.path.join(a.build, "granary"), "--server", "unix:" + socket_path]
        quiet = {"check": True, "stdout": subprocess.DEVNULL}
        subprocess.run(cli + ["dataset", "add", "posix", posix_root], **quiet)
        subprocess.run(cli + ["dataset", "add", "s3", "s3://%s/data" % BUCKET, "--endpoint",
                              endpoint], **quiet)
        for dataset in ("posix", "s3"):
            subprocess.run(cli + ["prewarm", dataset, "--json"], **quiet)
        mount = os.path.join(work, "mnt")
        os.makedirs(mount)
        procs.append(subprocess.Popen(
            [os.path.join(a.build, "granary-fuse"), mount, "--server", "unix:" + socket_path,
             "--foreground", "--log-file", os.path.join(work, "granary-fuse.log")],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "granary-fuse.err"), "w")))
        first = listing[0][0]
        wait_for(lambda: all(os.path.exists(os.path.join(mount, d, first))
                             for d in ("posix", "s3")), 60, "granary-fuse mount")
        files = os.path.join(work, "files.tsv")
        with open(files, "w") as f:
            f.writelines("%s\t%d\n" % row for row in listing)
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "client", "--mount", mount, "--files",
             files, "--rounds", str(a.rounds), "--workers", str(a.workers), "--batch-size",
             str(a.batch_size)], check=True, capture_output=True, text=True).stdout
        subprocess.run(["fusermount3", "-u", mount], check=False)
        return [json.loads(line) for line in out.splitlines()]
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        return client_main(sys.argv[2:])
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--file-kib", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    a = parser.parse_args()
    work = tempfile.mkdtemp(prefix="granary-s3-loader-bench-")
    s3rver = None
    try:
        s3rver, endpoint = start_s3rver(os.path.join(work, "s3"), BUCKET)
        posix_root = os.path.join(work, "posix")
        rng = random.Random(7)
        listing = []
        for i in range(a.files):
            rel = "class%02d/%05d.jpg" % (i % 20, i)
            size = max(1, int(rng.lognormvariate(0, 0.5) * a.file_kib * 1024))
            os.makedirs(os.path.join(posix_root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(posix_root, rel), "wb") as f:
                f.write(os.urandom(size))
            listing.append((rel, size))
        for start in range(0, len(listing), UPLOADS_PER_CURL):
            cmd = signed_curl("-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-o", "/dev/null")
            for rel, _ in listing[start:start + UPLOADS_PER_CURL]:
                cmd += ["-T", os.path.join(posix_root, rel),
                        "%s/%s/data/%s" % (endpoint, BUCKET, rel)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        rounds = run_granary(a, work, endpoint, posix_root, listing)
        ratios = []
        for number, pair in enumerate(rounds, 1):
            rate = {epoch["dataset"]: epoch["samples_s"] for epoch in pair}
            ratios.append(rate["s3"] / rate["posix"])
            print("round %d: posix %.0f samples/s, s3 %.0f samples/s, ratio %.2f"
                  % (number, rate["posix"], rate["s3"], ratios[-1]), file=sys.stderr, flush=True)
        total_mib = sum(size for _, size in listing) / (1 << 20)
        print("%d files (%.0f MiB), %d rounds, %d workers: posix median %.0f samples/s, s3 "
              "median %.0f samples/s, ratio s3/posix median %.2f (min %.2f, max %.2f)"
              % (a.files, total_mib, a.rounds, a.workers,
                 statistics.median(p[0]["samples_s"] if p[0]["dataset"] == "posix"
                                   else p[1]["samples_s"] for p in rounds),
                 statistics.median(p[0]["samples_s"] if p[0]["dataset"] == "s3"
                                   else p[1]["samples_s"] for p in rounds),
                 statistics.median(ratios), min(ratios), max(ratios)))
        return 0
    finally:
        if s3rver is not None and s3rver.poll() is None:
            s3rver.kill()
            s3rver.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
