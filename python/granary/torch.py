"""PyTorch map datasets over Granary that read a whole batch per call.

PyTorch 1.13's DataLoader asks a map dataset for its samples one at a time
(it has no ``__getitems__``), which costs a request to granaryd and a
read per sample. These datasets also take a list of indices and read them
as one batch (granary.Client.read_many: one request per 128 files, every
read in flight at once). Have the DataLoader hand them whole batches by
giving it a BatchSampler as its sampler and batch_size=None:

    import torch.utils.data
    from granary.torch import BatchSampler, ImageFolder

    images = ImageFolder("imagenet", root="train", loader=decode_jpeg, transform=augment)
    loader = torch.utils.data.DataLoader(
        images,
        sampler=BatchSampler(torch.utils.data.RandomSampler(images), batch_size=256, lookahead=8),
        batch_size=None,
        num_workers=8,
        collate_fn=torch.utils.data.default_collate,
    )

Each item the dataset returns for a batch is then the list of its samples;
collate_fn=default_collate stacks them as a DataLoader with a batch_size
would (without it they arrive as a list).

Reading ahead: with lookahead=N, the sampler pairs each batch with the
batch N further on, (batch, next_batch), and the dataset starts reading
next_batch in a background thread of the process before it decodes batch
(libgranary's reads release the GIL), so that reading and decoding
overlap. The DataLoader gives batch k to worker k % num_workers, so N must
be num_workers for next_batch to be the one that worker is asked for next
(1 without workers). At most one batch is read ahead per process; a batch
read ahead that is not the one asked for next is dropped and the asked one
read then.

Each dataset reads with a granary.Client it keeps: the one given, else one
made on first use (granary.Client(): $GRANARY_SOCKET, else the node's
granaryd). DataLoader workers forked
from the process keep using it (it connects again in each child); workers
started by spawn get a new one with the same settings, as a Client is
pickled by its settings.

Thread-safety: a dataset may be read from several threads at once; reading
ahead serves one reader per process (a DataLoader worker's loop).
"""

import concurrent.futures
import math
import operator
import os
import threading

import torch.utils.data

import granary

__all__ = ["BatchSampler", "FileListDataset", "ImageFolder"]


class BatchSampler(torch.utils.data.Sampler):
    """Groups the indices of `sampler` into lists of `batch_size` (the last
    one shorter unless drop_last), for a DataLoader with batch_size=None.

    Args:
        sampler: an iterable of sample indices (a Sampler, a range).
        batch_size: indices per batch.
        drop_last: whether a last, shorter batch is left out.
        lookahead: 0: yields each batch (a list of indices). N > 0: yields
            (batch, next_batch) pairs, next_batch being the batch N further
            on (None for the last N), so that the dataset reads it ahead;
            N is the DataLoader's num_workers, or 1 without workers.
    """

    def __init__(self, sampler, batch_size, drop_last=False, lookahead=0):
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        if not isinstance(lookahead, int) or lookahead < 0:
            raise ValueError(f"lookahead must be a non-negative integer, not {lookahead!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.lookahead = lookahead

    def __iter__(self):
        if self.lookahead == 0:
            yield from self._batches()
            return
        # The batches drawn but not yielded yet: the one to yield next and
        # the `lookahead` after it.
        window = []
        for batch in self._batches():
            window.append(batch)
            if len(window) > self.lookahead:
                yield window[0], window[-1]
                del window[0]
        for batch in window:
            yield batch, None

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return math.ceil(len(self.sampler) / self.batch_size)

    def _batches(self):
        batch = []
        for index in self.sampler:
            batch.append(operator.index(index))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch


class _BatchDataset(torch.utils.data.Dataset):
    """A map dataset of files of a Granary dataset whose __getitem__ takes
    an index (one sample), a list of indices (a list of samples, read as one
    batch) or a BatchSampler's (batch, next_batch) pair (the samples of
    batch; next_batch is read ahead).

    Subclasses name each index's file (_path) and make its sample from the
    file's bytes (_sample).
    """

    def __init__(self, dataset, client):
        self.dataset = dataset
        self._client = client
        self._read_ahead = None  # A _ReadAhead of this process, made on first use.

    @property
    def client(self):
        """The granary.Client this dataset reads with."""
        if self._client is None:
            self._client = granary.Client()
        return self._client

    def __getitem__(self, index):
        try:
            position = operator.index(index)
        except TypeError:
            pass
        else:
            return self._read_samples([position])[0]
        if isinstance(index, tuple) and len(index) == 2 and isinstance(index[0], list):
            return self._read_batch_ahead(*index)
        return self._read_samples([operator.index(i) for i in index])

    def __getstate__(self):
        # Reading ahead belongs to the process (its thread, its batch).
        state = self.__dict__.copy()
        state["_read_ahead"] = None
        return state

    def _read(self, batch):
        return self.client.read_many(self.dataset, [self._path(i) for i in batch])

    def _read_samples(self, batch):
        return [self._sample(i, data) for i, data in zip(batch, self._read(batch))]

    def _read_batch_ahead(self, batch, next_batch):
        read_ahead = self._read_ahead
        if read_ahead is None or read_ahead.pid != os.getpid():
            # Forked, unpickled or first use: what the parent read ahead is
            # not this process's to take.
            read_ahead = self._read_ahead = _ReadAhead()
        read = read_ahead.take(batch)
        if read is None:
            read = self._read(batch)
        if next_batch is not None:
            read_ahead.start(next_batch, self._read)
        # Decoded while next_batch is read.
        return [self._sample(i, data) for i, data in zip(batch, read)]

    def _path(self, index):
        raise NotImplementedError

    def _sample(self, index, data):
        raise NotImplementedError


class _ReadAhead:
    """One batch read ahead, in a background thread of the process."""

    def __init__(self):
        self.pid = os.getpid()
        self._lock = threading.Lock()
        # The thread starts with the first read ahead.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="granary-read-ahead"
        )
        self._batch = None
        self._future = None

    def take(self, batch):
        """The files of `batch` if it is the batch read ahead (raising what
        its read raised), else None."""
        with self._lock:
            future, self._future = self._future, None
            ahead, self._batch = self._batch, None
        if future is None:
            return None
        if ahead != batch:
            future.cancel()
            return None
        return future.result()

    def start(self, batch, read):
        """Starts reading `batch` with read(batch)."""
        future = self._executor.submit(read, batch)
        with self._lock:
            self._batch, self._future = batch, future


class FileListDataset(_BatchDataset):
    """The files `paths` of Granary dataset `dataset`: sample i is the bytes
    of paths[i], or transform(bytes).

    Args:
        dataset: the Granary dataset's name.
        paths: paths of regular files in it.
        transform: applied to each file's bytes.
        client: the granary.Client to read with (default: one made on first
            use).
    """

    def __init__(self, dataset, paths, transform=None, client=None):
        super().__init__(dataset, client)
        self.paths = list(paths)
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def _path(self, index):
        return self.paths[index]

    def _sample(self, index, data):
        return data if self.transform is None else self.transform(data)


class ImageFolder(_BatchDataset):
    """Files sorted into classes by directory, as torchvision's ImageFolder:
    each directory directly under `root` is a class (classes sorted by name,
    numbered from 0), and every regular file at any depth under it is a
    sample of that class. Samples are sorted by path; files directly in
    `root` belong to no class and are left out. Sample i is
    (loader(bytes), class_index), transform applied to the first,
    target_transform to the second.

    Args:
        dataset: the Granary dataset's name.
        root: the directory of the class directories ('' is the root).
        transform: applied to each loaded sample.
        loader: makes a sample of a file's bytes (decodes an image, say);
            None: the sample is the bytes.
        client: the granary.Client to read with (default: one made on first
            use).
        target_transform: applied to each class index.
        extensions: if given, only files whose names end with one of these
            (compared in lower case, e.g. (".jpg", ".jpeg")) are samples.

    Attributes: classes, class_to_idx, samples ([(path, class_index)]) and
    targets ([class_index]), as torchvision's.
    """

    def __init__(
        self,
        dataset,
        root="",
        transform=None,
        loader=None,
        client=None,
        target_transform=None,
        extensions=None,
    ):
        super().__init__(dataset, client)
        self.root = root.strip("/")
        self.transform = transform
        self.loader = loader
        self.target_transform = target_transform
        prefix = self.root + "/" if self.root else ""
        entries = self.client.ls(dataset, self.root, detail=True)
        self.classes = sorted(
            entry["name"][len(prefix) :] for entry in entries if entry["type"] == "directory"
        )
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        suffixes = None if extensions is None else tuple(e.lower() for e in extensions)
        self.samples = []
        for path in self.client.find(dataset, self.root):
            class_name, nested, _ = path[len(prefix) :].partition("/")
            if not nested or (suffixes is not None and not path.lower().endswith(suffixes)):
                continue
            self.samples.append((path, self.class_to_idx[class_name]))
        self.targets = [target for _, target in self.samples]

    def __len__(self):
        return len(self.samples)

    def _path(self, index):
        return self.samples[index][0]

    def _sample(self, index, data):
        sample = data if self.loader is None else self.loader(data)
        if self.transform is not None:
            sample = self.transform(sample)
        target = self.samples[index][1]
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target
