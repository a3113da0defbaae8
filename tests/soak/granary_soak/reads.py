"""One checked read of one file: open, a few preads, close, each range
compared with the oracle. Shared by the harness's reader threads and the
DataLoader job's workers, so that both record reads the same way.

A read's record names the revisions its bytes matched (all ranges of one
open must match one), the first wrong offset if none did, the errno's name
if a call failed, and how long the slowest call took.
"""
import errno
import os
import time

from . import datasets


def read_file(root, name, path, size, ranges, guess, clock):
    """Reads `ranges` [(offset, length)] of `root`/`name`/`path`; the record."""
    record = {"dataset": name, "path": path, "t_open": clock(), "ops": 0, "bytes": 0,
              "revisions": [], "slowest": 0.0}
    fd = None
    try:
        started = time.monotonic()
        fd = os.open(os.path.join(root, name, path), os.O_RDONLY | os.O_CLOEXEC)
        record["slowest"] = time.monotonic() - started
        for offset, length in ranges:
            started = time.monotonic()
            data = _pread_fully(fd, offset, length)
            record["slowest"] = max(record["slowest"], time.monotonic() - started)
            record["ops"] += 1
            record["bytes"] += len(data)
            want = max(0, min(length, size - offset))
            if len(data) != want:
                record["wrong"] = {"offset": offset + len(data),
                                   "why": f"{len(data)} bytes of {want}"}
                break
            revision = datasets.identify(name, path, offset, data, guess)
            if revision is None:
                record["wrong"] = {"offset": offset, "why": "bytes of no revision"}
                break
            if revision not in record["revisions"]:
                record["revisions"].append(revision)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError as error:
        record["error"] = errno.errorcode.get(error.errno, str(error.errno))
        record["error_text"] = str(error)
    finally:
        if fd is not None:
            os.close(fd)
    record["t_end"] = clock()
    return record


def _pread_fully(fd, offset, length):
    parts, done = [], 0
    while done < length:
        part = os.pread(fd, min(length - done, 1 << 20), offset + done)
        if not part:
            break
        parts.append(part)
        done += len(part)
    return b"".join(parts)
