"""The examples in docs/python.md type-check with ``mypy --strict``: what
they leave to the reader (the order to charge, the function that charges)
is declared first, and an example that awaits runs in a coroutine."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api

DOCS = Path(__file__).resolve().parents[2] / "docs" / "python.md"

# The reader's own names the examples use.
PREAMBLE = """\
from typing import Any

order: Any = None
sku: Any = None


def charge(order: Any, *, fence: int) -> None: ...


async def decrement(sku: Any, *, fence: int) -> None: ...


"""


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)


def test_the_docs_examples_type_check_strictly(tmp_path: Path) -> None:
    found = examples()
    assert len(found) >= 2, f"no Python examples in {DOCS}"
    files = []
    for n, example in enumerate(found):
        if "await " in example or "async " in example:
            example = "async def example() -> None:\n" + textwrap.indent(example, "    ")
        path = tmp_path / f"example_{n}.py"
        path.write_text(PREAMBLE + example)
        files.append(str(path))
    out, err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), *files]
    )
    assert status == 0, out + err
