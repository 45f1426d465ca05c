"""One fuzzing campaign per test session: every target, C (test_fuzz.py) and Python (test_fuzz_python.py),
starts at once and runs its UTVM_FUZZ_SECONDS concurrently with the others.

libFuzzer's budget is wall-clock time, so targets run one module after the other would hold the machine for
the sum of their windows; run together they hold it for one window. Each test module registers a starter
(`register(kind, start)`) when it is imported; the session fixture `fuzz_campaign` (conftest.py) calls every
registered starter and hands each module its own runs. Both modules carry `xdist_group("fuzz")`, so under
pytest-xdist (`--dist loadgroup`) they share one worker, and with it one campaign.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol


class Run(Protocol):
    """What a started target offers the campaign: its process, and cleanup when its test never waited."""

    def abandon(self) -> None: ...


_STARTERS: dict[str, Callable[[], dict[str, Any]]] = {}

#: The xdist group of every fuzz test: one worker, one campaign.
GROUP = "fuzz"


def register(kind: str, start: Callable[[], dict[str, Any]]) -> None:
    """`start()` builds and starts every target of `kind`, returning {target name: run}."""
    _STARTERS[kind] = start


def campaign() -> Iterator[dict[str, dict[str, Any]]]:
    """Start every registered kind (the builds first, so the windows overlap), yield {kind: {name: run}},
    then abandon whatever a test did not wait for (an earlier failure, -x, a deselected target)."""
    runs: dict[str, dict[str, Any]] = {}
    try:
        for kind, start in _STARTERS.items():
            runs[kind] = start()
        yield runs
    finally:
        for by_name in runs.values():
            for run in by_name.values():
                run.abandon()
