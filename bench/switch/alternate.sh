#!/usr/bin/env bash
# The switch server's command stream, for several atmlab binaries alternated: operations
# per second (adds and deletes, 256 in flight per stream) and the server's CPU time per
# operation, against a fresh `atmlab switch serve` with mutual TLS each time. The CPU per
# operation is the figure to compare for a change to the switch server: the load
# generator shares the machine's cores, so operations per second move with it.
#
# Usage: bench/switch/alternate.sh BIN...
# Environment: ROUNDS (default 3), SECS (default 3 s per run), WORKERS (default 4 streams).
set -euo pipefail
secs="${SECS:-3}"
rounds="${ROUNDS:-3}"
workers="${WORKERS:-4}"
[ "$#" -ge 1 ] || { echo "usage: $0 BIN..." >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
. "$here/common.sh"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
tick="$(getconf CLK_TCK)"
cpu() { awk -v t="$tick" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    switch_files "$bin" "$work"
    RUST_LOG=warn "$bin" switch serve --config "$work/s1.toml" --certs "$work/certs" > "$work/serve.out" &
    spid=$!
    wait_serving "$work/serve.out"
    grpc="$(sed -n 's/.*gRPC https\?:\/\/\(.*\)/\1/p' "$work/serve.out")"
    c0="$(cpu "$spid")"
    out="$("$bin" switch bench --certs "$work/certs" --seconds "$secs" --addr "$grpc" \
      --mode stream --batch 256 --workers "$workers" 2>&1 | tail -1)"
    c1="$(cpu "$spid")"
    ops="$(echo "$out" | grep -o '[0-9.]* ops/s' | head -1 | cut -d' ' -f1)"
    per_op="$(echo "$c0 $c1 $ops $secs" | awk '{printf "%.2f", ($2 - $1) * 1e6 / ($3 * $4)}')"
    echo "round $round $bin: $out | server CPU $per_op us/op"
    kill "$spid"
    wait "$spid" 2>/dev/null || true
  done
done
