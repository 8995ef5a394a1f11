#!/usr/bin/env bash
# What a scrape of /metrics costs the process that serves it: `atmlab up --metrics` (the
# ring of four switches, the name service and an xbind manager in one process), its CPU
# time (utime + stime from /proc) over N scrapes, less what it spends idle over the same
# wall time, per scrape; and the share of one core that costs at a scrape a second.
#
# Usage: bench/metrics/run.sh [BIN]   (default target/release/atmlab, built if missing)
# Environment: SCRAPES (default 2000), CALLS (default 2000: calls set up first, so the
# manager's counters and latency histogram are not empty).
#
# The metrics add nothing to the per-cell path (a switch's counters are the ones its
# Statistics RPC reads) and one clock read and three atomic adds to a setup; a scrape is
# the whole of their cost, which this measures without the machine's noise in a
# throughput ratio.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-${CARGO_TARGET_DIR:-$root/target}/release/atmlab}"
[ -x "$bin" ] || (cd "$root" && cargo build --release -p atmlab)
scrapes="${SCRAPES:-2000}"
work="$(mktemp -d)"
up_pid=""
trap '[ -n "$up_pid" ] && kill "$up_pid" 2>/dev/null; rm -rf "$work"' EXIT
"$bin" up --insecure --data "$work/data" --metrics 127.0.0.1:0 >"$work/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 1 200); do grep -q "network up" "$work/up.log" 2>/dev/null && break; sleep 0.1; done
url="$(sed -n 's/^  metrics *//p' "$work/up.log")"
cm="$(sed -n 's/.*connection manager at http:\/\/\([^;]*\);.*/\1/p' "$work/up.log")"
"$bin" callgen --insecure --cm "$cm" --rate 1000 --seconds "$(( ${CALLS:-2000} / 1000 ))" >/dev/null 2>&1 || true
ticks() { awk '{print $14 + $15}' "/proc/$up_pid/stat"; }
hz="$(getconf CLK_TCK)"
for _ in $(seq 1 "$scrapes"); do echo "url = \"$url\""; echo "output = /dev/null"; done > "$work/urls"
# Idle first, for as long as the scrapes will take (timed by a first pass).
t0=$(date +%s.%N); c0=$(ticks)
curl -s -K "$work/urls"
t1=$(date +%s.%N); c1=$(ticks)
wall=$(python3 -c "print($t1 - $t0)")
sleep "$wall"
c2=$(ticks)
curl -s "$url" > "$work/last"
bytes=$(wc -c < "$work/last")
grep '^atmlab_cm_setups_total' "$work/last" || true
python3 - "$hz" "$c0" "$c1" "$c2" "$scrapes" "$wall" "$bytes" <<'PY'
import sys
hz, c0, c1, c2, n, wall, size = (float(x) for x in sys.argv[1:])
busy, idle = (c1 - c0) / hz, (c2 - c1) / hz
per = (busy - idle) / n
print(f"{int(n)} scrapes in {wall:.2f} s, {int(size)} bytes each: the process used {busy:.2f} s of CPU, "
      f"{idle:.2f} s idle over the same time")
print(f"CPU per scrape: {per * 1e3:.3f} ms; at one scrape a second: {100 * per:.3f}% of one core")
PY
