"""ctypes mirrors of the C ABI structs (docs/architecture.md §4/§5.3), defined once for all of Python.

Layouts follow `crt/include/dlpack/dlpack.h` and `crt/include/tvm/runtime/c_runtime_api.h`:
DLDevice, DLDataType, DLTensor, TVMValue (an 8-byte union), TVMByteArray, the DLPack exchange structs
(DLManagedTensor and DLManagedTensorVersioned) and the one C function signature, TVMBackendPackedCFunc.
The type codes themselves live in `typecodes.py`.
"""

from __future__ import annotations

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class TVMValue(ctypes.Union):
    """The type-erased value travelling beside a type code. `v_str` is read as a raw address."""

    _fields_ = [
        ("v_int64", ctypes.c_int64),
        ("v_float64", ctypes.c_double),
        ("v_handle", ctypes.c_void_p),
        ("v_str", ctypes.c_void_p),
        ("v_type", DLDataType),
        ("v_device", DLDevice),
    ]


class TVMByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


# int (*)(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value, int* out_ret_tcode,
#         void* resource_handle)
TVMBackendPackedCFunc = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(TVMValue),
    ctypes.POINTER(ctypes.c_int),
    ctypes.c_int,
    ctypes.POINTER(TVMValue),
    ctypes.POINTER(ctypes.c_int),
    ctypes.c_void_p,
)

# --- DLPack exchange (the __dlpack__ capsule protocol) ----------------------------------------------------
DLPackDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    """Legacy (unversioned) DLPack exchange struct; travels in a capsule named "dltensor"."""

    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """DLPack >= 1.0 exchange struct; travels in a capsule named "dltensor_versioned"."""

    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1
DLPACK_MAJOR_VERSION = 1
DLPACK_MINOR_VERSION = 0
