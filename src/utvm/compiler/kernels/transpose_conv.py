"""C kernels of the transpose_conv op family (utvm.ops.transpose_conv)."""

from __future__ import annotations
