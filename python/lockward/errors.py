"""lockward's errors: one base class, :class:`Error`, and a class per kind.

Each class is named as the kind of lockward's error (the same names as the
Rust library, the CLI's messages and the daemon's ``lockward-error-kind``).
Messages never contain a password or a token.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "Busy",
    "NoPermits",
    "TimedOut",
    "Lost",
    "NotOwner",
    "InvalidArgument",
    "Contended",
    "Unavailable",
    "Denied",
    "Protocol",
    "Stale",
    "NotSupported",
    "NotBuilt",
]


class Error(Exception):
    """Any error of lockward's."""


class Busy(Error):
    """A try found the lock held by another holder."""


class NoPermits(Error):
    """A semaphore's try found too few permits free."""


class TimedOut(Error):
    """A wait ran out of its time limit."""


class Lost(Error):
    """A lease is no longer held: work done under it must stop."""


class NotOwner(Error):
    """The store records another holder (or none) for a lock this caller
    believed it held."""


class InvalidArgument(Error, ValueError):
    """A name, duration or option was refused; the message says why."""


class Contended(Error):
    """An optimistic update lost its race too many times."""


class Unavailable(Error):
    """The store could not be reached or did not answer in time."""


class Denied(Error):
    """The store refused lockward's credentials or permissions; waiting
    does not help until they are changed."""


class Protocol(Error):
    """The store answered something lockward does not understand."""


class Stale(Error):
    """A write carried a fence older than the resource's."""


class NotSupported(Error):
    """The store cannot do what was asked (see its capabilities)."""


class NotBuilt(Error):
    """This build of lockward lacks the store's feature."""
