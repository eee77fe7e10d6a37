"""Idempotency keys: an operation runs at most once per key, and later
duplicates get its stored result; ``once`` runs a job to success at most
once across every instance and all time (the keys of ``lockward once``)."""

from __future__ import annotations

import os
import socket
import time
from types import TracebackType
from typing import Optional, Type

from . import _native
from ._lease import Lease
from .errors import Error

__all__ = ["Claim", "InProgress", "KEEP_LONGEST", "read_found", "run_record"]

#: ``keep=KEEP_LONGEST``: forever where the store can keep a record
#: forever, ten years elsewhere.
KEEP_LONGEST = -1.0


class InProgress(Error):
    """Another caller runs the key's operation right now (an API would
    answer "409, in progress")."""


def read_found(found: _native.Found) -> tuple[Optional[str], bool, Optional[_native.Lease]]:
    """What the native claim found: (the stored result, whether it runs
    elsewhere, the claim's lease)."""
    kind, value = found
    stored = value if kind == "stored" and isinstance(value, str) else None
    lease = value if isinstance(value, _native.Lease) else None
    return stored, kind == "in_progress", lease


def run_record(fence: int) -> str:
    """What a run-once job records, as ``lockward once`` does."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return f"by {socket.gethostname()}:{os.getpid()} at {at} with fence {fence}"


class Claim:
    """What :meth:`lockward.Store.claim` found for a key: its stored result,
    that it runs elsewhere, or the right to run it (:attr:`lease`).

    >>> import lockward
    >>> store = lockward.Store("memory://")
    >>> with store.claim("order-17") as claim:
    ...     if claim.stored is None:
    ...         claim.complete("charged 42.00")
    >>> store.claim("order-17").stored
    'charged 42.00'
    """

    def __init__(self, found: _native.Found) -> None:
        self.stored, self.in_progress, native = read_found(found)
        self.lease: Optional[Lease] = None if native is None else Lease(native)
        """The key's lock, when this caller must run the operation: its
        fence fences the operation's writes."""

    def complete(self, result: str) -> None:
        """Stores ``result`` as the key's result (while the key's lock is
        still held), then releases the key. Raises :class:`lockward.Lost`,
        storing nothing, if the lock was lost meanwhile."""
        if self.lease is None:
            raise InProgress("this claim does not hold the key: nothing to complete")
        self.lease._native.complete(result)

    def abandon(self) -> None:
        """Releases the key without storing anything: it stays free for a
        retry."""
        if self.lease is not None:
            self.lease._native.release()

    def __enter__(self) -> Claim:
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        # Not completed (an error, or the block chose not to): nothing stored.
        if self.lease is not None and not self.lease._native.is_released():
            self.abandon()
