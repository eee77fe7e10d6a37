#!/usr/bin/env bash
# The Go client's checks, as scripts/test.sh runs them: the committed
# generated code is what the proto generates, gofmt and go vet are clean,
# and the tests pass against `lockward serve` ($LOCKWARD_BIN, default the
# workspace's debug build, which `cargo test` builds) on SQLite, Redis,
# etcd and PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")"
plugins="$(../../scripts/go-protoc-plugins.sh)"
regenerated="$(mktemp -d)"
trap 'rm -rf "$regenerated"' EXIT
PATH="$plugins:$PATH" protoc -I ../../crates/lockward-serve/proto \
  --go_out="$regenerated" --go_opt=module=lockward.dev/go \
  --go-grpc_out="$regenerated" --go-grpc_opt=module=lockward.dev/go \
  lockward/v1/lockward.proto
if ! diff -r "$regenerated/lockwardpb" lockwardpb; then
  echo "clients/go/lockwardpb is not what the proto generates: run go generate in clients/go" >&2
  exit 1
fi
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "gofmt: $unformatted" >&2
  exit 1
fi
go vet ./...
# Pure Go: it builds without cgo.
CGO_ENABLED=0 go build ./...
# The tests on Redis, etcd and PostgreSQL start those servers the way the
# Rust tests do, with lockward-testserver.
(cd ../.. && cargo build --quiet -p lockward-testkit --bin lockward-testserver)
target="${CARGO_TARGET_DIR:-$PWD/../../target}"
LOCKWARD_BIN="${LOCKWARD_BIN:-$target/debug/lockward}" \
  LOCKWARD_TESTSERVER_BIN="${LOCKWARD_TESTSERVER_BIN:-$target/debug/lockward-testserver}" \
  go test -count=1 ./...
