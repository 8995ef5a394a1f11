#!/usr/bin/env bash
# Generates the Python modules of the atmlab.v1 IDL (crates/rpc/proto) with grpcio-tools:
# messages (*_pb2.py), type stubs (*_pb2.pyi) and gRPC stubs (*_pb2_grpc.py).
#
#   clients/python/generate.sh [OUT]
#
# OUT defaults to clients/python/generated; the modules land in OUT/atmlab/v1/ and import
# each other as `atmlab.v1.*`, so OUT is what goes on sys.path (atmlab_client.py adds
# clients/python/generated, or $ATMLAB_PB_DIR when set). PYTHON names the interpreter that
# has grpcio-tools (default: clients/python/.venv/bin/python if present, else python3).
# The generated files are not committed: they are made from the current IDL every time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
proto="$root/crates/rpc/proto"
out="${1:-$here/generated}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$here/.venv/bin/python" ]; then PYTHON="$here/.venv/bin/python"; else PYTHON=python3; fi
fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"
# Start clean, so a message or file removed from the IDL does not linger.
rm -rf "$out/atmlab"
mapfile -t files < <(cd "$proto" && find atmlab -name '*.proto' | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "generate.sh: no .proto files under $proto" >&2
  exit 1
fi
(cd "$proto" && "$PYTHON" -m grpc_tools.protoc -I . \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "${files[@]}")
# Regular packages (not namespace ones), so no other `atmlab` on sys.path can shadow them.
find "$out/atmlab" -type d -exec touch {}/__init__.py \;
echo "generated ${#files[@]} proto files into $out/atmlab"
