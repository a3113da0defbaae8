"""The soak's cluster: etcd in the root namespace, four granaryd nodes in
network namespaces of their own (two cache groups of two), each caching on a
small ext4 disk of its own (a loop device, which the nemesis fills), and
granary-fuse mounts on two of them. Every part is the real built binary;
nodes find each other through etcd and call each other over TCP with the
cluster token. granaryd may register POSIX sources beneath the source root
and S3 sources at the object store's endpoint alone (s3.py); it and
granary-fuse find the store's keys in their environment.

Thread-safety: the nemesis thread changes processes; other threads only read
pids, sockets and addresses.
"""
import os
import secrets
import socket
import subprocess
import time

from . import processes
from .network import BRIDGE_ADDRESS
from .processes import Child, wait_until

CAPACITY = "64MiB"  # granaryd's least: one chunk of the largest size.
CACHE_DISK_MIB = 96
GROUPS = ["rack-a", "rack-a", "rack-b", "rack-b"]
MOUNTED_NODES = [0, 2]  # One mount in each group.


def journal_path(root, node_id):
    """Where node `node_id`'s granaryd writes its source journal."""
    return f"{root}/{node_id}/source.jsonl"


def write_token(path):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write(secrets.token_hex(32))


def unix_socket_answers(path):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(0.5)
            s.connect(path)
            return True
    except OSError:
        return False


class Etcd:
    def __init__(self, root, port=23790):
        self.port = port
        self.endpoint = f"http://{BRIDGE_ADDRESS}:{port}"
        peer = f"http://127.0.0.1:{port + 1}"
        self.child = Child(["/usr/bin/etcd", "--name", "soak", "--data-dir", f"{root}/etcd",
                            "--listen-client-urls", self.endpoint, "--advertise-client-urls",
                            self.endpoint, "--listen-peer-urls", peer,
                            "--initial-advertise-peer-urls", peer, "--initial-cluster",
                            f"soak={peer}"], f"{root}/etcd.log")

    def start(self):
        self.child.start()
        wait_until(lambda: processes.accepts_connections(BRIDGE_ADDRESS, self.port), 30,
                   "etcd accepting connections")


class CacheDisk:
    """A small ext4 filesystem on a loop device, mounted on `path`."""

    def __init__(self, image, path):
        self.image, self.path = image, path
        os.makedirs(path, exist_ok=True)
        subprocess.run(["truncate", "-s", f"{CACHE_DISK_MIB}M", image], check=True)
        # 4 KiB blocks: the stale fault (stale.py) writes whole blocks below the filesystem.
        subprocess.run(["/usr/sbin/mkfs.ext4", "-q", "-F", "-m", "0", "-b", "4096", image],
                       check=True)
        subprocess.run(["mount", "-o", "loop", image, path], check=True)
        self.filler = os.path.join(path, "filler")

    def fill(self):
        """Writes until the filesystem is full; the bytes written."""
        written = 0
        block = b"\0" * (1 << 20)
        with open(self.filler, "wb", buffering=0) as out:
            try:
                while True:
                    written += out.write(block)
            except OSError:
                pass
        return written

    def free(self):
        if os.path.exists(self.filler):
            os.unlink(self.filler)

    def close(self):
        subprocess.run(["umount", "-l", self.path], check=False)


class Node:
    def __init__(self, index, root, network, etcd, token, binaries, source_root, store):
        self.index = index
        self.id = f"n{index + 1}"
        self.group = GROUPS[index]
        self.address = network.address(index)
        self.prefix = network.prefix(index)
        self.dir = f"{root}/{self.id}"
        os.makedirs(self.dir, exist_ok=True)
        self.socket = f"{self.dir}/granaryd.sock"
        self.metrics = f"{self.address}:9100"
        self.disk = CacheDisk(f"{self.dir}/cache.img", f"{self.dir}/cache")
        # Every source read and every change to what the cache holds
        # (source_reads.py judges them).
        self.journal = journal_path(root, self.id)
        argv = self.prefix + [
            binaries.granaryd, "--node-id", self.id, "--group", self.group,
            "--data-dir", f"{self.dir}/data", "--cache-dir", self.disk.path,
            "--capacity", CAPACITY, "--socket", self.socket,
            "--listen", f"{self.address}:7070", "--advertise", f"{self.address}:7070",
            "--etcd", etcd.endpoint, "--token-file", token,
            "--metrics-listen", self.metrics, "--source-root", source_root,
            "--s3-endpoint", store.endpoint, "--source-journal", self.journal]
        self.child = Child(argv, f"{self.dir}/granaryd.log", env=store.environment())
        self.server = f"unix:{self.socket}"

    def start(self):
        self.child.start()
        wait_until(lambda: unix_socket_answers(self.socket) or not self.child.running(), 30,
                   f"granaryd {self.id} answering")
        if not self.child.running():
            raise RuntimeError(f"granaryd {self.id} exited:\n{self.child.log_tail()}")

    def restart(self):
        self.child.kill()
        self.start()


class Mount:
    """granary-fuse on `node`, run in its namespace (its peers are over TCP)."""

    def __init__(self, node, token, binaries, store):
        self.node = node
        self.env = store.environment()  # For reads straight from the store.
        self.path = f"{node.dir}/mnt"
        os.makedirs(self.path, exist_ok=True)
        self.argv = node.prefix + [binaries.fuse, self.path, "--server", node.server,
                                   "--token-file", token, "--foreground", "-o", "allow_other"]
        self.log = f"{node.dir}/granary-fuse.log"
        self.child = None

    def _spawn(self, extra, ready_dataset):
        child = Child(self.argv + extra, self.log, env=self.env).start()
        wait_until(lambda: os.path.isdir(f"{self.path}/{ready_dataset}") or not child.running(),
                   30, f"mount on {self.node.id} serving")
        if not child.running():
            raise RuntimeError(f"granary-fuse on {self.node.id} exited:\n{child.log_tail()}")
        return child

    def start(self, ready_dataset):
        self.child = self._spawn([], ready_dataset)

    def kill(self):
        """SIGKILL, leaving the mount to its connection keeper."""
        self.child.kill()

    def restart(self, ready_dataset):
        """A plain start on the mount point: it takes the killed one's mount over."""
        self.start(ready_dataset)

    def take_over(self, ready_dataset):
        """A new granary-fuse --takeover while this one serves; the old exits 0."""
        old = self.child
        self.child = self._spawn(["--takeover"], ready_dataset)
        code = old.process.wait(30)
        if code != 0:
            raise RuntimeError(f"granary-fuse on {self.node.id} handed over with exit {code}")

    def close(self):
        subprocess.run(["fusermount3", "-u", self.path], capture_output=True)
        if self.child is not None and self.child.running():
            self.child.terminate(5)
        subprocess.run(["fusermount3", "-uz", self.path], capture_output=True)


class Binaries:
    def __init__(self, build_dir):
        self.granaryd = f"{build_dir}/granaryd"
        self.fuse = f"{build_dir}/granary-fuse"
        self.cli = f"{build_dir}/granary"
        self.object_store = f"{build_dir}/tests/support/granary-test-s3"
        for path in (self.granaryd, self.fuse, self.cli, self.object_store):
            if not os.access(path, os.X_OK):
                raise FileNotFoundError(f"{path}: not built (bash scripts/build.sh)")


class Cluster:
    def __init__(self, root, network, binaries, source_root, store):
        self.root = root
        self.network = network
        self.binaries = binaries
        self.token = f"{root}/token"
        write_token(self.token)
        self.etcd = Etcd(root)
        self.nodes = [Node(i, root, network, self.etcd, self.token, binaries, source_root, store)
                      for i in range(len(GROUPS))]
        self.mounts = [Mount(self.nodes[i], self.token, binaries, store) for i in MOUNTED_NODES]
        self.cli_env = dict(os.environ, GRANARY_TOKEN_FILE=self.token)

    def start(self):
        self.etcd.start()
        for node in self.nodes:
            node.start()

    def cli(self, node, args, timeout=60):
        """`granary --server NODE ARGS` run in the node's namespace."""
        argv = node.prefix + [self.binaries.cli, "--server", node.server, *args]
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, timeout=timeout, env=self.cli_env)
        return done, time.monotonic() - started

    def close(self):
        for mount in self.mounts:
            mount.close()
        for node in self.nodes:
            node.child.kill()
        self.etcd.child.kill()
        for node in self.nodes:
            node.disk.close()
