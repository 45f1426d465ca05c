"""The one way generated C is written: indentation, blocks, loops, literals, tables and templates.

Every kernel emitter and the code generator build their C text with these functions, so the shape of the
output (two-space indentation, braces on the opening line, literals that round-trip) is decided here once.
Facts about the C (which <math.h> functions it calls, whether it reads the workspace, which helpers it
needs) are *reported* by the emitter as data (`KernelContext.libm`, `KernelCode.scratch_bytes`,
`KernelContext.helper`): nothing is recovered later by searching the text.

Templates: fixed C with holes is written with `@NAME@` placeholders and filled by `fill(template, NAME=...)`,
which refuses a hole left open or a value with no hole (a misspelt name is an error, not wrong C).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

INDENT = "  "

#: int32 bounds as numbers (what accumulator bounds are checked against)
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)

_HOLE = re.compile(r"@([A-Z][A-Z0-9_]*)@")


def indent(text: str, levels: int = 1) -> str:
    """`text` with every non-empty line indented by `levels` steps (empty lines stay empty)."""
    pad = INDENT * levels
    return "\n".join(pad + ln if ln.strip() else "" for ln in text.splitlines())


def lines(*parts: str | Iterable[str] | None) -> str:
    """Statements joined one per line; None, "" and empty sequences are skipped (optional statements)."""
    out: list[str] = []
    for p in parts:
        if p is None:
            continue
        if isinstance(p, str):
            if p:
                out.append(p)
        else:
            out.extend(x for x in p if x)
    return "\n".join(out)


def block(head: str, body: str | Iterable[str]) -> str:
    """`head {` + the body indented + `}` (a function, loop, if or bare block: head "" gives `{ ... }`)."""
    text = body if isinstance(body, str) else lines(body)
    opening = f"{head} {{" if head else "{"
    return f"{opening}\n{indent(text)}\n}}" if text.strip() else f"{opening}\n}}"


def for_loop(var: str, start: int | str, stop: int | str, body: str | Iterable[str], step: int | str = 1,
             ctype: str = "int32_t") -> str:
    """`for (ctype var = start; var < stop; var += step) { body }` (`++var` for a step of 1)."""
    inc = f"++{var}" if str(step) == "1" else f"{var} += {step}"
    return block(f"for ({ctype} {var} = {start}; {var} < {stop}; {inc})", body)


def fill(template: str, **values: Any) -> str:
    """`template` with every `@NAME@` replaced by `str(values[NAME])`. Every hole must be given a value and
    every value must have a hole (KeyError / ValueError name the one at fault)."""
    holes = set(_HOLE.findall(template))
    missing = sorted(holes - set(values))
    if missing:
        raise KeyError(f"template holes without a value: {', '.join(missing)}")
    unused = sorted(set(values) - holes)
    if unused:
        raise ValueError(f"values without a template hole: {', '.join(unused)}")
    return _HOLE.sub(lambda m: str(values[m.group(1)]), template)


def offset_term(v: int) -> str:
    """` + v` / ` - |v|` / `` for adding a baked-in integer to an expression."""
    v = int(v)
    return f" + {v}" if v > 0 else (f" - {-v}" if v < 0 else "")


# --- literals and tables --------------------------------------------------------------------------------

#: C spellings of the special float values (they need <math.h>'s macros, no libm function)
FLOAT_SPECIALS = ("NAN", "INFINITY")


def c_literal(value: Any, dtype: str) -> str:
    """One value as a C literal of `dtype` (exact for float32: 9 significant digits round-trip)."""
    if dtype == "float32":
        with np.errstate(over="ignore"):  # beyond float32's range: INFINITY, as the C compiler would round it
            v = float(np.float32(value))
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        s = f"{v:.9g}"
        if "e" not in s and "." not in s and "n" not in s:
            s += ".0"
        return s + "f"
    v = int(value)
    if dtype == "int64":
        return "(-9223372036854775807LL - 1)" if v == -(2**63) else f"{v}LL"
    if dtype in ("uint32", "uint64"):
        return f"{v}U" if dtype == "uint32" else f"{v}ULL"
    if dtype in ("int32", "int16", "int8") and v == -(2**31):
        return "(-2147483647 - 1)"
    return str(v)


def has_float_specials(values: np.ndarray | Sequence[Any], dtype: str) -> bool:
    """Whether a float table of `values` spells NAN or INFINITY (the file then includes <math.h>)."""
    # as c_literal writes them: float32 (a float64 beyond float32's range is written INFINITY)
    with np.errstate(over="ignore"):
        return dtype == "float32" and not bool(np.all(np.isfinite(np.asarray(values, np.float64).astype(np.float32))))


def c_array_body(values: np.ndarray | Sequence[Any], dtype: str, per_line: int = 16) -> str:
    """The initialiser list of a table (`per_line` values a line; "0" for an empty table)."""
    flat = np.asarray(values).reshape(-1)
    if dtype == "float32":
        items = [c_literal(v, dtype) for v in flat.tolist()]
    elif dtype in ("int8", "uint8", "int16", "int32", "bool") and flat.size:
        ints = flat.astype(np.int64).tolist()
        items = ["(-2147483647 - 1)" if v == -(2**31) else str(v) for v in ints]
    else:
        items = [c_literal(v, dtype) for v in flat.tolist()]
    if not items:
        return "0"
    rows = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n  ".join(rows)


def hex_words_body(words: np.ndarray | Sequence[int], per_line: int = 8) -> str:
    """The initialiser list of a uint32 table as hex words (`0x0000abcdu`); "0u" when empty."""
    flat = np.asarray(words, np.uint32).reshape(-1)
    body = ",\n  ".join(", ".join(f"0x{int(v):08x}u" for v in flat[i:i + per_line])
                        for i in range(0, flat.size, per_line))
    return body or "0u"


def table_decl(ctype: str, name: str, body: str, count: int, qualifiers: str = "static const") -> str:
    """`static const <ctype> name[count] = { body };` (count at least 1: C has no empty arrays)."""
    return f"{qualifiers} {ctype} {name}[{max(count, 1)}] = {{\n  {body}\n}};"
