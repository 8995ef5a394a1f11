#!/usr/bin/env bash
# Regenerates the committed reproductions in docs/reproductions/ from release runs:
#
#   bash scripts/regenerate-reproductions.sh                 # all five papers
#   bash scripts/regenerate-reproductions.sh xbind retina    # some
#
# Each paper's run replaces its directory docs/reproductions/PAPER/ (report, verdicts.csv,
# CSVs, figures, results). Paper 003's report is also the page docs/reproductions/rdma.md
# (its figure links pointed into rdma/). The live papers (xbind, retina, smds) measure
# this machine: run them with nothing else busy. Wall times go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p atmlab
bin=target/release/atmlab
papers=("$@")
[ ${#papers[@]} -eq 0 ] && papers=(xbind retina smds rdma gateway)
for p in "${papers[@]}"; do
  out="docs/reproductions/$p"
  rm -rf "$out"
  start=$(date +%s)
  "$bin" reproduce "$p" --out "$out"
  echo "reproduce $p: $(( $(date +%s) - start )) s" >&2
  if [ "$p" = rdma ]; then
    sed -e 's#](\(fig[^)]*\.png\))#](rdma/\1)#g' "$out/README.md" > docs/reproductions/rdma.md
    rm "$out/README.md"
  fi
done
