#!/usr/bin/env bash
# Cells per second through one live switch: host A -> switch (UDP port 0 -> port 1) ->
# host B, AAL5 frames of 9,180 octets (192 cells) on one VC, sent at a given rate.
#
# Usage: bench/dataplane/run.sh [MEGABYTES] [RATE...]   (default 40 MB at 155.52 Mb/s,
#        622.08 Mb/s and 10 Gb/s, the last one effectively unpaced)
# Environment: ATMLAB_BIN=path skips the build. METRICS (default "off"; "on": the
# switch serves --metrics, scraped once a second while the cells flow; "both": a fresh
# switch with metrics off and one with them on, side by side, ROUNDS times (default 1)
# in alternating order, and the end prints each mode's mean cells/s per rate).
#
# Prints, per rate, what host B received and its rate from the first frame to the last;
# frames lost (UDP drops when the receiver falls behind) are reported, not hidden.
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
case "${METRICS:-off}" in
  off) modes=(off) ;;
  on) modes=(on) ;;
  both) modes=(off on) ;;
  *) echo "METRICS is off, on or both" >&2; exit 2 ;;
esac
rounds="${ROUNDS:-1}"
cat > "$work/s1.toml" <<TOML
name = "s1"
cells_per_datagram = 24
[[ports]]
id = 0
[[ports]]
id = 1
TOML
head -c "$((mb * 1000000))" /dev/urandom > "$work/data"
frames=$(( (mb * 1000000 + 9179) / 9180 ))
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $mb MB in $frames frames of 9180 octets"
: > "$work/rates"
for round in $(seq 1 "$rounds"); do
  order=("${modes[@]}")
  if [ $((round % 2)) -eq 0 ] && [ ${#modes[@]} -eq 2 ]; then order=(on off); fi
  for mode in "${order[@]}"; do
    extra=()
    [ "$mode" = on ] && extra=(--metrics 127.0.0.1:0)
    : > "$work/serve.out"
    RUST_LOG=error "$ATMLAB_BIN" switch serve --insecure --config "$work/s1.toml" "${extra[@]}" > "$work/serve.out" &
    serve=$!
    ready="port 1 udp"
    [ "$mode" = on ] && ready="metrics http"
    for _ in $(seq 100); do grep -q "$ready" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
    grpc="$(sed -n 's/.*gRPC http:\/\/\(.*\)/\1/p' "$work/serve.out")"
    p0="$(sed -n 's/.*port 0 udp \(.*\)/\1/p' "$work/serve.out")"
    p1="$(sed -n 's/.*port 1 udp \(.*\)/\1/p' "$work/serve.out")"
    scrape=""
    if [ "$mode" = on ]; then
      # Scraped as a Prometheus at a 1 s interval would.
      url="$(sed -n 's/.*metrics \(http:.*\)/\1/p' "$work/serve.out")"
      (while :; do curl -s -o /dev/null "$url" || true; sleep 1; done) &
      scrape=$!
    fi
    "$ATMLAB_BIN" switch commit --insecure --addr "$grpc" --in 0:0/100 --out 1:0/200 --pcr 300000 >/dev/null
    for rate in "${rates[@]}"; do
      # Each host binds its port through the control path (AttachHost): a host port
      # takes no host from a first datagram (issue 24).
      "$ATMLAB_BIN" host recv --insecure --switch "$p1" --control "$grpc" --port 1 --vc 0/200 \
        --rate "$rate" --frames "$frames" --idle "3 s" --out /dev/null 2> "$work/recv.err" &
      recv=$!
      sleep 0.3
      "$ATMLAB_BIN" host send --insecure --switch "$p0" --control "$grpc" --port 0 --vc 0/100 \
        --rate "$rate" "$work/data" 2>/dev/null
      wait "$recv" || true
      echo "metrics $mode, sent at $rate: $(grep -h 'received\|rate:' "$work/recv.err" | tr '\n' ' ')"
      cps="$(sed -n 's/^rate: \([0-9]*\) cells\/s.*/\1/p' "$work/recv.err")"
      [ -n "$cps" ] && echo "$mode|$rate|$cps" >> "$work/rates"
    done
    [ -n "$scrape" ] && { kill "$scrape" 2>/dev/null || true; wait "$scrape" 2>/dev/null || true; }
    kill "$serve" 2>/dev/null || true
    wait "$serve" 2>/dev/null || true
  done
done
if [ ${#modes[@]} -eq 2 ]; then
  python3 - "$work/rates" <<'PY'
import sys, statistics
by = {}
for line in open(sys.argv[1]):
    mode, rate, cps = line.strip().split("|")
    by.setdefault(rate, {}).setdefault(mode, []).append(float(cps))
for rate, m in by.items():
    if "off" in m and "on" in m:
        off, on = statistics.mean(m["off"]), statistics.mean(m["on"])
        print(f"at {rate}: cells/s off {', '.join(f'{v:.0f}' for v in m['off'])} "
              f"(mean {off:.0f}), on {', '.join(f'{v:.0f}' for v in m['on'])} "
              f"(mean {on:.0f}): on / off {on / off:.4f} ({100 * (on - off) / off:+.2f}%)")
PY
fi
