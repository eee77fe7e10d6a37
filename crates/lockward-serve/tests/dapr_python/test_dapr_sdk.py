"""Dapr's own Python SDK (sync and asyncio) locks through `lockward serve`,
with no Dapr runtime: one owner wins, unlock answers as Dapr defines, expiry
frees, the client starts without waiting on its health check, and the lock
is the one `lockward run` sees."""

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

LOCKWARD = os.environ.get(
    "LOCKWARD_BIN",
    str(Path(__file__).resolve().parents[4] / "target" / "debug" / "lockward"),
)


@pytest.fixture()
def daemon(tmp_path):
    """A daemon on a fresh SQLite store; Dapr's SDK pointed at it."""
    if not Path(LOCKWARD).exists():
        pytest.fail(f"no lockward binary at {LOCKWARD}: build it (cargo build -p lockward-cli) or set LOCKWARD_BIN")
    store = f"sqlite://{tmp_path / 'locks.db'}"
    process = subprocess.Popen(
        [LOCKWARD, "--store", store, "serve", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stdout.readline().strip()
        address = first.rsplit(" on ", 1)[1]
        os.environ["DAPR_GRPC_ENDPOINT"] = address
        os.environ["DAPR_HTTP_ENDPOINT"] = f"http://{address}"
        os.environ["DAPR_HEALTH_TIMEOUT"] = "5"
        yield store
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_no_wait(store, name):
    return subprocess.run(
        [LOCKWARD, "--store", store, "run", name, "--no-wait", "--", "true"],
        check=False,
    ).returncode


def test_one_owner_wins_and_unlock_answers_as_dapr_defines(daemon):
    from dapr.clients import DaprClient
    from dapr.clients.grpc._response import UnlockResponseStatus

    started = time.monotonic()
    with DaprClient() as client:
        assert time.monotonic() - started < 2, "the client waited on its health check"
        first = client.try_lock("lockward", "orders", "owner-a", expiry_in_seconds=30)
        assert first.success
        second = client.try_lock("lockward", "orders", "owner-b", expiry_in_seconds=30)
        assert not second.success
        # The same lock the shell sees.
        assert run_no_wait(daemon, "orders") == 75
        by_other = client.unlock("lockward", "orders", "owner-b")
        assert by_other.status == UnlockResponseStatus.lock_belongs_to_others
        mine = client.unlock("lockward", "orders", "owner-a")
        assert mine.status == UnlockResponseStatus.success
        again = client.unlock("lockward", "orders", "owner-a")
        assert again.status == UnlockResponseStatus.lock_does_not_exist
        assert run_no_wait(daemon, "orders") == 0


def test_a_lock_expires_and_the_shell_holds_one_dapr_cannot_take(daemon):
    from dapr.clients import DaprClient

    with DaprClient() as client:
        assert client.try_lock("lockward", "job", "a", expiry_in_seconds=1).success
        time.sleep(1.3)
        assert client.try_lock("lockward", "job", "b", expiry_in_seconds=30).success
        shell = subprocess.Popen(
            [LOCKWARD, "--store", daemon, "run", "report", "--", "sleep", "5"]
        )
        try:
            deadline = time.monotonic() + 5
            taken = True
            while time.monotonic() < deadline:
                response = client.try_lock("lockward", "report", "a", expiry_in_seconds=5)
                if not response.success:
                    taken = False
                    break
                client.unlock("lockward", "report", "a")
                time.sleep(0.1)
            assert not taken, "Dapr took a lock the shell held"
        finally:
            shell.kill()
            shell.wait()


def test_an_unknown_store_is_refused(daemon):
    from dapr.clients import DaprClient

    with DaprClient() as client:
        with pytest.raises(Exception) as refused:
            client.try_lock("redis", "x", "a", expiry_in_seconds=5)
        assert "INVALID_ARGUMENT" in str(refused.value) or "not configured" in str(refused.value)


def test_the_asyncio_client_locks_too(daemon):
    from dapr.aio.clients import DaprClient
    from dapr.clients.grpc._response import UnlockResponseStatus

    async def main():
        async with DaprClient() as client:
            first = await client.try_lock("lockward", "aio", "a", expiry_in_seconds=30)
            assert first.success
            second = await client.try_lock("lockward", "aio", "b", expiry_in_seconds=30)
            assert not second.success
            unlocked = await client.unlock("lockward", "aio", "a")
            assert unlocked.status == UnlockResponseStatus.success

    asyncio.run(main())
