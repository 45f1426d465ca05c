"""Fresh names: the one rule every generator of names follows (tensors and nodes a rewrite adds, C functions
and arrays of the generated code): `base` if it is free, else `base_1`, `base_2`, ... — the first one free."""

from __future__ import annotations

from collections.abc import Container


def fresh_name(base: str, used: set[str], also: Container[str] = ()) -> str:
    """The first of `base`, `base_1`, `base_2`, ... in neither `used` nor `also`; added to `used`."""
    name, k = base, 1
    while name in used or name in also:
        name, k = f"{base}_{k}", k + 1
    used.add(name)
    return name
