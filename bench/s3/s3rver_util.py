"""What the S3 benchmarks share: s3rver (tests/support/s3rver, installed by
scripts/install-deps.sh) on a free loopback port, and curl requests signed
with its keys."""
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench"))
from bench_util import free_port, wait_for  # noqa: E402

KEY = "S3RVER"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
S3RVER = os.path.join(REPO, "tests", "support", "s3rver", "node_modules", "s3rver", "bin",
                      "s3rver.js")


def signed_curl(*args):
    return ["curl", "-sS", "--fail", "--aws-sigv4", "aws:amz:us-east-1:s3", "-u",
            KEY + ":" + KEY, "-H", "x-amz-content-sha256: " + EMPTY_SHA256] + list(args)


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_s3rver(directory, bucket):
    """s3rver serving `bucket` out of `directory`: (its process, its endpoint)."""
    port = free_port()
    os.makedirs(directory, exist_ok=True)
    proc = subprocess.Popen(
        ["/usr/bin/node", "--openssl-legacy-provider", S3RVER, "--directory", directory,
         "--address", "127.0.0.1", "--port", str(port), "--silent", "--configure-bucket", bucket])
    try:
        wait_for(lambda: port_open(port), 30, "s3rver")
    except RuntimeError:
        proc.kill()
        raise
    return proc, "http://127.0.0.1:%d" % port
