"""Python ABI definitions (type codes, ctypes structs) checked against abi.json and the C headers."""

from __future__ import annotations

import ctypes
import json
import re
from pathlib import Path

import pytest

from utvm.runtime import capi
from utvm.runtime.typecodes import DLDataTypeCode, DLDeviceType, TypeCode
from utvm.support import cc

ABI = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "abi.json").read_text())

# abi.json name -> TypeCode member
TYPE_CODE_NAMES = {
    "kTVMArgInt": TypeCode.INT, "kTVMArgUInt": TypeCode.UINT, "kTVMArgFloat": TypeCode.FLOAT,
    "kTVMOpaqueHandle": TypeCode.OPAQUE_HANDLE, "kTVMNullptr": TypeCode.NULL,
    "kTVMDataType": TypeCode.DATA_TYPE,
    "kDLDevice": TypeCode.DEVICE, "kTVMDLTensorHandle": TypeCode.DLTENSOR_HANDLE,
    "kTVMObjectHandle": TypeCode.OBJECT_HANDLE, "kTVMModuleHandle": TypeCode.MODULE_HANDLE,
    "kTVMPackedFuncHandle": TypeCode.PACKED_FUNC_HANDLE, "kTVMStr": TypeCode.STR, "kTVMBytes": TypeCode.BYTES,
    "kTVMNDArrayHandle": TypeCode.NDARRAY_HANDLE,
}


def test_type_codes_match_vectors() -> None:
    assert set(TYPE_CODE_NAMES) == set(ABI["type_codes"])
    for name, member in TYPE_CODE_NAMES.items():
        assert int(member) == ABI["type_codes"][name], name
    assert len(TypeCode) == len(ABI["type_codes"])


DEVICE_NAMES = {
    "kDLCPU": DLDeviceType.CPU, "kDLCUDA": DLDeviceType.CUDA, "kDLCUDAHost": DLDeviceType.CUDA_HOST,
    "kDLOpenCL": DLDeviceType.OPENCL, "kDLVulkan": DLDeviceType.VULKAN, "kDLMetal": DLDeviceType.METAL,
    "kDLVPI": DLDeviceType.VPI, "kDLROCM": DLDeviceType.ROCM, "kDLExtDev": DLDeviceType.EXT_DEV,
}
DTYPE_NAMES = {
    "kDLInt": DLDataTypeCode.INT, "kDLUInt": DLDataTypeCode.UINT, "kDLFloat": DLDataTypeCode.FLOAT,
    "kDLOpaqueHandle": DLDataTypeCode.OPAQUE_HANDLE, "kDLBfloat": DLDataTypeCode.BFLOAT,
    "kDLComplex": DLDataTypeCode.COMPLEX, "kDLBool": DLDataTypeCode.BOOL,
}


@pytest.mark.parametrize(("section", "table"),
                         [("dl_device_types", DEVICE_NAMES), ("dl_dtype_codes", DTYPE_NAMES)])
def test_dlpack_enums_match_vectors(section: str, table: dict) -> None:
    assert set(table) == set(ABI[section])
    for name, member in table.items():
        assert int(member) == ABI[section][name], name
    assert len(set(table.values())) == len(type(next(iter(table.values()))))


def test_type_codes_match_c_header() -> None:
    header = (cc.crt_dir() / "include" / "tvm" / "runtime" / "c_runtime_api.h").read_text()
    for name in ("kTVMOpaqueHandle", "kTVMNullptr", "kTVMDataType", "kDLDevice", "kTVMDLTensorHandle",
                 "kTVMObjectHandle", "kTVMModuleHandle", "kTVMPackedFuncHandle", "kTVMStr", "kTVMBytes",
                 "kTVMNDArrayHandle"):
        m = re.search(rf"\b{name}\s*=\s*(\d+)U?\b", header)
        assert m is not None, f"{name} not found in c_runtime_api.h"
        assert int(m.group(1)) == int(TYPE_CODE_NAMES[name]), name


def test_python_error_code_tables_match_vectors() -> None:
    """The error codes Python code names (the parameter blob's refusals, the runtime's argument errors, the
    framing verdicts the acceptance kit explains) are the ones abi.json pins for the C headers."""
    from utvm.acceptance.context import FRAMING_ERRORS
    from utvm.compiler import params
    from utvm.runtime import local

    codes = ABI["error_codes"]
    assert params.ERRORS == {k: v for k, v in codes.items() if k.startswith("kTvmErrorParams")}
    assert set(params.MEANINGS) == set(params.ERRORS)
    assert (local.K_NUM_ARGUMENTS, local.K_WRONG_ARG_TYPE, local.K_INVALID_ARG) == (
        codes["kTvmErrorFunctionCallNumArguments"], codes["kTvmErrorFunctionCallWrongArgType"],
        codes["kTvmErrorFunctionCallInvalidArg"])
    framing = {v for k, v in codes.items() if k.startswith("kTvmErrorFraming")}
    assert set(FRAMING_ERRORS) <= framing, sorted(set(FRAMING_ERRORS) - framing)
    assert FRAMING_ERRORS[codes["kTvmErrorFramingPacketTooLong"]].endswith("TVM_CRT_MAX_PACKET_SIZE_BYTES")
    assert "CRC" in FRAMING_ERRORS[codes["kTvmErrorFramingCrcMismatch"]]


@pytest.mark.parametrize(("struct", "size"), [
    (capi.DLDevice, 8), (capi.DLDataType, 4), (capi.TVMValue, 8),
])
def test_struct_sizes(struct: type, size: int) -> None:
    assert ctypes.sizeof(struct) == size


def test_dltensor_layout() -> None:
    ptr = ctypes.sizeof(ctypes.c_void_p)
    assert capi.DLTensor.data.offset == 0
    assert capi.DLTensor.device.offset == ptr
    assert capi.DLTensor.ndim.offset == ptr + 8
    assert capi.DLTensor.dtype.offset == ptr + 12
    assert capi.DLTensor.shape.offset == ptr + 16
    assert capi.DLTensor.byte_offset.offset == 3 * ptr + 16
    assert ctypes.sizeof(capi.DLTensor) == 3 * ptr + 24
    # DLPack exchange structs: the tensor first (legacy) / after version, ctx, deleter, flags (1.0)
    assert capi.DLManagedTensor.dl_tensor.offset == 0
    assert capi.DLManagedTensorVersioned.dl_tensor.offset == 8 + 2 * ptr + 8


def test_tvmvalue_union_views() -> None:
    v = capi.TVMValue()
    v.v_int64 = -2
    assert v.v_int64 == -2
    v.v_float64 = 1.5
    assert v.v_float64 == 1.5
    v.v_type = capi.DLDataType(2, 32, 4)
    assert (v.v_type.code, v.v_type.bits, v.v_type.lanes) == (2, 32, 4)
    v.v_device = capi.DLDevice(12, 3)
    assert (v.v_device.device_type, v.v_device.device_id) == (12, 3)
