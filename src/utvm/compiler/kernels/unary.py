"""C kernels of the math op family (utvm.ops.unary)."""

from __future__ import annotations
