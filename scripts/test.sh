#!/usr/bin/env bash
# Installs what the tests need, then runs every test of the workspace.
#
# The tests need: a Rust toolchain (stable; rust-toolchain.toml pins nothing newer than
# the machine's), and tshark, which the capture tests run on files atmlab writes. tshark is
# installed from Debian's packages when it is missing (as root, or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

need_tshark() { ! command -v tshark >/dev/null 2>&1; }

if need_tshark; then
  echo "== installing tshark (Debian package) for the capture tests"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # wireshark-common asks whether non-root users may capture; the default answer is fine.
  $SUDO apt-get install -y -qq --no-install-recommends tshark >/dev/null
fi
tshark --version | head -n 1

echo "== cargo test --workspace"
cargo test --workspace --locked
