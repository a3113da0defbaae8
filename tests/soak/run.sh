#!/usr/bin/env bash
# Runs one soak of a Granary cluster (tests/soak/README.md): four granaryd in
# network namespaces, etcd, two granary-fuse mounts, a dozen datasets, jobs
# checking every byte, faults on a seeded schedule, a checker and a report.
#   bash tests/soak/run.sh [--minutes N] [--seed N] [--out DIR] [--build DIR] [--stale-fault]
# Needs root and the built binaries (bash scripts/build.sh). Exit status 0
# when the run is judged as expected.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" exec /usr/bin/python3 -m granary_soak.main "$@"
