#!/usr/bin/env bash
# Do two atmlab binaries write the same simulation results? For a refactor that must not
# change behaviour: runs `sim run` on every example and paper scenario (the simulated
# control plane's too) and the rdma and gateway reproductions with each binary, then
# compares every file byte for byte, except
# what holds wall-clock time (run.json's timing fields, the reports' "Cost:" and "wall"
# lines, the RDMA report's table of run times). Exits 1 on any other difference.
#
#   bash scripts/same-results.sh OLD_BIN NEW_BIN [--full]
#
# --full adds the full reproductions (minutes); without it, their --quick forms. Needs jq.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OLD_BIN NEW_BIN [--full]" >&2
  exit 2
fi
old=$(realpath "$1")
new=$(realpath "$2")
full=${3:-}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {
  local bin=$1 out=$2
  for f in scenarios/examples/*.toml scenarios/gateway/*.toml scenarios/rdma/*.toml \
    scenarios/control/*.toml; do
    n=$(basename "$f" .toml)
    "$bin" sim run "$f" --out "$out/sim/$n" --threads 2 >/dev/null
  done
  local q="--quick"
  [ "$full" = "--full" ] && q=""
  "$bin" reproduce rdma $q --threads 2 --out "$out/rdma" >/dev/null
  "$bin" reproduce gateway $q --threads 2 --out "$out/gateway" >/dev/null
}

mask() {
  # Wall-clock time, and nothing else, is allowed to differ.
  find "$1" -name run.json -exec sh -c \
    'jq "del(.wall_seconds, .events_per_second, .simulated_seconds_per_second)" "$1" > "$1.masked" && mv "$1.masked" "$1"' _ {} \;
  find "$1" \( -name README.md -o -name report.md \) -exec sed -i -E \
    -e 's/^Cost: ([0-9]+) events in .*$/Cost: \1 events/' \
    -e 's/^(atmlab: [0-9]+ events), [0-9.]+ s wall/\1/' \
    -e 's/^\| ([a-z0-9.-]+) \| ([0-9]+) \| [0-9.]+ \|$/| \1 | \2 |/' {} \;
}

echo "== $old"
run "$old" "$work/old"
echo "== $new"
run "$new" "$work/new"
mask "$work/old"
mask "$work/new"
if diff -r "$work/old" "$work/new"; then
  echo "same results: every file identical (wall-clock time masked)"
else
  echo "the results differ (above)"
  exit 1
fi
