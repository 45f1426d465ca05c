"""C kernels of the movement op family (utvm.ops.movement)."""

from __future__ import annotations
