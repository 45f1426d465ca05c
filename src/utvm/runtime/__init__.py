"""The host runtime system (seed 004, DESIGN.md §3): type codes, DataType, Device, PackedFunc and the global
registry, Module, and NDArray (numpy + DLPack).

Importing this package does not import numpy; `NDArray`, `from_dlpack` and `utvm.nd` do. The CRT loaded
with ctypes is `utvm.runtime.local`.
"""

from __future__ import annotations

from typing import Any

from utvm.runtime.capi import TVMValue
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device, cpu, device, ext_dev
from utvm.runtime.module import Module, PyModule
from utvm.runtime.packed_func import (
    PackedFunc,
    convert_arg,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from utvm.runtime.typecodes import DLDataTypeCode, DLDeviceType, TypeCode

__all__ = [
    "DLDataTypeCode", "DLDeviceType", "DataType", "Device", "Module", "NDArray", "PackedFunc", "PyModule",
    "TVMValue", "TypeCode", "convert_arg", "cpu", "device", "ext_dev", "from_dlpack", "get_global_func",
    "list_global_func_names", "register_func", "remove_global_func",
]


def __getattr__(name: str) -> Any:  # numpy-backed parts load on first use
    if name in ("NDArray", "from_dlpack"):
        from utvm.runtime import ndarray

        return getattr(ndarray, name)
    raise AttributeError(f"module 'utvm.runtime' has no attribute {name!r}")
