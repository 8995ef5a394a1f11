#!/usr/bin/env bash
# Cells per second through one live switch: host A -> switch (UDP port 0 -> port 1) ->
# host B, AAL5 frames of 9,180 octets (192 cells) on one VC, sent at a given rate.
#
# Usage: bench/dataplane/run.sh [MEGABYTES] [RATE...]   (default 40 MB at 155.52 Mb/s,
#        622.08 Mb/s and 10 Gb/s, the last one effectively unpaced)
# Environment: ATMLAB_BIN=path skips the build. METRICS (default "off"; "on": the
# switch serves --metrics, scraped once a second while the cells flow; "both": a fresh
# switch with metrics off and one with them on, side by side, ROUNDS times (default 1)
# in alternating order, and the end prints each mode's mean cells/s per rate; SCRAPE=max
# scrapes back to back instead, and the end scales the cost found to one scrape a
# second). BEFORE=path:
# the switch and hosts of another build (metrics off) side by side with this one's,
# "before" and "after", ROUNDS times in alternating order (the control commands, commit
# and stats, are always this build's). PIN=1
# puts the switch on CPU 1 and both hosts on CPU 0 (taskset), so that the switch has a
# processor of its own and, unpaced, is the bottleneck.
#
# Prints, per rate, what host B received and its rate from the first frame to the last;
# frames lost (UDP drops when the receiver falls behind) are reported, not hidden. Beside
# it, the switch's own work: the cells it forwarded (its port 1 cells-out counter, read
# with `atmlab switch stats`) and the CPU time all its threads spent meanwhile
# (/proc/PID/task/*/schedstat, nanoseconds), as cells forwarded per CPU-second: what the
# switch forwards on one core when it is the bottleneck. That figure does not depend on
# what a lossy receiver keeps.
set -euo pipefail
mb="${1:-40}"; shift || true
rates=("$@"); [ ${#rates[@]} -eq 0 ] && rates=("155.52 Mb/s" "622.08 Mb/s" "10 Gb/s")
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ -z "${ATMLAB_BIN:-}" ]; then
  (cd "$root" && cargo build --release -q -p atmlab)
  ATMLAB_BIN="$root/target/release/atmlab"
fi
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -n "${BEFORE:-}" ]; then METRICS=before-after; fi
case "${METRICS:-off}" in
  off) modes=(off) ;;
  on) modes=(on) ;;
  both) modes=(off on) ;;
  before-after) modes=(before after) ;;
  *) echo "METRICS is off, on or both" >&2; exit 2 ;;
esac
rounds="${ROUNDS:-1}"
pin_switch=(); pin_hosts=()
if [ "${PIN:-0}" = 1 ]; then pin_switch=(taskset -c 1); pin_hosts=(taskset -c 0); fi
# 10 Gb/s ports, so that admission control takes a connection at any rate asked.
cat > "$work/s1.toml" <<TOML
name = "s1"
cells_per_datagram = 24
[[ports]]
id = 0
link_rate = "10 Gb/s"
[[ports]]
id = 1
link_rate = "10 Gb/s"
TOML
# The switch's cells out of port 1 (cumulative), and its threads' CPU time in ns.
cells_out() {
  RUST_LOG=error "$ATMLAB_BIN" switch stats --insecure --addr "$1" --json |
    python3 -c 'import json,sys; print(sum(p["cells_out"] for p in json.load(sys.stdin)["ports"] if p["port"] == 1))'
}
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d\n", s}'; }
head -c "$((mb * 1000000))" /dev/urandom > "$work/data"
frames=$(( (mb * 1000000 + 9179) / 9180 ))
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $mb MB in $frames frames of 9180 octets"
: > "$work/rates"
for round in $(seq 1 "$rounds"); do
  order=("${modes[@]}")
  if [ $((round % 2)) -eq 0 ] && [ ${#modes[@]} -eq 2 ]; then order=("${modes[1]}" "${modes[0]}"); fi
  for mode in "${order[@]}"; do
    bin="$ATMLAB_BIN"
    [ "$mode" = before ] && bin="$BEFORE"
    extra=()
    [ "$mode" = on ] && extra=(--metrics 127.0.0.1:0)
    : > "$work/serve.out"
    RUST_LOG=error "${pin_switch[@]}" "$bin" switch serve --insecure --config "$work/s1.toml" "${extra[@]}" > "$work/serve.out" &
    serve=$!
    ready="port 1 udp"
    [ "$mode" = on ] && ready="metrics http"
    for _ in $(seq 100); do grep -q "$ready" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
    grpc="$(sed -n 's/.*gRPC http:\/\/\(.*\)/\1/p' "$work/serve.out")"
    p0="$(sed -n 's/.*port 0 udp \(.*\)/\1/p' "$work/serve.out")"
    p1="$(sed -n 's/.*port 1 udp \(.*\)/\1/p' "$work/serve.out")"
    scrape=""
    : > "$work/scrapes"
    if [ "$mode" = on ] && [ "${SCRAPE:-1s}" = max ]; then
      # Scraped back to back over one kept-alive connection: the cost of a scrape,
      # magnified (the summary scales it back to one scrape a second).
      url="$(sed -n 's/.*metrics \(http:.*\)/\1/p' "$work/serve.out")"
      "${pin_hosts[@]}" python3 -c '
import http.client, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1]); c = http.client.HTTPConnection(u.hostname, u.port)
n = 0
while True:
    c.request("GET", u.path); c.getresponse().read(); n += 1
    if n % 20 == 0:
        open(sys.argv[2], "w").write(str(n))' "$url" "$work/scrapes" &
      scrape=$!
    elif [ "$mode" = on ]; then
      # Scraped as a Prometheus at a 1 s interval would.
      url="$(sed -n 's/.*metrics \(http:.*\)/\1/p' "$work/serve.out")"
      "${pin_hosts[@]}" bash -c 'while :; do curl -s -o /dev/null "$1" || true; sleep 1; done' _ "$url" &
      scrape=$!
    fi
    scrapes() { cat "$work/scrapes" 2>/dev/null | grep . || echo 0; }
    "$ATMLAB_BIN" switch commit --insecure --addr "$grpc" --in 0:0/100 --out 1:0/200 --pcr 23584905 >/dev/null
    for rate in "${rates[@]}"; do
      # Each host binds its port through the control path (AttachHost): a host port
      # takes no host from a first datagram (issue 24).
      "${pin_hosts[@]}" "$bin" host recv --insecure --switch "$p1" --control "$grpc" --port 1 --vc 0/200 \
        --rate "$rate" --frames "$frames" --idle "3 s" --out /dev/null 2> "$work/recv.err" &
      recv=$!
      sleep 0.3
      out0="$(cells_out "$grpc")"; cpu0="$(cpu_ns "$serve")"; sc0="$(scrapes)"; t0="$(date +%s.%N)"
      "${pin_hosts[@]}" "$bin" host send --insecure --switch "$p0" --control "$grpc" --port 0 --vc 0/100 \
        --rate "$rate" "$work/data" 2>/dev/null
      wait "$recv" || true
      out1="$(cells_out "$grpc")"; cpu1="$(cpu_ns "$serve")"; sc1="$(scrapes)"; t1="$(date +%s.%N)"
      sps="$(python3 -c "print(f'{($sc1 - $sc0) / ($t1 - $t0):.1f}')")"; nsc=$((sc1 - sc0))
      fwd=$((out1 - out0)); ns=$((cpu1 - cpu0))
      per="n/a"; [ "$ns" -gt 0 ] && per="$(python3 -c "print(f'{$fwd * 1e9 / $ns:.0f}')")"
      echo "$mode, sent at $rate: $(grep -h 'received\|rate:' "$work/recv.err" | tr '\n' ' ')| switch forwarded $fwd cells, $per per CPU-second"
      cps="$(sed -n 's/^rate: \([0-9]*\) cells\/s.*/\1/p' "$work/recv.err")"
      # No receiver rate ("not measured": frames came faster than its link): 0, left
      # out of that comparison only.
      [ "$fwd" -gt 0 ] && echo "$mode|$rate|${cps:-0}|$per|$round|$sps|$fwd|$ns|$nsc" >> "$work/rates"
    done
    [ -n "$scrape" ] && { kill "$scrape" 2>/dev/null || true; wait "$scrape" 2>/dev/null || true; }
    kill "$serve" 2>/dev/null || true
    wait "$serve" 2>/dev/null || true
  done
done
if [ ${#modes[@]} -eq 2 ]; then
  python3 - "$work/rates" "${modes[0]}" "${modes[1]}" <<'PY'
import sys, statistics, math
by = {}
for line in open(sys.argv[1]):
    mode, rate, cps, per, rnd, sps, fwd, ns, nsc = line.strip().split("|")
    by.setdefault(rate, {}).setdefault(mode, {})[rnd] = tuple(
        float(x) for x in (cps, per, sps, fwd, ns, nsc))
# Student t, two-sided 95%, by degrees of freedom (rounds - 1).
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 19: 2.09, 29: 2.05}
def interval(logs):
    if len(logs) < 2:
        return ""
    m, s = statistics.mean(logs), statistics.stdev(logs)
    t = T95.get(len(logs) - 1, T95[max(k for k in T95 if k <= len(logs) - 1)])
    h = t * s / math.sqrt(len(logs))
    return f", 95% interval {math.exp(m - h):.3f}-{math.exp(m + h):.3f}"
first, second = sys.argv[2], sys.argv[3]
for rate, m in by.items():
    if first not in m or second not in m:
        continue
    rounds = sorted(set(m[first]) & set(m[second]))
    for i, what in ((0, "receiver cells/s"), (1, "switch cells per CPU-second")):
        both = [r for r in rounds if m[first][r][i] > 0 and m[second][r][i] > 0]
        if not both:
            continue
        a = [m[first][r][i] for r in both]
        b = [m[second][r][i] for r in both]
        logs = [math.log(y / x) for x, y in zip(a, b)]
        if i == 1 and second == "on" and len(logs) > 1:
            # Scrapes back to back (SCRAPE=max): the switch's CPU per scrape, its CPU
            # in the "on" run less what its cells took at the paired "off" run's cells
            # per CPU-second, over the scrapes; at one scrape a second, that share of a
            # processor is what a switch saturating its own loses.
            ks = []
            for r in both:
                on, off = m[second][r], m[first][r]
                if on[5] > 0:
                    ks.append((on[4] / 1e9 - on[3] / off[1]) / on[5])
            if len(ks) > 1:
                t = T95.get(len(ks) - 1, T95[max(k for k in T95 if k <= len(ks) - 1)])
                mean, h = statistics.mean(ks), t * statistics.stdev(ks) / math.sqrt(len(ks))
                sps = statistics.mean(m[second][r][2] for r in both)
                print(f"at {rate}: {sps:.0f} scrapes/s while the cells flowed; the switch's CPU "
                      f"per scrape {1e3 * mean:.3f} ms (95% interval {1e3 * (mean - h):.3f}-"
                      f"{1e3 * (mean + h):.3f} ms): at one scrape a second, "
                      f"{100 * mean:.4f}% of a processor (at most {100 * (mean + h):.4f}%)")
        print(f"at {rate}, {what}: {first} {', '.join(f'{v:.0f}' for v in a)} (mean "
              f"{statistics.mean(a):.1f}), {second} {', '.join(f'{v:.0f}' for v in b)} (mean "
              f"{statistics.mean(b):.1f}); paired {second} / {first} {math.exp(statistics.mean(logs)):.4f}"
              f"{interval(logs)}")
PY
fi
