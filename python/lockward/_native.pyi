# The native module's interface (built from python/src by maturin).
from typing import Callable, Optional, Sequence, overload

class Pending:
    def cancel(self) -> None: ...

class Lease:
    @property
    def name(self) -> str: ...
    @property
    def fences(self) -> list[int]: ...
    def remaining(self) -> float: ...
    def lost_reason(self) -> Optional[str]: ...
    def wait_lost(self, timeout: Optional[float] = None) -> bool: ...
    def wait_lost_async(self, done: Callable[[Optional[str], Optional[BaseException]], None]) -> Pending: ...
    @overload
    def extend(self, ttl: Optional[float] = None) -> None: ...
    @overload
    def extend(self, ttl: Optional[float], done: Callable[[None, Optional[BaseException]], None]) -> Pending: ...
    @overload
    def release(self) -> None: ...
    @overload
    def release(self, done: Callable[[None, Optional[BaseException]], None]) -> Pending: ...
    def is_released(self) -> bool: ...
    def is_revoked(self) -> bool: ...
    @overload
    def wait_revoked(self, timeout: Optional[float] = None) -> bool: ...
    @overload
    def wait_revoked(
        self, timeout: Optional[float], done: Callable[[Optional[bool], Optional[BaseException]], None]
    ) -> Pending: ...
    @overload
    def complete(self, result: str) -> None: ...
    @overload
    def complete(
        self, result: str, done: Callable[[None, Optional[BaseException]], None]
    ) -> Pending: ...

Row = tuple[str, str, Optional[str], Optional[int], Optional[float], Optional[int], str, Optional[str]]
Verdict = tuple[bool, int, float]
Found = tuple[str, object]

class Store:
    def __init__(self, url: str) -> None: ...
    @property
    def address(self) -> str: ...
    @overload
    def acquire(
        self,
        kind: str,
        names: Sequence[str],
        permits: int,
        take: int,
        ttl: float,
        wait: Optional[float],
        label: Optional[str],
        renew: bool,
    ) -> Lease: ...
    @overload
    def acquire(
        self,
        kind: str,
        names: Sequence[str],
        permits: int,
        take: int,
        ttl: float,
        wait: Optional[float],
        label: Optional[str],
        renew: bool,
        done: Callable[[Optional[Lease], Optional[BaseException]], None],
    ) -> Pending: ...
    def inspect(self, name: str) -> Optional[Row]: ...
    @overload
    def campaign(
        self,
        election: str,
        identity: str,
        lease: float,
        renew_deadline: float,
        retry: float,
        wait: Optional[float],
    ) -> Lease: ...
    @overload
    def campaign(
        self,
        election: str,
        identity: str,
        lease: float,
        renew_deadline: float,
        retry: float,
        wait: Optional[float],
        done: Callable[[Optional[Lease], Optional[BaseException]], None],
    ) -> Pending: ...
    @overload
    def leader(self, election: str) -> Optional[str]: ...
    @overload
    def leader(
        self, election: str, done: Callable[[Optional[str], Optional[BaseException]], None]
    ) -> Pending: ...
    @overload
    def next_leader_change(self, election: str, last: Optional[str], retry: float) -> Optional[str]: ...
    @overload
    def next_leader_change(
        self,
        election: str,
        last: Optional[str],
        retry: float,
        done: Callable[[Optional[str], Optional[BaseException]], None],
    ) -> Pending: ...
    @overload
    def claim(
        self,
        key: str,
        namespace: str,
        keep: Optional[float],
        wait: bool,
        ttl: float,
        label: Optional[str],
    ) -> Found: ...
    @overload
    def claim(
        self,
        key: str,
        namespace: str,
        keep: Optional[float],
        wait: bool,
        ttl: float,
        label: Optional[str],
        done: Callable[[Optional[Found], Optional[BaseException]], None],
    ) -> Pending: ...
    def list(self, prefix: str) -> list[Row]: ...
    @overload
    def check_rate(
        self, name: str, subject: str, limit: int, period: float, burst: Optional[int]
    ) -> Verdict: ...
    @overload
    def check_rate(
        self,
        name: str,
        subject: str,
        limit: int,
        period: float,
        burst: Optional[int],
        done: Callable[[Optional[Verdict], Optional[BaseException]], None],
    ) -> Pending: ...

def reset_logging() -> None:
    """Makes levels set on lockward's loggers since its first event count."""
