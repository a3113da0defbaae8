"""The run's history: one JSON object a line, each with `t`, seconds since the
run began (monotonic), and `type`. Jobs record their reads, the nemesis its
faults, the sampler its samples; the checker judges the file afterwards.

Thread-safety: record() may be called from any thread.
"""
import json
import threading
import time


class History:
    def __init__(self, path):
        self.path = path
        self.start = time.monotonic()
        self._out = open(path, "w", buffering=1)
        self._lock = threading.Lock()

    def now(self):
        return time.monotonic() - self.start

    def record(self, type_, **fields):
        line = json.dumps({"t": round(self.now(), 4), "type": type_, **fields})
        with self._lock:
            self._out.write(line + "\n")

    def close(self):
        with self._lock:
            self._out.close()


def load(path):
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]
