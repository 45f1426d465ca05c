"""Type codes of the TVM ABI, defined once for all of Python (docs/architecture.md §5.3).

The C side defines the same numbers once in `crt/include/tvm/runtime/c_runtime_api.h` and
`crt/include/dlpack/dlpack.h`; `tests/vectors/abi.json` holds them and both sides check against it.
"""

from __future__ import annotations

import enum


class TypeCode(enum.IntEnum):
    """TVMArgTypeCode: the type code that travels beside each TVMValue."""

    INT = 0  # kDLInt
    UINT = 1  # kDLUInt
    FLOAT = 2  # kDLFloat
    OPAQUE_HANDLE = 3  # kTVMOpaqueHandle
    NULL = 4  # kTVMNullptr
    DATA_TYPE = 5  # kTVMDataType
    DEVICE = 6  # kDLDevice
    DLTENSOR_HANDLE = 7  # kTVMDLTensorHandle
    OBJECT_HANDLE = 8  # kTVMObjectHandle
    MODULE_HANDLE = 9  # kTVMModuleHandle
    PACKED_FUNC_HANDLE = 10  # kTVMPackedFuncHandle
    STR = 11  # kTVMStr
    BYTES = 12  # kTVMBytes
    NDARRAY_HANDLE = 13  # kTVMNDArrayHandle


class DLDataTypeCode(enum.IntEnum):
    """DLPack's DLDataTypeCode."""

    INT = 0
    UINT = 1
    FLOAT = 2
    OPAQUE_HANDLE = 3
    BFLOAT = 4
    COMPLEX = 5
    BOOL = 6


class DLDeviceType(enum.IntEnum):
    """DLPack's DLDeviceType (the subset utvm uses, plus microTVM's ext_dev)."""

    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    OPENCL = 4
    VULKAN = 7
    METAL = 8
    VPI = 9
    ROCM = 10
    EXT_DEV = 12
