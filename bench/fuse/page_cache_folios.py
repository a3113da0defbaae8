#!/usr/bin/env python3
"""How the kernel holds a file's page cache: counts of 4 KiB pages that are
alone (order-0 folios) or part of a large folio, over the file's first pages.

  /usr/bin/python3 bench/fuse/page_cache_folios.py FILE [FILE...] [--pages 4096]

Needs root (it reads /proc/self/pagemap and /proc/kpageflags). Each file is
mapped and its pages touched, so they are resident when counted; read the file
first, the way it is read in the benchmark, so the page cache holds it as that
read left it. Used to compare a file read through granary-fuse with the same
bytes on ext4 (bench/RESULTS.md, issue 4).
"""
import argparse
import ctypes
import mmap
import os
import struct

PAGE = 4096
KPF_COMPOUND_HEAD = 1 << 15
KPF_COMPOUND_TAIL = 1 << 16


def folio_counts(path, pages):
    size = min(pages * PAGE, os.path.getsize(path)) // PAGE * PAGE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        start = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    if start == ctypes.c_void_p(-1).value:
        raise SystemExit("cannot map %s: %s" % (path, os.strerror(ctypes.get_errno())))
    mapped = ctypes.cast(start, ctypes.POINTER(ctypes.c_ubyte))
    for page in range(size // PAGE):
        mapped[page * PAGE]  # Fault the page in.
    counts = {"alone": 0, "in large folios": 0, "not resident": 0}
    with open("/proc/self/pagemap", "rb") as pagemap, open("/proc/kpageflags", "rb") as flags:
        for page in range(size // PAGE):
            pagemap.seek((start // PAGE + page) * 8)
            entry = struct.unpack("<Q", pagemap.read(8))[0]
            if not entry >> 63:
                counts["not resident"] += 1
                continue
            flags.seek((entry & ((1 << 55) - 1)) * 8)
            page_flags = struct.unpack("<Q", flags.read(8))[0]
            large = page_flags & (KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL)
            counts["in large folios" if large else "alone"] += 1
    libc.munmap(start, size)
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+")
    parser.add_argument("--pages", type=int, default=4096)
    args = parser.parse_args()
    for path in args.files:
        counts = folio_counts(path, args.pages)
        print("%s: %s" % (path, ", ".join("%d %s" % (n, what) for what, n in counts.items())))


if __name__ == "__main__":
    main()
