"""C kernels of the recurrent op family (utvm.ops.recurrent)."""

from __future__ import annotations
