"""The soak's object store: granary-test-s3 (tests/support/verified_s3_main.cc),
a real s3rver behind the SigV4 front end of the S3 tests, listening on the
bridge address, where granaryd and granary-fuse reach it from their
namespaces (a node whose link is cut loses it, as it loses its peers). The
harness writes objects through that front end as any S3 writer does, signed
with its keys (AWS Signature Version 4); the front end makes each write
atomic, as S3's are.

Thread-safety: put() may be called from any thread; close() from one.
"""
import datetime
import hashlib
import hmac
import http.client
import json
import os
import select
import signal
import subprocess
import urllib.parse

BUCKET = "soak"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


class ObjectStore:
    """granary-test-s3 serving bucket BUCKET on `address`; its objects live under `root`/s3."""

    def __init__(self, binary, root, address):
        self.log_path = os.path.join(root, "granary-test-s3.log")
        self.tmp = os.path.join(root, "s3")
        os.makedirs(self.tmp, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [binary, "--listen", address, BUCKET], stdout=subprocess.PIPE, stderr=log,
                stdin=subprocess.DEVNULL, env=dict(os.environ, TMPDIR=self.tmp), text=True)
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            self.process.wait()
            with open(self.log_path, errors="replace") as log:
                raise RuntimeError(f"granary-test-s3 did not start:\n{log.read()[-2000:]}")
        started = json.loads(line)
        self.endpoint = started["endpoint"]
        self.access_key, self.secret = started["access_key"], started["secret"]
        self.region = started["region"]
        self.counts = None
        self._host = urllib.parse.urlsplit(self.endpoint).netloc

    def environment(self):
        """The environment of a process that reads the store: this one's
        without AWS settings of its own, with the store's keys."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret)
        return env

    def source_args(self, prefix):
        """The words of `granary dataset add` naming the objects under `prefix`/."""
        return [f"s3://{BUCKET}/{prefix}", "--endpoint", self.endpoint, "--region", self.region]

    def put(self, key, data):
        """Writes `data` as object `key` of BUCKET; raises on any answer but 200."""
        path = "/" + urllib.parse.quote(f"{BUCKET}/{key}", safe="/-_.~")
        headers = self._signed("PUT", path)
        headers["Content-Type"] = "application/octet-stream"
        # A connection of its own: the front end closes idle ones unannounced.
        connection = http.client.HTTPConnection(self._host, timeout=60)
        try:
            connection.request("PUT", path, body=data, headers=headers)
            answer = connection.getresponse()
            body = answer.read()
        finally:
            connection.close()
        if answer.status != 200:
            raise RuntimeError(f"PUT {path} answered {answer.status}: {body[:300]!r}")

    def _signed(self, method, path):
        """The headers that sign `method` `path` (no query, payload unsigned)."""
        amz_date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        headers = {"host": self._host, "x-amz-content-sha256": UNSIGNED_PAYLOAD,
                   "x-amz-date": amz_date}
        names = sorted(headers)
        signed_headers = ";".join(names)
        canonical = "\n".join([method, path, ""] + [f"{n}:{headers[n]}" for n in names] +
                              ["", signed_headers, UNSIGNED_PAYLOAD])
        scope = f"{amz_date[:8]}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = _hmac(("AWS4" + self.secret).encode(), amz_date[:8])
        for part in (self.region, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                                    f"SignedHeaders={signed_headers}, Signature={signature}")
        return headers

    def close(self):
        """Stops the store; what its front end counted ({} if it did not say)."""
        if self.counts is not None:
            return self.counts
        self.counts = {}
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                out, _ = self.process.communicate(timeout=60)
                lines = out.strip().splitlines()
                self.counts = json.loads(lines[-1]) if lines else {}
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.counts
