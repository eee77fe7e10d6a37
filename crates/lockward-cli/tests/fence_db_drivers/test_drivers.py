"""Drivers that know nothing of lockward write to guarded tables under
`lockward run --fence-db`: psycopg (libpq) through the `PGOPTIONS` lockward
sets, PyMySQL through the init command lockward exports. Each write under
the current fence goes in; the same program with the fence of a holder
that lost is refused by the database itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import pytest

TARGET = Path(os.environ.get("CARGO_TARGET_DIR", Path(__file__).resolve().parents[4] / "target"))
LOCKWARD = os.environ.get("LOCKWARD_BIN", str(TARGET / "debug" / "lockward"))
TESTSERVER = os.environ.get("LOCKWARD_TESTSERVER_BIN", str(TARGET / "debug" / "lockward-testserver"))

PSYCOPG_WRITE = """
import os, sys
import psycopg
try:
    with psycopg.connect(sys.argv[1]) as conn:
        conn.execute("INSERT INTO stock VALUES (%s, %s)", (sys.argv[2], int(os.environ["LOCKWARD_FENCE"])))
except psycopg.Error as e:
    print(e.sqlstate, e, file=sys.stderr)
    sys.exit(3)
"""

PYMYSQL_WRITE = """
import os, sys
from urllib.parse import urlsplit
import pymysql
url = urlsplit(sys.argv[1])
try:
    conn = pymysql.connect(
        host=url.hostname, port=url.port, user=url.username, password=url.password,
        database=url.path.lstrip("/"), init_command=os.environ["LOCKWARD_FENCE_DB_INIT"],
    )
    with conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO stock VALUES (%s, %s)", (sys.argv[2], int(os.environ["LOCKWARD_FENCE"])))
        conn.commit()
except pymysql.err.MySQLError as e:
    print(e, file=sys.stderr)
    sys.exit(3)
"""


def server(kind: str) -> Iterator[str]:
    if not Path(TESTSERVER).exists():
        pytest.fail(f"no lockward-testserver at {TESTSERVER}: build it (cargo build -p lockward-testkit); its servers come from scripts/install-test-deps.sh")
    if not Path(LOCKWARD).exists():
        pytest.fail(f"no lockward binary at {LOCKWARD}: build it (cargo build -p lockward-cli) or set LOCKWARD_BIN")
    process = subprocess.Popen([TESTSERVER, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    url = process.stdout.readline().strip()
    try:
        if not url:
            pytest.fail(f"lockward-testserver {kind} printed no URL")
        yield url
    finally:
        process.stdin.close()
        process.wait(timeout=60)


@pytest.fixture()
def postgres() -> Iterator[str]:
    yield from server("postgres")


@pytest.fixture()
def mariadb() -> Iterator[str]:
    yield from server("mariadb")


def lockward(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LOCKWARD, *args], capture_output=True, text=True, env=env, check=False)


def write_under_lockward(store: str, db: str, script: str, sku: str) -> dict[str, str]:
    """Runs `script` under `lockward run --fence-db`; the environment it had."""
    dump = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[3], 'w'))"
    out_file = Path(store.removeprefix("sqlite://")).with_name(f"env-{sku}.json")
    ran = lockward(
        "--store", store, "run", "migrate", "--fence-db", db, "--",
        "sh", "-c", f'"{sys.executable}" -c "$0" "$1" "$2" && "{sys.executable}" -c "$3" "$1" "$2" "$4"',
        script, db, sku, dump, str(out_file),
    )
    assert ran.returncode == 0, ran.stderr
    import json

    env: dict[str, str] = json.loads(out_file.read_text())
    return env


def test_psycopg_is_fenced_through_pgoptions(postgres: str, tmp_path: Path) -> None:
    import psycopg

    db = urlsplit(postgres)._replace(query="").geturl()
    with psycopg.connect(db) as conn:
        conn.execute("CREATE TABLE stock (sku text PRIMARY KEY, fence bigint)")
    installed = lockward("fence", "install", "--db", postgres, "stock", "--lock", "migrate")
    assert installed.returncode == 0, installed.stderr
    store = f"sqlite://{tmp_path / 'locks.db'}"
    env = write_under_lockward(store, postgres, PSYCOPG_WRITE, "first")
    assert "lockward.fences=migrate=" in env["PGOPTIONS"]
    fence = int(env["LOCKWARD_FENCE"])
    # A newer holder claims; the same program with the old fence is refused.
    claimed = lockward("fence", "claim", "--db", postgres, "migrate", str(fence + 1))
    assert claimed.returncode == 0, claimed.stderr
    late = subprocess.run(
        [sys.executable, "-c", PSYCOPG_WRITE, db, "late"], capture_output=True, text=True, env=env, check=False
    )
    assert late.returncode == 3, late
    assert late.stderr.startswith("LW001"), late.stderr
    assert f"stale fence {fence} for lock migrate" in late.stderr
    with psycopg.connect(db) as conn:
        rows = conn.execute("SELECT sku FROM stock ORDER BY sku").fetchall()
    assert rows == [("first",)]


def test_pymysql_is_fenced_through_its_init_command(mariadb: str, tmp_path: Path) -> None:
    import pymysql

    url = urlsplit(mariadb)
    setup = pymysql.connect(
        host=url.hostname, port=url.port, user=url.username, password=url.password, database=url.path.lstrip("/")
    )
    with setup, setup.cursor() as cursor:
        cursor.execute("CREATE TABLE stock (sku VARCHAR(40) PRIMARY KEY, fence BIGINT) ENGINE=InnoDB")
    installed = lockward("fence", "install", "--db", mariadb, "stock", "--lock", "migrate")
    assert installed.returncode == 0, installed.stderr
    store = f"sqlite://{tmp_path / 'locks.db'}"
    env = write_under_lockward(store, mariadb, PYMYSQL_WRITE, "first")
    assert env["LOCKWARD_FENCE_DB_INIT"].startswith("SET @lockward_fences = 'migrate=")
    fence = int(env["LOCKWARD_FENCE"])
    claimed = lockward("fence", "claim", "--db", mariadb, "migrate", str(fence + 1))
    assert claimed.returncode == 0, claimed.stderr
    late = subprocess.run(
        [sys.executable, "-c", PYMYSQL_WRITE, mariadb, "late"], capture_output=True, text=True, env=env, check=False
    )
    assert late.returncode == 3, late
    assert f"stale fence {fence} for lock migrate" in late.stderr, late.stderr
    check = pymysql.connect(
        host=url.hostname, port=url.port, user=url.username, password=url.password, database=url.path.lstrip("/")
    )
    with check, check.cursor() as cursor:
        cursor.execute("SELECT sku FROM stock ORDER BY sku")
        assert cursor.fetchall() == (("first",),)
