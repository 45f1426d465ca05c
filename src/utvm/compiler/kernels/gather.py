"""C kernels of the gather op family (utvm.ops.gather)."""

from __future__ import annotations
