"""A training job's reads while granary-fuse is killed, restarted and taken
over under it: a PyTorch DataLoader (4 workers) reads every file under
MOUNT_DIR in random order, epoch after epoch, until STOP_FILE exists (and at
least one epoch after that). Each worker keeps the last few files it opened
open and reads their second halves items later (so descriptors span the
restarts), opening each again before closing it, and holds MMAP_FILE mapped, checking a random slice of it with
every item. Every byte is compared with the same file under SOURCE_DIR.

Prints one JSON object: files read, reads, errors, wrong reads, the first
errors, and the longest a single read or open took (the stall a restart
causes)."""
import collections
import json
import mmap
import os
import random
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, get_worker_info

KEEP_OPEN = 4


class Reads(Dataset):
    def __init__(self, mount_dir, source_dir, mmap_name):
        self.mount_dir = mount_dir
        self.source_dir = source_dir
        self.mmap_name = mmap_name
        self.names = sorted(n for n in os.listdir(source_dir) if n != mmap_name)
        self.worker = None

    def __len__(self):
        return len(self.names)

    def setup(self):
        mapped = open(os.path.join(self.mount_dir, self.mmap_name), "rb")
        self.worker = {
            "open": collections.deque(),
            "mapped_file": mapped,
            "mapped": mmap.mmap(mapped.fileno(), 0, prot=mmap.PROT_READ),
            "mapped_source": open(os.path.join(self.source_dir, self.mmap_name), "rb").read(),
            "random": random.Random(os.getpid()),
        }

    def timed(self, stats, what, action):
        start = time.monotonic()
        try:
            return action()
        except OSError as error:
            stats["errors"] += 1
            if len(stats["first_errors"]) < 5:
                stats["first_errors"].append(f"{what}: {error}")
            return None
        finally:
            stats["slowest"] = max(stats["slowest"], time.monotonic() - start)
            stats["reads"] += 1

    def source(self, name):
        with open(os.path.join(self.source_dir, name), "rb") as f:
            return f.read()

    def check(self, stats, name, got, want):
        if got is not None and got != want:
            stats["wrong"] += 1
            if len(stats["first_errors"]) < 5:
                stats["first_errors"].append(f"{name}: wrong bytes")

    def __getitem__(self, index):
        if self.worker is None:
            self.setup()
        w = self.worker
        stats = {"reads": 0, "errors": 0, "wrong": 0, "slowest": 0.0, "first_errors": []}
        name = self.names[index]
        want = self.source(name)
        half = len(want) // 2
        f = self.timed(stats, name, lambda: open(os.path.join(self.mount_dir, name), "rb"))
        if f is not None:
            self.check(stats, name, self.timed(stats, name, lambda: os.pread(f.fileno(), half, 0)),
                       want[:half])
            w["open"].append((name, f, want))
        while len(w["open"]) > KEEP_OPEN or (w["open"] and f is None):
            old_name, old, old_want = w["open"].popleft()
            rest = len(old_want) - len(old_want) // 2
            # Past the page cache, so the read reaches the mount.
            os.posix_fadvise(old.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            got = self.timed(stats, old_name,
                             lambda: os.pread(old.fileno(), rest, len(old_want) // 2))
            self.check(stats, old_name, got, old_want[len(old_want) // 2:])
            # Opened again while still open: in the mode the kernel holds it in.
            again = self.timed(stats, old_name,
                               lambda: open(os.path.join(self.mount_dir, old_name), "rb"))
            if again is not None:
                self.check(stats, old_name, self.timed(stats, old_name, again.read), old_want)
                again.close()
            old.close()
        source = w["mapped_source"]
        offset = w["random"].randrange(0, max(1, len(source) - 65536))
        w["mapped"].madvise(mmap.MADV_DONTNEED)
        os.posix_fadvise(w["mapped_file"].fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        got = self.timed(stats, self.mmap_name, lambda: w["mapped"][offset:offset + 65536])
        self.check(stats, self.mmap_name, got, source[offset:offset + 65536])
        return json.dumps(stats)


def main():
    mount_dir, source_dir, mmap_name, stop_file = sys.argv[1:5]
    dataset = Reads(mount_dir, source_dir, mmap_name)
    total = {"files": 0, "epochs": 0, "reads": 0, "errors": 0, "wrong": 0, "slowest": 0.0,
             "first_errors": []}
    stopped_epochs = 0
    while stopped_epochs < 1:
        stopping = os.path.exists(stop_file)
        loader = DataLoader(dataset, batch_size=None, sampler=RandomSampler(dataset),
                            num_workers=4)
        for item in loader:
            stats = json.loads(item)
            total["files"] += 1
            for key in ("reads", "errors", "wrong"):
                total[key] += stats[key]
            total["slowest"] = max(total["slowest"], stats["slowest"])
            total["first_errors"] += stats["first_errors"][:5 - len(total["first_errors"])]
        total["epochs"] += 1
        if stopping:
            stopped_epochs += 1
    print(json.dumps(total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
