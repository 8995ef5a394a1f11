#!/usr/bin/env bash
# The connection manager over gRPC past its knee: `atmlab up` (xbind, T = 10, the ring of
# four) and `atmlab callgen` in its own process, at rising offered loads, for one atmlab
# binary or several side by side (alternated, a fresh network each time).
#
# Usage: bench/callgen-grpc/run.sh [BIN...]
#   BIN   atmlab binaries to compare (default: target/release/atmlab, built if missing)
# Environment: RATES (default "10000,20000,30000"), SECONDS_PER_RATE (default 2),
# ROUNDS (default 2).
#
# Prints, per binary and round, callgen's table (offered/s, setups/s, latency, blocked,
# failed) and then the manager's counters, whose "active" must be 0: a call whose release
# was lost would still be up. Plain text on loopback (--insecure), to measure the
# manager and HTTP/2, not TLS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rates="${RATES:-10000,20000,30000}"
seconds="${SECONDS_PER_RATE:-2}"
rounds="${ROUNDS:-2}"
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  bin="${CARGO_TARGET_DIR:-$root/target}/release/atmlab"
  [ -x "$bin" ] || (cd "$root" && cargo build --release -p atmlab)
  bins=("$bin")
fi

work="$(mktemp -d)"
up_pid=""
cleanup() {
  if [ -n "$up_pid" ]; then kill "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

port=50900
for round in $(seq 1 "$rounds"); do
  for bin in "${bins[@]}"; do
    port=$((port + 1))
    rm -rf "$work/data"
    "$bin" up --threshold 10 --insecure --data "$work/data" --listen "127.0.0.1:$port" \
      >"$work/up.log" 2>&1 &
    up_pid=$!
    for _ in $(seq 1 100); do
      grep -q "network up" "$work/up.log" 2>/dev/null && break
      sleep 0.1
    done
    echo "== round $round: $bin"
    # Past the knee some calls fail, and callgen then exits 1: the table is the result.
    "$bin" callgen --cm "127.0.0.1:$port" --insecure --rate "$rates" --seconds "$seconds" 2>/dev/null || true
    "$bin" cm status --cm "127.0.0.1:$port" --insecure 2>/dev/null | sed -n 1p
    kill "$up_pid"
    wait "$up_pid" 2>/dev/null || true
    up_pid=""
  done
done
