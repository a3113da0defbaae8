#!/usr/bin/env python3
"""Granary's HTTP endpoints under hostile clients (bench/RESULTS.md, finding 8).

1. Probe latency: GET /healthz on granary-extender and GET /metrics on granaryd,
   each probe on a new connection as kubelet and Prometheus make them, first on
   idle servers, then while 100 connections trickle header bytes (one byte per
   connection every 500 ms) and 100 more sit idle on each server. Reported as
   the ratio of the loaded median (and p90) to the idle one, measured in the
   same run; a probe unanswered within --probe-timeout counts as failed.
2. Extender memory: the peak RSS (VmHWM) of a fresh granary-extender after one
   request, for a body at --max-body-bytes (node names, and a whole NodeList to
   /filter, the form that builds a JSON tree) and for a 110 MB body, as a ratio
   of the peak after an empty request.

--before DIR runs the same against the binaries in DIR (granaryd,
granary-extender) as a second variant, e.g. a build of the previous commit.

    /usr/bin/python3 bench/scheduler_hooks/http_limits_bench.py --build build \
        [--before /tmp/old-binaries]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_util import free_port, wait_for  # noqa: E402

SLOW_CLIENTS = 100
IDLE_CLIENTS = 100
BODY_LIMIT = 1 << 20  # granary-extender's default --max-body-bytes.


def probe(port, path, timeout):
    """Seconds for one GET on a new connection, or None if unanswered."""
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            reply = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                reply += data
    except OSError:
        return None
    if not reply.startswith(b"HTTP/1.1 200"):
        return None
    return time.perf_counter() - start


def probes(port, path, count, timeout):
    times, failed = [], 0
    for _ in range(count):
        took = probe(port, path, timeout)
        if took is None:
            failed += 1
        else:
            times.append(took)
    return times, failed


class Held:
    """Slow and idle connections held against one port."""

    def __init__(self, port):
        self.idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(IDLE_CLIENTS)]
        self.slow = []
        for _ in range(SLOW_CLIENTS):
            conn = socket.create_connection(("127.0.0.1", port))
            conn.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            conn.setblocking(False)
            self.slow.append(conn)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.trickle, daemon=True)
        self.thread.start()

    def trickle(self):
        while not self.stop.wait(0.5):
            for conn in self.slow:
                try:
                    conn.send(b"s")
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.thread.join()
        for conn in self.idle + self.slow:
            conn.close()


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def post(port, path, body_path, timeout=120):
    """POSTs the file; the HTTP status, or None."""
    size = os.path.getsize(body_path)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {size}\r\nConnection: close\r\n\r\n".encode())
        try:
            with open(body_path, "rb") as body:
                while chunk := body.read(1 << 20):
                    conn.sendall(chunk)
        except OSError:
            pass  # Refused before the end: the answer is waiting.
        reply = b""
        try:
            while data := conn.recv(65536):
                reply += data
        except OSError:
            pass
    return int(reply[9:12]) if reply.startswith(b"HTTP/1.1 ") else None


def write_names_body(path, size):
    with open(path, "w") as out:
        out.write('{"Pod": {"metadata": {"name": "p", "annotations": '
                  '{"granary.io/datasets": "imagenet"}}}, "Nodes": null, "NodeNames": ["node-0"')
        written, i = out.tell(), 1
        while written < size - 40:
            name = f',"gpu-node-{i:07d}"'
            out.write(name)
            written += len(name)
            i += 1
        out.write("]}")


def node(i):
    name = f"node-{i:06d}"
    return {"metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "48100",
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "topology.kubernetes.io/zone": "rack-a"}},
            "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
            "status": {"capacity": {"cpu": "96", "memory": "1056766524Ki", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "95", "memory": "1056664124Ki"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"kubeletVersion": "v1.29.4", "architecture": "amd64"}}}


def write_node_list_body(path, size):
    one = len(json.dumps(node(0))) + 2
    items = [node(i) for i in range((size - 300) // one)]
    body = {"Pod": {"metadata": {"name": "p", "annotations": {"granary.io/datasets": "imagenet"}}},
            "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    with open(path, "w") as out:
        json.dump(body, out)


class Servers:
    """granaryd and granary-extender from one directory of binaries."""

    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.metrics_port = free_port()
        self.socket = os.path.join(work, "granaryd.sock")
        self.log = open(os.path.join(work, "servers.log"), "a")
        self.granaryd = subprocess.Popen(
            [os.path.join(bin_dir, "granaryd"), "--data-dir", os.path.join(work, "data"),
             "--socket", self.socket, "--listen", f"127.0.0.1:{free_port()}",
             "--metrics-listen", f"127.0.0.1:{self.metrics_port}", "--capacity", "1GiB"],
            stdout=self.log, stderr=self.log)
        wait_for(lambda: probe(self.metrics_port, "/metrics", 1) is not None, 30, "granaryd")

    def extender(self):
        port = free_port()
        process = subprocess.Popen(
            [os.path.join(self.bin_dir, "granary-extender"), "--server", "unix:" + self.socket,
             "--listen", f"127.0.0.1:{port}"], stdout=self.log, stderr=self.log)
        wait_for(lambda: probe(port, "/healthz", 1) is not None, 30, "granary-extender")
        return process, port

    def close(self):
        self.granaryd.terminate()
        self.granaryd.wait()
        self.log.close()


def stop(process):
    process.kill()
    process.wait()


def latency(servers, count, timeout):
    extender, port = servers.extender()
    rows = {}
    try:
        targets = {"extender /healthz": (port, "/healthz"),
                   "granaryd /metrics": (servers.metrics_port, "/metrics")}
        idle = {name: probes(p, path, count, timeout) for name, (p, path) in targets.items()}
        held = [Held(port), Held(servers.metrics_port)]
        time.sleep(1)
        loaded = {name: probes(p, path, count, timeout) for name, (p, path) in targets.items()}
        for connections in held:
            connections.close()
        for name in targets:
            rows[name] = (idle[name], loaded[name])
    finally:
        stop(extender)
    return rows


def memory(servers, bodies):
    rows = {}
    for name, (path, body_path) in bodies.items():
        extender, port = servers.extender()
        try:
            status = post(port, path, body_path)
            rows[name] = (status, peak_rss_kib(extender.pid), os.path.getsize(body_path))
        finally:
            stop(extender)
    return rows


def percentile(times, share):
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", required=True, help="build directory with the binaries")
    parser.add_argument("--before", help="directory of binaries to compare against")
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--before-probes", type=int, default=10,
                        help="probes against --before while loaded (each may time out)")
    parser.add_argument("--probe-timeout", type=float, default=5.0)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="granary-http-bench-")
    try:
        bodies_dir = os.path.join(work, "bodies")
        os.makedirs(bodies_dir)
        empty = os.path.join(bodies_dir, "empty.json")
        with open(empty, "w") as out:
            out.write('{"Pod": {}, "Nodes": null, "NodeNames": []}')
        names = os.path.join(bodies_dir, "names.json")
        write_names_body(names, BODY_LIMIT - 64)
        node_list = os.path.join(bodies_dir, "node_list.json")
        write_node_list_body(node_list, BODY_LIMIT - 64)
        huge = os.path.join(bodies_dir, "huge.json")
        write_names_body(huge, 110 << 20)
        bodies = {"empty ExtenderArgs to /prioritize": ("/prioritize", empty),
                  "NodeNames at the limit to /prioritize": ("/prioritize", names),
                  "NodeNames at the limit to /filter": ("/filter", names),
                  "NodeList at the limit to /filter": ("/filter", node_list),
                  "110 MB of NodeNames to /filter": ("/filter", huge)}

        variants = [("after", os.path.abspath(args.build))]
        if args.before:
            variants.append(("before", os.path.abspath(args.before)))
        for variant, bin_dir in variants:
            variant_work = os.path.join(work, variant)
            os.makedirs(variant_work)
            servers = Servers(bin_dir, variant_work)
            try:
                count = args.probes if variant == "after" else args.before_probes
                print(f"## {variant} ({bin_dir}), load average {os.getloadavg()[0]:.1f}")
                print(f"probes on new connections, {count} per case, "
                      f"{SLOW_CLIENTS} slow + {IDLE_CLIENTS} idle connections on each server")
                for name, (idle, loaded) in latency(servers, count, args.probe_timeout).items():
                    idle_times, idle_failed = idle
                    loaded_times, loaded_failed = loaded
                    line = (f"  {name}: idle median {statistics.median(idle_times) * 1e3:.2f} ms "
                            f"p90 {percentile(idle_times, 0.9) * 1e3:.2f} ms "
                            f"({idle_failed} failed); loaded ")
                    if loaded_times:
                        line += (f"median {statistics.median(loaded_times) * 1e3:.2f} ms "
                                 f"p90 {percentile(loaded_times, 0.9) * 1e3:.2f} ms "
                                 f"({loaded_failed} failed of {count}); ratio median "
                                 f"{statistics.median(loaded_times) / statistics.median(idle_times):.2f}"
                                 f" p90 {percentile(loaded_times, 0.9) / percentile(idle_times, 0.9):.2f}")
                    else:
                        line += f"all {loaded_failed} probes failed (timeout {args.probe_timeout} s)"
                    print(line, flush=True)
                rows = memory(servers, bodies)
                base = rows["empty ExtenderArgs to /prioritize"][1]
                print("extender peak RSS (VmHWM) of a fresh process after one request")
                for name, (status, kib, size) in rows.items():
                    print(f"  {name} ({size} bytes): HTTP {status}, VmHWM {kib} KiB, "
                          f"{kib / base:.2f}x the empty request", flush=True)
            finally:
                servers.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
