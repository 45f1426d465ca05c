"""Progress lines of the long-running commands: `[  1.23s] message` on stderr, silenced by --quiet.

A message often quotes a model (a tensor or op name) or a path: it is escaped (utvm.support.text.shown), so
a progress line is always one inert line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def progress_printer(quiet: bool = False) -> Callable[[str], None]:
    """A `say(message)` that prints the time since it was made; a no-op when `quiet`."""
    from utvm.support.text import shown

    t0 = time.monotonic()

    def say(msg: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - t0:6.2f}s] {shown(msg)}", file=sys.stderr, flush=True)

    return say
