#!/usr/bin/env bash
# Builds the protoc plugins that generate the Go client's code
# (clients/go/lockwardpb), once per version, into a cache folder, and prints
# that folder. Versions are pinned: the generated code names them.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lockward/protoc-go-v1.36.12-grpc-v1.6.2"
if [ ! -x "$cache/protoc-gen-go" ] || [ ! -x "$cache/protoc-gen-go-grpc" ]; then
  mkdir -p "$cache"
  GOBIN="$cache" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12 >&2
  GOBIN="$cache" go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2 >&2
fi
echo "$cache"
