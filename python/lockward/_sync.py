"""The blocking API: a :class:`Store` and the :class:`Lease` of a held lock.

Every wait releases the GIL (other threads run) and is interrupted by
Ctrl-C within 50 ms, leaving nothing held. A ``Store`` is safe to share
between threads, and a child made by ``os.fork()`` gets connections of
its own at its first call.
"""

from __future__ import annotations

import logging
import time
import warnings
from types import TracebackType
from typing import Optional, Sequence, Type

from . import _native
from ._handles import RateLimitHandle, RwLockHandle, SemaphoreHandle
from ._values import Decision, Holder
from .errors import Lost

__all__ = ["Store", "Lease", "LostEvent", "RwLock", "Semaphore", "RateLimit", "DEFAULT_TTL"]

log = logging.getLogger("lockward")

#: The TTL of a lease unless ``ttl=`` says otherwise, in seconds.
DEFAULT_TTL = 30.0


class LostEvent:
    """Set when a lease is lost, like a :class:`threading.Event` that only
    lockward sets."""

    def __init__(self, lease: _native.Lease) -> None:
        self._lease = lease

    def is_set(self) -> bool:
        """Whether the lease was lost."""
        return self._lease.lost_reason() is not None

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the lease is lost or ``timeout`` seconds pass
        (``None``: without a limit); returns :meth:`is_set`. The GIL is
        released while it waits, and Ctrl-C interrupts it."""
        return self._lease.wait_lost(timeout)


class Lease:
    """A held lock: its fencing token, its deadline, and whether it was lost.

    It renews itself in the background every third of its TTL (unless taken
    with ``renew=False``). Use it as a context manager, or call
    :meth:`release`; a lease dropped while held is released in the
    background with a :class:`ResourceWarning`.
    """

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
        """The fencing token: larger than every token issued before for
        the name. Send it with every write; the resource refuses older
        ones."""
        return self._native.fences[0]

    @property
    def fences(self) -> list[int]:
        """The fence of each name, in the order given."""
        return self._native.fences

    @property
    def deadline(self) -> float:
        """When the lease ends unless renewed, on :func:`time.monotonic`'s
        scale; never later than the store's."""
        return time.monotonic() + self._native.remaining()

    def raise_if_lost(self) -> None:
        """Raises :class:`lockward.Lost` if the lease was lost."""
        reason = self._native.lost_reason()
        if reason is not None:
            raise Lost(f"lock {self.name!r} was lost: {reason}")

    def extend(self, ttl: Optional[float] = None) -> None:
        """Renews the lease for ``ttl`` seconds (``None``: its own TTL)."""
        self._native.extend(ttl)

    def release(self) -> None:
        """Releases the lock; a second call does nothing. Raises
        :class:`lockward.Lost` when it had been lost already (work done
        after the loss may have overlapped with another holder)."""
        self._native.release()

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        try:
            self.release()
        except Lost:
            if error is None:
                raise
            # The body's own exception says more; do not hide it.
            log.warning("lock %r was lost before the failing block ended", self.name)

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None and not native.is_released():
            warnings.warn(
                f"lock {native.name!r} was dropped without release(); released in the background",
                ResourceWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        return f"<Lease {self.name!r} fence={self.fence}>"


class Store:
    """A lockward store, opened from its URL: ``sqlite:///var/lib/app/locks.db``,
    ``redis://host:6379``, ``etcd://host:2379``, ``zk://host:2181``,
    ``postgres://user@host/db``, ``mysql://user@host/db``, ``k8s://``,
    ``memory://``.

    >>> store = Store("memory://")
    >>> with store.lock("payment/order-42", ttl=30, wait=5) as lease:
    ...     lease.fence > 0
    True
    """

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
    ) -> Lease:
        """Takes the lock ``name``, waiting up to ``wait`` seconds for it
        (``None``: without a limit; then :class:`lockward.TimedOut`).

        ``ttl`` is how long the store keeps the lease without a renewal;
        ``label`` names the holder in ``lockward status``; ``renew=False``
        leaves renewing to :meth:`Lease.extend`.
        """
        return Lease(self._native.acquire("lock", [name], 0, 0, ttl, wait, label, renew))

    def try_lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        label: Optional[str] = None,
        renew: bool = True,
    ) -> Lease:
        """Takes the lock ``name`` if it is free, else raises
        :class:`lockward.Busy` at once."""
        return Lease(self._native.acquire("lock", [name], 0, 0, ttl, 0.0, label, renew))

    def lock_all(
        self,
        names: Sequence[str],
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
        renew: bool = True,
    ) -> Lease:
        """Takes every one of ``names``, all or none, in an order that
        cannot deadlock with another ``lock_all`` of the same names."""
        return Lease(self._native.acquire("lock", list(names), 0, 0, ttl, wait, label, renew))

    def rw_lock(self, name: str) -> RwLock:
        """The read-write lock ``name``: readers hold it together, a
        writer alone."""
        return RwLock(self._native, name)

    def semaphore(self, name: str, permits: int) -> Semaphore:
        """The semaphore ``name`` with ``permits`` permits (every holder
        must agree on the number)."""
        return Semaphore(self._native, name, permits)

    def rate_limit(
        self, name: str, limit: int, period: float, *, burst: Optional[int] = None
    ) -> RateLimit:
        """``limit`` requests per ``period`` seconds for each subject,
        shared by every instance: counted in fixed windows, or, with
        ``burst``, spread evenly (GCRA) with bursts of up to ``burst``."""
        return RateLimit(self._native, name, limit, period, burst)

    def inspect(self, name: str) -> Optional[Holder]:
        """The holder of ``name``, or ``None`` when nobody holds it."""
        row = self._native.inspect(name)
        return None if row is None else Holder._from_row(row)

    def list(self, prefix: str = "") -> list[Holder]:
        """Every holder whose name starts with ``prefix``, as ``lockward
        status`` shows them."""
        return [Holder._from_row(row) for row in self._native.list(prefix)]

    def __repr__(self) -> str:
        return f"Store({self.address!r})"


class RwLock(RwLockHandle):
    """A read-write lock: readers hold it together, a writer alone (a
    writer waits for the readers to leave)."""

    def read(
        self, *, ttl: float = DEFAULT_TTL, wait: Optional[float] = None, label: Optional[str] = None
    ) -> Lease:
        """Takes a reader's share, waiting while a writer holds the lock."""
        return Lease(self._store.acquire("read", [self.name], 0, 0, ttl, wait, label, True))

    def write(
        self, *, ttl: float = DEFAULT_TTL, wait: Optional[float] = None, label: Optional[str] = None
    ) -> Lease:
        """Takes the writer's side, waiting for every holder to leave."""
        return Lease(self._store.acquire("write", [self.name], 0, 0, ttl, wait, label, True))

    def try_read(self, *, ttl: float = DEFAULT_TTL, label: Optional[str] = None) -> Lease:
        """A reader's share now, or :class:`lockward.Busy`."""
        return self.read(ttl=ttl, wait=0.0, label=label)

    def try_write(self, *, ttl: float = DEFAULT_TTL, label: Optional[str] = None) -> Lease:
        """The writer's side now, or :class:`lockward.Busy`."""
        return self.write(ttl=ttl, wait=0.0, label=label)


class Semaphore(SemaphoreHandle):
    """Up to ``permits`` holders at once, across every instance."""

    def acquire(
        self,
        take: int = 1,
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
    ) -> Lease:
        """Takes ``take`` permits, waiting until they are free."""
        return Lease(
            self._store.acquire("permits", [self.name], self.permits, take, ttl, wait, label, True)
        )

    def try_acquire(
        self, take: int = 1, *, ttl: float = DEFAULT_TTL, label: Optional[str] = None
    ) -> Lease:
        """Takes ``take`` permits now, or raises :class:`lockward.NoPermits`."""
        return self.acquire(take, ttl=ttl, wait=0.0, label=label)


class RateLimit(RateLimitHandle):
    """A rate limit shared by every instance that checks it by name."""

    def check(self, subject: str) -> Decision:
        """Counts one request of ``subject`` (a user, an API key) and says
        whether it may go on."""
        limit, period, burst = self._limit
        return Decision._from_verdict(self._store.check_rate(self.name, subject, limit, period, burst))
