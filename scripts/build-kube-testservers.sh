#!/usr/bin/env bash
# Builds the Kubernetes store's test servers from Go modules, once per
# version, into a cache folder: kube-apiserver and kubectl (k8s.io/kubernetes),
# the etcd server the API server stores its objects in (go.etcd.io/etcd/server),
# and lease-leader (client-go's leader election, for the interoperability test).
#
# The cache key is a hash of the Go module's files, so a version bump (or a
# change to lease-leader) builds again and an unchanged module never does.
# Prints the folder holding the three programs as its last line.
#   LOCKWARD_CACHE  where to keep builds (default ~/.cache/lockward)
set -euo pipefail

module="$(cd "$(dirname "$0")/../crates/lockward-testkit/go" && pwd)"
cache="${LOCKWARD_CACHE:-$HOME/.cache/lockward}"
key="$(cat "$0" "$module/go.mod" "$module/go.sum" "$module"/cmd/*/*.go | sha256sum | cut -c1-16)"
kube_version="$(sed -n 's/^\t*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$module/go.mod")"
out="$cache/kube-${kube_version:-unknown}-$key"

if [ -x "$out/kube-apiserver" ] && [ -x "$out/kubectl" ] && [ -x "$out/etcd" ] && [ -x "$out/lease-leader" ]; then
  echo "build-kube-testservers: cached in $out" >&2
  echo "$out"
  exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build-kube-testservers: needs Go 1.26 or newer on the PATH" >&2; exit 1; }
echo "build-kube-testservers: building kube-apiserver and kubectl $kube_version, etcd and lease-leader into $out (the first build takes 10-25 minutes on 2 cores)" >&2
start=$(date +%s)
tmp="$out.partial.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
cd "$module"
# -trimpath and no debug info: smaller binaries, same behaviour. The version
# variables are what Kubernetes' own build stamps, so /version tells the truth.
minor="$(echo "$kube_version" | cut -d. -f2)"
stamp="-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
stamp="$stamp -X k8s.io/client-go/pkg/version.gitVersion=$kube_version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
flags=(-trimpath -buildvcs=false "-ldflags=-s -w $stamp")
go build "${flags[@]}" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build "${flags[@]}" -o "$tmp/kubectl" k8s.io/kubernetes/cmd/kubectl
go build "${flags[@]}" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
go build "${flags[@]}" -o "$tmp/lease-leader" ./cmd/lease-leader
rm -rf "$out"
mv "$tmp" "$out"
# Builds of other versions are no longer used.
find "$cache" -maxdepth 1 -name 'kube-*' ! -name "$(basename "$out")" -exec rm -rf {} +
echo "build-kube-testservers: built in $(( $(date +%s) - start )) s" >&2
echo "$out"
