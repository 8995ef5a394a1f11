# Shared by the switch benches: one switch server's certificates and configuration.
# shellcheck shell=bash

# switch_files BIN DIR: the lab CA and a certificate for switch s1 in DIR/certs, and
# DIR/s1.toml, a switch of two ports with every VCI (gRPC and raw TCP on loopback).
switch_files() {
  local bin="$1" dir="$2"
  rm -rf "$dir/certs"
  "$bin" certs init --dir "$dir/certs" switch:s1 >/dev/null
  cat > "$dir/s1.toml" <<TOML
name = "s1"
raw = "127.0.0.1:0"
[[ports]]
id = 0
vci = [32, 65535]
[[ports]]
id = 1
vci = [32, 65535]
TOML
}

# wait_serving FILE: until `atmlab switch serve`'s output in FILE names its raw port.
wait_serving() {
  for _ in $(seq 100); do grep -q "raw TCP" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "the switch server did not start: $(cat "$1")" >&2
  return 1
}
