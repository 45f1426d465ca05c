"""DataType: the parsing table, printing, equality, DLDataType and numpy conversions, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from utvm.errors import DataTypeError, RuntimeSystemError
from utvm.runtime import DataType
from utvm.runtime.capi import DLDataType
from utvm.runtime.typecodes import DLDataTypeCode as C

# text -> (code, bits, lanes, canonical text)
PARSE_TABLE = [
    ("int8", C.INT, 8, 1, "int8"),
    ("int16", C.INT, 16, 1, "int16"),
    ("int32", C.INT, 32, 1, "int32"),
    ("int64", C.INT, 64, 1, "int64"),
    ("int", C.INT, 32, 1, "int32"),
    ("uint8", C.UINT, 8, 1, "uint8"),
    ("uint1", C.UINT, 1, 1, "uint1"),
    ("uint", C.UINT, 32, 1, "uint32"),
    ("float16", C.FLOAT, 16, 1, "float16"),
    ("float32", C.FLOAT, 32, 1, "float32"),
    ("float64", C.FLOAT, 64, 1, "float64"),
    ("float", C.FLOAT, 32, 1, "float32"),
    ("float32x4", C.FLOAT, 32, 4, "float32x4"),
    ("int8x16", C.INT, 8, 16, "int8x16"),
    ("int8x1", C.INT, 8, 1, "int8"),
    ("uint1x64", C.UINT, 1, 64, "uint1x64"),
    ("bfloat16", C.BFLOAT, 16, 1, "bfloat16"),
    ("bfloat", C.BFLOAT, 16, 1, "bfloat16"),
    ("complex64", C.COMPLEX, 64, 1, "complex64"),
    ("bool", C.BOOL, 8, 1, "bool"),
    ("bool8", C.BOOL, 8, 1, "bool"),
    ("boolx4", C.BOOL, 8, 4, "boolx4"),
    ("handle", C.OPAQUE_HANDLE, 64, 1, "handle"),
    ("handle32", C.OPAQUE_HANDLE, 32, 1, "handle32"),
    ("void", C.OPAQUE_HANDLE, 0, 1, "void"),
    ("  int8 ", C.INT, 8, 1, "int8"),
    ("int8x65535", C.INT, 8, 65535, "int8x65535"),
    ("int255", C.INT, 255, 1, "int255"),
]


@pytest.mark.parametrize(("text", "code", "bits", "lanes", "canonical"), PARSE_TABLE,
                         ids=[row[0].strip() for row in PARSE_TABLE])
def test_parse_table(text: str, code: C, bits: int, lanes: int, canonical: str) -> None:
    dt = DataType(text)
    assert (dt.code, dt.bits, dt.lanes) == (code, bits, lanes)
    assert str(dt) == canonical
    assert DataType(str(dt)) == dt  # printing round-trips
    assert repr(dt) == f"DataType({canonical!r})"


BAD = ["", "int0", "int256", "int8x0", "int8x65536", "int8x", "xint8", "int8 x4", "Int8", "float32x4x2",
       "void8", "voidx2", "bool1", "bool16", "string", "int-8", "8int", "handlex"]


@pytest.mark.parametrize("text", BAD)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(DataTypeError) as info:
        DataType(text)
    assert repr(text) in str(info.value)  # the message names the bad string
    assert isinstance(info.value, RuntimeSystemError) and isinstance(info.value, ValueError)


def test_numeric_constructor_and_checks() -> None:
    assert DataType(C.FLOAT, 32, 4) == DataType("float32x4")
    assert DataType(0, 8) == "int8"
    with pytest.raises(DataTypeError, match="bits are required"):
        DataType(2)
    with pytest.raises(DataTypeError, match="unknown DLDataType code 9"):
        DataType(9, 8)
    with pytest.raises(DataTypeError, match="bits must be"):
        DataType(C.INT, 256)
    with pytest.raises(DataTypeError, match="lanes must be"):
        DataType(C.INT, 8, 0)
    with pytest.raises(DataTypeError, match="0 bits"):
        DataType(C.INT, 0)
    with pytest.raises(DataTypeError, match="bool is 8 bits"):
        DataType(C.BOOL, 1)
    with pytest.raises(DataTypeError, match="void has no lanes"):
        DataType(C.OPAQUE_HANDLE, 0, 4)
    with pytest.raises(DataTypeError, match="cannot make a DataType from list"):
        DataType([1, 2])  # type: ignore[arg-type]


def test_equality_and_hash() -> None:
    a, b = DataType("float32"), DataType("float")
    assert a == b and hash(a) == hash(b)
    assert a == "float32" and "float32" == a  # noqa: SIM300 - both directions on purpose
    assert a != "float64" and a != "not a type" and a != DataType("float32x2")
    assert a != 3
    assert len({DataType("int8"), DataType("int8x1"), DataType("uint8")}) == 2
    assert DataType(a) == a


def test_immutable() -> None:
    dt = DataType("int8")
    with pytest.raises(AttributeError):
        dt.bits = 16  # type: ignore[misc]


def test_itemsize_and_lanes() -> None:
    assert DataType("float32x4").itemsize == 16
    assert DataType("uint1").itemsize == 1
    assert DataType("uint1x64").itemsize == 8
    assert DataType("bool").itemsize == 1
    assert DataType("int8").with_lanes(4) == "int8x4"


def test_dl_round_trip() -> None:
    for text, *_ in PARSE_TABLE:
        dt = DataType(text)
        dl = dt.to_dl()
        assert isinstance(dl, DLDataType)
        assert (dl.code, dl.bits, dl.lanes) == (int(dt.code), dt.bits, dt.lanes)
        assert DataType.from_dl(dl) == dt


@pytest.mark.parametrize(("np_dtype", "expected"), [
    ("int8", "int8"), ("uint16", "uint16"), ("float32", "float32"), ("float64", "float64"), ("bool", "bool"),
    ("complex64", "complex64"), ("<i4", "int32"),
])
def test_from_numpy(np_dtype: str, expected: str) -> None:
    assert DataType(np.dtype(np_dtype)) == expected


@pytest.mark.parametrize("np_dtype", [">i4", "U4", "O", "datetime64[s]", "V8"])
def test_from_numpy_rejects(np_dtype: str) -> None:
    with pytest.raises(DataTypeError):
        DataType(np.dtype(np_dtype))


@given(st.sampled_from(list(C)), st.integers(0, 255), st.integers(1, 0xFFFF))
def test_every_valid_datatype_round_trips_through_str(code: C, bits: int, lanes: int) -> None:
    try:
        dt = DataType(code, bits, lanes)
    except DataTypeError:
        return  # rejected combinations are covered above
    assert DataType(str(dt)) == dt
    assert DataType.from_dl(dt.to_dl()) == dt
