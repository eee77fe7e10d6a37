"""What the blocking and asyncio handles of a read-write lock, a semaphore
and a rate limit share: the store and what names them."""

from __future__ import annotations

from typing import Optional

from . import _native


class RwLockHandle:
    """A read-write lock's name on a store."""

    def __init__(self, store: _native.Store, name: str) -> None:
        self._store = store
        self.name = name
        """The read-write lock's name."""


class SemaphoreHandle:
    """A semaphore's name and size on a store."""

    def __init__(self, store: _native.Store, name: str, permits: int) -> None:
        self._store = store
        self.name = name
        """The semaphore's name."""
        self.permits = permits
        """How many permits it has."""


class RateLimitHandle:
    """A rate limit's name and budget on a store."""

    def __init__(
        self, store: _native.Store, name: str, limit: int, period: float, burst: Optional[int]
    ) -> None:
        self._store = store
        self.name = name
        """The limit's name, shared by every instance that checks it."""
        self._limit = (limit, period, burst)
