"""A training job of the soak: a PyTorch DataLoader (2 workers) reading files
of one dataset through a granary-fuse mount, every byte checked against the
oracle. Prints one JSON read record a line (see granary_soak/reads.py), its
times in seconds since the harness's start.

Usage: loader_job.py START_MONOTONIC MOUNT DATASET JOB_JSON
where JOB_JSON is a list of [path, size, revision the harness expects].
"""
import json
import os
import sys
import time

from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from granary_soak import reads  # noqa: E402


class Files(Dataset):
    def __init__(self, start, mount, name, files):
        self.start, self.mount, self.name, self.files = start, mount, name, files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        path, size, guess = self.files[index]
        return reads.read_file(self.mount, self.name, path, size, [(0, size)], guess,
                               lambda: round(time.monotonic() - self.start, 4))


def main():
    start, mount, name = float(sys.argv[1]), sys.argv[2], sys.argv[3]
    files = json.loads(sys.argv[4])
    loader = DataLoader(Files(start, mount, name, files), batch_size=2, num_workers=2,
                        collate_fn=list, shuffle=True)
    for batch in loader:
        for record in batch:
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
