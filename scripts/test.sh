#!/usr/bin/env bash
# Installs what the tests need, then runs every test of the workspace, both tiers.
#
# The tests need: a Rust toolchain (stable; rust-toolchain.toml pins nothing newer than
# the machine's); tshark, which the capture tests run on files atmlab writes; Prometheus,
# which scrapes a running network in the metrics test; Chromium and its WebDriver, which
# load the dashboard; Python 3 with grpcio and
# grpcio-tools, for the client generated from the .proto IDL; and grpcurl, built with Go
# (a Go toolchain is needed once, to build it into .tools/bin). tshark (and
# python3-venv, when `python3 -m venv` does not work) are installed from Debian's packages
# when missing (as root, or through sudo); the Python packages go into a venv,
# clients/python/.venv, from clients/python/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_updated=""
apt_install() {
  local SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need_tshark() { ! command -v tshark >/dev/null 2>&1; }

if need_tshark; then
  echo "== installing tshark (Debian package) for the capture tests"
  # wireshark-common asks whether non-root users may capture; the default answer is fine.
  apt_install tshark
fi
tshark --version | sed -n 1p

# GNU parallel runs the shards of a sweep in the sharding test (docs/cluster.md).
if ! command -v parallel >/dev/null 2>&1; then
  echo "== installing GNU parallel (Debian package) for the sharding test"
  apt_install parallel
fi
parallel --version | sed -n 1p

# iproute2 builds the network namespaces of the test hosts (scripts/netns.sh, issue 26);
# that test needs root, as CI runs this script.
if ! command -v ip >/dev/null 2>&1; then
  echo "== installing iproute2 (Debian package) for the network-namespace test"
  apt_install iproute2
fi

# PostgreSQL holds the connection manager's journal in the journal and fail-over tests
# (issue 26, item 3): Debian's server (initdb, postgres), which each test starts as the
# postgres user in a scratch directory on a free loopback port.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "== installing postgresql (Debian package) for the journal and fail-over tests"
  apt_install postgresql
fi
ls -d /usr/lib/postgresql/*/bin | tail -n 1

# Headless Chromium, driven through its WebDriver, loads the live dashboard in the
# dashboard test (issue 25): Debian's chromium and chromium-driver.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "== installing chromium and chromium-driver (Debian packages) for the dashboard test"
  apt_install chromium chromium-driver
fi
chromedriver --version | sed -n 1p

# Prometheus scrapes a running network in the metrics test (issue 25): Debian's server.
if ! command -v prometheus >/dev/null 2>&1; then
  echo "== installing prometheus (Debian package) for the metrics test"
  apt_install prometheus
fi
prometheus --version 2>&1 | sed -n 1p

# etcd is the registry and the managers' election store across hosts (issue 26); the
# etcd tests start their own members on loopback: Debian's server.
if ! command -v etcd >/dev/null 2>&1; then
  echo "== installing etcd-server (Debian package) for the etcd tests"
  apt_install etcd-server
fi
etcd --version 2>&1 | sed -n 1p

# grpcurl, the operators' gRPC tool, for the test that lists, describes and health-checks
# a running manager and switch through reflection (issue 25). Debian 12 has no package:
# it is built with Go from the Go module proxy, at a pinned version, into .tools/bin
# (gitignored), and rebuilt only when the pin changes. The test finds it there (or
# through ATMLAB_GRPCURL).
GRPCURL_VERSION=v1.9.3
grpcurl="$PWD/.tools/bin/grpcurl"
go_bin="$(command -v go || true)"
if [ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ]; then go_bin=/usr/local/go/bin/go; fi
if [ -n "${ATMLAB_GRPCURL:-}" ]; then
  echo "grpcurl: $ATMLAB_GRPCURL (ATMLAB_GRPCURL)"
else
  if [ ! -x "$grpcurl" ] || ! "${go_bin:-false}" version -m "$grpcurl" 2>/dev/null \
      | grep "mod[[:space:]]*github.com/fullstorydev/grpcurl[[:space:]]*$GRPCURL_VERSION" >/dev/null; then
    if [ -z "$go_bin" ]; then
      echo "error: the grpcurl test needs grpcurl $GRPCURL_VERSION, built with Go, and this" >&2
      echo "  machine has no Go toolchain (neither go on PATH nor /usr/local/go/bin/go)." >&2
      echo "  Install Go 1.21 or later (Debian 12's golang-go is too old) and rerun, or" >&2
      echo "  set ATMLAB_GRPCURL to a grpcurl binary." >&2
      exit 1
    fi
    echo "== building grpcurl $GRPCURL_VERSION with $go_bin into .tools/bin"
    # Go keeps its module and build caches under HOME; without one (a bare CI
    # environment), under .tools.
    if [ -z "${HOME:-}" ]; then
      export GOPATH="$PWD/.tools/go" GOCACHE="$PWD/.tools/go-build"
    fi
    GOBIN="$PWD/.tools/bin" "$go_bin" install \
      "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
  fi
  echo "grpcurl $GRPCURL_VERSION: $grpcurl"
  export ATMLAB_GRPCURL="$grpcurl"
fi

# The Python client (clients/python): a venv with the pinned grpcio and grpcio-tools,
# reinstalled only when requirements.txt changed since the last install, and its modules
# generated from the current IDL. The tests find the interpreter through ATMLAB_PYTHON.
py_dir="$PWD/clients/python"
venv="$py_dir/.venv"
stamp="$venv/installed-requirements.txt"
if ! command -v python3 >/dev/null 2>&1; then
  echo "== installing python3 (Debian package) for the Python client test"
  apt_install python3 python3-venv
fi
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$py_dir/requirements.txt" "$stamp"; then
  echo "== creating $venv (grpcio, grpcio-tools) for the Python client test"
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    # Debian's python3 ships venv (and ensurepip) separately.
    rm -rf "$venv"
    echo "== installing python3-venv (Debian package)"
    apt_install python3-venv
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install -q -r "$py_dir/requirements.txt"
  cp "$py_dir/requirements.txt" "$stamp"
fi
"$venv/bin/python" -c 'import sys, grpc; print(f"Python {sys.version.split()[0]}, grpcio {grpc.__version__}")'
PYTHON="$venv/bin/python" bash "$py_dir/generate.sh"
export ATMLAB_PYTHON="$venv/bin/python"

# Two tiers. The default tier (plain `cargo test`) is fast: units, properties, the
# robustness corpora, servers started on loopback. The heavy tier is the tests marked
# `#[ignore = "heavy tier ..."]`: whole reproductions, the demo and the soak, processes
# killed under load, the call generator against live managers. Both run here.
echo "== cargo test --workspace (the default tier)"
cargo test --workspace --locked

echo "== cargo test --workspace -- --ignored (the heavy tier)"
cargo test --workspace --locked -- --ignored
