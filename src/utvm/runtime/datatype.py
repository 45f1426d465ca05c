"""DataType: an element type (DLPack code, bits per lane, lanes), parsed from and printed as a string.

Grammar: `<kind>[<bits>][x<lanes>]` with kind one of int, uint, float, bfloat, complex, bool, handle, void:
"int8", "uint1", "float32x4", "bfloat16", "handle", "bool". Defaults when bits are omitted: int/uint/float
32, bfloat 16, complex 64, handle 64. "bool" is DLPack's kDLBool with 8 bits (one byte per element, what
numpy and DLPack consumers use); "uint1" is a 1-bit unsigned integer. "void" is a handle of 0 bits.
"""

from __future__ import annotations

import re
from typing import Any

from utvm.errors import DataTypeError
from utvm.runtime.capi import DLDataType
from utvm.runtime.typecodes import DLDataTypeCode

_KIND_CODE = {
    "int": DLDataTypeCode.INT,
    "uint": DLDataTypeCode.UINT,
    "float": DLDataTypeCode.FLOAT,
    "bfloat": DLDataTypeCode.BFLOAT,
    "complex": DLDataTypeCode.COMPLEX,
    "bool": DLDataTypeCode.BOOL,
    "handle": DLDataTypeCode.OPAQUE_HANDLE,
    "void": DLDataTypeCode.OPAQUE_HANDLE,
}
_DEFAULT_BITS = {"int": 32, "uint": 32, "float": 32, "bfloat": 16, "complex": 64, "bool": 8, "handle": 64}
_CODE_KIND = {
    DLDataTypeCode.INT: "int",
    DLDataTypeCode.UINT: "uint",
    DLDataTypeCode.FLOAT: "float",
    DLDataTypeCode.BFLOAT: "bfloat",
    DLDataTypeCode.COMPLEX: "complex",
    DLDataTypeCode.BOOL: "bool",
    DLDataTypeCode.OPAQUE_HANDLE: "handle",
}
_GRAMMAR = re.compile(r"(int|uint|float|bfloat|complex|bool|handle|void)([0-9]*)(?:x([0-9]+))?")
# numpy dtype.kind -> DLPack code (duck-typed: this module never imports numpy)
_NUMPY_KIND = {"i": DLDataTypeCode.INT, "u": DLDataTypeCode.UINT, "f": DLDataTypeCode.FLOAT,
               "c": DLDataTypeCode.COMPLEX, "b": DLDataTypeCode.BOOL}


class DataType:
    """An immutable element type. `DataType("int8")`, `DataType(DLDataTypeCode.FLOAT, 32, 4)`,
    `DataType(numpy.dtype("int16"))`. Compares equal to an equal DataType or to its string."""

    __slots__ = ("_code", "_bits", "_lanes")
    _code: DLDataTypeCode
    _bits: int
    _lanes: int

    def __init__(self, dtype: str | DataType | int | Any, bits: int | None = None, lanes: int = 1) -> None:
        if isinstance(dtype, DataType):
            code, bits, lanes = dtype._code, dtype._bits, dtype._lanes
        elif isinstance(dtype, str):
            code, bits, lanes = _parse(dtype)
        elif isinstance(dtype, int):
            if bits is None:
                raise DataTypeError(f"DataType({dtype}): bits are required with a numeric type code")
            code = _check_code(dtype)
        elif hasattr(dtype, "kind") and hasattr(dtype, "itemsize"):  # a numpy dtype
            code, bits, lanes = _from_numpy(dtype)
        else:
            raise DataTypeError(f"cannot make a DataType from {type(dtype).__name__} {dtype!r}")
        if isinstance(bits, bool) or not isinstance(bits, int) or not 0 <= bits <= 255:
            raise DataTypeError(f"DataType bits must be an integer in 0..255, got {bits!r}")
        if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= 0xFFFF:
            raise DataTypeError(f"DataType lanes must be an integer in 1..65535, got {lanes!r}")
        if bits == 0 and code != DLDataTypeCode.OPAQUE_HANDLE:
            raise DataTypeError(f"DataType {code.name.lower()} with 0 bits (only 'void' has no bits)")
        if code == DLDataTypeCode.BOOL and bits != 8:
            raise DataTypeError(f"DataType bool is 8 bits, got {bits} (use uint1 for a 1-bit integer)")
        if code == DLDataTypeCode.OPAQUE_HANDLE and bits == 0 and lanes != 1:
            raise DataTypeError(f"DataType void has no lanes, got {lanes}")
        object.__setattr__(self, "_code", code)
        object.__setattr__(self, "_bits", bits)
        object.__setattr__(self, "_lanes", lanes)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"DataType is immutable (cannot set {name!r})")

    @property
    def code(self) -> DLDataTypeCode:
        return self._code

    @property
    def bits(self) -> int:
        return self._bits

    @property
    def lanes(self) -> int:
        return self._lanes

    @property
    def itemsize(self) -> int:
        """Bytes per element (all lanes), rounded up to whole bytes."""
        return (self._bits * self._lanes + 7) // 8

    def with_lanes(self, lanes: int) -> DataType:
        return DataType(self._code, self._bits, lanes)

    # --- DLPack ---------------------------------------------------------------------------------------
    def to_dl(self) -> DLDataType:
        return DLDataType(int(self._code), self._bits, self._lanes)

    @classmethod
    def from_dl(cls, dl: DLDataType) -> DataType:
        return cls(int(dl.code), int(dl.bits), int(dl.lanes))

    # --- value semantics ------------------------------------------------------------------------------
    def _key(self) -> tuple[int, int, int]:
        return (int(self._code), self._bits, self._lanes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = DataType(other)
            except DataTypeError:
                return False
        if not isinstance(other, DataType):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        kind = _CODE_KIND[self._code]
        if self._code == DLDataTypeCode.OPAQUE_HANDLE:
            base = "void" if self._bits == 0 else "handle" if self._bits == 64 else f"handle{self._bits}"
        elif self._code == DLDataTypeCode.BOOL and self._bits == 8:
            base = "bool"
        else:
            base = f"{kind}{self._bits}"
        return base if self._lanes == 1 else f"{base}x{self._lanes}"

    def __repr__(self) -> str:
        return f"DataType({str(self)!r})"


def _check_code(code: int) -> DLDataTypeCode:
    try:
        return DLDataTypeCode(code)
    except ValueError:
        known = ", ".join(f"{c.value} ({c.name.lower()})" for c in DLDataTypeCode)
        raise DataTypeError(f"unknown DLDataType code {code}; known codes: {known}") from None


def _parse(text: str) -> tuple[DLDataTypeCode, int, int]:
    m = _GRAMMAR.fullmatch(text.strip())
    if m is None:
        raise DataTypeError(
            f"cannot parse data type {text!r}: expected <kind>[<bits>][x<lanes>] with kind one of "
            f"{', '.join(_KIND_CODE)} (e.g. 'int8', 'float32x4', 'bool', 'handle')"
        )
    kind, bits_s, lanes_s = m.groups()
    if kind == "void":
        if bits_s or lanes_s:
            raise DataTypeError(f"data type {text!r}: 'void' takes no bits or lanes")
        return DLDataTypeCode.OPAQUE_HANDLE, 0, 1
    bits = int(bits_s) if bits_s else _DEFAULT_BITS[kind]
    lanes = int(lanes_s) if lanes_s else 1
    if kind == "bool" and bits != 8:
        raise DataTypeError(f"data type {text!r}: bool is 8 bits (use 'uint1' for a 1-bit integer)")
    if not 1 <= bits <= 255:
        raise DataTypeError(f"data type {text!r}: bits must be in 1..255, got {bits}")
    if not 1 <= lanes <= 0xFFFF:
        raise DataTypeError(f"data type {text!r}: lanes must be in 1..65535, got {lanes}")
    return _KIND_CODE[kind], bits, lanes


def _from_numpy(dtype: Any) -> tuple[DLDataTypeCode, int, int]:
    code = _NUMPY_KIND.get(getattr(dtype, "kind", None))
    if code is None or getattr(dtype, "fields", None) or getattr(dtype, "subdtype", None):
        raise DataTypeError(f"numpy dtype {dtype} has no DataType equivalent")
    if getattr(dtype, "byteorder", "=") == ">":
        raise DataTypeError(f"numpy dtype {dtype} is big-endian; utvm tensors are little-endian")
    return code, 8 * int(dtype.itemsize), 1
