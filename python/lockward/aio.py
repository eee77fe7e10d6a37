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
import time
import warnings
from types import TracebackType
from typing import Any, Callable, Generator, Optional, Sequence, Type, TypeVar

from . import _native
from ._handles import RateLimitHandle, RwLockHandle, SemaphoreHandle
from ._lease import DEFAULT_TTL
from ._values import Decision
from .errors import Lost

__all__ = ["Store", "Lease", "LostEvent", "RwLock", "Semaphore", "RateLimit"]

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
        value.release_async(lambda _value, _error: None)


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


class Lease:
    """A held lock, as :class:`lockward.Lease`, with awaitable methods."""

    def __init__(self, native: _native.Lease) -> None:
        self._native = native
        self.lost = LostEvent(native)
        """Set when the lease is lost."""

    @property
    def name(self) -> str:
        """The lock's name (the first, for several taken together)."""
        return self._native.name

    @property
    def fence(self) -> int:
        """The fencing token; send it with every write."""
        return self._native.fences[0]

    @property
    def fences(self) -> list[int]:
        """The fence of each name, in the order given."""
        return self._native.fences

    @property
    def deadline(self) -> float:
        """When the lease ends unless renewed, on :func:`time.monotonic`'s
        scale (the event loop's clock by default)."""
        return time.monotonic() + self._native.remaining()

    def raise_if_lost(self) -> None:
        """Raises :class:`lockward.Lost` if the lease was lost."""
        reason = self._native.lost_reason()
        if reason is not None:
            raise Lost(f"lock {self.name!r} was lost: {reason}")

    async def extend(self, ttl: Optional[float] = None) -> None:
        """Renews the lease for ``ttl`` seconds (``None``: its own TTL)."""
        await _call(lambda done: self._native.extend_async(ttl, done))

    async def release(self) -> None:
        """Releases the lock; a second call does nothing. Raises
        :class:`lockward.Lost` when it had been lost already."""
        await _call(self._native.release_async)

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None and not native.is_released():
            warnings.warn(
                f"lock {native.name!r} was dropped without release(); released in the background",
                ResourceWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        return f"<aio.Lease {self.name!r} fence={self.fence}>"


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
            lambda done: self._native.acquire_async("lock", [name], 0, 0, ttl, wait, label, renew, done)
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
            lambda done: self._native.acquire_async("lock", [name], 0, 0, ttl, 0.0, label, renew, done)
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
            lambda done: self._native.acquire_async("lock", asked, 0, 0, ttl, wait, label, renew, done)
        )

    def rw_lock(self, name: str) -> RwLock:
        """The read-write lock ``name``."""
        return RwLock(self._native, name)

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
        lambda done: store.acquire_async(kind, [name], permits, take, ttl, wait, label, True, done)
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
        return _acquisition(self._store, "permits", self.name, self.permits, take, ttl, wait, label)


class RateLimit(RateLimitHandle):
    """A rate limit (see :class:`lockward.RateLimit`), awaited."""

    async def check(self, subject: str) -> Decision:
        """Counts one request of ``subject``."""
        limit, period, burst = self._limit

        def start(done: Done[_native.Verdict]) -> _native.Pending:
            return self._store.check_rate(self.name, subject, limit, period, burst, done)

        return Decision._from_verdict(await _call(start))
