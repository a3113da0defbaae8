"""Reads every file under MOUNT_DIR through a PyTorch DataLoader (random
sampler, two worker processes) and checks each sample's SHA-256 against the
same file under SOURCE_DIR. Prints "ok N" and exits 0 when all match."""
import hashlib
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler


class Files(Dataset):
    def __init__(self, root):
        self.root = root
        self.names = sorted(os.listdir(root))

    def __len__(self):
        return len(self.names)

    def __getitem__(self, index):
        with open(os.path.join(self.root, self.names[index]), "rb") as f:
            data = f.read()
        return index, torch.frombuffer(bytearray(hashlib.sha256(data).digest()), dtype=torch.uint8)


def main():
    mount_dir, source_dir = sys.argv[1], sys.argv[2]
    dataset = Files(mount_dir)
    loader = DataLoader(dataset, batch_size=8, sampler=RandomSampler(dataset), num_workers=2)
    seen = 0
    for indices, digests in loader:
        for index, digest in zip(indices.tolist(), digests):
            with open(os.path.join(source_dir, dataset.names[index]), "rb") as f:
                want = hashlib.sha256(f.read()).digest()
            if bytes(digest.tolist()) != want:
                print("mismatch", dataset.names[index])
                return 1
            seen += 1
    if seen != len(dataset) or seen == 0:
        print("saw", seen, "of", len(dataset))
        return 1
    print("ok", seen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
