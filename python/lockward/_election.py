"""Leader election, with client-go's timing: a :class:`Leadership` renews
itself every retry period and is revoked when its renewals have failed for
the renew deadline, before the store can elect another candidate."""

from __future__ import annotations

from types import TracebackType
from typing import Optional, Type

from . import _native

__all__ = ["LeaderState", "Leadership", "RevokedEvent"]


class RevokedEvent:
    """Set when a leadership ends without a resign."""

    def __init__(self, lease: _native.Lease) -> None:
        self._lease = lease

    def is_set(self) -> bool:
        """Whether the leadership was revoked."""
        return self._lease.is_revoked()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until revoked or ``timeout`` seconds pass; returns whether
        it was. The GIL is released, and Ctrl-C interrupts it."""
        return self._lease.wait_revoked(timeout)


class LeaderState:
    """What a leadership shows in both APIs: the election, this candidate's
    identity, its epoch and whether it still leads. :class:`Leadership`
    and :class:`lockward.aio.Leadership` add the calls."""

    def __init__(self, native: _native.Lease, identity: str) -> None:
        self._native = native
        self.identity = identity
        """The name this candidate campaigned as."""

    @property
    def election(self) -> str:
        """The election's name."""
        return self._native.name

    @property
    def epoch(self) -> int:
        """The fencing token of this leadership: larger than every earlier
        leader's."""
        return self._native.fences[0]

    @property
    def is_leader(self) -> bool:
        """Whether this candidate still leads (not revoked, not resigned)."""
        return not self._native.is_released() and not self._native.is_revoked()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.election!r} {self.identity!r} epoch={self.epoch}>"


class Leadership(LeaderState):
    """This candidate leads ``election`` until it resigns or is revoked.

    Stop leading the moment :attr:`revoked` is set; fence the leader's
    writes with :attr:`epoch`.
    """

    def __init__(self, native: _native.Lease, identity: str) -> None:
        super().__init__(native, identity)
        self.revoked = RevokedEvent(native)
        """Set when the leadership ends without a resign."""

    def resign(self) -> None:
        """Gives the leadership up at once; a waiting candidate is elected
        without waiting for the lease to lapse."""
        self._native.release()

    def __enter__(self) -> Leadership:
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        if not self._native.is_released():
            self.resign()

