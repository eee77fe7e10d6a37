"""Read-write locks, semaphores, rate limits and status rows on every store,
blocking and awaited."""

from __future__ import annotations

import asyncio

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
