"""The host runtime system (seed 004, docs/architecture.md §3): type codes, DataType, Device, PackedFunc and the global
registry, Module, and NDArray (numpy + DLPack).

The backends share one interface: `Backend` (get_function, empty/array, system_lib, time_evaluator),
`PackedFunc` (argument conversion in one place), `Module` and `NDArrayBase`. The CRT loaded with ctypes is
`utvm.runtime.local`; a device over a transport is `utvm.rpc.Session`. Importing this package does not
import numpy; `NDArray`, `from_dlpack` and `utvm.nd` do.
"""

from __future__ import annotations

from typing import Any

from utvm.runtime.backend import Backend, TimeEvaluator
from utvm.runtime.capi import TVMValue
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device, cpu, device, ext_dev
from utvm.runtime.module import Module, PyModule
from utvm.runtime.ndarray_base import NDArrayBase
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
    "Backend", "DLDataTypeCode", "DLDeviceType", "DataType", "Device", "Module", "NDArray", "NDArrayBase",
    "PackedFunc", "PyModule", "TVMValue", "TimeEvaluator", "TypeCode", "convert_arg", "cpu", "device", "ext_dev",
    "from_dlpack", "get_global_func", "list_global_func_names", "register_func", "remove_global_func",
]


def __getattr__(name: str) -> Any:  # numpy-backed parts load on first use
    if name in ("NDArray", "from_dlpack"):
        from utvm.runtime import ndarray

        return getattr(ndarray, name)
    raise AttributeError(f"module 'utvm.runtime' has no attribute {name!r}")
