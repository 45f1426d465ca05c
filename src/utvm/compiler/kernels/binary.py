"""C kernels of the binary op family (utvm.ops.binary)."""

from __future__ import annotations
