"""The soak's datasets: a dozen sources of three shapes (many small files,
large shards, a nested mix), with the revision of every file the source
holds now. Nine are POSIX trees; the last of each shape is a prefix of a
bucket of the object store (s3.py). A refresh rewrites a few files with
their next revision (a new file renamed over the old, as a writer of a
shared filesystem would; a PUT of the object, as an S3 writer would); the
oracle (content.py) knows every revision's bytes.

Thread-safety: revisions are read by reader threads while the nemesis
changes them; `lock` guards them.
"""
import os
import random
import threading

from . import content

MIB = 1 << 20
# Revisions a reader tries before calling bytes wrong: more than any run makes.
MAX_REVISIONS = 64
# Names of the datasets that live in the object store begin with this.
S3_PREFIX = "s3-"


class Dataset:
    def __init__(self, name, chunk_size, files):
        self.name = name
        self.chunk_size = chunk_size
        self.files = files  # path -> size
        self.paths = sorted(files)
        self.in_s3 = name.startswith(S3_PREFIX)


def _names(shape, count):
    """`count` names of a shape: POSIX ones numbered, the last in S3."""
    return [f"{shape}{i}" for i in range(count - 1)] + [f"{S3_PREFIX}{shape}"]


def plan(seed, total_bytes):
    """Twelve datasets whose sizes add up to about `total_bytes`."""
    rng = random.Random(seed)
    share = total_bytes // 12
    datasets = []
    for name in _names("images", 6):
        files, size = {}, 0
        while size < share:
            length = rng.randrange(48 << 10, 320 << 10)
            files[f"train/{len(files) // 100:02d}/img{len(files):05d}.jpg"] = length
            size += length
        datasets.append(Dataset(name, MIB, files))
    for name in _names("shards", 4):
        count = max(1, share // (8 * MIB))
        files = {f"shard-{j:04d}.tar": 8 * MIB - rng.randrange(0, 1 << 16) for j in range(count)}
        datasets.append(Dataset(name, 4 * MIB, files))
    for name in _names("mixed", 2):
        files, size = {}, 0
        while size < share:
            length = rng.choice([rng.randrange(1, 4096), rng.randrange(4096, MIB),
                                 rng.randrange(MIB, 6 * MIB)])
            depth = "/".join(f"d{rng.randrange(3)}" for _ in range(rng.randrange(1, 4)))
            files[f"{depth}/f{len(files):04d}.bin"] = length
            size += length
        datasets.append(Dataset(name, 2 * MIB, files))
    return datasets


class World:
    """The POSIX source trees under `root`, the S3 datasets' objects in
    `store` (an s3.ObjectStore, under the dataset's name), and the revision
    each file has now."""

    def __init__(self, root, datasets, store):
        self.root = root
        self.store = store
        self.datasets = {d.name: d for d in datasets}
        self.revision = {(d.name, p): 0 for d in datasets for p in d.paths}
        self.lock = threading.Lock()

    def source(self, name):
        """The words of `granary dataset add` that name the dataset's source."""
        if self.datasets[name].in_s3:
            return self.store.source_args(name)
        return [os.path.join(self.root, name)]

    def s3_names(self):
        return sorted(name for name, d in self.datasets.items() if d.in_s3)

    def total_bytes(self):
        return sum(sum(d.files.values()) for d in self.datasets.values())

    def write_all(self):
        for d in self.datasets.values():
            for path in d.paths:
                self._write(d, path, 0)

    def _write(self, dataset, path, revision):
        seed = content.seed_of(dataset.name, path, revision)
        if dataset.in_s3:
            self.store.put(f"{dataset.name}/{path}",
                           content.expected_bytes(seed, 0, dataset.files[path]))
            return
        target = os.path.join(self.root, dataset.name, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        staged = target + ".new"
        content.write_file(staged, seed, dataset.files[path])
        os.rename(staged, target)

    def change(self, name, rng, fraction=0.05):
        """Rewrites some files of `name` with their next revision; {path: revision}."""
        dataset = self.datasets[name]
        count = max(2, int(len(dataset.paths) * fraction))
        changed = {}
        for path in rng.sample(dataset.paths, min(count, len(dataset.paths))):
            with self.lock:
                revision = self.revision[(name, path)] + 1
                self.revision[(name, path)] = revision
            self._write(dataset, path, revision)
            changed[path] = revision
        return changed

    def current(self, name, path):
        with self.lock:
            return self.revision[(name, path)]


def identify(name, path, offset, data, guess):
    """The revision of `name`/`path` whose bytes at `offset` are `data`
    (`guess` tried first), or None when no revision's are."""
    order = [guess] + [r for r in range(guess, -1, -1) if r != guess]
    order += range(guess + 1, MAX_REVISIONS)
    for revision in order:
        seed = content.seed_of(name, path, revision)
        if content.expected_bytes(seed, offset, len(data)) == data:
            return revision
    return None
