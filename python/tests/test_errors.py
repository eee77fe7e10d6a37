"""Every kind of the Rust library's errors (``Error::KINDS``, what the
library and the daemon report) has its class here, under its name, and
nothing else is exported as a kind."""

from __future__ import annotations

import re
from pathlib import Path

import lockward
from lockward import errors

ERROR_RS = Path(__file__).resolve().parents[2] / "crates" / "lockward" / "src" / "error.rs"


def library_kinds() -> list[str]:
    block = re.search(
        r"pub const KINDS: \[&'static str; \d+\] = \[(.*?)\];", ERROR_RS.read_text(), re.S
    )
    assert block, "no Error::KINDS in error.rs"
    return re.findall(r'"(\w+)"', block.group(1))


def test_every_kind_of_the_library_has_its_class() -> None:
    kinds = library_kinds()
    assert len(kinds) >= 13, kinds
    assert [name for name in errors.__all__ if name != "Error"] == kinds
    for kind in kinds:
        cls = getattr(lockward, kind)
        assert issubclass(cls, lockward.Error), kind
        assert cls.__name__ == kind
