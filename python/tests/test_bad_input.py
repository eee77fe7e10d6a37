"""A fuzz-style sweep over the API with values of the wrong type or out of
range: each call raises ``lockward.InvalidArgument`` (a ``ValueError``) or
``TypeError``, as Python code expects, and never crashes the interpreter."""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest

import lockward

BAD_VALUES: list[Any] = [
    None,
    -1,
    0,
    2**64,
    -(2**70),
    math.nan,
    math.inf,
    -0.5,
    "",
    "x" * 1_000_000,
    "a\x00b",
    b"bytes",
    ["list"],
    {"a": 1},
    object(),
]


def calls(store: lockward.Store) -> dict[str, Callable[[Any], object]]:
    return {
        "Store(url)": lambda v: lockward.Store(v),
        "lock(name)": lambda v: store.lock(v, wait=0.1),
        "lock(ttl)": lambda v: store.lock("fuzz/ttl", ttl=v, wait=0.1),
        "lock(wait)": lambda v: store.lock("fuzz/wait", wait=v),
        "lock(label)": lambda v: store.lock("fuzz/label", label=v, wait=0.1),
        "lock_all(names)": lambda v: store.lock_all(v, wait=0.1),
        "semaphore(permits)": lambda v: store.semaphore("fuzz/sem", v).try_acquire(),
        "semaphore(take)": lambda v: store.semaphore("fuzz/sem2", 3).try_acquire(v),
        "rw_lock(name)": lambda v: store.rw_lock(v).try_read(),
        "rate_limit(limit)": lambda v: store.rate_limit("fuzz/rate", v, 1.0).check("s"),
        "rate_limit(period)": lambda v: store.rate_limit("fuzz/rate2", 5, v).check("s"),
        "rate_limit(burst)": lambda v: store.rate_limit("fuzz/rate3", 5, 1.0, burst=v).check("s"),
        "elect(timing)": lambda v: store.elect("fuzz/elect", "me", lease_duration=v, wait=0),
        "elect(identity)": lambda v: store.elect("fuzz/elect2", v, wait=0),
        "claim(key)": lambda v: store.claim(v),
        "claim(keep)": lambda v: store.claim("fuzz/keep", keep=v),
        "inspect(name)": lambda v: store.inspect(v),
        "list(prefix)": lambda v: store.list(v),
    }


@pytest.mark.parametrize("store_url", ["memory"], indirect=True)
def test_wrong_types_and_values_raise_invalid_argument_or_type_error(store: lockward.Store) -> None:
    unexpected = []
    for call, make in calls(store).items():
        for value in BAD_VALUES:
            try:
                held = make(value)
            except (lockward.InvalidArgument, TypeError):
                continue
            except lockward.Error:
                # Another of lockward's kinds (Busy, NotSupported) is a
                # clear answer too.
                continue
            except Exception as error:  # noqa: BLE001 - what the sweep looks for
                unexpected.append(f"{call} with {value!r:.40}: {type(error).__name__}: {error}")
                continue
            # Some values are valid (0 seconds of wait, an empty prefix):
            # give back whatever was taken.
            release = getattr(held, "release", None) or getattr(held, "resign", None)
            if callable(release):
                release()
    assert not unexpected, "\n".join(unexpected)
