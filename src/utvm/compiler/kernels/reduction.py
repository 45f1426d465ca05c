"""C kernels of the reduction op family (utvm.ops.reduction)."""

from __future__ import annotations
