"""The soak's child processes: one spawned program with its log, and the
helpers that wait for something to come up.

A Child appends every run's output to one log file, so that a restarted
server's log still holds what the earlier runs said.
"""
import signal
import socket
import subprocess
import time


class Child:
    def __init__(self, argv, log_path, env=None):
        self.argv = argv
        self.log_path = log_path
        self.env = env
        self.process = None

    def start(self):
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {time.strftime('%H:%M:%S')}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env)
        return self

    @property
    def pid(self):
        return self.process.pid if self.running() else None

    def running(self):
        return self.process is not None and self.process.poll() is None

    def kill(self):
        """SIGKILL and reap, as a crash would end it."""
        if self.running():
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def terminate(self, timeout=20):
        """SIGTERM; SIGKILL if it has not exited after `timeout` s. Its exit code."""
        if not self.running():
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def log_tail(self, lines=20):
        with open(self.log_path, "rb") as log:
            return b"\n".join(log.read().splitlines()[-lines:]).decode(errors="replace")


def wait_until(predicate, timeout, what, interval=0.05):
    """Polls `predicate` until it is true; raises naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(interval)


def accepts_connections(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
