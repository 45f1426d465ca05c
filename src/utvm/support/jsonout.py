"""Strict JSON for `--json` outputs: a NaN or an infinity has no JSON form (Python's `json` writes a bare
`NaN`, which JSON parsers reject), so each becomes `null`, and the caller is told that it happened so it
can say so in the object (`"nonfinite": true`)."""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(obj: Any) -> tuple[Any, bool]:
    """`obj` with every non-finite float replaced by None (recursively through dicts, lists and tuples),
    and whether anything was replaced."""
    replaced = False

    def walk(x: Any) -> Any:
        nonlocal replaced
        if isinstance(x, float):
            if math.isfinite(x):
                return x
            replaced = True
            return None
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [walk(v) for v in x]
        return x

    return walk(obj), replaced


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps that never writes NaN/Infinity: non-finite floats become null, and a dict gets
    `"nonfinite": true` when any value was replaced."""
    clean, replaced = finite_or_none(obj)
    if replaced and isinstance(clean, dict):
        clean["nonfinite"] = True
    return json.dumps(clean, allow_nan=False, **kwargs)
