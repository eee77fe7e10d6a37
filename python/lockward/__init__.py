"""lockward: distributed locks with fencing tokens, on the stores you
already run (Redis, etcd, ZooKeeper, PostgreSQL, MySQL, Kubernetes,
SQLite), in-process.

>>> import lockward
>>> store = lockward.Store("memory://")
>>> with store.lock("payment/order-42", ttl=30, wait=5) as lease:
...     lease.raise_if_lost()
...     lease.fence >= 1
True

The blocking API is here; :mod:`lockward.aio` has the same names for
asyncio.

lockward logs through :mod:`logging`, under the logger ``lockward``
(``lockward.store.acquire``, ``lockward.renewer``, …; debug and up). Each
logger's level is read at its first event and kept: after changing a level
later, call :func:`reset_logging`.
"""

from . import aio, errors
from ._election import Leadership, RevokedEvent
from ._keys import KEEP_LONGEST, Claim, InProgress
from ._lease import DEFAULT_TTL, Lease, LostEvent
from ._sync import RateLimit, RwLock, Semaphore, Store
from ._native import reset_logging
from ._values import Decision, Holder
from .errors import (
    Busy,
    Contended,
    Denied,
    Error,
    InvalidArgument,
    Lost,
    NoPermits,
    NotBuilt,
    NotOwner,
    NotSupported,
    Protocol,
    Stale,
    TimedOut,
    Unavailable,
)

__all__ = [
    "aio",
    "errors",
    "DEFAULT_TTL",
    "KEEP_LONGEST",
    "Claim",
    "InProgress",
    "Leadership",
    "RevokedEvent",
    "Decision",
    "Holder",
    "Lease",
    "LostEvent",
    "RateLimit",
    "RwLock",
    "Semaphore",
    "Store",
    "reset_logging",
    "Busy",
    "Contended",
    "Denied",
    "Error",
    "InvalidArgument",
    "Lost",
    "NoPermits",
    "NotBuilt",
    "NotOwner",
    "NotSupported",
    "Protocol",
    "Stale",
    "TimedOut",
    "Unavailable",
]
