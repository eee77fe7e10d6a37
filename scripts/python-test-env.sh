#!/usr/bin/env bash
# Makes the Python environment the interoperability tests run in (Dapr's
# Python SDK, the drivers the fence tests write with, and pytest, pinned),
# once per set of versions, in a cache folder, and prints the folder. Packages come from the Python package index.
set -euo pipefail
requirements="dapr==1.19.0 pytest==9.2.0 maturin==1.15.0 mypy==2.4.1 redis==8.1.0 python-redis-lock==4.0.1 kazoo==2.11.0 pottery==3.0.1 psycopg[binary]==3.3.9 pymysql==1.2.4"
key="$(printf '%s' "$requirements" | sha256sum | cut -c1-12)"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/lockward/python-$key"
if [ ! -x "$venv/bin/pytest" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $requirements >&2
fi
echo "$venv"
