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
# The Go client, against the lockward binary the tests above built.
clients/go/check.sh
# Dapr's own Python SDK (sync and asyncio) locking through lockward serve.
venv="$(scripts/python-test-env.sh)"
LOCKWARD_BIN="$(realpath "${CARGO_TARGET_DIR:-target}")/debug/lockward" "$venv/bin/pytest" -q \
    -p no:cacheprovider -W "ignore:The Distributed Lock API:UserWarning" crates/lockward-serve/tests/dapr_python
# The Python package: built into the same environment, type-checked
# (mypy --strict) and tested on every store, servers from the testkit.
target="$(realpath "${CARGO_TARGET_DIR:-target}")"
cargo build --quiet -p lockward-testkit --bin lockward-testserver
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$target" \
    "$venv/bin/maturin" develop --quiet)
(cd python && "$venv/bin/mypy" && \
    LOCKWARD_TESTSERVER_BIN="$target/debug/lockward-testserver" \
    "$venv/bin/pytest" -q -p no:cacheprovider)
# The side-by-side benchmark is its own workspace (see its Cargo.toml):
# checked here so it keeps building; run it with `cargo bench` there.
(cd crates/lockward-compare && cargo fmt -- --check && \
    cargo clippy --all-targets --target-dir ../../target/compare -- -D warnings)
