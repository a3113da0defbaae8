#!/usr/bin/env python3
"""What the kernel does with a FUSE connection served over io_uring when the
server dies and another process holds the connection, as Granary's
connection keeper does (issue 52: can a mount served over rings be taken
over?).

A server, libfuse 3.18.3's passthrough_hp with io_uring on (built from
Debian's source package, its SHA-256 checked, in --cache on first use), serves
a mount whose source is a second passthrough_hp mount over /dev/fuse. This
script takes a duplicate of the server's /dev/fuse descriptor (pidfd_getfd);
stops the second mount's server, so that a lookup the server takes waits
there (a request taken and not answered); stops the server (SIGSTOP), starts
a reader (a stat of a name the kernel does not know, one request), kills the
server (SIGKILL) and starts another reader. Then, holding the connection, it
looks for the readers' requests on /dev/fuse, before and after
FUSE_NOTIFY_RESEND (what a successor on /dev/fuse relies on), and finally
runs ring_successor.c, which registers new ring entries on the same
connection and answers what arrives, while a last reader stats another name.
Each reader prints what its stat answered. The same sequence over /dev/fuse
(--transport dev) is the reference, answered by this script.

The kernel parameter /sys/module/fuse/parameters/enable_uring is set to Y for
the run and put back as it was.

Usage (root): /usr/bin/python3 bench/fuse/ring_restart_probe.py
    [--transport uring|dev] [--workdir /var/tmp/granary-ring-probe]
    [--cache /var/tmp/granary-libfuse-3.18]
"""
import argparse
import ctypes
import errno
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from bench_util import wait_for  # noqa: E402
from passthrough_hp import build as passthrough_hp_build  # noqa: E402

ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"
SYS_PIDFD_GETFD = 438
FUSE_NOTIFY_RESEND = 7
FUSE_FORGET = 2
READ_BUFFER = 32 << 20  # Above any max_write a server asks for.


def build_successor(workdir):
    binary = os.path.join(workdir, "ring_successor")
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", binary,
                    os.path.join(HERE, "ring_successor.c"), "-luring"], check=True)
    return binary


def possible_cpus():
    with open("/sys/devices/system/cpu/possible") as f:
        last = f.read().strip().split("-")[-1]
    return int(last) + 1


def reader(path):
    """A process that stats `path` and prints the errno's name, or "found"."""
    code = ("import errno, os, sys\n"
            "try:\n"
            "    os.stat(sys.argv[1]); print('found')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno])\n")
    return subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True)


def answer(process):
    if process is None:
        return "not started"
    if process.poll() is None:
        return "still waiting"
    if not hasattr(process, "answer"):
        process.answer = process.stdout.read().strip()
    return "answered " + process.answer


def pending_requests(fuse_fd):
    """The requests a server reading /dev/fuse would get now, as (opcode,
    unique) pairs, without waiting for more."""
    requests = []
    for _ in range(5):
        try:
            message = os.read(fuse_fd, READ_BUFFER)
        except BlockingIOError:
            time.sleep(0.2)
            continue
        _, opcode, unique = struct.unpack_from("<IIQ", message)
        requests.append((opcode, unique))
    return requests


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transport", choices=["uring", "dev"], default="uring")
    p.add_argument("--workdir", default="/var/tmp/granary-ring-probe")
    p.add_argument("--cache", default="/var/tmp/granary-libfuse-3.18")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("ring_restart_probe: run as root (mounts, the kernel parameter)")
    passthrough_hp = passthrough_hp_build(args.cache, "3.18.3")
    shutil.rmtree(args.workdir, ignore_errors=True)
    inner_source = os.path.join(args.workdir, "inner-src")
    source = os.path.join(args.workdir, "src")
    mountpoint = os.path.join(args.workdir, "mnt")
    for directory in (inner_source, source, mountpoint):
        os.makedirs(directory)
    successor = build_successor(args.workdir)
    uring = args.transport == "uring"
    with open(ENABLE_URING) as f:
        enable_uring_before = f.read().strip()
    with open(ENABLE_URING, "w") as f:
        f.write("Y" if uring else "N")
    # The source of the server under test, over /dev/fuse.
    inner = subprocess.Popen([passthrough_hp, "--foreground", "--nocache", inner_source, source],
                             env=dict(os.environ, FUSE_URING_ENABLE="0"),
                             stderr=subprocess.DEVNULL)
    wait_for(lambda: os.path.ismount(source), 10, "the inner mount")
    server = subprocess.Popen(
        [passthrough_hp, "--foreground", "--nocache", source, mountpoint],
        env=dict(os.environ, FUSE_URING_ENABLE="1" if uring else "0"),
        stderr=open(os.path.join(args.workdir, "passthrough_hp.log"), "w"))
    held = -1
    taken = before = after = None
    try:
        for _ in range(200):
            if os.path.ismount(mountpoint):
                break
            time.sleep(0.05)
        os.stat(mountpoint)
        descriptors = {}
        for fd in os.listdir("/proc/%d/fd" % server.pid):
            try:
                descriptors[int(fd)] = os.readlink("/proc/%d/fd/%s" % (server.pid, fd))
            except FileNotFoundError:  # Closed since the listing.
                pass
        print("transport %s; the server holds %s" % (
            args.transport, ", ".join(sorted(set(t for t in descriptors.values()
                                                 if t.startswith(("/dev/fuse", "anon_inode")))))))
        server_fd = next(fd for fd, target in descriptors.items() if target == "/dev/fuse")
        libc = ctypes.CDLL(None, use_errno=True)
        held = libc.syscall(SYS_PIDFD_GETFD, os.pidfd_open(server.pid), server_fd, 0)
        if held < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")

        # The server's source is a second FUSE mount whose own server is
        # stopped: a lookup the server takes then waits there, taken and not
        # answered when the server dies.
        os.kill(inner.pid, signal.SIGSTOP)
        taken = reader(os.path.join(mountpoint, "taken-and-not-answered"))
        time.sleep(0.5)
        os.kill(server.pid, signal.SIGSTOP)
        time.sleep(0.2)
        before = reader(os.path.join(mountpoint, "asked-before-the-death"))
        time.sleep(0.5)
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        time.sleep(0.5)
        after = reader(os.path.join(mountpoint, "asked-after-the-death"))
        time.sleep(0.5)
        print("server killed: the lookup it had taken %s; reader asking before its death %s; "
              "after it %s" % (answer(taken), answer(before), answer(after)))

        os.set_blocking(held, False)
        print("requests a successor on /dev/fuse reads: %s" % pending_requests(held))
        os.write(held, struct.pack("<IiQ", 16, FUSE_NOTIFY_RESEND, 0))
        time.sleep(0.3)
        resent = pending_requests(held)
        print("after FUSE_NOTIFY_RESEND: %s" % resent)
        os.set_blocking(held, True)
        if not uring:
            for opcode, unique in resent:
                if opcode != FUSE_FORGET:  # FORGET takes no answer.
                    os.write(held, struct.pack("<IiQ", 16, -errno.ENOENT, unique))
            time.sleep(0.3)
            print("resent requests answered over /dev/fuse: the lookup taken %s; before the death "
                  "%s; after it %s" % (answer(taken), answer(before), answer(after)))

        if uring:
            process = subprocess.Popen([successor, str(held), str(possible_cpus())],
                                       pass_fds=[held], stdout=subprocess.PIPE, text=True)
            time.sleep(1)
            print("successor registered; readers so far: the lookup taken %s; before the death "
                  "%s; after it %s" % (answer(taken), answer(before), answer(after)))
            during = reader(os.path.join(mountpoint, "asked-while-the-successor-serves"))
            output = process.communicate(timeout=60)[0]
            print("successor on new ring entries:\n  " + output.strip().replace("\n", "\n  "))
            print("readers: the lookup taken %s; before the death %s; after it %s; while the "
                  "successor served %s" % (answer(taken), answer(before), answer(after),
                                           answer(during)))
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if held >= 0:
            os.close(held)  # The connection's last descriptor: the kernel ends it.
            time.sleep(0.3)
            print("connection ended: the lookup taken %s; before the death %s; after it %s" %
                  (answer(taken), answer(before), answer(after)))
        subprocess.run(["umount", "-l", mountpoint], capture_output=True)
        inner.send_signal(signal.SIGCONT)
        inner.kill()
        inner.wait()
        subprocess.run(["umount", "-l", source], capture_output=True)
        with open(ENABLE_URING, "w") as f:
            f.write(enable_uring_before)


if __name__ == "__main__":
    main()
