#!/usr/bin/env bash
# The Granary demo, from a fresh Debian 12 machine: installs the dependencies,
# builds, starts granaryd (its embedded default configuration, or a private
# one under a temporary directory if the default one is taken), generates a
# deterministic sample dataset, registers it, prewarms it with a progress bar,
# mounts every dataset with granary-fuse and reads every file back through the
# mount, comparing it with the source, prints `granary status` with the hit
# ratio, then unmounts, stops the server and removes what it created.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${GRANARY_BUILD_DIR:-$root/build}"
dataset=granary-demo

step() { printf '\n== %s\n' "$*"; }

step "installing dependencies"
bash "$root/scripts/install-deps.sh"
step "building"
# The three programs the demo runs; the test suites and benchmarks are built
# by the README's test command.
GRANARY_BUILD_DIR="$build_dir" GRANARY_BUILD_TARGETS="granaryd granary granary-fuse" \
  bash "$root/scripts/build.sh"
granary="$build_dir/granary"
granaryd="$build_dir/granaryd"
granary_fuse="$build_dir/granary-fuse"

work="$(mktemp -d "${TMPDIR:-/tmp}/granary-demo.XXXXXX")"
server_pid=""
mount_dir="$work/mnt"
cleanup() {
  local status=$?
  if mountpoint -q "$mount_dir" 2>/dev/null; then
    fusermount3 -u "$mount_dir" 2>/dev/null || fusermount3 -uz "$mount_dir" 2>/dev/null || true
  fi
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    # The default data directory outlives the demo: leave no dataset behind.
    "$granary" dataset rm "$dataset" >/dev/null 2>&1 || true
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  if ((status != 0)); then
    echo "demo: failed (exit $status)" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts granaryd with "$@" and waits until it answers; fails if it exits first.
start_server() {
  "$granaryd" "$@" >"$work/granaryd.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    if "$granary" status >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      wait "$server_pid" || true
      server_pid=""
      return 1
    fi
    sleep 0.1
  done
  echo "demo: granaryd did not answer within 10 s; its log:" >&2
  cat "$work/granaryd.log" >&2
  return 1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

step "starting granaryd"
unset GRANARY_SERVER
# The one configuration granaryd needs: where datasets may come from.
if ! "$granary" status >/dev/null 2>&1 && start_server --source-root "$work"; then
  echo "granaryd runs with its embedded defaults and $work as its source root (pid $server_pid)"
else
  # A granaryd already owns the default socket, data directory or metrics port.
  export GRANARY_SERVER="unix:$work/granaryd.sock"
  start_server --source-root "$work" --data-dir "$work/data" --socket "$work/granaryd.sock" \
    --metrics-listen "127.0.0.1:$(free_port)" || {
    cat "$work/granaryd.log" >&2
    exit 1
  }
  echo "the default granaryd setup is taken; this one runs under $work (pid $server_pid)"
fi
"$granary" dataset rm "$dataset" >/dev/null 2>&1 || true  # left by an interrupted run

step "generating a sample dataset"
source_dir="$work/source"
python3 - "$source_dir" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(20261130)
total = 0
for split in ("train", "val"):
    for label in range(8):
        directory = os.path.join(root, split, f"class_{label:02d}")
        os.makedirs(directory, exist_ok=True)
        for index in range(30 if split == "train" else 8):
            size = rng.randint(1, 96) * 1024 + rng.randint(0, 1023)
            with open(os.path.join(directory, f"sample_{index:04d}.bin"), "wb") as f:
                f.write(rng.randbytes(size))
            total += size
os.makedirs(os.path.join(root, "shards"), exist_ok=True)
for index in range(3):
    size = (5 + 2 * index) * 1024 * 1024 + 12345
    with open(os.path.join(root, "shards", f"shard_{index}.tar"), "wb") as f:
        f.write(rng.randbytes(size))
    total += size
with open(os.path.join(root, "labels.txt"), "w") as f:
    f.writelines(f"class_{label:02d}\n" for label in range(8))
print(f"{sum(len(files) for _, _, files in os.walk(root))} files, {total / 2**20:.1f} MiB")
PY

step "granary dataset add $dataset $source_dir"
"$granary" dataset add "$dataset" "$source_dir"
"$granary" dataset ls

step "granary prewarm $dataset"
"$granary" prewarm "$dataset"

step "granary-fuse $mount_dir"
mkdir -p "$mount_dir"
"$granary_fuse" "$mount_dir" --log-file "$work/granary-fuse.log"
ls "$mount_dir"

step "reading every file back through the mount and comparing it with the source"
count=0
while IFS= read -r -d '' file; do
  relative="${file#"$source_dir"/}"
  if ! cmp -s "$mount_dir/$dataset/$relative" "$file"; then
    echo "demo: $relative differs from its source" >&2
    exit 1
  fi
  count=$((count + 1))
done < <(find "$source_dir" -type f -print0 | sort -z)
diff -r "$source_dir" "$mount_dir/$dataset"
echo "all $count files read through $mount_dir/$dataset match their source byte for byte"
echo "one through the CLI too: granary cat $dataset/labels.txt"
"$granary" cat "$dataset/labels.txt" | head -3

step "granary locate $dataset"
"$granary" locate "$dataset"

step "granary status"
"$granary" status

step "unmounting and stopping granaryd"
fusermount3 -u "$mount_dir"
"$granary" dataset rm "$dataset"
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
echo "demo: done"
