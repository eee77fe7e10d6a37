"""The blocking API: a :class:`Store` and what it takes.

Every wait releases the GIL (other threads run) and is interrupted by
Ctrl-C within 50 ms, leaving nothing held. A ``Store`` is safe to share
between threads, and a child made by ``os.fork()`` gets connections of
its own at its first call.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Generator, Optional, Sequence

from . import _native
from ._election import Leadership
from ._handles import RateLimitHandle, RwLockHandle, SemaphoreHandle
from ._keys import KEEP_LONGEST, Claim, InProgress, run_record
from ._lease import DEFAULT_TTL, Lease, LostEvent
from ._values import Decision, Holder

if TYPE_CHECKING:
    from typing import ParamSpec

    P = ParamSpec("P")

__all__ = ["Store", "Lease", "LostEvent", "RwLock", "Semaphore", "RateLimit", "DEFAULT_TTL"]


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

    def read_lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
    ) -> Lease:
        """A reader's share of the read-write lock ``name``:
        ``store.rw_lock(name).read(...)``."""
        return self.rw_lock(name).read(ttl=ttl, wait=wait, label=label)

    def write_lock(
        self,
        name: str,
        *,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        label: Optional[str] = None,
    ) -> Lease:
        """The writer's side of the read-write lock ``name``:
        ``store.rw_lock(name).write(...)``."""
        return self.rw_lock(name).write(ttl=ttl, wait=wait, label=label)

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

    def elect(
        self,
        election: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        wait: Optional[float] = None,
    ) -> Leadership:
        """Campaigns in ``election`` as ``identity`` (the name observers
        see) and returns when elected; ``wait`` bounds the campaign (``0``:
        only if nobody leads, else :class:`lockward.Busy`). Timing as
        client-go's: retry period < renew deadline < lease duration."""
        native = self._native.campaign(
            election, identity, lease_duration, renew_deadline, retry_period, wait
        )
        return Leadership(native, identity)

    def leader(self, election: str) -> Optional[str]:
        """The identity of ``election``'s leader, or ``None``."""
        return self._native.leader(election)

    def observe(
        self, election: str, *, retry_period: float = 2.0
    ) -> Generator[Optional[str], None, None]:
        """The leaders of ``election`` as they change: the current one
        (``None`` while nobody leads) at once, then each new one. A resign
        or a lapsed lease is seen at once where the store pushes releases,
        a new leader within ``retry_period`` seconds of its election.

        >>> store = Store("memory://")
        >>> leaders = store.observe("scheduler", retry_period=0.1)
        >>> next(leaders) is None
        True
        >>> with store.elect("scheduler", "node-a"):
        ...     next(leaders)
        'node-a'
        """
        last = self._native.leader(election)
        yield last
        while True:
            last = self._native.next_leader_change(election, last, retry_period)
            yield last

    def claim(
        self,
        key: str,
        *,
        namespace: str = "idem",
        keep: Optional[float] = 86400.0,
        wait: bool = False,
        ttl: float = DEFAULT_TTL,
        label: Optional[str] = None,
    ) -> Claim:
        """Looks for the stored result of idempotency key ``key`` and claims
        the key when there is none (see :class:`Claim`). ``keep``: seconds
        to keep the result, ``None`` forever (stores that can; else
        :class:`lockward.NotSupported`), :data:`KEEP_LONGEST` forever where
        the store can. ``wait``: wait while another caller runs it, instead
        of :attr:`Claim.in_progress`."""
        return Claim(self._native.claim(key, namespace, keep, wait, ttl, label))

    def idempotent(
        self,
        key: str,
        operation: Callable[[Lease], str],
        *,
        namespace: str = "idem",
        keep: Optional[float] = 86400.0,
        wait: bool = False,
        ttl: float = DEFAULT_TTL,
    ) -> tuple[str, bool]:
        """Runs ``operation(lease)`` at most once for ``key``, across every
        instance, and returns ``(result, ran)``: its result and ``True``, or
        the stored result of an earlier run and ``False``. An exception
        from ``operation`` stores nothing and propagates; a duplicate that
        arrives while it runs raises :class:`InProgress` (or, with
        ``wait``, waits for the result)."""
        with self.claim(key, namespace=namespace, keep=keep, wait=wait, ttl=ttl) as claim:
            if claim.stored is not None:
                return claim.stored, False
            if claim.lease is None:
                raise InProgress(f"{key} runs elsewhere right now")
            result = operation(claim.lease)
            claim.complete(result)
            return result, True

    def idempotent_function(
        self,
        key: Callable[P, str],
        *,
        namespace: str = "idem",
        keep: Optional[float] = 86400.0,
        wait: bool = False,
        ttl: float = DEFAULT_TTL,
    ) -> Callable[[Callable[P, str]], Callable[P, str]]:
        """A decorator: each call of the function runs at most once per
        ``key(*args, **kwargs)`` across every instance; a repeated call
        returns the stored result without running it.

        >>> store = Store("memory://")
        >>> @store.idempotent_function(key=lambda order, amount: f"charge/{order}")
        ... def charge(order: str, amount: int) -> str:
        ...     return f"charged {amount} for {order}"
        >>> charge("o-17", 42), charge("o-17", 42)
        ('charged 42 for o-17', 'charged 42 for o-17')
        """

        def decorate(function: Callable[P, str]) -> Callable[P, str]:
            @functools.wraps(function)
            def once_per_key(*args: P.args, **kwargs: P.kwargs) -> str:
                result, _ = self.idempotent(
                    key(*args, **kwargs),
                    lambda lease: function(*args, **kwargs),
                    namespace=namespace,
                    keep=keep,
                    wait=wait,
                    ttl=ttl,
                )
                return result

            return once_per_key

        return decorate

    def once(self, key: str, job: Callable[[Lease], object]) -> bool:
        """Runs ``job(lease)`` to success at most once for ``key`` across
        every instance and all time (a migration), waiting while another
        instance runs it; returns whether this call ran it. The same keys as
        ``lockward once KEY``; a job that raises records nothing."""

        def run(lease: Lease) -> str:
            job(lease)
            return run_record(lease.fence)

        _, ran = self.idempotent(key, run, namespace="once", keep=KEEP_LONGEST, wait=True)
        return ran

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
            self._store.acquire(
                "permits", [self.name], self.permits, self._take(take), ttl, wait, label, True
            )
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
