"""Stores for the tests: SQLite and memory in the test's own folder, and a
real server of every other kind started by ``lockward-testserver`` (the
testkit the Rust tests use) on a free loopback port, once per session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

import lockward

ROOT = Path(__file__).resolve().parents[2]

#: Every kind of store the package is tested on.
SERVER_KINDS = ["redis", "redis-cluster", "redlock", "etcd", "zookeeper", "postgres", "mariadb", "k8s"]
ALL_KINDS = ["memory", "sqlite", *SERVER_KINDS]


def testserver_binary() -> str:
    return os.environ.get(
        "LOCKWARD_TESTSERVER_BIN",
        str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "lockward-testserver"),
    )


class Servers:
    """The servers started so far, by kind; each stops at the session's end."""

    def __init__(self) -> None:
        self.urls: dict[str, str] = {}
        self.processes: list[subprocess.Popen[str]] = []

    def url(self, kind: str) -> str:
        if kind not in self.urls:
            binary = testserver_binary()
            if not os.path.exists(binary):
                pytest.fail(
                    f"no lockward-testserver at {binary}: build it with "
                    "`cargo build -p lockward-testkit` (its servers come from scripts/install-test-deps.sh)"
                )
            process = subprocess.Popen(
                [binary, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            self.processes.append(process)
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            if not line:
                pytest.fail(f"lockward-testserver {kind} printed no URL")
            self.urls[kind] = line
        return self.urls[kind]

    def stop(self) -> None:
        for process in self.processes:
            # Closing its stdin stops the server and removes its files.
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=60)


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    started = Servers()
    yield started
    started.stop()


StoreUrl = Callable[[], str]


@pytest.fixture
def store_url(request: pytest.FixtureRequest, servers: Servers, tmp_path: Path) -> str:
    """The URL of a store of the kind the test is parametrized with."""
    kind: str = request.param
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite://{tmp_path / 'locks.db'}"
    return servers.url(kind)


def unique(name: str) -> str:
    """A lock name no other test (on a shared server) uses."""
    return f"py/{name}/{os.getpid()}/{os.urandom(4).hex()}"


@pytest.fixture
def store(store_url: str) -> lockward.Store:
    return lockward.Store(store_url)
