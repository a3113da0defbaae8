"""fsspec's granary:// protocol: the datasets of the node's granaryd as a
read-only file system, for pandas, Dask and whatever else opens fsspec URLs.

    import fsspec, pandas

    frame = pandas.read_csv("granary://tables/2024/sales.csv")
    fs = fsspec.filesystem("granary")
    blobs = fs.cat(["imagenet/train/n01/a.jpg", "imagenet/train/n01/b.jpg"])

A URL is granary://DATASET/PATH; the file system's root lists the datasets
as directories. Storage options: socket and read_through, as
granary.Client takes them (by default, $GRANARY_SOCKET or the node's
granaryd).

``cat`` of many files reads each dataset's files as one batch
(granary.Client.read_many) rather than file by file. ``open`` gives the
seekable reader of granary.Client.open. Listings come from the dataset's
manifest, loaded once per file system instance and dataset;
invalidate_cache() drops them.

Installed, the package declares an fsspec.specs entry point, so fsspec
knows granary:// without granary being imported; importing granary
registers it too.

Thread-safety: as fsspec's file systems (fsspec keeps an instance per
thread unless told otherwise); the underlying granary.Client may be shared.
"""

import datetime
import errno
import io

import fsspec

import granary


class GranaryFileSystem(fsspec.AbstractFileSystem):
    """granary://DATASET/PATH: the datasets of the node's granaryd,
    read-only."""

    protocol = "granary"
    root_marker = ""

    def __init__(self, socket=None, read_through=True, **storage_options):
        super().__init__(socket=socket, read_through=read_through, **storage_options)
        self.client = granary.Client(socket, read_through)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        return super()._strip_protocol(path).lstrip("/")

    def _split(self, path):
        """(dataset, path in the dataset) of a URL or path."""
        dataset, _, inner = self._strip_protocol(path).partition("/")
        return dataset, inner

    def ls(self, path, detail=True, **kwargs):
        dataset, inner = self._split(path)
        if not dataset:
            entries = [
                {"name": name, "size": 0, "type": "directory"} for name in self.client.datasets()
            ]
        else:
            entries = [_entry(dataset, e) for e in self.client.ls(dataset, inner, detail=True)]
        return entries if detail else [e["name"] for e in entries]

    def info(self, path, **kwargs):
        dataset, inner = self._split(path)
        if not dataset:
            return {"name": "", "size": 0, "type": "directory"}
        return _entry(dataset, self.client.info(dataset, inner))

    def modified(self, path):
        return datetime.datetime.fromtimestamp(
            self.info(path)["mtime_ns"] / 1e9, tz=datetime.timezone.utc
        )

    def invalidate_cache(self, path=None):
        dataset = self._split(path)[0] if path else ""
        self.client.invalidate(dataset or None)

    def _open(
        self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs
    ):
        if mode != "rb":
            _refuse_write(path, f"open with mode {mode!r}")
        dataset, inner = self._split(path)
        try:
            return self.client.open(
                dataset, inner, buffer_size=block_size or io.DEFAULT_BUFFER_SIZE
            )
        except ValueError as error:
            raise self._not_regular(dataset, [inner], error) from None

    def cat_file(self, path, start=None, end=None, **kwargs):
        if start is not None or end is not None:
            return super().cat_file(path, start=start, end=end, **kwargs)
        dataset, inner = self._split(path)
        try:
            return self.client.read_many(dataset, [inner])[0]
        except ValueError as error:
            raise self._not_regular(dataset, [inner], error) from None

    def cat(self, path, recursive=False, on_error="raise", **kwargs):
        """The bytes of the files of `path` (a path, a glob or a list of
        them; with recursive=True, the files under directories): for one
        path naming one file, its bytes, else a dict of them by path.

        The files of each dataset are read as one batch. on_error: "raise"
        (the first error, before any file is read), "omit" (files that
        cannot be read are left out) or "return" (their exception in place
        of their bytes). With start or end, files are read one by one.
        """
        if kwargs.get("start") is not None or kwargs.get("end") is not None:
            return super().cat(path, recursive=recursive, on_error=on_error, **kwargs)
        paths = self.expand_path(path, recursive=recursive)
        if not (
            len(paths) > 1 or isinstance(path, list) or paths[0] != self._strip_protocol(path)
        ):
            return self.cat_file(paths[0])
        given = set(self._strip_protocol(path if isinstance(path, list) else [path]))
        by_dataset = {}
        for p in paths:
            dataset, inner = self._split(p)
            # Directories a glob or recursive=True found (or recursed into)
            # are left out; one named alone is an error.
            found = recursive or p not in given
            if found and self.client.info(dataset, inner)["type"] == "directory":
                continue
            by_dataset.setdefault(dataset, []).append((p, inner))
        read = {}
        for dataset, files in by_dataset.items():
            inners = [inner for _, inner in files]
            try:
                results = self.client.read_many(
                    dataset, inners, errors="raise" if on_error == "raise" else "return"
                )
            except ValueError as error:
                raise self._not_regular(dataset, inners, error) from None
            except OSError as error:
                if on_error == "raise":
                    raise
                # The whole batch failed: an unknown dataset, no granaryd.
                results = [error] * len(files)
            for (p, inner), result in zip(files, results):
                if isinstance(result, ValueError):
                    result = self._not_regular(dataset, [inner], result)
                if isinstance(result, Exception) and on_error == "omit":
                    continue
                read[p] = result
        return {p: read[p] for p in paths if p in read}

    def _not_regular(self, dataset, inners, error):
        """The exception for `error`, the ValueError granaryd gave for the
        first of paths `inners` that is no regular file: IsADirectoryError
        when the listing has it as a directory, else `error`."""
        for inner in inners:
            try:
                kind = self.client.info(dataset, inner)["type"]
            except FileNotFoundError:
                continue
            if kind == "directory":
                return IsADirectoryError(
                    errno.EISDIR, f"'{dataset}/{inner}' is a directory", inner
                )
            if kind != "file":
                break
        return error

    # Every change is refused: the file system shows datasets, which change
    # only at their source, by a refresh.
    def mkdir(self, path, create_parents=True, **kwargs):
        _refuse_write(path, "make a directory")

    def makedirs(self, path, exist_ok=False):
        _refuse_write(path, "make a directory")

    def rmdir(self, path):
        _refuse_write(path, "remove a directory")

    def _rm(self, path):
        _refuse_write(path, "remove")

    def cp_file(self, path1, path2, **kwargs):
        _refuse_write(path2, "copy to")


def _entry(dataset, entry):
    """fsspec's form of granary.Client.info()'s `entry` of `dataset`."""
    name = f"{dataset}/{entry['name']}" if entry["name"] else dataset
    return {**entry, "name": name, "mtime": entry["mtime_ns"] / 1e9}


def _refuse_write(path, what):
    raise OSError(errno.EROFS, f"granary:// is read-only: cannot {what}", path)
