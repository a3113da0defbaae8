"""Helpers shared by Granary's benchmark scripts: free ports, waiting, and
finding a mount's granary-fuse."""

import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise RuntimeError("timed out waiting for " + what)


def fuse_server_pid(mountpoint):
    """The pid of the granary-fuse that serves `mountpoint`: not its connection
    keeper, a child with the same command line that names itself
    granary-keeper."""
    out = subprocess.run(["pgrep", "-f", "granary-fuse %s( |$)" % mountpoint],
                         capture_output=True, text=True).stdout.split()
    for pid in out:
        with open("/proc/%s/comm" % pid) as f:
            if f.read().strip() == "granary-fuse":
                return int(pid)
    raise RuntimeError("no granary-fuse serves " + mountpoint)
