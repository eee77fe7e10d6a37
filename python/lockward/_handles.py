"""What the blocking and asyncio handles of a read-write lock, a semaphore
and a rate limit share: the store and what names them."""

from __future__ import annotations

from typing import Optional

from . import _native
from .errors import InvalidArgument

#: The largest count the store takes: permits (u32), limits and bursts (u64).
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def count(what: str, value: int, high: int) -> int:
    """``value`` if it is an int from 0 to ``high``; a wrong type is a
    ``TypeError``, a number out of range ``InvalidArgument``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= high:
        raise InvalidArgument(f"{what}: {value} is not from 0 to {high}")
    return value


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
        self.permits = count("permits", permits, U32_MAX)
        """How many permits it has."""

    def _take(self, take: int) -> int:
        return count("take", take, U32_MAX)


class RateLimitHandle:
    """A rate limit's name and budget on a store."""

    def __init__(
        self, store: _native.Store, name: str, limit: int, period: float, burst: Optional[int]
    ) -> None:
        self._store = store
        self.name = name
        """The limit's name, shared by every instance that checks it."""
        if burst is not None:
            count("burst", burst, U64_MAX)
        self._limit = (count("limit", limit, U64_MAX), period, burst)
