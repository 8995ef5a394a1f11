#!/usr/bin/env bash
# How one live switch scales over cores: two flows through one switch (host A -> port 0
# -> port 1 -> host B, and host C -> port 2 -> port 3 -> host D), each paced at RATE,
# with the switch's runtime on 1 worker thread and then on 2 (TOKIO_WORKER_THREADS).
# Its ports' tasks spread over the workers; they share the switch core's lock for the
# switching step only, and do their system calls apart.
#
# Usage: bench/dataplane/scale.sh [MEGABYTES] [RATE]   (default 60 MB per flow at 2 Gb/s)
# Environment: ATMLAB_BIN=path skips the build; ROUNDS (default 2), workers alternated.
#
# Prints per run: each flow's frames received and rate at its receiver, the switch's
# cells forwarded (its cells-out counters) over the flows' common span, and its CPU time.
set -euo pipefail
mb="${1:-60}"; rate="${2:-2 Gb/s}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ -z "${ATMLAB_BIN:-}" ]; then
  (cd "$root" && cargo build --release -q -p atmlab)
  ATMLAB_BIN="$root/target/release/atmlab"
fi
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
{
  echo 'name = "s1"'
  echo 'cells_per_datagram = 24'
  for p in 0 1 2 3; do printf '[[ports]]\nid = %d\nlink_rate = "10 Gb/s"\n' "$p"; done
} > "$work/s1.toml"
head -c "$((mb * 1000000))" /dev/urandom > "$work/data"
frames=$(( (mb * 1000000 + 9179) / 9180 ))
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d\n", s}'; }
out_cells() {
  RUST_LOG=error "$ATMLAB_BIN" switch stats --insecure --addr "$1" --json |
    python3 -c 'import json,sys; print(sum(p["cells_out"] for p in json.load(sys.stdin)["ports"]))'
}
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, 2 flows of $mb MB ($frames frames) at $rate each"
for round in $(seq 1 "${ROUNDS:-2}"); do
  order=(1 2); [ $((round % 2)) -eq 0 ] && order=(2 1)
  for workers in "${order[@]}"; do
    : > "$work/serve.out"
    TOKIO_WORKER_THREADS=$workers RUST_LOG=error "$ATMLAB_BIN" switch serve --insecure \
      --config "$work/s1.toml" > "$work/serve.out" &
    serve=$!
    for _ in $(seq 100); do grep -q "port 3 udp" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
    grpc="$(sed -n 's/.*gRPC http:\/\/\(.*\)/\1/p' "$work/serve.out")"
    port() { sed -n "s/.*port $1 udp \(.*\)/\1/p" "$work/serve.out"; }
    for f in 0 2; do
      "$ATMLAB_BIN" switch commit --insecure --addr "$grpc" --in "$f:0/100" --out "$((f + 1)):0/200" \
        --pcr 23584905 >/dev/null 2>&1
    done
    for f in 0 2; do
      RUST_LOG=error "$ATMLAB_BIN" host recv --insecure --switch "$(port $((f + 1)))" --control "$grpc" \
        --port $((f + 1)) --vc 0/200 --rate "$rate" --frames "$frames" --idle "2 s" --out /dev/null \
        2> "$work/recv.$f" &
    done
    sleep 0.3
    c0="$(cpu_ns "$serve")"; o0="$(out_cells "$grpc")"; t0="$(date +%s.%N)"
    for f in 0 2; do
      RUST_LOG=error "$ATMLAB_BIN" host send --insecure --switch "$(port "$f")" --control "$grpc" \
        --port "$f" --vc 0/100 --rate "$rate" "$work/data" 2>/dev/null &
    done
    wait $(jobs -p | grep -v "^$serve$")
    t1="$(date +%s.%N)"; c1="$(cpu_ns "$serve")"; o1="$(out_cells "$grpc")"
    got=""
    for f in 0 2; do got="$got flow $f: $(sed -n 's/^received \([0-9]*\) frames.*/\1/p' "$work/recv.$f") frames, $(sed -n 's/^rate: \([0-9]*\) cells\/s.*/\1/p' "$work/recv.$f") cells/s;"; done
    python3 -c "
w, cpu, cells = $t1 - $t0, ($c1 - $c0) / 1e9, $o1 - $o0
print(f'workers $workers:$got switch forwarded {cells} cells, {cpu:.2f} CPU-s ({cells / cpu / 1e6:.2f} M cells per CPU-second)')"
    kill "$serve" 2>/dev/null || true; wait "$serve" 2>/dev/null || true
  done
done
