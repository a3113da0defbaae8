#!/usr/bin/python3
"""Small files read one at a time against in one call: the Python client's batches
(`fsspec.filesystem("granary").cat(paths)`, `granary.Client.read_many`) against a loop
of `open().read()` through Granary's mount and over the same files on the local disk.

One granaryd (a data directory of its own on the root disk) holds a dataset of
--files files of --size-kib KiB (random bytes, generated once under --workdir) after
a prewarm; granary-fuse mounts it. Each round reads every file once with each reader,
in an order that alternates from round to round, with the page cache dropped before
each reader (--drop) or warm (the round before read the same files), and checks every
file's bytes against the source's XXH3-64. Prints one JSON document: per reader the
median seconds, and the ratios to the local disk and to the mount.

Usage (root): /usr/bin/python3 bench/client/small_files_bench.py --build build-release
    [--files 1000] [--size-kib 110] [--rounds 5] [--drop]
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from bench_util import wait_for  # noqa: E402

DATASET = "small"


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def generate(source, files, size):
    marker = os.path.join(source, ".complete-%d-%d" % (files, size))
    if os.path.exists(marker):
        return
    shutil.rmtree(source, ignore_errors=True)
    rng = random.Random(7)
    for i in range(files):
        path = os.path.join(source, "d%02d" % (i % 50), "f%05d.bin" % i)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(rng.randbytes(size - 4096 + rng.randrange(8192)))
    open(marker, "w").close()


def cat_in_order(fs, urls):
    """fs.cat(urls) (one batch) as a list in the order of `urls`; fsspec keys its answer by
    path without the protocol."""
    got = fs.cat(urls)
    return [got[u] if u in got else got[fs._strip_protocol(u)] for u in urls]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build-release")
    p.add_argument("--workdir", default="/var/tmp/granary-small-files")
    p.add_argument("--files", type=int, default=1000)
    p.add_argument("--size-kib", type=int, default=110)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--drop", action="store_true", help="drop the page cache before each read")
    a = p.parse_args()
    build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(build, "python"))
    import fsspec
    import xxhash
    import granary

    source = os.path.join(a.workdir, "source")
    generate(source, a.files, a.size_kib * 1024)
    rels = sorted(os.path.relpath(os.path.join(d, f), source)
                  for d, _, fs in os.walk(source) for f in fs if not f.startswith("."))
    digests = {}
    for rel in rels:
        with open(os.path.join(source, rel), "rb") as f:
            digests[rel] = xxhash.xxh3_64_intdigest(f.read())

    data = os.path.join(a.workdir, "granary-data")
    mnt = os.path.join(a.workdir, "mnt")
    subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    os.makedirs(mnt, exist_ok=True)
    sock = os.path.join(data, "granaryd.sock")
    log = open(os.path.join(a.workdir, "granaryd.log"), "w")
    server = subprocess.Popen([os.path.join(build, "granaryd"), "--data-dir", data, "--socket",
                               sock, "--metrics-listen", "127.0.0.1:0", "--capacity", "4GiB",
                               "--source-root", "/"], stdout=log, stderr=subprocess.STDOUT)
    cli = [os.path.join(build, "granary"), "--server", "unix:" + sock]
    fuse = None
    try:
        wait_for(lambda: os.path.exists(sock), 30, "granaryd's socket")
        time.sleep(0.5)
        subprocess.run(cli + ["dataset", "add", DATASET, source], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(cli + ["prewarm", DATASET], check=True, stdout=subprocess.DEVNULL)
        fuse = subprocess.Popen([os.path.join(build, "granary-fuse"), mnt, "--server",
                                 "unix:" + sock, "--foreground"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.isdir(os.path.join(mnt, DATASET)), 30, "the mount")

        urls = ["granary://%s/%s" % (DATASET, rel) for rel in rels]

        def loop(root):
            out = []
            for rel in rels:
                with open(os.path.join(root, rel), "rb") as f:
                    out.append(f.read())
            return out

        os.environ["GRANARY_SOCKET"] = sock
        client = granary.Client(sock)
        fs = fsspec.filesystem("granary")
        readers = {
            "local disk, open().read() loop": lambda: loop(source),
            "Granary mount, open().read() loop": lambda: loop(os.path.join(mnt, DATASET)),
            "fsspec granary:// cat": lambda: cat_in_order(fs, urls),
            "granary.Client.read_many": lambda: client.read_many(DATASET, rels),
        }
        times = {name: [] for name in readers}
        names = list(readers)
        for r in range(a.rounds + 1):  # the first round warms, and is not counted
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                if a.drop:
                    drop_caches()
                start = time.perf_counter()
                read = readers[name]()
                seconds = time.perf_counter() - start
                bad = sum(1 for rel, b in zip(rels, read) if xxhash.xxh3_64_intdigest(b) !=
                          digests[rel])
                if bad:
                    raise SystemExit("%s: %d files differ from the source" % (name, bad))
                if r > 0:
                    times[name].append(seconds)
        medians = {name: statistics.median(t) for name, t in times.items()}
        local = medians[names[0]]
        mount = medians[names[1]]
        print(json.dumps({
            "files": len(rels), "size_kib": a.size_kib, "rounds": a.rounds,
            "page_cache": "dropped before each read" if a.drop else "warm",
            "seconds": times,
            "median_seconds": medians,
            "local_disk_over": {n: local / m for n, m in medians.items()},
            "mount_over": {n: mount / m for n, m in medians.items()},
        }, indent=1))
    finally:
        if fuse:
            subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
            fuse.terminate()
            fuse.wait()
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
