#!/usr/bin/env bash
# Cells per second through one live switch: host A -> switch (UDP port 0 -> port 1) ->
# host B, AAL5 frames of 9,180 octets (192 cells) on one VC, sent at a given rate.
#
# Usage: bench/dataplane/run.sh [MEGABYTES] [RATE...]   (default 40 MB at 155.52 Mb/s,
#        622.08 Mb/s and 10 Gb/s, the last one effectively unpaced)
# Environment: ATMLAB_BIN=path skips the build.
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
cat > "$work/s1.toml" <<TOML
name = "s1"
cells_per_datagram = 24
[[ports]]
id = 0
[[ports]]
id = 1
TOML
RUST_LOG=warn "$ATMLAB_BIN" switch serve --insecure --config "$work/s1.toml" > "$work/serve.out" &
for _ in $(seq 100); do grep -q "port 1 udp" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
grpc="$(sed -n 's/.*gRPC http:\/\/\(.*\)/\1/p' "$work/serve.out")"
p0="$(sed -n 's/.*port 0 udp \(.*\)/\1/p' "$work/serve.out")"
p1="$(sed -n 's/.*port 1 udp \(.*\)/\1/p' "$work/serve.out")"
"$ATMLAB_BIN" switch commit --insecure --addr "$grpc" --in 0:0/100 --out 1:0/200 --pcr 300000 >/dev/null
head -c "$((mb * 1000000))" /dev/urandom > "$work/data"
frames=$(( (mb * 1000000 + 9179) / 9180 ))
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $mb MB in $frames frames of 9180 octets"
for rate in "${rates[@]}"; do
  "$ATMLAB_BIN" host recv --switch "$p1" --vc 0/200 --frames "$frames" --idle "3 s" --out /dev/null 2> "$work/recv.err" &
  recv=$!
  sleep 0.3
  "$ATMLAB_BIN" host send --switch "$p0" --vc 0/100 --rate "$rate" "$work/data" 2>/dev/null
  wait "$recv" || true
  echo "sent at $rate: $(grep -h 'received\|rate:' "$work/recv.err" | tr '\n' ' ')"
done
