"""Every canonical op of utvm.ops has a C kernel, and every kernel module named in KERNEL_MODULES exists."""

from __future__ import annotations

import importlib

from utvm.compiler.kernels import KERNEL_MODULES, supported_ops
from utvm.ops import OP_MODULES


def test_every_canonical_op_has_a_kernel() -> None:
    missing = sorted(set(OP_MODULES) - set(supported_ops()))
    assert missing == [], f"ops of utvm.ops without a C kernel: {missing}"


def test_every_listed_kernel_module_imports() -> None:
    for name in KERNEL_MODULES:
        importlib.import_module(f"utvm.compiler.kernels.{name}")
