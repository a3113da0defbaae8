"""The soak's network: one network namespace per node, each joined by a veth
pair to a bridge in the root namespace, where etcd listens. Nodes talk real
TCP over the bridge; cutting a node's link takes its veth down (every peer,
and etcd, lose it) and healing brings it up again.

Names carry the harness's pid, so that namespaces and links left by a run
that died are recognised and removed by the next one, and a run refuses to
start beside one still running: both would use the same subnet and etcd
ports, and each would break the other.
"""
import os
import re
import subprocess

SUBNET = "10.79.0"
BRIDGE_ADDRESS = f"{SUBNET}.1"


def ip(*args, check=True):
    """Runs `ip ARGS`; raises with its output when it fails and `check`."""
    done = subprocess.run(["/usr/sbin/ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def remove_leftovers():
    """Removes namespaces and bridges of earlier runs whose harness is gone;
    the pids of harnesses whose bridges are up and who still run."""
    for name in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        match = re.fullmatch(r"gsoak(\d+)-n\d+", name)
        if match and not _alive(int(match.group(1))):
            ip("netns", "del", name, check=False)
    running = []
    for line in ip("-br", "link", "show", "type", "bridge").stdout.splitlines():
        match = re.match(r"gsb(\d+)\b", line)
        if match and not _alive(int(match.group(1))):
            ip("link", "del", f"gsb{match.group(1)}", check=False)
        elif match:
            running.append(int(match.group(1)))
    return running


class Network:
    def __init__(self, node_count):
        running = remove_leftovers()
        if running:
            raise RuntimeError(f"another soak is running (harness pid {running[0]}): two cannot "
                               f"share a machine ({SUBNET}.0/24 and etcd's ports)")
        tag = os.getpid()
        self.bridge = f"gsb{tag}"
        self.namespaces = [f"gsoak{tag}-n{i + 1}" for i in range(node_count)]
        self.links = [f"gsv{tag}n{i + 1}" for i in range(node_count)]
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i, (ns, link) in enumerate(zip(self.namespaces, self.links)):
            ip("netns", "add", ns)
            ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", link, "master", self.bridge)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("link", "set", link, "up")

    def address(self, i):
        return f"{SUBNET}.{10 + i + 1}"

    def prefix(self, i):
        """The words that run a command in node i's namespace (its network only)."""
        return ["/usr/bin/nsenter", f"--net=/run/netns/{self.namespaces[i]}", "--"]

    def cut(self, i):
        ip("link", "set", self.links[i], "down")

    def heal(self, i):
        ip("link", "set", self.links[i], "up")

    def close(self):
        for ns in self.namespaces:
            ip("netns", "del", ns, check=False)
        ip("link", "del", self.bridge, check=False)
