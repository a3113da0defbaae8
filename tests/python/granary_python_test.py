"""Tests of the Python package granary against a real granaryd.

The module starts one granaryd on a temporary data directory, registers a
generated dataset with the `granary` CLI (1 MiB chunks, so that a 3.5 MiB
file spans four) and checks every read against the source's own bytes:
Client.read_many and open(), fsspec's granary:// (with pandas), and the
PyTorch datasets under a DataLoader with forked workers reading ahead.

Run by ctest (tests/python/CMakeLists.txt), which passes the binaries in
GRANARY_TEST_GRANARYD and GRANARY_TEST_CLI and the built package on
PYTHONPATH. The server's socket is also set as $GRANARY_SOCKET, which
clients that name no socket use.
"""

import errno
import hashlib
import io
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

import fsspec
import pandas
import pandas.testing
import torch.utils.data

import granary
import granary.fsspec
from granary.torch import BatchSampler, FileListDataset, ImageFolder

DATASET = "ds"
SMALL_FILES = [f"small/{i:04d}.bin" for i in range(1000)]
IMAGE_FILES = {
    "images/cat/1.jpg": 0,
    "images/cat/2.JPG": 0,
    "images/cat/3.png": 0,
    "images/dog/1.jpg": 1,
    "images/dog/deep/2.jpg": 1,
    "images/dog/notes.txt": 1,
}
RANGES_FILES = [f"ranges/{i}.bin" for i in range(8)]
BIG_FILE = "big.bin"
BIG_SIZE = (3 << 20) + (1 << 19) + 123  # Four 1 MiB chunks, the last partial.
CSV_FILE = "table.csv"

_server = None  # The granaryd subprocess.
_temp = None  # Its temporary directory.
_source = None  # The dataset's source directory.
_socket = None  # granaryd's socket.
_files = {}  # Path in the dataset -> its bytes.


def _write(path, data):
    full = os.path.join(_source, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(data)
    _files[path] = data


def _make_source():
    rng = random.Random(20240601)
    for path in SMALL_FILES:
        # Some empty: a file of 0 bytes has no chunk.
        _write(path, rng.randbytes(rng.choice([0, 1, 100, 2000, rng.randrange(4096)])))
    for path in RANGES_FILES:
        _write(path, rng.randbytes(rng.randrange(1, 50_000)))
    for path in IMAGE_FILES:
        _write(path, rng.randbytes(rng.randrange(100, 1000)))
    _write("images/README.txt", b"not a class\n")
    _write(BIG_FILE, rng.randbytes(BIG_SIZE))
    rows = ["id,name,value"] + [f"{i},row {i},{rng.random():.6f}" for i in range(2000)]
    _write(CSV_FILE, ("\n".join(rows) + "\n").encode())
    os.makedirs(os.path.join(_source, "empty_dir"))


def _binary(variable):
    path = os.environ.get(variable)
    if not path:
        raise RuntimeError(f"{variable} names no binary; run this test through ctest")
    return path


def _socket_accepts(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
        except OSError:
            return False
    return True


def _server_log():
    with open(os.path.join(_temp, "granaryd.log"), errors="replace") as f:
        return f.read()


def setUpModule():
    global _server, _temp, _source, _socket
    _temp = tempfile.mkdtemp(prefix="granary-python-test-")
    _source = os.path.join(_temp, "source")
    _socket = os.path.join(_temp, "granaryd.sock")
    _make_source()
    with open(os.path.join(_temp, "granaryd.log"), "wb") as log:
        _server = subprocess.Popen(
            [
                _binary("GRANARY_TEST_GRANARYD"),
                "--data-dir", os.path.join(_temp, "data"),
                "--socket", _socket,
                "--metrics-listen", "127.0.0.1:0",
                "--source-root", _source,
                # Nothing cached behind the test's back: a file is fetched
                # when it is read.
                "--fill", "none",
            ],
            stdout=log,
            stderr=log,
        )
    deadline = time.monotonic() + 30
    while not _socket_accepts(_socket):
        if _server.poll() is not None:
            raise RuntimeError(f"granaryd exited with {_server.returncode}:\n{_server_log()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"granaryd did not answer within 30 s:\n{_server_log()}")
        time.sleep(0.02)
    added = subprocess.run(
        [
            _binary("GRANARY_TEST_CLI"),
            "--server", f"unix:{_socket}",
            "dataset", "add", DATASET, _source, "--chunk-size", "1MiB",
        ],
        capture_output=True,
        text=True,
    )
    if added.returncode != 0:
        raise RuntimeError(f"granary dataset add failed: {added.stderr}\n{_server_log()}")
    # For what names no socket: granary.Client(), granary:// URLs without
    # storage options, DataLoader workers, a fresh interpreter.
    os.environ["GRANARY_SOCKET"] = _socket


def tearDownModule():
    # Killed, as the C++ tests' servers are: a graceful stop waits out the
    # connections the test's clients still hold, and is not tested here.
    if _server is not None:
        _server.kill()
        _server.wait()
    shutil.rmtree(_temp, ignore_errors=True)


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = granary.Client(_socket)

    def test_read_many_returns_the_source_bytes(self):
        paths = SMALL_FILES[:300] + [BIG_FILE, CSV_FILE]
        read = self.client.read_many(DATASET, paths)
        self.assertEqual(len(read), len(paths))
        for path, data in zip(paths, read):
            self.assertIsInstance(data, bytes)
            self.assertEqual(data, _files[path], path)
        # A generator of paths too.
        self.assertEqual(
            self.client.read_many(DATASET, (p for p in SMALL_FILES[:3])),
            [_files[p] for p in SMALL_FILES[:3]],
        )

    def test_missing_file_raises_or_is_returned(self):
        paths = [SMALL_FILES[1], "no/such.bin", SMALL_FILES[2]]
        with self.assertRaises(FileNotFoundError) as raised:
            self.client.read_many(DATASET, paths)
        self.assertEqual(raised.exception.errno, errno.ENOENT)
        self.assertEqual(raised.exception.filename, "no/such.bin")
        read = self.client.read_many(DATASET, paths, errors="return")
        self.assertEqual(read[0], _files[SMALL_FILES[1]])
        self.assertIsInstance(read[1], FileNotFoundError)
        self.assertEqual(read[1].filename, "no/such.bin")
        self.assertEqual(read[2], _files[SMALL_FILES[2]])
        with self.assertRaises(ValueError):
            self.client.read_many(DATASET, ["empty_dir"])
        with self.assertRaises(ValueError):
            self.client.read_many(DATASET, [SMALL_FILES[0]], errors="ignore")
        with self.assertRaises(FileNotFoundError):
            self.client.read_many("no-such-dataset", [SMALL_FILES[0]])

    def test_without_read_through_files_are_read_by_ranges(self):
        # The files of ranges/ are read by no other test: granaryd holds
        # none of them, and reads them chunk by chunk.
        client = granary.Client(_socket, read_through=False)
        self.assertEqual(client.read_many(DATASET, RANGES_FILES), [_files[p] for p in RANGES_FILES])

    def test_open_seeks_and_reads_across_chunks(self):
        source = _files[BIG_FILE]
        with self.client.open(DATASET, BIG_FILE) as f:
            self.assertEqual(f.size, BIG_SIZE)
            self.assertTrue(f.seekable() and f.readable())
            self.assertEqual(f.read(), source)
            self.assertEqual(f.read(10), b"")
            rng = random.Random(5)
            mib = 1 << 20
            offsets = [0, mib - 3, 2 * mib - 1, 3 * mib, BIG_SIZE - 7] + [
                rng.randrange(BIG_SIZE) for _ in range(50)
            ]
            for offset in offsets:
                length = rng.choice([1, 7, 4096, 70_000, mib + 5])
                self.assertEqual(f.seek(offset), offset)
                self.assertEqual(f.read(length), source[offset : offset + length], offset)
                self.assertEqual(f.tell(), min(offset + length, BIG_SIZE))
            f.seek(-100, io.SEEK_END)
            self.assertEqual(f.read(), source[-100:])
            f.seek(mib - 10)
            f.seek(20, io.SEEK_CUR)
            buffer = bytearray(1000)
            self.assertEqual(f.readinto(buffer), 1000)
            self.assertEqual(bytes(buffer), source[mib + 10 : mib + 1010])
            with self.assertRaises(OSError):
                f.seek(-1)
        with self.assertRaises(ValueError):
            f.read(1)
        with self.assertRaises(FileNotFoundError):
            self.client.open(DATASET, "no/such.bin")
        # A small file, and one of 0 bytes.
        empty = next(p for p in SMALL_FILES if not _files[p])
        with self.client.open(DATASET, empty) as f:
            self.assertEqual(f.read(), b"")
        with self.client.open(DATASET, SMALL_FILES[3], buffer_size=16) as f:
            self.assertEqual(f.read(5) + f.read(), _files[SMALL_FILES[3]])

    def test_listing(self):
        self.assertIn(DATASET, self.client.datasets())
        self.assertEqual(
            self.client.ls(DATASET),
            sorted(["big.bin", "empty_dir", "images", "ranges", "small", "table.csv"]),
        )
        self.assertEqual(self.client.ls(DATASET, "small"), SMALL_FILES)
        self.assertEqual(self.client.ls(DATASET, "empty_dir"), [])
        info = self.client.info(DATASET, BIG_FILE)
        self.assertEqual(info["size"], BIG_SIZE)
        self.assertEqual(info["type"], "file")
        self.assertEqual(info["mtime_ns"], os.stat(os.path.join(_source, BIG_FILE)).st_mtime_ns)
        self.assertEqual(self.client.info(DATASET, "images/cat")["type"], "directory")
        self.assertEqual(
            self.client.find(DATASET, "images"),
            sorted(list(IMAGE_FILES) + ["images/README.txt"]),
        )
        with self.assertRaises(FileNotFoundError):
            self.client.info(DATASET, "no/such.bin")


class FsspecTest(unittest.TestCase):
    def setUp(self):
        self.fs = fsspec.filesystem("granary", socket=_socket)

    def test_the_entry_point_registers_the_protocol(self):
        # In a fresh interpreter that imports fsspec alone.
        script = (
            "import sys, fsspec\n"
            f"with fsspec.open('granary://{DATASET}/{CSV_FILE}') as f:\n"
            "    sys.stdout.buffer.write(f.read())\n"
            "assert 'granary' in sys.modules\n"
        )
        ran = subprocess.run([sys.executable, "-c", script], capture_output=True)
        self.assertEqual(ran.returncode, 0, ran.stderr.decode())
        self.assertEqual(ran.stdout, _files[CSV_FILE])

    def test_open_and_pandas(self):
        with fsspec.open(f"granary://{DATASET}/{CSV_FILE}") as f:
            self.assertEqual(f.read(), _files[CSV_FILE])
        with fsspec.open(f"granary://{DATASET}/{CSV_FILE}", "rt", socket=_socket) as f:
            self.assertEqual(f.readline(), "id,name,value\n")
        expected = pandas.read_csv(os.path.join(_source, CSV_FILE))
        pandas.testing.assert_frame_equal(
            pandas.read_csv(f"granary://{DATASET}/{CSV_FILE}"), expected
        )
        pandas.testing.assert_frame_equal(
            pandas.read_csv(f"granary://{DATASET}/{CSV_FILE}", storage_options={"socket": _socket}),
            expected,
        )

    def test_cat_of_many_files(self):
        paths = [f"{DATASET}/{p}" for p in SMALL_FILES]
        read = self.fs.cat([f"granary://{p}" for p in paths])
        self.assertEqual(list(read), sorted(paths))
        for path in paths:
            self.assertEqual(read[path], _files[path[len(DATASET) + 1 :]], path)
        self.assertEqual(
            self.fs.cat(f"{DATASET}/images/cat/*"),
            {f"{DATASET}/{p}": _files[p] for p in IMAGE_FILES if p.startswith("images/cat/")},
        )
        self.assertEqual(
            self.fs.cat(f"{DATASET}/images/dog", recursive=True),
            {f"{DATASET}/{p}": _files[p] for p in IMAGE_FILES if p.startswith("images/dog/")},
        )

    def test_cat_errors(self):
        good, missing = f"{DATASET}/{SMALL_FILES[5]}", f"{DATASET}/no/such.bin"
        with self.assertRaises(FileNotFoundError):
            self.fs.cat([good, missing])
        self.assertEqual(
            self.fs.cat([good, missing], on_error="omit"), {good: _files[SMALL_FILES[5]]}
        )
        returned = self.fs.cat([good, missing], on_error="return")
        self.assertEqual(returned[good], _files[SMALL_FILES[5]])
        self.assertIsInstance(returned[missing], FileNotFoundError)
        with self.assertRaises(IsADirectoryError):
            self.fs.cat([good, f"{DATASET}/empty_dir"])
        with self.assertRaises(IsADirectoryError):
            self.fs.cat_file(f"{DATASET}/images")
        with self.assertRaises(FileNotFoundError):
            self.fs.cat_file(missing)

    def test_cat_file_ranges(self):
        source = _files[BIG_FILE]
        path = f"granary://{DATASET}/{BIG_FILE}"
        self.assertEqual(self.fs.cat_file(path), source)
        self.assertEqual(self.fs.cat_file(path, start=(1 << 20) - 5, end=(2 << 20) + 5),
                         source[(1 << 20) - 5 : (2 << 20) + 5])
        self.assertEqual(self.fs.cat_file(path, start=-10), source[-10:])
        self.assertEqual(self.fs.cat_file(path, end=-BIG_SIZE + 3), source[:3])

    def test_ls_and_info(self):
        self.assertIn(DATASET, self.fs.ls("", detail=False))
        self.assertEqual(self.fs.info(DATASET)["type"], "directory")
        listed = {e["name"]: e for e in self.fs.ls(f"granary://{DATASET}/images")}
        self.assertEqual(
            {name: e["type"] for name, e in listed.items()},
            {
                f"{DATASET}/images/README.txt": "file",
                f"{DATASET}/images/cat": "directory",
                f"{DATASET}/images/dog": "directory",
            },
        )
        info = self.fs.info(f"granary://{DATASET}/{BIG_FILE}")
        self.assertEqual(
            (info["name"], info["size"], info["type"]), (f"{DATASET}/{BIG_FILE}", BIG_SIZE, "file")
        )
        self.assertTrue(self.fs.isdir(f"{DATASET}/empty_dir"))
        self.assertTrue(self.fs.isfile(f"{DATASET}/{CSV_FILE}"))
        self.assertFalse(self.fs.exists(f"{DATASET}/no/such.bin"))
        with self.assertRaises(FileNotFoundError):
            self.fs.info(f"{DATASET}/no/such.bin")
        self.assertEqual(
            sorted(self.fs.find(f"{DATASET}/images/dog")),
            sorted(f"{DATASET}/{p}" for p in IMAGE_FILES if p.startswith("images/dog/")),
        )

    def test_writes_are_refused(self):
        with self.assertRaises(OSError) as raised:
            self.fs.open(f"{DATASET}/new.bin", "wb")
        self.assertEqual(raised.exception.errno, errno.EROFS)
        with self.assertRaises(OSError):
            self.fs.pipe_file(f"{DATASET}/new.bin", b"x")
        with self.assertRaises(OSError):
            self.fs.rm(f"{DATASET}/{CSV_FILE}")
        with self.assertRaises(OSError):
            self.fs.mkdir(f"{DATASET}/new_dir")


class _ReadThreadDataset(FileListDataset):
    """Sample i is (sha256 of the file, the name of the thread that read it)."""

    def _read(self, batch):
        thread = threading.current_thread().name
        return [(data, thread) for data in super()._read(batch)]

    def _sample(self, index, read):
        data, thread = read
        return _sha256(data), thread


class TorchTest(unittest.TestCase):
    def _check_data_loader(self, dataset, workers, batch_size):
        order = random.Random(workers).sample(range(len(dataset)), len(dataset))
        with warnings.catch_warnings():
            # That this machine may have fewer cores than workers.
            warnings.simplefilter("ignore", UserWarning)
            loader = torch.utils.data.DataLoader(
                dataset,
                sampler=BatchSampler(order, batch_size=batch_size, lookahead=workers),
                batch_size=None,
                num_workers=workers,
            )
            self.assertEqual(len(loader), math.ceil(len(dataset) / batch_size))
            loaded = list(loader)
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        self.assertEqual(len(loaded), len(batches))
        for k, (indices, samples) in enumerate(zip(batches, loaded)):
            self.assertEqual(
                [digest for digest, _ in samples],
                [_sha256(_files[dataset.paths[i]]) for i in indices],
            )
            # Each worker reads its first batch when asked for it, and every
            # later one ahead, while it decodes the one before.
            threads = {thread for _, thread in samples}
            self.assertEqual(len(threads), 1)
            self.assertEqual(threads.pop().startswith("granary-read-ahead"), k >= workers, k)

    def test_data_loader_workers_reading_ahead(self):
        # No client: each worker makes its own.
        dataset = _ReadThreadDataset(DATASET, SMALL_FILES)
        self._check_data_loader(dataset, workers=4, batch_size=24)
        self.assertIsNone(dataset._client)

    def test_data_loader_workers_of_a_used_client(self):
        # The workers fork from a process whose client has connected to
        # granaryd (gRPC and the local read socket) and read ahead.
        dataset = _ReadThreadDataset(DATASET, SMALL_FILES[:300], client=granary.Client(_socket))
        self.assertEqual(dataset.client.ls(DATASET, "small"), SMALL_FILES)
        self.assertEqual(dataset[([0], [1])][0][0], _sha256(_files[SMALL_FILES[0]]))
        self._check_data_loader(dataset, workers=2, batch_size=16)

    def test_reading_ahead_in_one_process(self):
        dataset = _ReadThreadDataset(DATASET, SMALL_FILES[:100], client=granary.Client(_socket))
        sampler = BatchSampler(range(100), batch_size=30, lookahead=1)
        self.assertEqual(
            [pair[1] for pair in sampler],
            [list(range(30, 60)), list(range(60, 90)), list(range(90, 100)), None],
        )
        read = [sample for pair in sampler for sample in dataset[pair]]
        self.assertEqual(
            [digest for digest, _ in read], [_sha256(_files[p]) for p in SMALL_FILES[:100]]
        )
        # The first batch read when asked for, the others ahead.
        self.assertEqual({thread for _, thread in read[:30]}, {threading.current_thread().name})
        self.assertTrue(all(thread.startswith("granary-read-ahead") for _, thread in read[30:]))
        # Another batch than the one read ahead: read when asked for.
        self.assertEqual(
            [digest for digest, _ in dataset[([5, 6], [7])]],
            [_sha256(_files[SMALL_FILES[5]]), _sha256(_files[SMALL_FILES[6]])],
        )
        self.assertEqual(dataset[([8], None)][0][1], threading.current_thread().name)
        plain = FileListDataset(DATASET, SMALL_FILES, transform=len, client=dataset.client)
        self.assertEqual(plain[9], len(_files[SMALL_FILES[9]]))
        self.assertEqual(plain[[1, 2]], [len(_files[SMALL_FILES[1]]), len(_files[SMALL_FILES[2]])])

    def test_batch_sampler_drop_last(self):
        sampler = BatchSampler(range(10), batch_size=4, drop_last=True)
        self.assertEqual(list(sampler), [[0, 1, 2, 3], [4, 5, 6, 7]])
        self.assertEqual(len(sampler), 2)
        self.assertEqual(len(BatchSampler(range(10), batch_size=4)), 3)

    def test_image_folder(self):
        images = ImageFolder(DATASET, root="images", loader=len, client=granary.Client(_socket))
        self.assertEqual(images.classes, ["cat", "dog"])
        self.assertEqual(images.class_to_idx, {"cat": 0, "dog": 1})
        self.assertEqual(images.samples, sorted(IMAGE_FILES.items()))
        self.assertEqual(images.targets, [target for _, target in sorted(IMAGE_FILES.items())])
        self.assertEqual(
            images[list(range(len(images)))],
            [(len(_files[path]), target) for path, target in sorted(IMAGE_FILES.items())],
        )
        jpegs = ImageFolder(DATASET, root="/images/", extensions=(".jpg",))
        self.assertEqual(
            [path for path, _ in jpegs.samples],
            sorted(p for p in IMAGE_FILES if p.lower().endswith(".jpg")),
        )
        self.assertEqual(jpegs[0], (_files[jpegs.samples[0][0]], 0))


if __name__ == "__main__":
    unittest.main()
