"""The binary op family (see utvm.ops for the module interface)."""

from __future__ import annotations

OPS: tuple[str, ...] = ()
