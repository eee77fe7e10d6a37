"""The blocking API on every store: fences, waits, threads, loss, Ctrl-C,
fork, and the errors of bad input."""

from __future__ import annotations

import gc
import logging
import math
import os
import signal
import threading
import time
import warnings

import pytest

import lockward
from conftest import ALL_KINDS, unique

every_store = pytest.mark.parametrize("store_url", ALL_KINDS, indirect=True)


@every_store
def test_fences_grow_and_the_context_manager_releases(store: lockward.Store) -> None:
    name = unique("fences")
    last = 0
    for _ in range(3):
        with store.lock(name, ttl=5, wait=5) as lease:
            assert lease.fence > last
            last = lease.fence
            assert lease.name == name
            assert 4 < lease.deadline - time.monotonic() <= 5
            assert not lease.lost.is_set()
            lease.raise_if_lost()
            time.sleep(0.2)
            # etcd keeps a lease's TTL: renew for the same TTL on every store.
            lease.extend()
            assert lease.deadline - time.monotonic() > 4.8


@every_store
def test_a_held_lock_is_busy_and_a_bounded_wait_times_out(store: lockward.Store) -> None:
    name = unique("busy")
    with store.lock(name):
        with pytest.raises(lockward.Busy):
            store.try_lock(name)
        started = time.monotonic()
        with pytest.raises(lockward.TimedOut):
            store.lock(name, wait=0.2)
        assert time.monotonic() - started < 2
    store.try_lock(name).release()


@every_store
def test_a_waiting_thread_gets_the_lock_when_it_is_released(store: lockward.Store) -> None:
    name = unique("handoff")
    holder = store.lock(name, ttl=10)
    got: list[tuple[float, int]] = []

    def wait() -> None:
        with store.lock(name, ttl=10, wait=10) as lease:
            got.append((time.monotonic(), lease.fence))

    waiter = threading.Thread(target=wait)
    waiter.start()
    # The waiter releases the GIL while it waits: this thread runs meanwhile.
    ticks = 0
    until = time.monotonic() + 0.3
    while time.monotonic() < until:
        ticks += 1
    assert ticks > 1000
    released = time.monotonic()
    holder.release()
    waiter.join(timeout=10)
    assert got, "the waiter never got the lock"
    woken, fence = got[0]
    assert fence > holder.fence
    assert woken - released < 3


@every_store
def test_threads_sharing_one_store_make_exact_fenced_increments(store: lockward.Store) -> None:
    name = unique("counter")
    counter = {"value": 0, "fence": 0}

    def work() -> None:
        for _ in range(10):
            with store.lock(name, ttl=10, wait=30) as lease:
                assert lease.fence > counter["fence"], "a fence older than one seen"
                counter["fence"] = lease.fence
                value = counter["value"]
                time.sleep(0.001)
                counter["value"] = value + 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert counter["value"] == 40


@every_store
def test_lock_all_takes_every_name_or_none(store: lockward.Store) -> None:
    a, b = unique("all-a"), unique("all-b")
    with store.lock_all([a, b], ttl=5) as both:
        assert len(both.fences) == 2
        with pytest.raises(lockward.Busy):
            store.try_lock(b)
    store.try_lock(a).release()


@pytest.mark.parametrize("store_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_a_lease_that_is_not_renewed_is_lost(store: lockward.Store) -> None:
    name = unique("lost")
    lease = store.lock(name, ttl=0.5, renew=False)
    assert lease.lost.wait(timeout=5), "the lease outlived its TTL"
    assert lease.lost.is_set()
    with pytest.raises(lockward.Lost):
        lease.raise_if_lost()
    following = store.lock(name, wait=5)
    assert following.fence > lease.fence
    following.release()
    with pytest.raises(lockward.Lost):
        lease.release()


@pytest.mark.parametrize("store_url", ["sqlite", "redis"], indirect=True)
def test_ctrl_c_interrupts_a_wait_at_once_and_leaves_no_holder(store: lockward.Store) -> None:
    name = unique("interrupt")
    holder = store.lock(name, ttl=10)
    sent: list[float] = []

    def interrupt() -> None:
        time.sleep(0.3)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        store.lock(name, wait=30)
    assert time.monotonic() - sent[0] < 0.1
    holder.release()
    # The interrupted wait left nobody holding the lock (a holder would keep
    # it for its TTL of 30 s): status shows none, and the lock is free.
    assert store.inspect(name) is None
    store.lock(name, wait=1).release()


@pytest.mark.parametrize("store_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_a_forked_child_gets_its_own_connections_and_leaves_the_parents_lock(
    store: lockward.Store,
) -> None:
    name, other = unique("parent"), unique("child")
    lease = store.lock(name, ttl=10)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with pytest.raises(lockward.Busy):
                store.try_lock(name)
            with store.lock(other, wait=5) as mine:
                code = 0 if mine.fence > 0 else 2
            # The parent's lease cannot be used here, and dropping it here
            # does not release it.
            try:
                lease.release()
                code = 3
            except lockward.InvalidArgument:
                pass
            del lease
            gc.collect()
        finally:
            os._exit(code)
    assert exit_code_of(pid, within=30) == 0
    assert not lease.lost.is_set()
    with pytest.raises(lockward.Busy):
        store.try_lock(name)
    lease.release()


def exit_code_of(pid: int, within: float) -> int:
    """The exit code of child `pid`; a child still running after `within`
    seconds is killed and the test fails (a hung child must not hang the
    suite)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"child {pid} still ran after {within} s")


@pytest.mark.parametrize("store_url", ["redis"], indirect=True)
def test_a_child_that_collects_the_parents_store_exits(store_url: str) -> None:
    # The parent renews a short lease and a thread of it locks and unlocks
    # while it forks, so its runtime is busy at the moments of the forks;
    # each child drops the parent's store (as a child's garbage collection
    # would) and must still exit.
    parents = lockward.Store(store_url)
    lease = parents.lock(unique("busy"), ttl=0.3)
    forking = threading.Event()
    forking.set()

    def busy() -> None:
        name = unique("busier")
        while forking.is_set():
            parents.lock(name, ttl=5).release()

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        forks = 50
        for _ in range(forks):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ResourceWarning)
                        del lease, parents
                        gc.collect()
                    code = 0
                finally:
                    os._exit(code)
            assert exit_code_of(pid, within=10) == 0
    finally:
        forking.clear()
        thread.join()
    assert not lease.lost.is_set()
    lease.release()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_lease_dropped_while_held_warns_and_is_released(store: lockward.Store) -> None:
    name = unique("dropped")
    lease = store.lock(name, ttl=30)
    with pytest.warns(ResourceWarning, match="without release"):
        del lease
        gc.collect()
    store.lock(name, wait=5).release()


@pytest.mark.parametrize("store_url", ["memory"], indirect=True)
def test_bad_input_is_refused_with_a_clear_error(store: lockward.Store) -> None:
    for ttl in (-1.0, math.nan, math.inf, 0.0, 10 * 365 * 86400.0):
        with pytest.raises(lockward.InvalidArgument):
            store.lock(unique("ttl"), ttl=ttl)
    with pytest.raises(lockward.InvalidArgument):
        store.lock(unique("wait"), wait=-1)
    with pytest.raises(lockward.InvalidArgument):
        store.lock("a\x00b")
    with pytest.raises(lockward.InvalidArgument):
        store.lock("x" * 1_000_000)
    with pytest.raises(lockward.Error) as bad_url:
        lockward.Store("nope://somewhere")
    assert "nope" in str(bad_url.value)
    with pytest.raises(lockward.Error) as secret:
        lockward.Store("redis://user:hunter2-secret@127.0.0.1:1")
    assert "hunter2" not in str(secret.value)
    # InvalidArgument is a ValueError too, as Python code expects.
    assert issubclass(lockward.InvalidArgument, ValueError)


@pytest.mark.parametrize("store_url", ["sqlite", "redis"], indirect=True)
def test_threads_of_a_forked_child_open_its_store_at_once(store: lockward.Store) -> None:
    store.lock(unique("before-fork")).release()
    pid = os.fork()
    if pid == 0:
        failures: list[BaseException] = []

        def work(i: int) -> None:
            try:
                with store.lock(unique(f"child-{i}"), wait=5):
                    pass
            except BaseException as error:  # noqa: BLE001 - reported below
                failures.append(error)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        stuck = any(thread.is_alive() for thread in threads)
        os._exit(1 if failures or stuck else 0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_lockwards_events_reach_pythons_logging(caplog: pytest.LogCaptureFixture) -> None:
    store = lockward.Store("memory://")
    with caplog.at_level(logging.DEBUG, logger="lockward"):
        lockward.reset_logging()
        with store.lock(unique("logged"), ttl=5):
            pass
    acquired = [r for r in caplog.records if r.name.startswith("lockward.") and "acquired" in r.getMessage()]
    assert acquired, [f"{r.name}: {r.getMessage()}" for r in caplog.records]
    assert acquired[0].levelno == logging.DEBUG
    # Back at the default level, debug events are dropped before Python.
    caplog.clear()
    lockward.reset_logging()
    with store.lock(unique("quiet"), ttl=5):
        pass
    assert not [r for r in caplog.records if r.name.startswith("lockward.")]
