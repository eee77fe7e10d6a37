"""lockward from Python beside the Redis locks Python services use today —
redis-py's ``Lock``, python-redis-lock and pottery's ``Redlock`` — measured
in one run on one Redis, and printed as ratios.

    python bench/redis_locks.py redis://127.0.0.1:6379

Rows: the uncontended acquire+release rate of each (one thread); the
handoff (a holder releases, a waiter blocked in its acquire holds it),
median of 20; 1,000 asyncio tasks waiting on one name with lockward:
the order they are served in and the event loop's latency meanwhile; and
the extension's per-call overhead: its cycle beside the Rust library's
own, as ``lockward bench`` measures it on the same Redis ($LOCKWARD_BIN,
default the workspace's release build).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Callable
from urllib.parse import urlparse

import redis
import redis_lock
from pottery import Redlock

import lockward
import lockward.aio

Cycle = Callable[[str], None]


def rate(cycle: Cycle, seconds: float = 3.0) -> float:
    """Acquire+release cycles per second, one thread, distinct names."""
    done = 0
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        cycle(f"bench/rate/{done % 64}")
        done += 1
    return done / seconds


Hold = Callable[[str], Callable[[], None]]


def handoff(hold: Hold, rounds: int = 20) -> float:
    """Median seconds from a holder's release to a blocked waiter holding."""
    gaps = []
    for n in range(rounds):
        name = f"bench/handoff/{n}"
        release = hold(name)
        got: list[float] = []

        def wait() -> None:
            release_mine = hold(name)
            got.append(time.perf_counter())
            release_mine()

        waiter = threading.Thread(target=wait)
        waiter.start()
        # Released at a different point of a poller's period each round.
        time.sleep(0.2 + (n % 10) * 0.0137)
        released = time.perf_counter()
        release()
        waiter.join()
        gaps.append(got[0] - released)
    return statistics.median(gaps)


async def crowd(url: str, tasks: int = 1000) -> tuple[float, float, float]:
    """1,000 tasks wait on one name: the share served in the order they
    asked, the time to serve all, and the event loop's p99 latency."""
    store = lockward.aio.Store(url)
    name = f"bench/crowd/{time.time()}"
    holder = await store.lock(name, ttl=30)
    asked: list[int] = []
    served: list[int] = []

    async def one(i: int) -> None:
        asked.append(i)
        async with store.lock(name, ttl=30, wait=300):
            served.append(i)

    lateness: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            lateness.append(time.perf_counter() - before - 0.001)

    ticking = asyncio.create_task(ticker())
    waiting = []
    for i in range(tasks):
        waiting.append(asyncio.create_task(one(i)))
        # Each asks before the next: the order asked is the order created.
        await asyncio.sleep(0)
    await asyncio.sleep(0.5)
    started = time.perf_counter()
    await holder.release()
    await asyncio.gather(*waiting)
    took = time.perf_counter() - started
    stop.set()
    await ticking
    in_order = sum(1 for a, b in zip(asked, served) if a == b) / tasks
    p99 = statistics.quantiles(lateness, n=100)[98]
    return in_order, took, p99


def rust_cycle(url: str) -> float:
    """The Rust library's uncontended acquire+release, median seconds."""
    binary = os.environ.get(
        "LOCKWARD_BIN",
        os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "lockward"),
    )
    out = subprocess.run(
        [binary, "--store", url, "bench", "--json", "--clients", "1", "--names", "distinct",
         "--scale", "0", "--semaphore", "0", "--rw-clients", "0", "--failover-lease", "0",
         "--duration", "3s"],
        check=True, capture_output=True, text=True,
    ).stdout
    return float(json.loads(out)["p50_us"]) / 1e6


def median_cycle(cycle: Cycle, rounds: int = 3000) -> float:
    """The median seconds of one acquire+release."""
    took = []
    for n in range(rounds):
        began = time.perf_counter()
        cycle(f"bench/median/{n % 64}")
        took.append(time.perf_counter() - began)
    return statistics.median(took)


def main(url: str) -> None:
    parts = urlparse(url)
    client = redis.Redis(host=parts.hostname or "127.0.0.1", port=parts.port or 6379)
    store = lockward.Store(url)

    def lockward_cycle(name: str) -> None:
        store.lock(name, ttl=10, renew=False).release()

    def redis_py_cycle(name: str) -> None:
        lock = client.lock(name, timeout=10)
        lock.acquire()
        lock.release()

    def redis_lock_cycle(name: str) -> None:
        lock = redis_lock.Lock(client, name, expire=10)
        lock.acquire()
        lock.release()

    def pottery_cycle(name: str) -> None:
        lock = Redlock(key=name, masters={client}, auto_release_time=10)
        lock.acquire()
        lock.release()

    def lockward_hold(name: str) -> Callable[[], None]:
        return store.lock(name, ttl=10, wait=30).release

    def redis_py_hold(name: str) -> Callable[[], None]:
        lock = client.lock(f"{name}:redis-py", timeout=10)
        lock.acquire(blocking=True)

        def release() -> None:
            lock.release()

        return release

    def redis_lock_hold(name: str) -> Callable[[], None]:
        lock = redis_lock.Lock(client, f"{name}:redis-lock", expire=10)
        lock.acquire(blocking=True)

        def release() -> None:
            lock.release()

        return release

    def pottery_hold(name: str) -> Callable[[], None]:
        lock = Redlock(key=f"{name}:pottery", masters={client}, auto_release_time=10)
        lock.acquire(blocking=True)

        def release() -> None:
            lock.release()

        return release

    rows = [
        ("lockward", lockward_cycle, lockward_hold),
        ("redis-py Lock", redis_py_cycle, redis_py_hold),
        ("python-redis-lock", redis_lock_cycle, redis_lock_hold),
        ("pottery Redlock", pottery_cycle, pottery_hold),
    ]
    rates = {label: rate(cycle) for label, cycle, _ in rows}
    handoffs = {label: handoff(hold) for label, _, hold in rows}
    fastest_other = max(v for k, v in rates.items() if k != "lockward")
    print(f"{'client':<20} {'acquire+release/s':>18} {'handoff median':>15}")
    for label, _, _ in rows:
        print(f"{label:<20} {rates[label]:>18,.0f} {handoffs[label] * 1000:>12.2f} ms")
    print(f"lockward / fastest other, rate: {rates['lockward'] / fastest_other:.2f}x")
    for label in rates:
        if label != "lockward":
            print(f"handoff, {label} / lockward: {handoffs[label] / handoffs['lockward']:.1f}x")
    python_p50 = median_cycle(lockward_cycle)
    rust_p50 = rust_cycle(url)
    print(
        f"per call: lockward from Python {python_p50 * 1e6:.0f} us a cycle (median), "
        f"the Rust library {rust_p50 * 1e6:.0f} us: {python_p50 / rust_p50:.2f}x, "
        f"{(python_p50 - rust_p50) * 1e6 / 2:.0f} us a call (acquire or release)"
    )
    in_order, took, p99 = asyncio.run(crowd(url))
    print(
        f"1,000 asyncio tasks on one name: {in_order:.1%} served in the order they asked, "
        f"all in {took:.2f} s; event loop latency p99 {p99 * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379")
