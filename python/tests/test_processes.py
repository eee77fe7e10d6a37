"""Across processes: 8 processes make fenced increments of one counter
exactly, and a parent holding a lock forks children that lock on the same
store while its lease stays valid."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

import lockward
from conftest import unique

#: The store each forked worker inherits (fork-safety is part of the test).
inherited: dict[str, lockward.Store] = {}


def increment(path: str, name: str, times: int, url: str = "") -> None:
    # A spawned worker opens the store; a forked one uses the parent's.
    store = lockward.Store(url) if url else inherited["store"]
    counter = Path(path)
    for _ in range(times):
        with store.lock(name, ttl=10, wait=60) as lease:
            value, fence = (int(x) for x in counter.read_text().split())
            # A fenced write: the resource refuses an older fence.
            assert lease.fence > fence, f"fence {lease.fence} after {fence}"
            counter.write_text(f"{value + 1} {lease.fence}")


@pytest.mark.parametrize(
    "store_url", ["sqlite", "redis", "etcd", "zookeeper", "postgres", "k8s"], indirect=True
)
def test_eight_processes_make_exact_fenced_increments(
    store: lockward.Store, tmp_path: Path, store_url: str
) -> None:
    # Kubernetes writes a Lease object per acquisition: fewer rounds.
    times = 25 if "k8s" in store_url or store_url.startswith("kubernetes") else 100
    counter = tmp_path / "counter"
    counter.write_text("0 0")
    name = unique("counter")
    inherited["store"] = store
    # ZooKeeper: a child forked from a process with a ZooKeeper session
    # cannot start one of its own (docs/python.md); fresh processes can.
    zookeeper = store_url.startswith("zk")
    args = (str(counter), name, times, store_url if zookeeper else "")
    workers: list[multiprocessing.process.BaseProcess] = [
        (multiprocessing.get_context("spawn") if zookeeper else multiprocessing.get_context("fork"))
        .Process(target=increment, args=args)
        for _ in range(8)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        joined(worker, within=300)
    value, _ = counter.read_text().split()
    assert int(value) == 8 * times


def joined(process: multiprocessing.process.BaseProcess, within: float) -> None:
    """Waits for `process` to succeed; one still running after `within`
    seconds is killed (a hung child must not hang the suite at exit)."""
    process.join(timeout=within)
    if process.is_alive():
        process.kill()
        process.join()
        pytest.fail(f"process {process.pid} still ran after {within} s")
    assert process.exitcode == 0, f"process {process.pid} failed: {process.exitcode}"


def lock_and_release(name: str) -> None:
    store = inherited["store"]
    for i in range(5):
        with store.lock(f"{name}/{i}", ttl=5, wait=10):
            pass


@pytest.mark.parametrize("store_url", ["sqlite", "redis", "etcd", "postgres"], indirect=True)
def test_a_parent_holding_a_lock_forks_four_children_that_lock_too(store: lockward.Store) -> None:
    name = unique("forks")
    held = store.lock(name, ttl=10)
    inherited["store"] = store
    fork = multiprocessing.get_context("fork")
    children = [fork.Process(target=lock_and_release, args=(f"{name}/{n}",)) for n in range(4)]
    for child in children:
        child.start()
    for child in children:
        joined(child, within=60)
    assert not held.lost.is_set()
    held.extend()
    with pytest.raises(lockward.Busy):
        store.try_lock(name)
    held.release()
    assert os.getpid() > 0
