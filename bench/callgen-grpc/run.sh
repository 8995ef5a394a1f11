#!/usr/bin/env bash
# The connection manager over gRPC past its knee: `atmlab up` (xbind, T = 10, the ring of
# four) and `atmlab callgen` in its own process, at rising offered loads, for one atmlab
# binary or several side by side (alternated, a fresh network each time).
#
# Usage: bench/callgen-grpc/run.sh [BIN...]
#   BIN   atmlab binaries to compare (default: target/release/atmlab, built if missing)
# Environment: RATES (default "10000,20000,30000"), SECONDS_PER_RATE (default 2),
# ROUNDS (default 2), METRICS (default "off"; "on": `up --metrics` scraped once a second
# while callgen runs; "both": each round runs with metrics off and on, side by side, in
# alternating order), CALLS (default "unary"; "stream": `callgen --stream`, the calls
# pipelined on one Calls stream; "both": unary and stream side by side, in alternating
# order), TLS (default "off": plain text, --insecure; "on": mutual TLS with the lab's
# certificates, as issue 28's targets ask). With METRICS or CALLS "both" the end prints
# each variant's knee, the most setups/s of a round.
#
# Prints, per binary and round, callgen's table (offered/s, setups/s, latency, blocked,
# failed) and then the manager's counters, whose "active" must be 0: a call whose release
# was lost would still be up.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rates="${RATES:-10000,20000,30000}"
seconds="${SECONDS_PER_RATE:-2}"
rounds="${ROUNDS:-2}"
case "${METRICS:-off}" in
  off) modes=(off) ;;
  on) modes=(on) ;;
  both) modes=(off on) ;;
  *) echo "METRICS is off, on or both" >&2; exit 2 ;;
esac
case "${CALLS:-unary}" in
  unary) calls=(unary) ;;
  stream) calls=(stream) ;;
  both) calls=(unary stream) ;;
  *) echo "CALLS is unary, stream or both" >&2; exit 2 ;;
esac
case "${TLS:-off}" in
  off) sec=(--insecure) ;;
  on) sec=() ;;
  *) echo "TLS is off or on" >&2; exit 2 ;;
esac
# shellcheck source=common.sh
. "$here/common.sh"
pick_bins "$@"

work="$(mktemp -d)"
up_pid=""
scrape_pid=""
cleanup() {
  if [ -n "$scrape_pid" ]; then kill "$scrape_pid" 2>/dev/null || true; fi
  if [ -n "$up_pid" ]; then kill "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

port=50900
: > "$work/knees"
for round in $(seq 1 "$rounds"); do
  # Alternate which mode goes first, so neither always runs on a cooler machine.
  order=("${modes[@]}")
  if [ $((round % 2)) -eq 0 ] && [ ${#modes[@]} -eq 2 ]; then order=(on off); fi
  corder=("${calls[@]}")
  if [ $((round % 2)) -eq 0 ] && [ ${#calls[@]} -eq 2 ]; then corder=(stream unary); fi
  for bin in "${bins[@]}"; do
    for mode in "${order[@]}"; do
    for call in "${corder[@]}"; do
      port=$((port + 1))
      rm -rf "$work/data"
      extra=()
      [ "$mode" = on ] && extra=(--metrics 127.0.0.1:0)
      "$bin" up --threshold 10 "${sec[@]}" --data "$work/data" --listen "127.0.0.1:$port" \
        "${extra[@]}" >"$work/up.log" 2>&1 &
      up_pid=$!
      wait_up "$work/up.log"
      if [ "$mode" = on ]; then
        # Scraped as a Prometheus at a 1 s interval would (the heavy test's interval).
        url="$(sed -n 's/^  metrics *//p' "$work/up.log")"
        (while :; do curl -s -o /dev/null "$url" || true; sleep 1; done) &
        scrape_pid=$!
      fi
      cflag=()
      [ "$call" = stream ] && cflag=(--stream)
      echo "== round $round: $bin (metrics $mode, calls $call, tls ${TLS:-off})"
      # Past the knee some calls fail, and callgen then exits 1: the table is the result.
      "$bin" callgen --cm "127.0.0.1:$port" "${sec[@]}" --data "$work/data" "${cflag[@]}" \
        --rate "$rates" --seconds "$seconds" --json 2>"$work/callgen.err" >"$work/rows.json" || true
      grep -i "error" "$work/callgen.err" | head -3 || true
      python3 - "$work/rows.json" "$mode/$call" "$work/knees" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in rows:
    print(f"  offered {r['offered_per_s']:>8.0f}/s  setups {r['setups_per_s']:>8.0f}/s  "
          f"mean {r['mean_setup_ms']:>8.3f} ms  p99 {r['p99_setup_ms']:>8.3f} ms  "
          f"blocked {r['blocked']}  failed {r['failed']}")
if rows:
    with open(sys.argv[3], "a") as f:
        f.write(f"{sys.argv[2]} {max(r['setups_per_s'] for r in rows)}\n")
PY
      "$bin" cm status --cm "127.0.0.1:$port" "${sec[@]}" --data "$work/data" 2>/dev/null | sed -n 1p
      if [ -n "$scrape_pid" ]; then kill "$scrape_pid" 2>/dev/null || true; wait "$scrape_pid" 2>/dev/null || true; scrape_pid=""; fi
      kill "$up_pid"
      wait "$up_pid" 2>/dev/null || true
      up_pid=""
    done
    done
  done
done
if [ ${#modes[@]} -eq 2 ] || [ ${#calls[@]} -eq 2 ]; then
  python3 - "$work/knees" <<'PY'
import sys, statistics
k = {}
for line in open(sys.argv[1]):
    m, v = line.split()
    k.setdefault(m, []).append(float(v))
for m, vs in k.items():
    metrics, calls = m.split("/")
    print(f"knee, metrics {metrics}, calls {calls}: " + ", ".join(f"{v:.0f}" for v in vs)
          + f" setups/s (mean {statistics.mean(vs):.0f})")
def mean(pred):
    vs = [v for m, l in k.items() if pred(m) for v in l]
    return statistics.mean(vs) if vs else None
off, on = mean(lambda m: m.startswith("off/")), mean(lambda m: m.startswith("on/"))
if off and on:
    print(f"metrics on / off: {on / off:.4f} ({100 * (on - off) / off:+.2f}%)")
un, st = mean(lambda m: m.endswith("/unary")), mean(lambda m: m.endswith("/stream"))
if un and st:
    print(f"stream / unary: {st / un:.2f}")
PY
fi
