#!/usr/bin/env bash
# Installs the test dependencies, then runs every test, formatting and lint
# check of the workspace. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

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
trap sweep_server_folders EXIT

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo fmt --all -- --check
# The testkit's Go (kube-apiserver's build and client-go's elector).
(cd crates/lockward-testkit/go && unformatted="$(gofmt -l .)" && \
    { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }; } && go vet ./...)
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test --workspace --all-features
target="$(realpath "${CARGO_TARGET_DIR:-target}")"
# The Go client, against the lockward binary the tests above built.
clients/go/check.sh
# Dapr's own Go SDK locking through lockward serve, beside the Go client
# and the shell (a test-only module).
(cd crates/lockward-serve/tests/dapr_go && \
    unformatted="$(gofmt -l .)" && { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }; } && \
    go vet ./... && \
    LOCKWARD_BIN="$target/debug/lockward" go test -count=1 ./...)
# The Go benchmark beside redsync (its own module): checked so it keeps
# building; run it with `go run .` there (docs/benchmarks.md).
(cd clients/go/bench && unformatted="$(gofmt -l .)" && \
    { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }; } && go vet ./...)
# Dapr's own Python SDK (sync and asyncio) locking through lockward serve.
venv="$(scripts/python-test-env.sh)"
LOCKWARD_BIN="$target/debug/lockward" "$venv/bin/pytest" -q \
    -p no:cacheprovider -W "ignore:The Distributed Lock API:UserWarning" crates/lockward-serve/tests/dapr_python
# Drivers that know nothing of lockward (psycopg, PyMySQL) fenced by the
# database under `lockward run --fence-db`.
cargo build --quiet -p lockward-testkit --bin lockward-testserver
LOCKWARD_BIN="$target/debug/lockward" LOCKWARD_TESTSERVER_BIN="$target/debug/lockward-testserver" \
    "$venv/bin/pytest" -q -p no:cacheprovider crates/lockward-cli/tests/fence_db_drivers
# The Python package: built into the same environment, type-checked
# (mypy --strict) and tested on every store, servers from the testkit.
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$target" \
    "$venv/bin/maturin" develop --quiet)
(cd python && "$venv/bin/mypy" && \
    LOCKWARD_TESTSERVER_BIN="$target/debug/lockward-testserver" \
    "$venv/bin/pytest" -q -p no:cacheprovider)
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
# The side-by-side benchmark is its own workspace (see its Cargo.toml):
# checked here so it keeps building; run it with `cargo bench` there.
(cd crates/lockward-compare && cargo fmt -- --check && \
    cargo clippy --all-targets --target-dir ../../target/compare -- -D warnings)
