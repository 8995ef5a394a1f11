#!/usr/bin/env bash
# M/M/1 side-by-side: atmlab's discrete-event engine against SimPy and against the same
# queue hand-written on a bare std BinaryHeap (the reference issue 3's 30 M events/s names).
#
# Usage: bench/mm1/run.sh [--simpy-only]
#   --simpy-only   skip the atmlab and bare-heap builds and runs (SimPy half alone)
# Environment: CARGO_TARGET_DIR is honoured; ATMLAB_BIN=path skips the build and runs
# that atmlab binary instead; SIMPY_SEED overrides the SimPy seed (default: the
# scenario's [run] seed).
#
# Prints (stdout), one line each:
#   atmlab events/s: R      (median of three runs)
#   bare BinaryHeap, tuple key events/s: R          (the same queue without an engine,
#   bare BinaryHeap, packed u128 key events/s: R     medians of three runs each)
#   bare BinaryHeap, packed u128 key, the model's statistics events/s: R
#                           (the same, keeping the queue model's statistics: atmlab's
#                           ratio to it is the engine's own cost)
#   simpy events/s: R
#   ratio: X                (atmlab / simpy)
#   atmlab / bare BinaryHeap, tuple key: Y
#   atmlab / bare BinaryHeap, packed u128 key: Z
#   atmlab / bare BinaryHeap, packed u128 key, the model's statistics: W
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
        -h|--help) sed -n '2,23p' "${BASH_SOURCE[0]}"; exit 0 ;;
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
bare_json=""
if [[ $simpy_only -eq 0 ]]; then
    target_dir="${CARGO_TARGET_DIR:-$root/target}"
    case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
    if [[ -n "${ATMLAB_BIN:-}" ]]; then
        atmlab="$ATMLAB_BIN"
    else
        # (2) atmlab, release build.
        (cd "$root" && cargo build --release -p atmlab)
        atmlab="$target_dir/release/atmlab"
    fi
    # The reference: the same queue hand-written on a bare std BinaryHeap.
    (cd "$root" && cargo build --release -p atmlab-models --example mm1_bare_heap)
    bare="$target_dir/release/examples/mm1_bare_heap"
    # (3) atmlab (it writes run.json into --out) and the bare heap, alternated three
    # times: the machine drifts, so the two are compared run by run, by their medians.
    for i in 1 2 3; do
        (cd "$root" && "$atmlab" sim run "$scenario" --out "$tmp/atmlab$i" --threads 1) >&2
        atmlab_json+="$(tr -d '\n' < "$tmp/atmlab$i/run.json")"$'\n'
        bare_json+="$("$bare" "$customers" 1 "$seed" --json)"$'\n'
    done
    echo "atmlab: $atmlab_json" >&2
    echo "bare heap: $bare_json" >&2
fi

# (4) SimPy, right after.
simpy_json="$("$venv/bin/python" "$here/mm1_simpy.py" --seed "$seed" --customers "$customers")"
echo "simpy: $simpy_json" >&2

# (5) Summary.
python3 - "$customers" "$simpy_json" "$atmlab_json" "$bare_json" <<'PY'
import json, statistics, sys
customers = int(sys.argv[1])
simpy = json.loads(sys.argv[2])
atmlab = [json.loads(l) for l in sys.argv[3].splitlines() if l.strip()]
bare = [json.loads(l) for l in sys.argv[4].splitlines() if l.strip()]
if simpy["events"] != 2 * customers:
    sys.exit(f"simpy counted {simpy['events']} events, expected {2 * customers}")
for a in atmlab:
    if a["events"] != 2 * customers:
        print(f"warning: atmlab counted {a['events']} events, "
              f"expected 2 x {customers} customers = {2 * customers}", file=sys.stderr)
median = lambda runs: statistics.median(r["events_per_second"] for r in runs)
if atmlab:
    runs = " ".join(f"{r['events_per_second']:.0f}" for r in atmlab)
    print(f"atmlab events/s: {median(atmlab):.0f}   (median of {runs})")
    names = list(dict.fromkeys(r["engine"] for r in bare))
    for name in names:
        mine = [r for r in bare if r["engine"] == name]
        runs = " ".join(f"{r['events_per_second']:.0f}" for r in mine)
        print(f"{name} events/s: {median(mine):.0f}   (median of {runs})")
print(f"simpy events/s: {simpy['events_per_second']:.0f}")
if atmlab:
    print(f"ratio: {median(atmlab) / simpy['events_per_second']:.1f}")
    for name in names:
        mine = [r for r in bare if r["engine"] == name]
        print(f"atmlab / {name}: {median(atmlab) / median(mine):.2f}")
PY
