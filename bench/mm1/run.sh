#!/usr/bin/env bash
# M/M/1 side-by-side: atmlab's discrete-event engine against SimPy, back to back.
#
# Usage: bench/mm1/run.sh [--simpy-only]
#   --simpy-only   skip the atmlab build and run (SimPy half alone)
# Environment: CARGO_TARGET_DIR is honoured; ATMLAB_BIN=path skips the build and runs
# that atmlab binary instead; SIMPY_SEED overrides the SimPy seed (default: the
# scenario's [run] seed).
#
# Prints (stdout), one line each:
#   atmlab events/s: R
#   simpy events/s: R
#   ratio: X            (atmlab / simpy)
# The raw JSON of each side goes to stderr.
set -euo pipefail

SIMPY_VERSION=4.1.2

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
scenario="$here/mm1.toml"
venv="$here/.venv"

simpy_only=0
for arg in "$@"; do
    case "$arg" in
        --simpy-only) simpy_only=1 ;;
        -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "run.sh: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

# Customers and seed come from the scenario, so both engines run the same queue.
read -r customers seed < <(python3 - "$scenario" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
try:
    import tomllib
    run = tomllib.loads(text)["run"]
    print(run["count"], run["seed"])
except ModuleNotFoundError:  # Python < 3.11: the two keys are plain integers
    count = re.search(r"^count\s*=\s*(\d+)", text, re.M).group(1)
    seed = re.search(r"^seed\s*=\s*(\d+)", text, re.M).group(1)
    print(count, seed)
PY
)
[[ -n "${customers:-}" && -n "${seed:-}" ]] || { echo "run.sh: cannot read [run] count/seed from $scenario" >&2; exit 1; }
seed="${SIMPY_SEED:-$seed}"

# (1) SimPy in a private virtualenv, pinned.
if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating $venv" >&2
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import sys, simpy; sys.exit(simpy.__version__ != '$SIMPY_VERSION')" 2>/dev/null; then
    "$venv/bin/pip" install --quiet "simpy==$SIMPY_VERSION"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

atmlab_json=""
if [[ $simpy_only -eq 0 ]]; then
    if [[ -n "${ATMLAB_BIN:-}" ]]; then
        atmlab="$ATMLAB_BIN"
    else
        # (2) atmlab, release build.
        (cd "$root" && cargo build --release -p atmlab)
        target_dir="${CARGO_TARGET_DIR:-$root/target}"
        case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
        atmlab="$target_dir/release/atmlab"
    fi
    # (3) atmlab run; it writes run.json into --out.
    (cd "$root" && "$atmlab" sim run "$scenario" --out "$tmp/atmlab" --threads 1) >&2
    atmlab_json="$(cat "$tmp/atmlab/run.json")"
    echo "atmlab: $atmlab_json" >&2
fi

# (4) SimPy, right after.
simpy_json="$("$venv/bin/python" "$here/mm1_simpy.py" --seed "$seed" --customers "$customers")"
echo "simpy: $simpy_json" >&2

# (5) Summary.
python3 - "$customers" "$simpy_json" "$atmlab_json" <<'PY'
import json, sys
customers = int(sys.argv[1])
simpy = json.loads(sys.argv[2])
atmlab = json.loads(sys.argv[3]) if sys.argv[3] else None
if simpy["events"] != 2 * customers:
    sys.exit(f"simpy counted {simpy['events']} events, expected {2 * customers}")
if atmlab is not None:
    if atmlab["events"] != 2 * customers:
        print(f"warning: atmlab counted {atmlab['events']} events, "
              f"expected 2 x {customers} customers = {2 * customers}", file=sys.stderr)
    print(f"atmlab events/s: {atmlab['events_per_second']:.0f}")
print(f"simpy events/s: {simpy['events_per_second']:.0f}")
if atmlab is not None:
    print(f"ratio: {atmlab['events_per_second'] / simpy['events_per_second']:.1f}")
PY
