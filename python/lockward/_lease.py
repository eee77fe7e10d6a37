"""A held lock in the blocking API: its fencing token, its deadline, and
whether it was lost."""

from __future__ import annotations

import logging
import time
import warnings
from types import TracebackType
from typing import Optional, Type

from . import _native
from .errors import Lost

__all__ = ["HeldLease", "Lease", "LostEvent", "DEFAULT_TTL"]

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


class HeldLease:
    """What a held lock shows in both APIs: its name, fencing token and
    deadline, whether it was lost, and a warning when it is dropped while
    held. :class:`Lease` and :class:`lockward.aio.Lease` add the calls."""

    def __init__(self, native: _native.Lease) -> None:
        self._native = native

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
        scale (the event loop's clock by default); never later than the
        store's."""
        return time.monotonic() + self._native.remaining()

    def raise_if_lost(self) -> None:
        """Raises :class:`lockward.Lost` if the lease was lost."""
        reason = self._native.lost_reason()
        if reason is not None:
            raise Lost(f"lock {self.name!r} was lost: {reason}")

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None and not native.is_released():
            warnings.warn(
                f"lock {native.name!r} was dropped without release(); released in the background",
                ResourceWarning,
                stacklevel=2,
            )


class Lease(HeldLease):
    """A held lock: its fencing token, its deadline, and whether it was lost.

    It renews itself in the background every third of its TTL (unless taken
    with ``renew=False``). Use it as a context manager, or call
    :meth:`release`; a lease dropped while held is released in the
    background with a :class:`ResourceWarning`.
    """

    def __init__(self, native: _native.Lease) -> None:
        super().__init__(native)
        self.lost = LostEvent(native)
        """Set when the lease is lost."""

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

    def __repr__(self) -> str:
        return f"<Lease {self.name!r} fence={self.fence}>"
