"""The asyncio API: the same names as the blocking one, awaited.

Waits never block the event loop, and cancelling the task that waits ends
the wait and leaves nothing held. ``async with store.lock(...)`` also
cancels its body when the lease is lost, as :func:`asyncio.timeout` does,
and raises :class:`lockward.Lost` in its place::

    store = lockward.aio.Store("redis://127.0.0.1:6379")
    async with store.lock("payment/order-42", ttl=30, wait=5) as lease:
        await charge(order, fence=lease.fence)
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncGenerator, Awaitable, Callable, Generator, Optional, Sequence, Type, TypeVar

from . import _native
from ._election import LeaderState
from ._handles import RateLimitHandle, RwLockHandle, SemaphoreHandle
from ._keys import KEEP_LONGEST, InProgress, read_found, run_record
from ._lease import DEFAULT_TTL, HeldLease
from ._values import Decision
from .errors import Lost

__all__ = [
    "Store",
    "Lease",
    "LostEvent",
    "Leadership",
    "RevokedEvent",
    "Claim",
    "RwLock",
    "Semaphore",
    "RateLimit",
]

T = TypeVar("T")

Done = Callable[[Optional[T], Optional[BaseException]], None]


async def _call(start: Callable[[Done[T]], _native.Pending]) -> T:
    """Runs a native call in the background and awaits its outcome;
    cancelling the awaiting task cancels the call."""
    loop = asyncio.get_running_loop()
    settled: asyncio.Future[T] = loop.create_future()

    def done(value: Optional[T], error: Optional[BaseException]) -> None:
        # Called from one of lockward's threads.
        try:
            loop.call_soon_threadsafe(_settle, settled, value, error)
        except RuntimeError:
            # The loop is closed: nobody will take a lease granted now.
            _abandon(value)

    pending = start(done)
    try:
        return await settled
    except asyncio.CancelledError:
        pending.cancel()
        raise


def _settle(settled: asyncio.Future[T], value: Optional[T], error: Optional[BaseException]) -> None:
    if settled.cancelled():
        # The waiter was cancelled as the call ended: a lease granted at
        # that moment is nobody's.
        _abandon(value)
    elif error is not None:
        settled.set_exception(error)
    else:
        settled.set_result(value)  # type: ignore[arg-type]


def _abandon(value: object) -> None:
    if isinstance(value, _native.Lease):
        value.release(lambda _value, _error: None)


class LostEvent:
    """Set when a lease is lost, like an :class:`asyncio.Event` that only
    lockward sets."""

    def __init__(self, lease: _native.Lease) -> None:
        self._lease = lease

    def is_set(self) -> bool:
        """Whether the lease was lost."""
        return self._lease.lost_reason() is not None

    async def wait(self) -> str:
        """Waits until the lease is lost; returns why."""
        return await _call(self._lease.wait_lost_async)


class Lease(HeldLease):
    """A held lock, as :class:`lockward.Lease`, with awaitable methods."""

    def __init__(self, native: _native.Lease) -> None:
        super().__init__(native)
        self.lost = LostEvent(native)
        """Set when the lease is lost."""

    async def extend(self, ttl: Optional[float] = None) -> None:
        """Renews the lease for ``ttl`` seconds (``None``: its own TTL)."""
        await _call(lambda done: self._native.extend(ttl, done))

    async def release(self) -> None:
        """Releases the lock; a second call does nothing. Raises
        :class:`lockward.Lost` when it had been lost already."""
        await _call(self._native.release)

    def __repr__(self) -> str:
        return f"<aio.Lease {self.name!r} fence={self.fence}>"


class RevokedEvent:
    """Set when a leadership ends without a resign."""

    def __init__(self, lease: _native.Lease) -> None:
        self._lease = lease

    def is_set(self) -> bool:
        """Whether the leadership was revoked."""
        return self._lease.is_revoked()

    async def wait(self) -> None:
        """Waits until the leadership is revoked."""

        def start(done: Done[bool]) -> _native.Pending:
            return self._lease.wait_revoked(None, done)

        await _call(start)


class Leadership(LeaderState):
    """This candidate leads, until it resigns or :attr:`revoked` is set
    (see :class:`lockward.Leadership`)."""

    def __init__(self, native: _native.Lease, identity: str) -> None:
        super().__init__(native, identity)
        self.revoked = RevokedEvent(native)
        """Set when the leadership ends without a resign."""

    async def resign(self) -> None:
        """Gives the leadership up at once."""
        await _call(self._native.release)

    async def __aenter__(self) -> Leadership:
        return self

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        if not self._native.is_released():
            await self.resign()


class Claim:
    """What :meth:`Store.claim` found for a key (see :class:`lockward.Claim`)."""

    def __init__(self, found: _native.Found) -> None:
        self.stored, self.in_progress, native = read_found(found)
        self.lease: Optional[Lease] = None if native is None else Lease(native)
        """The key's lock, when this caller must run the operation."""

    async def complete(self, result: str) -> None:
        """Stores ``result``, then releases the key."""
        if self.lease is None:
            raise InProgress("this claim does not hold the key: nothing to complete")
        native = self.lease._native
        await _call(lambda done: native.complete(result, done))

    async def abandon(self) -> None:
        """Releases the key without storing anything."""
        if self.lease is not None:
            await self.lease.release()

    async def __aenter__(self) -> Claim:
        return self

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        if self.lease is not None and not self.lease._native.is_released():
            await self.abandon()


class _Acquisition:
    """What :meth:`Store.lock` returns: await it for the lease, or use it
    with ``async with`` to hold the lock for a block that is cancelled if
    the lease is lost."""

    def __init__(self, start: Callable[[Done[_native.Lease]], _native.Pending]) -> None:
        self._start = start
        self._lease: Optional[Lease] = None
        self._watch: Optional[asyncio.Task[None]] = None
        self._lost_cancelled = False

    async def _acquire(self) -> Lease:
        return Lease(await _call(self._start))

    def __await__(self) -> Generator[Any, None, Lease]:
        return self._acquire().__await__()

    async def __aenter__(self) -> Lease:
        lease = await self._acquire()
        self._lease = lease
        body = asyncio.current_task()
        if body is not None:
            self._watch = asyncio.ensure_future(self._cancel_on_loss(lease, body))
        return lease

    async def _cancel_on_loss(self, lease: Lease, body: asyncio.Task[Any]) -> None:
        await lease.lost.wait()
        self._lost_cancelled = True
        body.cancel()

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        lease = self._lease
        assert lease is not None
        if self._watch is not None:
            self._watch.cancel()
        try:
            await lease.release()
        except Lost:
            if error is None:
                raise
        if self._lost_cancelled and isinstance(error, asyncio.CancelledError):
            body = asyncio.current_task()
            uncancel = getattr(body, "uncancel", None)
            if uncancel is not None:
                uncancel()
            raise Lost(f"lock {lease.name!r} was lost; its block was cancelled") from error


class Store:
    """A lockward store for asyncio code (see :class:`lockward.Store`).
    Opening it connects once, before the first call."""

    def __init__(self, url: str) -> None:
        self._native = _native.Store(url)

    @property
    def address(self) -> str:
        """The store's address, without its password."""
        return self._native.address

    def lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
        renew: bool = True,
    ) -> _Acquisition:
        """Takes the lock ``name``, waiting up to ``wait`` seconds
        (``None``: without a limit); await it, or ``async with`` it."""
        return _Acquisition(
            lambda done: self._native.acquire("lock", [name], 0, 0, ttl, wait, label, renew, done)
        )

    def try_lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        label: Optional[str] = None,
        renew: bool = True,
    ) -> _Acquisition:
        """Takes the lock ``name`` if it is free, else raises
        :class:`lockward.Busy`."""
        return _Acquisition(
            lambda done: self._native.acquire("lock", [name], 0, 0, ttl, 0.0, label, renew, done)
        )

    def lock_all(
        self,
        names: Sequence[str],
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
        renew: bool = True,
    ) -> _Acquisition:
        """Takes every one of ``names``, all or none."""
        asked = list(names)
        return _Acquisition(
            lambda done: self._native.acquire("lock", asked, 0, 0, ttl, wait, label, renew, done)
        )

    async def elect(
        self,
        election: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        wait: Optional[float] = None,
    ) -> Leadership:
        """Campaigns until elected (see :meth:`lockward.Store.elect`);
        cancelling the task ends the campaign."""

        def start(done: Done[_native.Lease]) -> _native.Pending:
            return self._native.campaign(
                election, identity, lease_duration, renew_deadline, retry_period, wait, done
            )

        return Leadership(await _call(start), identity)

    async def leader(self, election: str) -> Optional[str]:
        """The identity of ``election``'s leader, or ``None``."""
        return await _call(lambda done: self._native.leader(election, done))

    async def observe(
        self, election: str, *, retry_period: float = 2.0
    ) -> AsyncGenerator[Optional[str], None]:
        """The leaders of ``election`` as they change (see
        :meth:`lockward.Store.observe`); leaving the ``async for`` (or
        cancelling its task) stops the watch."""
        last = await self.leader(election)
        yield last
        while True:
            seen = last
            last = await _call(
                lambda done: self._native.next_leader_change(election, seen, retry_period, done)
            )
            yield last

    async def claim(
        self,
        key: str,
        *,
        namespace: str = "idem",
        keep: Optional[float] = 86400.0,
        wait: bool = False,
        ttl: float = DEFAULT_TTL,
        label: Optional[str] = None,
    ) -> Claim:
        """Looks for ``key``'s stored result and claims the key when there
        is none (see :meth:`lockward.Store.claim`)."""

        def start(done: Done[_native.Found]) -> _native.Pending:
            return self._native.claim(key, namespace, keep, wait, ttl, label, done)

        return Claim(await _call(start))

    async def idempotent(
        self,
        key: str,
        operation: Callable[[Lease], Awaitable[str]],
        *,
        namespace: str = "idem",
        keep: Optional[float] = 86400.0,
        wait: bool = False,
        ttl: float = DEFAULT_TTL,
    ) -> tuple[str, bool]:
        """Runs ``await operation(lease)`` at most once for ``key`` (see
        :meth:`lockward.Store.idempotent`)."""
        async with await self.claim(
            key, namespace=namespace, keep=keep, wait=wait, ttl=ttl
        ) as claim:
            if claim.stored is not None:
                return claim.stored, False
            if claim.lease is None:
                raise InProgress(f"{key} runs elsewhere right now")
            result = await operation(claim.lease)
            await claim.complete(result)
            return result, True

    async def once(self, key: str, job: Callable[[Lease], Awaitable[object]]) -> bool:
        """Runs ``await job(lease)`` to success at most once for ``key``
        across every instance and all time (see :meth:`lockward.Store.once`)."""

        async def run(lease: Lease) -> str:
            await job(lease)
            return run_record(lease.fence)

        _, ran = await self.idempotent(key, run, namespace="once", keep=KEEP_LONGEST, wait=True)
        return ran

    def rw_lock(self, name: str) -> RwLock:
        """The read-write lock ``name``."""
        return RwLock(self._native, name)

    def read_lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
    ) -> _Acquisition:
        """A reader's share of the read-write lock ``name``; await it or
        ``async with`` it."""
        return self.rw_lock(name).read(ttl=ttl, wait=wait, label=label)

    def write_lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
    ) -> _Acquisition:
        """The writer's side of the read-write lock ``name``; await it or
        ``async with`` it."""
        return self.rw_lock(name).write(ttl=ttl, wait=wait, label=label)

    def semaphore(self, name: str, permits: int) -> Semaphore:
        """The semaphore ``name`` with ``permits`` permits."""
        return Semaphore(self._native, name, permits)

    def rate_limit(
        self, name: str, limit: int, period: float, *, burst: Optional[int] = None
    ) -> RateLimit:
        """``limit`` requests per ``period`` seconds for each subject (see
        :meth:`lockward.Store.rate_limit`)."""
        return RateLimit(self._native, name, limit, period, burst)

    def __repr__(self) -> str:
        return f"aio.Store({self.address!r})"


def _acquisition(
    store: _native.Store,
    kind: str,
    name: str,
    permits: int,
    take: int,
    ttl: float,
    wait: Optional[float],
    label: Optional[str],
) -> _Acquisition:
    return _Acquisition(
        lambda done: store.acquire(kind, [name], permits, take, ttl, wait, label, True, done)
    )


class RwLock(RwLockHandle):
    """A read-write lock (see :class:`lockward.RwLock`), awaited."""

    def read(
        self, *, ttl: float = DEFAULT_TTL, wait: Optional[float] = None, label: Optional[str] = None
    ) -> _Acquisition:
        """A reader's share; await it or ``async with`` it."""
        return _acquisition(self._store, "read", self.name, 0, 0, ttl, wait, label)

    def write(
        self, *, ttl: float = DEFAULT_TTL, wait: Optional[float] = None, label: Optional[str] = None
    ) -> _Acquisition:
        """The writer's side; await it or ``async with`` it."""
        return _acquisition(self._store, "write", self.name, 0, 0, ttl, wait, label)


class Semaphore(SemaphoreHandle):
    """A semaphore (see :class:`lockward.Semaphore`), awaited."""

    def acquire(
        self,
        take: int = 1,
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
    ) -> _Acquisition:
        """``take`` permits; await it or ``async with`` it."""
        return _acquisition(
            self._store, "permits", self.name, self.permits, self._take(take), ttl, wait, label
        )


class RateLimit(RateLimitHandle):
    """A rate limit (see :class:`lockward.RateLimit`), awaited."""

    async def check(self, subject: str) -> Decision:
        """Counts one request of ``subject``."""
        limit, period, burst = self._limit

        def start(done: Done[_native.Verdict]) -> _native.Pending:
            return self._store.check_rate(self.name, subject, limit, period, burst, done)

        return Decision._from_verdict(await _call(start))
