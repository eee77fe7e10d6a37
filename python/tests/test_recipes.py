"""Read-write locks, semaphores, rate limits and status rows on every store,
blocking and awaited."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Optional

import pytest

import lockward
import lockward.aio
from conftest import ALL_KINDS, unique

every_store = pytest.mark.parametrize("store_url", ALL_KINDS, indirect=True)


@every_store
def test_readers_share_and_a_writer_holds_alone(store: lockward.Store) -> None:
    rw = store.rw_lock(unique("config"))
    first = rw.read(ttl=10)
    second = rw.try_read(ttl=10)
    with pytest.raises(lockward.Busy):
        rw.try_write()
    first.release()
    second.release()
    with rw.write(ttl=10, wait=5) as writer:
        assert writer.fence > 0
        with pytest.raises(lockward.Busy):
            rw.try_read()
    rw.try_read().release()


@every_store
def test_read_lock_and_write_lock_are_the_read_write_locks_sides(store: lockward.Store) -> None:
    name = unique("rw-shortcuts")
    with store.read_lock(name, ttl=10), store.read_lock(name, ttl=10):
        with pytest.raises((lockward.Busy, lockward.TimedOut)):
            store.write_lock(name, ttl=10, wait=0.2)
    with store.write_lock(name, ttl=10, wait=5):
        with pytest.raises(lockward.Busy):
            store.rw_lock(name).try_read()


@every_store
def test_a_semaphore_lets_its_permits_in_and_no_more(store: lockward.Store) -> None:
    pool = store.semaphore(unique("pool"), 2)
    one = pool.acquire(ttl=10)
    two = pool.try_acquire(ttl=10)
    with pytest.raises(lockward.NoPermits):
        pool.try_acquire()
    one.release()
    with pool.acquire(ttl=10, wait=5) as three:
        assert three.fence > 0
    two.release()
    with pytest.raises(lockward.InvalidArgument):
        store.semaphore(unique("none"), 0).acquire()


@every_store
def test_status_rows_show_the_holder(store: lockward.Store) -> None:
    name = unique("shown")
    assert store.inspect(name) is None
    with store.lock(name, ttl=10, label="worker-7") as lease:
        holder = store.inspect(name)
        assert holder is not None
        assert holder.name == name
        assert holder.label == "worker-7"
        assert holder.holding == "lock"
        assert holder.fence in (None, lease.fence)
        prefix = name.rsplit("/", 1)[0]
        assert name in [row.name for row in store.list(prefix)]
    assert store.inspect(name) is None


@every_store
def test_a_rate_limit_lets_its_budget_through_per_subject(store: lockward.Store) -> None:
    limit = store.rate_limit(unique("api"), 2, 60)
    first = limit.check("user-7")
    assert first.allowed and first.remaining == 1
    assert limit.check("user-7").allowed
    refused = limit.check("user-7")
    assert not refused.allowed
    assert 0 < refused.retry_after <= 60
    assert limit.check("user-8").allowed
    smooth = store.rate_limit(unique("smooth"), 10, 1, burst=1)
    assert smooth.check("user-7").allowed
    assert not smooth.check("user-7").allowed
    with pytest.raises(lockward.InvalidArgument):
        store.rate_limit(unique("zero"), 0, 1).check("x")


@pytest.mark.parametrize("store_url", ["sqlite", "redis"], indirect=True)
def test_the_recipes_awaited(store_url: str) -> None:
    async def main() -> None:
        store = lockward.aio.Store(store_url)
        rw = store.rw_lock(unique("aio-config"))
        async with rw.read(ttl=10) as reader:
            assert reader.fence > 0
            with pytest.raises(lockward.Busy):
                await rw.write(wait=0)
        pool = store.semaphore(unique("aio-pool"), 1)
        held = await pool.acquire(ttl=10)
        with pytest.raises(lockward.NoPermits):
            await pool.acquire(wait=0)
        await held.release()
        limit = store.rate_limit(unique("aio-api"), 1, 60)
        assert (await limit.check("u")).allowed
        assert not (await limit.check("u")).allowed

    asyncio.run(main())


@every_store
def test_one_candidate_leads_and_a_resign_hands_over(store: lockward.Store) -> None:
    election = unique("scheduler")
    timing = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
    assert store.leader(election) is None
    with store.elect(election, "node-a", **timing) as a:
        assert a.is_leader and not a.revoked.is_set()
        assert store.leader(election) == "node-a"
        with pytest.raises(lockward.Busy):
            store.elect(election, "node-b", wait=0, **timing)
        # It renews itself: still leading past its lease duration.
        assert not a.revoked.wait(timeout=3.5)
        assert a.is_leader
    assert not a.is_leader
    with store.elect(election, "node-b", wait=5, **timing) as b:
        assert b.epoch > a.epoch
        assert store.leader(election) == "node-b"
    with pytest.raises(lockward.InvalidArgument):
        store.elect(election, "node-c", lease_duration=1, renew_deadline=2)


@every_store
def test_an_observer_sees_each_leader_as_it_takes_over(store: lockward.Store) -> None:
    election = unique("observed")
    timing = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
    leaders = store.observe(election, retry_period=0.1)
    assert next(leaders) is None
    seen: list[Optional[str]] = []

    def watch() -> None:
        for leader in leaders:
            seen.append(leader)
            if leader == "node-b":
                return

    watching = threading.Thread(target=watch, daemon=True)
    watching.start()
    with store.elect(election, "node-a", **timing):
        time.sleep(1.0)
    time.sleep(1.0)
    with store.elect(election, "node-b", wait=5, **timing):
        watching.join(timeout=10)
    assert not watching.is_alive(), f"the observer saw only {seen}"
    # Each change once, in order (the second before the next leader).
    assert seen == ["node-a", None, "node-b"], seen


@every_store
def test_an_idempotent_operation_runs_once_and_duplicates_get_its_result(
    store: lockward.Store,
) -> None:
    key = unique("order")
    runs: list[int] = []

    def charge(lease: lockward.Lease) -> str:
        runs.append(lease.fence)
        return "charged 42.00"

    assert store.idempotent(key, charge) == ("charged 42.00", True)
    assert store.idempotent(key, charge) == ("charged 42.00", False)
    assert len(runs) == 1
    with store.claim(key) as claim:
        assert claim.stored == "charged 42.00" and claim.lease is None

    failing = unique("refund")
    with pytest.raises(RuntimeError):
        store.idempotent(failing, lambda lease: (_ for _ in ()).throw(RuntimeError("declined")))
    assert store.idempotent(failing, lambda lease: "refunded") == ("refunded", True)

    running = unique("running")
    with store.claim(running) as first:
        assert first.lease is not None
        with pytest.raises(lockward.InProgress):
            store.idempotent(running, charge)
        first.complete("done")
    assert store.claim(running).stored == "done"


@every_store
def test_once_runs_a_job_to_success_once(store: lockward.Store) -> None:
    key = unique("migrate")
    runs: list[int] = []

    def flaky(lease: lockward.Lease) -> None:
        runs.append(lease.fence)
        if len(runs) == 1:
            raise RuntimeError("the first try fails")

    with pytest.raises(RuntimeError):
        store.once(key, flaky)
    assert store.once(key, flaky) is True
    assert store.once(key, flaky) is False
    assert len(runs) == 2
    record = store.claim(key, namespace="once").stored
    assert record is not None and f"with fence {runs[1]}" in record


@pytest.mark.parametrize("store_url", ["sqlite", "redis"], indirect=True)
def test_an_idempotent_function_runs_once_per_key(store: lockward.Store) -> None:
    calls: list[tuple[str, int]] = []
    prefix = unique("charge")

    @store.idempotent_function(key=lambda order, amount: f"{prefix}/{order}")
    def charge(order: str, amount: int) -> str:
        calls.append((order, amount))
        return f"charged {amount}"

    assert charge("o-1", 42) == "charged 42"
    assert charge("o-1", 42) == "charged 42"
    assert charge("o-2", 7) == "charged 7"
    assert calls == [("o-1", 42), ("o-2", 7)]
    assert charge.__name__ == "charge"
