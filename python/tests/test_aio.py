"""The asyncio API: waits that never block the loop, cancellation that
leaves no holder, and a block cancelled when its lease is lost."""

from __future__ import annotations

import asyncio
import time

import pytest

import lockward
import lockward.aio
from conftest import unique

stores = pytest.mark.parametrize("store_url", ["sqlite", "redis", "etcd"], indirect=True)


@stores
def test_async_with_holds_and_a_waiter_is_woken_by_the_release(store_url: str) -> None:
    async def main() -> None:
        store = lockward.aio.Store(store_url)
        name = unique("aio-handoff")
        order: list[str] = []
        holder = await store.lock(name, ttl=10)

        async def waiter() -> int:
            async with store.lock(name, ttl=10, wait=10) as lease:
                order.append("waiter")
                return lease.fence

        waiting = asyncio.create_task(waiter())
        # The loop runs other work while the waiter waits.
        for _ in range(20):
            await asyncio.sleep(0.01)
        order.append("release")
        await holder.release()
        fence = await asyncio.wait_for(waiting, 10)
        assert fence > holder.fence
        assert order == ["release", "waiter"]
        async with store.try_lock(name) as again:
            with pytest.raises(lockward.Busy):
                await store.try_lock(name)
            assert again.fence > fence

    asyncio.run(main())


@stores
def test_cancelling_a_waiting_task_leaves_no_holder(store_url: str) -> None:
    async def main() -> None:
        store = lockward.aio.Store(store_url)
        name = unique("aio-cancel")
        holder = await store.lock(name, ttl=10)
        waiting = asyncio.create_task(_take(store, name))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert time.monotonic() - started < 0.1
        await holder.release()
        # No holder was left: the lock is free (within the moment a store
        # with a line of waiters takes to drop the cancelled one's place).
        free = await store.lock(name, wait=1)
        await free.release()

    asyncio.run(main())


async def _take(store: lockward.aio.Store, name: str) -> lockward.aio.Lease:
    return await store.lock(name, wait=30)


@pytest.mark.parametrize("store_url", ["sqlite", "redis"], indirect=True)
def test_a_block_whose_lease_is_lost_is_cancelled_and_raises_lost(store_url: str) -> None:
    async def main() -> None:
        store = lockward.aio.Store(store_url)
        name = unique("aio-lost")
        reached_end = False
        started = time.monotonic()
        with pytest.raises(lockward.Lost):
            async with store.lock(name, ttl=0.5, renew=False) as lease:
                assert lease.fence > 0
                await asyncio.sleep(10)
                reached_end = True
        assert not reached_end
        assert time.monotonic() - started < 3
        # The task was not left cancelled: it goes on awaiting.
        await asyncio.sleep(0)

    asyncio.run(main())


@stores
def test_elections_and_idempotency_keys_awaited(store_url: str) -> None:
    async def main() -> None:
        store = lockward.aio.Store(store_url)
        election = unique("aio-scheduler")
        timing = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
        async with await store.elect(election, "node-a", **timing) as a:
            assert a.is_leader and not a.revoked.is_set()
            assert await store.leader(election) == "node-a"
            waiting = asyncio.create_task(store.elect(election, "node-b", **timing))
            await asyncio.sleep(0.2)
            assert not waiting.done()
        b = await asyncio.wait_for(waiting, 10)
        assert b.epoch > a.epoch
        await b.resign()

        key = unique("aio-order")
        runs: list[int] = []

        async def charge(lease: lockward.aio.Lease) -> str:
            runs.append(lease.fence)
            return "charged"

        assert await store.idempotent(key, charge) == ("charged", True)
        assert await store.idempotent(key, charge) == ("charged", False)
        assert len(runs) == 1
        job = unique("aio-migrate")

        async def migrate(lease: lockward.aio.Lease) -> None:
            runs.append(lease.fence)

        assert await store.once(job, migrate) is True
        assert await store.once(job, migrate) is False
        assert len(runs) == 2

    asyncio.run(main())


@stores
def test_waiting_tasks_are_served_in_the_order_they_asked(store_url: str) -> None:
    async def main() -> None:
        store = lockward.aio.Store(store_url)
        name = unique("aio-fifo")
        holder = await store.lock(name, ttl=30)
        served: list[int] = []

        async def one(i: int) -> None:
            async with store.lock(name, ttl=30, wait=60):
                served.append(i)

        waiting = [asyncio.create_task(one(i)) for i in range(50)]
        # Every task asks (in the order created) before the release.
        await asyncio.sleep(0.5)
        await holder.release()
        await asyncio.wait_for(asyncio.gather(*waiting), 60)
        assert served == list(range(50))

    asyncio.run(main())


@stores
def test_an_observer_is_awaited(store_url: str) -> None:
    async def main() -> None:
        store = lockward.aio.Store(store_url)
        election = unique("aio-observed")
        leaders = store.observe(election, retry_period=0.1)
        assert await leaders.__anext__() is None
        next_leader = asyncio.ensure_future(leaders.__anext__())
        await asyncio.sleep(0.2)
        assert not next_leader.done()
        async with await store.elect(election, "node-a"):
            assert await asyncio.wait_for(next_leader, 5) == "node-a"
        await leaders.aclose()

    asyncio.run(main())
