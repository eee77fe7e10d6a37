"""Plain values the API returns: a lock's holder, and a rate limit's
decision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import _native

__all__ = ["Holder", "Decision"]


@dataclass(frozen=True)
class Holder:
    """A lock's holder, as ``lockward status`` shows it."""

    name: str
    """The name held (a semaphore's permit or a reader has a name of its own)."""
    owner: str
    """The holder's owner id."""
    label: Optional[str]
    """The holder's label (host:pid by default)."""
    fence: Optional[int]
    """Its fence, where the store shows it."""
    expires_in: Optional[float]
    """Seconds until its lease ends unless renewed."""
    waiters: Optional[int]
    """How many wait for the name, where the store knows."""
    holding: str
    """What it holds: ``"lock"``, ``"reader"`` or ``"permits"``."""
    of: Optional[str]
    """The read-write lock or semaphore a reader or permit belongs to."""

    @classmethod
    def _from_row(cls, row: _native.Row) -> Holder:
        return cls(*row)


@dataclass(frozen=True)
class Decision:
    """A rate limit's answer to one request."""

    allowed: bool
    """Let it through."""
    remaining: int
    """When allowed: how many more fit now."""
    retry_after: float
    """When refused: seconds until a request fits."""

    @classmethod
    def _from_verdict(cls, verdict: _native.Verdict) -> Decision:
        return cls(*verdict)
