#!/usr/bin/python3
"""Prewarm of an S3 dataset against parallel GETs of the same objects by curl.

One run, per repetition, against one s3rver (tests/support/s3rver, installed
by scripts/install-deps.sh) on loopback holding --objects objects of
--object-mib MiB:

  baseline: curl fetching every object at once with --parallel
            --parallel-max --parallel (what `aws s3 cp --recursive` does with
            its 10 concurrent requests), signed with --aws-sigv4, bodies
            discarded;
  granary:  `granary prewarm NAME --json` of a fresh granaryd (its own data
            directory, prewarm_parallelism --parallel) that registered the
            bucket: every chunk GET, checked and stored on the cache disk.

Both read the same bytes from the same server; the ratio is granary's rate
over curl's. The medians of --repetitions are reported.

Usage (root or not): /usr/bin/python3 bench/s3/s3_prewarm_bench.py
    [--build build] [--objects 32] [--object-mib 8] [--parallel 10]
    [--repetitions 3]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from s3rver_util import KEY, REPO, free_port, signed_curl, start_s3rver, wait_for  # noqa: E402

MIB = 1 << 20
BUCKET = "bench"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--objects", type=int, default=32)
    parser.add_argument("--object-mib", type=int, default=8)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--repetitions", type=int, default=3)
    a = parser.parse_args()
    work = tempfile.mkdtemp(prefix="granary-s3-bench-")
    procs = []
    try:
        s3rver, endpoint = start_s3rver(os.path.join(work, "s3"), BUCKET)
        procs.append(s3rver)
        urls = ["%s/%s/data/part_%03d.bin" % (endpoint, BUCKET, i) for i in range(a.objects)]
        body = os.path.join(work, "object.bin")
        for url in urls:
            with open(body, "wb") as f:
                f.write(os.urandom(a.object_mib * MIB))
            subprocess.run(signed_curl("-X", "PUT", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                                       "--data-binary", "@" + body, "-o", "/dev/null", url),
                           check=True)
        total = a.objects * a.object_mib * MIB
        rows = []
        for rep in range(a.repetitions):
            cmd = signed_curl("--no-progress-meter", "--parallel", "--parallel-max", str(a.parallel))
            for url in urls:
                cmd += ["-o", "/dev/null", url]
            start = time.monotonic()
            subprocess.run(cmd, check=True)
            curl_rate = total / (time.monotonic() - start)

            data = os.path.join(work, "granaryd-%d" % rep)
            os.makedirs(data)
            config = os.path.join(data, "granaryd.yaml")
            with open(config, "w") as f:
                f.write("s3_endpoints: [%s]\nprewarm_parallelism: %d\nfill: none\n"
                        % (endpoint, a.parallel))
            socket_path = os.path.join(data, "granaryd.sock")
            env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=KEY)
            granaryd = subprocess.Popen(
                [os.path.join(a.build, "granaryd"), "--config", config, "--data-dir", data,
                 "--socket", socket_path, "--metrics-listen", "127.0.0.1:%d" % free_port()],
                env=env, stderr=open(os.path.join(data, "log"), "w"))
            procs.append(granaryd)
            wait_for(lambda: os.path.exists(socket_path), 30, "granaryd")
            cli = [os.path.join(a.build, "granary"), "--server", "unix:" + socket_path]
            time.sleep(0.5)
            subprocess.run(cli + ["dataset", "add", "bench", "s3://%s/data" % BUCKET,
                                  "--endpoint", endpoint], check=True, stdout=subprocess.DEVNULL)
            start = time.monotonic()
            out = subprocess.run(cli + ["prewarm", "bench", "--json"], check=True,
                                 capture_output=True, text=True).stdout
            granary_rate = total / (time.monotonic() - start)
            granaryd.terminate()
            granaryd.wait(30)
            last = json.loads(out)
            rows.append({"curl_mib_s": curl_rate / MIB, "granary_mib_s": granary_rate / MIB,
                         "ratio": granary_rate / curl_rate, "prewarm": last})
            print("repetition %d: curl %.0f MiB/s, granary prewarm %.0f MiB/s, ratio %.2f"
                  % (rep + 1, curl_rate / MIB, granary_rate / MIB, granary_rate / curl_rate),
                  file=sys.stderr, flush=True)
        print("%d objects of %d MiB, %d in parallel, %d repetitions: curl median %.0f MiB/s, "
              "granary prewarm median %.0f MiB/s, ratio median %.2f"
              % (a.objects, a.object_mib, a.parallel, a.repetitions,
                 statistics.median(r["curl_mib_s"] for r in rows),
                 statistics.median(r["granary_mib_s"] for r in rows),
                 statistics.median(r["ratio"] for r in rows)))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
