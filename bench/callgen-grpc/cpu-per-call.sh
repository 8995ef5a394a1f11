#!/usr/bin/env bash
# CPU time per call set up and released, below the knee: `atmlab up` (xbind, T = 10, the
# ring of four, mutual TLS) and `atmlab callgen --stream` in its own process at a fixed
# offered load, for one atmlab binary or several alternated. Throughput past the knee
# moves by 10-30% from run to run on a shared 2-core machine; the CPU a call costs at a
# load both binaries carry moves less, so it is the figure to compare for a change to the
# live path.
#
# Usage: bench/callgen-grpc/cpu-per-call.sh [BIN...]
#   BIN   atmlab binaries to compare (default: target/release/atmlab, built if missing)
# Environment: RATE (default 15000 calls/s), SECONDS_PER_RUN (default 4), ROUNDS (3).
#
# Prints per binary and round: setups/s, mean setup latency, and the CPU microseconds
# per call set up of `up` (the manager and four switch servers), of callgen, and both.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rate="${RATE:-15000}"
seconds="${SECONDS_PER_RUN:-4}"
rounds="${ROUNDS:-3}"
# shellcheck source=common.sh
. "$here/common.sh"
pick_bins "$@"
work="$(mktemp -d)"
up_pid=""
cleanup() {
  if [ -n "$up_pid" ]; then kill "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
tick="$(getconf CLK_TCK)"
cpu() { awk -v t="$tick" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
port=51900
for round in $(seq 1 "$rounds"); do
  for bin in "${bins[@]}"; do
    port=$((port + 1))
    rm -rf "$work/data"
    "$bin" up --threshold 10 --data "$work/data" --listen "127.0.0.1:$port" >"$work/up.log" 2>&1 &
    up_pid=$!
    wait_up "$work/up.log"
    before="$(cpu "$up_pid")"
    /usr/bin/time -f "%U %S" -o "$work/callgen.time" "$bin" callgen --cm "127.0.0.1:$port" \
      --data "$work/data" --stream --rate "$rate" --seconds "$seconds" --json \
      >"$work/rows.json" 2>"$work/callgen.err" || true
    after="$(cpu "$up_pid")"
    kill "$up_pid"
    wait "$up_pid" 2>/dev/null || true
    up_pid=""
    python3 - "$work" "$before" "$after" "$bin" "$round" <<'PY'
import json, sys
work, before, after, name, rnd = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = [json.loads(l) for l in open(work + "/rows.json") if l.strip()]
if not rows:
    sys.exit(f"callgen gave no result: {open(work + '/callgen.err').read()[-400:]}")
r = rows[-1]
n = max(r["established"], 1)
gen = sum(float(x) for x in open(work + "/callgen.time").read().split()[-2:])
up = 1e6 * (after - before) / n
print(f"round {rnd} {name}: {r['setups_per_s']:.0f} setups/s, mean {r['mean_setup_ms']:.3f} ms, "
      f"blocked {r['blocked']}; CPU per call: up {up:.1f} us, callgen {1e6 * gen / n:.1f} us, "
      f"both {up + 1e6 * gen / n:.1f} us")
PY
  done
done
