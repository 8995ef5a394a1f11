# Shared by the scripts of bench/callgen-grpc (sourced, not run): the binaries to compare
# and starting `atmlab up`.

# The atmlab binaries named in "$@" into the array `bins` (default: the release build,
# built if missing). Needs `root`, the repository.
pick_bins() {
  bins=("$@")
  if [ ${#bins[@]} -eq 0 ]; then
    local bin="${CARGO_TARGET_DIR:-$root/target}/release/atmlab"
    [ -x "$bin" ] || (cd "$root" && cargo build --release -p atmlab)
    bins=("$bin")
  fi
}

# Waits up to a minute for the `atmlab up` logging to LOG to say the network is up (with
# TLS a fresh data directory's certificates are made first, and the machine may be busy);
# exits with its log if it does not.
wait_up() {
  local log=$1
  for _ in $(seq 1 600); do
    grep -q "network up" "$log" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "atmlab up did not start:" >&2
  cat "$log" >&2
  exit 1
}
