#!/usr/bin/env bash
# Installs the test dependencies, then runs every test, formatting and lint
# check of the workspace. This is the README's test command and what CI runs.
#
#   scripts/test.sh               everything, then one store's conformance
#                                 suite again with four busy processes beside it
#   scripts/test.sh --under-load  everything with four busy processes beside it
#                                 (LOCKWARD_TEST_UNDER_LOAD=1 does the same)
#
# At the end it prints how long each step took.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
    --under-load) LOCKWARD_TEST_UNDER_LOAD=1 ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--under-load]" >&2; exit 2 ;;
esac

# Each step's name and start (seconds since the epoch); the table at the end.
steps=()
step() {
    steps+=("$(date +%s) $*")
    echo "== $*" >&2
}
print_steps() {
    local end now name i
    end="$(date +%s)"
    echo "step times:" >&2
    for ((i = 0; i < ${#steps[@]}; i++)); do
        now="${steps[$i]%% *}"
        name="${steps[$i]#* }"
        local next="$end"
        if ((i + 1 < ${#steps[@]})); then next="${steps[$((i + 1))]%% *}"; fi
        printf '  %6d s  %s\n' "$((next - now))" "$name" >&2
    done
    printf '  %6d s  in all\n' "$((end - ${steps[0]%% *}))" >&2
}

# Busy processes beside the tests, as on a shared runner or a laptop that
# builds something else: four CPU-bound loops, each ended by its own
# timeout and by the end of this script.
busy=()
start_load() {
    for _ in 1 2 3 4; do
        timeout 5400 sh -c 'while :; do :; done' &
        busy+=("$!")
    done
    echo "four busy processes beside the tests: ${busy[*]}" >&2
}
stop_load() {
    for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${busy[@]}"; do wait "$pid" 2>/dev/null || true; done
    busy=()
}

step "install the test dependencies"
scripts/install-test-deps.sh

# The test servers' data folders outlive the test binaries that keep their
# servers in statics (the testkit sweeps them when it next starts a server):
# at the end, remove every one whose owning process has ended.
sweep_server_folders() {
    for dir in "${TMPDIR:-/tmp}"/lockward-testkit/*-*; do
        name="${dir##*/}"
        [ -e "/proc/${name%%-*}" ] || rm -rf "$dir"
    done
}
finish() {
    stop_load
    sweep_server_folders
    print_steps
}
trap finish EXIT

if [ -n "${LOCKWARD_TEST_UNDER_LOAD:-}" ]; then start_load; fi

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
step "rustfmt, gofmt and go vet of the testkit"
cargo fmt --all -- --check
# The testkit's Go (kube-apiserver's build and client-go's elector).
(cd crates/lockward-testkit/go && unformatted="$(gofmt -l .)" && \
    { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }; } && go vet ./...)
step "clippy (builds every target)"
cargo clippy --workspace --all-targets --all-features -- -D warnings
step "cargo test: every Rust test"
cargo test --workspace --all-features
target="$(realpath "${CARGO_TARGET_DIR:-target}")"
step "the Go client and Dapr's Go SDK"
# The Go client, against the lockward binary the tests above built.
clients/go/check.sh
# Dapr's own Go SDK locking through lockward serve, beside the Go client
# and the shell (a test-only module).
(cd crates/lockward-serve/tests/dapr_go && \
    unformatted="$(gofmt -l .)" && { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }; } && \
    go vet ./... && \
    LOCKWARD_BIN="$target/debug/lockward" go test -count=1 ./...)
# The Go benchmark beside redsync (its own module): checked so it keeps
# building, and its test that redsync and lockward exclude each other on
# one name; run the benchmark with `go run .` there (docs/benchmarks.md).
(cd clients/go/bench && unformatted="$(gofmt -l .)" && \
    { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }; } && go vet ./... && \
    LOCKWARD_TESTSERVER_BIN="$target/debug/lockward-testserver" go test -count=1 ./...)
step "Dapr's Python SDK and the fence drivers"
# Dapr's own Python SDK (sync and asyncio) locking through lockward serve.
venv="$(scripts/python-test-env.sh)"
LOCKWARD_BIN="$target/debug/lockward" "$venv/bin/pytest" -q \
    -p no:cacheprovider -W "ignore:The Distributed Lock API:UserWarning" crates/lockward-serve/tests/dapr_python
# Drivers that know nothing of lockward (psycopg, PyMySQL) fenced by the
# database under `lockward run --fence-db`.
cargo build --quiet -p lockward-testkit --bin lockward-testserver
LOCKWARD_BIN="$target/debug/lockward" LOCKWARD_TESTSERVER_BIN="$target/debug/lockward-testserver" \
    "$venv/bin/pytest" -q -p no:cacheprovider crates/lockward-cli/tests/fence_db_drivers
step "the Python package: build, mypy, pytest"
# The Python package: built into the same environment, type-checked
# (mypy --strict) and tested on every store, servers from the testkit.
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$target" \
    "$venv/bin/maturin" develop --quiet)
(cd python && "$venv/bin/mypy" && \
    LOCKWARD_TESTSERVER_BIN="$target/debug/lockward-testserver" \
    "$venv/bin/pytest" -q -p no:cacheprovider)
step "pip install ./python into a clean environment"
# `pip install ./python` into a clean environment, as a user installs it:
# the package builds (maturin comes from the registry), installs and works
# outside the checkout. The debug build above is reused.
clean="$(mktemp -d)"
python3 -m venv "$clean/venv"
CARGO_TARGET_DIR="$target" MATURIN_PEP517_ARGS="--profile dev" \
    "$clean/venv/bin/pip" install --quiet --disable-pip-version-check ./python
(cd "$clean" && "$clean/venv/bin/python" - <<'PY'
import lockward, pathlib, sys
assert pathlib.Path(lockward.__file__).is_relative_to(sys.prefix), lockward.__file__
store = lockward.Store(f"sqlite://{pathlib.Path.cwd() / 'locks.db'}")
with store.lock("installed", ttl=5) as lease:
    assert lease.fence >= 1 and store.inspect("installed") is not None
print("pip install ./python: installed and working in", sys.prefix)
PY
)
rm -rf "$clean"
step "the side-by-side benchmark's workspace: fmt and clippy"
# The side-by-side benchmark is its own workspace (see its Cargo.toml):
# checked here so it keeps building; run it with `cargo bench` there.
(cd crates/lockward-compare && cargo fmt -- --check && \
    cargo clippy --all-targets --target-dir ../../target/compare -- -D warnings)
# The suite holds on a busy machine: one store's conformance suite again,
# with four busy processes beside it (skipped when everything already ran
# that way). PostgreSQL: its waiting (the server's lock manager, a session
# per waiter) is the most sensitive to a slow scheduler.
if [ -z "${LOCKWARD_TEST_UNDER_LOAD:-}" ]; then
    step "PostgreSQL's conformance suite under load"
    start_load
    cargo test --workspace --all-features --test conformance -- postgres::
    stop_load
fi
