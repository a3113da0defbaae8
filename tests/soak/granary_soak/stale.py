"""The test-only fault that proves the checker fails when it should: a node
is made to serve a stale version, with no hook in the product.

After a refresh changed some files of a dataset, the fault reads each changed
file through the mount of a node until that node's cache holds one of them
whole (a data file with the new revision's bytes), then writes the previous
revision's bytes into that data file's blocks on the cache disk's image,
below the filesystem, so that the data file's ctime stays what granaryd
verified, and drops the file's pages. The kernel then serves the old bytes
to opens passed through to the data file: bit rot that happens to be the
previous version. The fault reads the file through the mount again; the
checker must judge those reads stale and name them.
"""
import os
import re
import subprocess
import time

from . import checker, content, reads


def _data_files(cache_dir, size):
    for folder, _, names in os.walk(cache_dir):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".dat") and os.path.getsize(path) == size:
                yield path


def _holding(cache_dir, seed, size):
    want = content.expected_bytes(seed, 0, size)
    for path in _data_files(cache_dir, size):
        with open(path, "rb") as f:
            if f.read() == want:
                return path
    return None


def _extents(path):
    """[(logical byte, physical byte, length)] of `path` on its filesystem."""
    done = subprocess.run(["/usr/sbin/filefrag", "-v", "-b4096", path], capture_output=True,
                          text=True, check=True)
    extents = []
    for line in done.stdout.splitlines():
        match = re.match(r"\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\.\s*\d+:\s+(\d+):", line)
        if match:
            logical, _, physical, length = (int(g) for g in match.groups())
            extents.append((logical * 4096, physical * 4096, length * 4096))
    return extents


def _drop_pages(path, sync):
    fd = os.open(path, os.O_RDONLY)
    try:
        if sync:  # Allocates delayed blocks, so that the extents are on the disk.
            os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _overwrite_below_filesystem(image, data_file, old_bytes):
    _drop_pages(data_file, sync=True)
    with open(image, "r+b") as disk:
        for logical, physical, length in _extents(data_file):
            part = old_bytes[logical:logical + length]
            if part:
                disk.seek(physical)
                disk.write(part)
        disk.flush()
        os.fsync(disk.fileno())
    _drop_pages(data_file, sync=False)
    with open(data_file, "rb") as f:
        if f.read() != old_bytes:
            raise RuntimeError(f"the old bytes written below {data_file} do not read back")


def serve_stale(ctx, mount_index):
    mount = ctx.cluster.mounts[mount_index]
    node = mount.node
    world = ctx.world
    candidates = [(name, path) for (name, path), revision in sorted(world.revision.items())
                  if revision > 0]
    if not candidates:
        raise RuntimeError("serve_stale needs a refresh before it")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for name, path in candidates:
            size = world.datasets[name].files[path]
            revision = world.current(name, path)
            reads.read_file(mount.path, name, path, size, [(0, size)], revision, ctx.history.now)
            held = _holding(node.disk.path, content.seed_of(name, path, revision), size)
            if held is None:
                continue
            old = content.expected_bytes(content.seed_of(name, path, revision - 1), 0, size)
            _overwrite_below_filesystem(node.disk.image, held, old)
            # Past the time mounts may still show the old version after a refresh.
            time.sleep(checker.SETTLE + 1)
            for _ in range(3):
                record = reads.read_file(mount.path, name, path, size, [(0, size)], revision,
                                         ctx.history.now)
                ctx.history.record("read", job="stale-probe", via=f"mount {node.id}", **record)
            return {"stale_file": f"{name}/{path}", "data_file": held,
                    "written_revision": revision - 1}
        time.sleep(1)
    raise RuntimeError(f"no changed file came to be held whole on {node.id} within 60 s")
