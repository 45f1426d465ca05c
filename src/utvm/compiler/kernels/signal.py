"""C kernels of the signal op family (utvm.ops.signal)."""

from __future__ import annotations
