#!/usr/bin/env bash
# Installs what lockward's tests need, from Debian's packages.
# Idempotent: does nothing when everything is already there.
#   redis-server, redis-tools  the Redis backend's tests and benchmarks
#   openssl                    test certificates for TLS to Redis
#   etcd-server, etcd-client   the etcd backend's tests (etcd, etcdctl)
#   protobuf-compiler, libprotobuf-dev
#                              protoc and its well-known types, to build etcd-client
#   postgresql                 the PostgreSQL backend's tests (initdb, postgres)
#   mariadb-server, mariadb-client
#                              the MySQL backend's tests (mariadb-install-db, mariadbd,
#                              mariadb-admin to wait for it, mariadb for set-up SQL)
#   zookeeper, default-jdk-headless
#                              the ZooKeeper backend's tests (the server runs on java;
#                              its libnetty-java serves TLS for the zks:// tests)
#   libcurator-recipes-java    Curator's InterProcessMutex, for the interoperability test (javac)
#   faketime                   clock skew in the chaos harness (libfaketime)
#   prometheus                 scrapes `lockward --metrics` in the metrics tests
#   tmux                       drives `lockward status --watch` as a terminal
# Then it builds, once per version into a cache: the Kubernetes store's test
# servers (kube-apiserver, kubectl, a current etcd and client-go's leader
# election) from Go modules (scripts/build-kube-testservers.sh, which needs
# Go 1.26); protoc's Go plugins (scripts/go-protoc-plugins.sh); and a Python
# environment with Dapr's SDK, pytest, maturin and mypy (scripts/python-test-env.sh).
set -euo pipefail

packages=(redis-server redis-tools openssl etcd-server etcd-client protobuf-compiler libprotobuf-dev
  postgresql mariadb-server mariadb-client zookeeper default-jdk-headless libcurator-recipes-java faketime
  prometheus tmux)
commands=(redis-server redis-cli redis-benchmark openssl etcd etcdctl protoc java javac faketime prometheus tmux
  mariadb-install-db mariadb-admin mariadb)
files=(/usr/sbin/mariadbd /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 /usr/include/google/protobuf/descriptor.proto /usr/share/java/zookeeper.jar /usr/share/java/netty-handler.jar
  /usr/share/java/curator-recipes.jar /usr/share/java/slf4j-simple.jar)

missing=()
# Debian keeps the PostgreSQL server binaries off the PATH.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(initdb)
for c in "${commands[@]}"; do
  command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
for f in "${files[@]}"; do
  [ -e "$f" ] || missing+=("$f")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-test-deps: every Debian package is installed"
else
  install_packages=yes
fi

if [ -n "${install_packages:-}" ]; then
  echo "install-test-deps: missing ${missing[*]}; installing ${packages[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-test-deps: run as root or install sudo" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
  # The packages start system services we do not use: tests start their own
  # servers on free loopback ports.
  for service in redis-server etcd postgresql mariadb zookeeper prometheus prometheus-node-exporter; do
    $sudo service "$service" stop >/dev/null 2>&1 || true
  done
fi

"$(dirname "$0")/build-kube-testservers.sh" >/dev/null
# protoc's Go plugins, for the check that the Go client's generated code is current.
"$(dirname "$0")/go-protoc-plugins.sh" >/dev/null
# Dapr's Python SDK and pytest, for the Dapr interoperability tests.
"$(dirname "$0")/python-test-env.sh" >/dev/null
