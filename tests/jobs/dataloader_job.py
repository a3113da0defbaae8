"""A training job's data loading, as slurm_dataloader_test.sh runs it in a
Slurm allocation: a PyTorch DataLoader with 4 worker processes reads every
file beneath DIR once, each worker timing its own open() and read() calls.

The files are listed (and each one stat'ed) before loading starts, as a
dataset class does when it indexes its files, so the workers' opens find
their names already looked up.

Prints one JSON object: the Slurm job id, the files and bytes read, the
seconds the workers spent inside open() and read() (summed over files), and
the loading's wall time.

Usage: python3 dataloader_job.py DIR
"""
import json
import os
import sys
import time

import torch.utils.data


class TimedFiles(torch.utils.data.Dataset):
    """Each item is one whole file: its size and the time spent opening and
    reading it."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        start = time.perf_counter()
        fd = os.open(self.paths[index], os.O_RDONLY)
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
        spent = time.perf_counter() - start
        os.close(fd)
        return size, spent


def main():
    root = sys.argv[1]
    paths = sorted(os.path.join(parent, name)
                   for parent, _, names in os.walk(root) for name in names)
    for path in paths:
        os.stat(path)
    loader = torch.utils.data.DataLoader(TimedFiles(paths), batch_size=None, shuffle=True,
                                         num_workers=4)
    start = time.perf_counter()
    files = size = 0
    inside = 0.0
    for file_size, spent in loader:
        files += 1
        size += file_size
        inside += spent
    print(json.dumps({"job": os.environ["SLURM_JOB_ID"], "files": files, "bytes": size,
                      "inside_seconds": inside, "wall_seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
