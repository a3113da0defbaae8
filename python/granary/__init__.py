"""Granary for Python: read the datasets a node's granaryd caches.

    import granary

    client = granary.Client()  # $GRANARY_SOCKET, else the node's granaryd
    images = client.read_many("imagenet", ["train/n01/a.jpg", "train/n01/b.jpg"])
    with client.open("imagenet", "train/labels.csv") as f:
        header = f.readline()

``Client.read_many`` reads a batch of whole files: one request to granaryd
for up to 128 files, which checks each file against the caller's uid and
groups, fetches the files it lacks and hands over its verified copies; then
every read of the batch is in flight at once. Each file is read straight
into the bytes object returned for it. ``Client.open`` gives a seekable
binary file for ranged reads of a single file, large or small.

Datasets are named by name and read at their current version. Paths are
relative to the dataset's root, '/'-separated, without a leading slash.

The same datasets are reachable as fsspec's ``granary://DATASET/PATH``
(granary.fsspec: pandas, Dask, ...) and as PyTorch map datasets that read a
batch per call (granary.torch).

Errors are Python's own exceptions naming the path: FileNotFoundError,
PermissionError, ValueError (a directory or symlink where a regular file was
asked for), ConnectionError (granaryd unreachable, or a fetch that may
succeed when tried again), TimeoutError, and OSError otherwise.

Thread-safety: a Client may be used from several threads at once, and the
calls that wait on granaryd or the disk release the GIL. A Client made
before a fork (DataLoader workers) keeps working in the child, which
connects again; a pickled Client is unpickled as a new one with the same
settings.
"""

import bisect
import errno
import io
import itertools
import os

# gRPC reads this when it starts (the first listing starts it), and only
# with it does a process that used gRPC stay usable across fork(), as every
# DataLoader worker is made.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "true")

from granary import _granary  # noqa: E402 (after the environment is set)

__version__ = _granary.__version__
__all__ = ["Client", "GranaryReader"]


class Client:
    """A connection to the node's granaryd, made on first use.

    Args:
        socket: granaryd's Unix socket; None: $GRANARY_SOCKET, else the
            node's granaryd (/run/granary/granaryd.sock) when it runs, else
            the caller's own granaryd's default socket.
        read_through: whether granaryd fetches the files of a batch it does
            not hold yet before answering (the default); False: files it
            lacks are read by ranges, which granaryd fetches chunk by chunk.
    """

    def __init__(self, socket=None, read_through=True):
        self.socket = None if socket is None else os.fspath(socket)
        self.read_through = read_through
        self._native = _granary.Client(self.socket or "", read_through)
        # Dataset name -> _Listing, loaded on first use (see invalidate()).
        self._listings = {}

    def __reduce__(self):
        return Client, (self.socket, self.read_through)

    def __repr__(self):
        return f"granary.Client(socket={self.socket!r}, read_through={self.read_through!r})"

    def read_many(self, dataset, paths, errors="raise"):
        """The bytes of each file of `paths` (of `dataset`), in order.

        errors="raise" raises the exception of the first file that cannot be
        read, before any file is read; errors="return" puts each failed
        file's exception in its place in the list and reads the others. An
        unknown dataset, or granaryd out of reach, raises either way.
        """
        if not isinstance(paths, (list, tuple)):
            paths = list(paths)
        return self._native.read_many(dataset, paths, errors)

    def open(self, dataset, path, buffer_size=io.DEFAULT_BUFFER_SIZE):
        """The file `path` of `dataset`, open for reading: a seekable binary
        io.BufferedReader (with a `size` attribute). It reads the dataset's
        version current when it was opened, however long it stays open."""
        return GranaryReader(_RawFile(self._native.open_file(dataset, path), path), buffer_size)

    def datasets(self):
        """The names of the datasets granaryd has."""
        return self._native.datasets()

    def ls(self, dataset, path="", detail=False):
        """The entries of directory `path` of `dataset` (its root by
        default), sorted by path; for a file, that file alone. With
        detail=False their paths, else dicts as info() returns.

        Listings are loaded once per dataset and kept: invalidate() drops
        them (after a `granary dataset refresh`, say).
        """
        path = path.strip("/")
        listing = self._listing(dataset)
        row = listing.find(dataset, path)
        if row[2] != "directory":
            names = [path]
        else:
            names = listing.children.get(path, [])
        if not detail:
            return list(names)
        return [_entry(listing.entries[name]) for name in names]

    def info(self, dataset, path=""):
        """The entry `path` of `dataset` ('' is the root): a dict with name
        (its path), size, type ('file', 'directory' or 'symlink'), mode
        (st_mode) and mtime_ns."""
        path = path.strip("/")
        return _entry(self._listing(dataset).find(dataset, path))

    def find(self, dataset, path=""):
        """The paths of the regular files under directory `path` of
        `dataset` (at any depth), sorted; for a regular file, that file."""
        path = path.strip("/")
        listing = self._listing(dataset)
        kind = listing.find(dataset, path)[2]
        if kind != "directory":
            return [path] if kind == "file" else []
        prefix = path + "/" if path else ""
        files = []
        # Sorted by path, the entries under `path` are those from `prefix`
        # on that start with it.
        for under in itertools.islice(
            listing.paths, bisect.bisect_left(listing.paths, prefix), None
        ):
            if not under.startswith(prefix):
                break
            if listing.entries[under][2] == "file":
                files.append(under)
        return files

    def invalidate(self, dataset=None):
        """Drops the listing kept of `dataset` (of every dataset: None)."""
        if dataset is None:
            self._listings.clear()
        else:
            self._listings.pop(dataset, None)

    def _listing(self, dataset):
        listing = self._listings.get(dataset)
        if listing is None:
            # Two threads may both load it; the last one kept is as good.
            listing = _Listing(self._native.list(dataset))
            self._listings[dataset] = listing
        return listing


class _Listing:
    """A dataset's entries by path, and each directory's children."""

    __slots__ = ("entries", "paths", "children")

    def __init__(self, rows):
        # rows: (path, size, type, mode, mtime_ns), sorted by path, so that
        # each directory's children come out sorted too.
        self.entries = {}
        self.children = {}
        for row in rows:
            path = row[0]
            self.entries[path] = row
            if path:
                self.children.setdefault(path.rpartition("/")[0], []).append(path)
        self.paths = list(self.entries)

    def find(self, dataset, path):
        row = self.entries.get(path)
        if row is None:
            raise FileNotFoundError(
                errno.ENOENT, f"dataset '{dataset}' has no entry '{path}'", path
            )
        return row


def _entry(row):
    path, size, kind, mode, mtime_ns = row
    return {"name": path, "size": size, "type": kind, "mode": mode, "mtime_ns": mtime_ns}


class GranaryReader(io.BufferedReader):
    """What Client.open returns: an io.BufferedReader that also knows the
    file's size."""

    @property
    def size(self):
        return self.raw.size


class _RawFile(io.RawIOBase):
    """One file of a dataset as an unbuffered binary file: each read is a
    ranged read of libgranary's file (granaryd's verified copy when it handed
    one over, else chunks over gRPC)."""

    mode = "rb"

    def __init__(self, file, name):
        super().__init__()
        self._file = file
        self._position = 0
        self.name = name

    @property
    def size(self):
        return self._file.size

    def readable(self):
        self._check_open()
        return True

    def seekable(self):
        self._check_open()
        return True

    def readinto(self, buffer):
        self._check_open()
        read = self._file.read_at(self._position, buffer)
        self._position += read
        return read

    def read(self, size=-1):
        # Into a bytes object of its own rather than through readinto(),
        # which would copy the bytes once more.
        self._check_open()
        if size is None or size < 0:
            size = max(0, self._file.size - self._position)
        data = self._file.read(self._position, size)
        self._position += len(data)
        return data

    def readall(self):
        return self.read()

    def seek(self, offset, whence=io.SEEK_SET):
        self._check_open()
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = self._file.size + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if position < 0:
            raise OSError(errno.EINVAL, f"negative seek position {position}", self.name)
        self._position = position
        return position

    def tell(self):
        self._check_open()
        return self._position

    def close(self):
        super().close()
        # Closes the descriptor of granaryd's copy now, not when collected.
        self._file = None

    def _check_open(self):
        if self.closed:
            raise ValueError("I/O operation on closed file")


try:
    import fsspec as _fsspec
except ImportError:
    pass
else:
    # By name: granary.fsspec is imported when granary:// is first used.
    _fsspec.register_implementation("granary", "granary.fsspec.GranaryFileSystem")
