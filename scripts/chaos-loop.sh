#!/usr/bin/env bash
# Runs the chaos harness on one backend again and again, as the test suite
# runs it (the debug build, 8 s, random seeds), and says how many runs
# passed, how long they took, and where a failed run kept its histories.
# Outside CI: it proves the suite's chaos test does not fail by chance.
#
#   scripts/chaos-loop.sh BACKEND [RUNS]     (50 runs by default)
#
# Build first: cargo build --workspace --all-features --bins
set -euo pipefail
cd "$(dirname "$0")/.."

backend="${1:?usage: scripts/chaos-loop.sh BACKEND [RUNS]}"
runs="${2:-50}"
bin="${CARGO_TARGET_DIR:-target}/debug/lockward-chaos"
[ -x "$bin" ] || { echo "no $bin: cargo build --workspace --all-features --bins" >&2; exit 2; }

passed=0
failed=()
began="$(date +%s)"
for ((i = 1; i <= runs; i++)); do
    out="$(timeout 300 "$bin" --backend "$backend" --duration 8s </dev/null 2>&1)" && ok=1 || ok=0
    seed="$(printf '%s\n' "$out" | awk '$1 == "seed" { print $2 }')"
    if [ "$ok" = 1 ]; then
        passed=$((passed + 1))
    else
        failed+=("$seed")
        printf '%s\n' "$out" >&2
    fi
    echo "$backend run $i/$runs: $([ "$ok" = 1 ] && echo passed || echo FAILED) (seed $seed)"
done
echo "$backend: $passed of $runs runs passed in $(($(date +%s) - began)) s${failed:+; failed seeds: ${failed[*]}}"
[ "$passed" = "$runs" ]
