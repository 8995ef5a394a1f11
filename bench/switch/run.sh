#!/usr/bin/env bash
# Connection add+delete operations per second against one switch server, by interface:
# the modern version of ReTINA's Table 3.3 (paper 001 §3.5). One operation is one add
# (commit) or one delete (release).
#
# Usage: bench/switch/run.sh [SECONDS]      (default 3 s per row)
# Environment: ATMLAB_BIN=path skips the build; INSECURE=1 runs without TLS.
#
# Starts `atmlab switch serve` (gRPC + raw TCP, mutual TLS) and `atmlab switch proxy`
# (gRPC in front of the raw interface), then runs `atmlab switch bench` in each mode.
# The load generator and the server share this machine's cores, as the papers' did not.
set -euo pipefail
secs="${1:-3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ -z "${ATMLAB_BIN:-}" ]; then
  (cd "$root" && cargo build --release -q -p atmlab)
  ATMLAB_BIN="$root/target/release/atmlab"
fi
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
sec=(--certs "$work/certs")
if [ "${INSECURE:-0}" = 1 ]; then sec=(--insecure); fi
# shellcheck source=common.sh
. "$root/bench/switch/common.sh"
switch_files "$ATMLAB_BIN" "$work"
RUST_LOG=warn "$ATMLAB_BIN" switch serve --config "$work/s1.toml" "${sec[@]}" > "$work/serve.out" &
wait_serving "$work/serve.out"
grpc="$(sed -n 's/.*gRPC https\?:\/\/\(.*\)/\1/p' "$work/serve.out")"
raw="$(sed -n 's/.*raw TCP \(.*\)/\1/p' "$work/serve.out")"
RUST_LOG=warn "$ATMLAB_BIN" switch proxy --raw "$raw" "${sec[@]}" > "$work/proxy.out" &
for _ in $(seq 100); do grep -q "proxy:" "$work/proxy.out" 2>/dev/null && break; sleep 0.1; done
proxy="$(sed -n 's/.*gRPC https\?:\/\/\(.*\) ->.*/\1/p' "$work/proxy.out")"

bench() { "$ATMLAB_BIN" switch bench "${sec[@]}" --seconds "$secs" "$@"; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, ${secs} s per row, TLS: $([ "${INSECURE:-0}" = 1 ] && echo off || echo mutual)"
bench --addr "$grpc" --mode unary --workers 1
bench --addr "$grpc" --mode unary --workers 16
for b in 1 4 10 100; do bench --addr "$grpc" --mode execute --batch "$b" --workers 1; done
bench --addr "$grpc" --mode execute --batch 100 --workers 4
bench --addr "$grpc" --mode stream --batch 256 --workers 1
bench --addr "$grpc" --mode stream --batch 256 --workers 4
bench --raw "$raw" --mode raw --batch 1 --workers 1
bench --raw "$raw" --mode raw --batch 1 --workers 16
bench --raw "$raw" --mode raw --batch 100 --workers 4
bench --addr "$proxy" --mode unary --workers 1
bench --addr "$proxy" --mode unary --workers 16
