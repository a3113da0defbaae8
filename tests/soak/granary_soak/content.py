"""The oracle: what every byte of every file of every dataset version is.

A file revision is named by a 64-bit seed derived from (dataset, path,
revision); its bytes are the fault suite's word pattern
(tests/faults/fault_support.cc, ExpectedBytes): the 8-byte word at index i is
splitmix64(seed * 0x100000001B3 ^ splitmix64(i)), little-endian. Any range of
any revision can be recomputed without reading anything, and a byte of another
file, offset or revision cannot pass for the right one.
"""
import hashlib

import numpy as np

_MASK = (1 << 64) - 1


def _splitmix64(x):
    """splitmix64 of a uint64 array (numpy wraps modulo 2**64)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def seed_of(dataset, path, revision):
    """The seed of revision `revision` of `path` in `dataset`."""
    digest = hashlib.blake2b(f"{dataset}\0{path}\0{revision}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") or 1


def expected_bytes(seed, offset, length):
    """Bytes [offset, offset + length) of the revision with `seed`."""
    if length <= 0:
        return b""
    first, last = offset // 8, (offset + length + 7) // 8
    with np.errstate(over="ignore"):
        indices = np.arange(first, last, dtype=np.uint64)
        words = _splitmix64(np.uint64((seed * 0x100000001B3) & _MASK) ^ _splitmix64(indices))
    raw = words.astype("<u8").tobytes()
    skip = offset - first * 8
    return raw[skip:skip + length]


def write_file(path, seed, size, block=8 << 20):
    """Writes revision `seed` of `size` bytes to `path`."""
    with open(path, "wb") as out:
        for at in range(0, size, block):
            out.write(expected_bytes(seed, at, min(block, size - at)))


def first_difference(got, want):
    """Offset of the first byte where `got` and `want` differ, or None."""
    if got == want:
        return None
    a = np.frombuffer(got[:len(want)], dtype=np.uint8)
    b = np.frombuffer(want[:len(got)], dtype=np.uint8)
    differing = np.nonzero(a != b)[0]
    return int(differing[0]) if differing.size else min(len(got), len(want))
