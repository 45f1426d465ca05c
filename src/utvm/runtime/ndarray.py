"""NDArray: a tensor in host memory, exchanged with numpy (copies) and DLPack (zero copy), passed to C as
a DLTensor* (seed 004, docs/architecture.md §3).

NDArray is the `local` backend's NDArrayBase (the interface it shares with `utvm.rpc.RemoteNDArray`).
Memory is owned by whatever `_owner` holds: an aligned numpy buffer for arrays utvm allocates, a DLPack
producer's managed tensor for `from_dlpack` imports (its deleter runs when the NDArray is collected), or
nothing for a *borrowed* view of a DLTensor handed to a Python callback by C (valid during that call only).
`free()` drops the array's own reference to its owner: numpy views and DLPack exports made from it keep
the owner alive, so the memory goes when the last of them does.

DLPack (`__dlpack__`, `__dlpack_device__`, `from_dlpack`) follows the Python array API capsule protocol,
implemented with ctypes: a capsule named "dltensor" (or "dltensor_versioned" when the consumer passes
max_version >= (1, 0)) holds a DLManagedTensor whose deleter releases the exported NDArray; a consumer
renames the capsule "used_dltensor" and calls the deleter when done. `numpy.from_dlpack(nd)` and
`utvm.nd.from_dlpack(numpy_array)` both share memory with their source.
"""

from __future__ import annotations

import ctypes
import itertools
import operator
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from utvm.errors import ArgumentError, ArrayError, DataTypeError
from utvm.runtime import capi
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device, cpu
from utvm.runtime.ndarray_base import NDArrayBase
from utvm.runtime.typecodes import DLDataTypeCode, DLDeviceType

ALIGNMENT = 64  # bytes; >= TVM_CRT_ALLOC_ALIGNMENT_BYTES so C kernels may assume aligned data

_NUMPY_DTYPES: dict[tuple[int, int], str] = {
    **{(DLDataTypeCode.INT, b): f"int{b}" for b in (8, 16, 32, 64)},
    **{(DLDataTypeCode.UINT, b): f"uint{b}" for b in (8, 16, 32, 64)},
    **{(DLDataTypeCode.FLOAT, b): f"float{b}" for b in (16, 32, 64)},
    (DLDataTypeCode.BFLOAT, 16): "uint16",  # raw bits: numpy has no bfloat16
    (DLDataTypeCode.COMPLEX, 64): "complex64",
    (DLDataTypeCode.COMPLEX, 128): "complex128",
    (DLDataTypeCode.BOOL, 8): "bool",
}


def numpy_dtype(dtype: DataType) -> np.dtype:
    """The numpy dtype of one lane of `dtype`; ArrayError if numpy cannot hold it."""
    name = _NUMPY_DTYPES.get((int(dtype.code), dtype.bits))
    if name is None:
        raise ArrayError(f"data type {dtype} has no numpy equivalent (sub-byte or unusual width)")
    return np.dtype(name)


class _Interface:
    """Hands numpy a raw pointer through __array_interface__ and keeps the memory's owner alive."""

    def __init__(self, iface: dict[str, Any], owner: object) -> None:
        self.__array_interface__ = iface
        self._owner = owner


class NDArray(NDArrayBase):
    """A tensor in host memory. Make one with `utvm.nd.array`, `utvm.nd.empty` or `utvm.nd.from_dlpack`."""

    def __init__(self, data: int, shape: Sequence[int], dtype: DataType, device: Device, owner: object,
                 strides: Sequence[int] | None = None, readonly: bool = False,
                 borrowed: bool = False) -> None:
        self._data = int(data or 0)
        self._shape = tuple(int(s) for s in shape)
        self._dtype = dtype
        self._device = device
        self._owner = owner
        compact = _compact_strides(self._shape)
        given = None if strides is None else tuple(int(s) for s in strides)
        self._strides = None if given == compact else given
        self._readonly = readonly
        self._borrowed = borrowed
        self._freed = False
        self._dl: tuple[capi.DLTensor, Any, Any] | None = None

    # --- description -----------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def datatype(self) -> DataType:
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def strides(self) -> tuple[int, ...] | None:
        """Strides in elements, or None for a compact row-major array."""
        return self._strides

    @property
    def data_ptr(self) -> int:
        return self._data

    @property
    def readonly(self) -> bool:
        return self._readonly

    @property
    def freed(self) -> bool:
        return self._freed

    @property
    def handle(self) -> ctypes._Pointer:
        """A DLTensor* describing this array (valid while the NDArray lives); what C functions receive."""
        self._check_live()
        if self._dl is None:
            ndim = len(self._shape)
            shape = (ctypes.c_int64 * max(ndim, 1))(*self._shape)
            strides = (ctypes.c_int64 * max(ndim, 1))(*self._strides) if self._strides is not None else None
            t = capi.DLTensor(
                data=self._data or None, device=self._device.to_dl(), ndim=ndim, dtype=self._dtype.to_dl(),
                shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                strides=ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides is not None else None,
                byte_offset=0)
            self._dl = (t, shape, strides)
        return ctypes.pointer(self._dl[0])

    def __repr__(self) -> str:
        extra = " borrowed" if self._borrowed else ""
        extra += " freed" if self._freed else ""
        return f"<NDArray shape={self._shape} dtype={self.dtype} device={self._device}{extra}>"

    def free(self) -> None:
        """Drop this array's reference to its memory (numpy views and DLPack exports of it keep theirs);
        using the array afterwards raises ArgumentError. Idempotent."""
        if not self._freed:
            self._freed = True
            self._owner = None
            self._dl = None
            self._data = 0

    def _check_live(self) -> None:
        if self._freed:
            raise ArgumentError(f"{self!r} was freed")

    # --- numpy -----------------------------------------------------------------------------------------
    def _check_host(self, what: str) -> None:
        self._check_live()
        if self._device.device_type not in (DLDeviceType.CPU, DLDeviceType.CUDA_HOST):
            raise ArrayError(f"{what}: array is on {self._device}, not in host memory")

    def _view(self) -> np.ndarray:
        """A numpy array sharing this array's memory (lanes > 1 become a trailing axis)."""
        self._check_host("numpy view")
        base = numpy_dtype(self._dtype)
        lanes = self._dtype.lanes
        shape = self._shape + ((lanes,) if lanes > 1 else ())
        if self.size == 0:
            return np.empty(shape, dtype=base)
        iface: dict[str, Any] = {"shape": shape, "typestr": base.str, "data": (self._data, self._readonly),
                                 "version": 3}
        if self._strides is not None:
            iface["strides"] = tuple(s * self._dtype.itemsize for s in self._strides) + \
                ((base.itemsize,) if lanes > 1 else ())
        return np.asarray(_Interface(iface, (self, self._owner)))  # the view keeps the memory alive

    def numpy(self) -> np.ndarray:
        """A copy of the contents as a numpy array."""
        return np.array(self._view(), copy=True, order="C")

    def copyfrom(self, source: Any) -> NDArray:
        """Copy `source` (an array of any backend, a numpy array or a nested sequence) into this array;
        returns self."""
        if self._readonly:
            raise ArrayError(f"copyfrom: {self!r} is read-only")
        view = self._view()
        src = source.numpy() if isinstance(source, NDArrayBase) else source
        try:
            src = np.asarray(src, dtype=view.dtype)
        except (TypeError, ValueError) as exc:
            raise ArrayError(f"copyfrom: cannot convert {type(source).__name__} to {self.dtype}: {exc}") \
                from exc
        if src.shape != view.shape:
            raise ArrayError(f"copyfrom: source shape {src.shape} does not match array shape {view.shape}")
        view[...] = src
        return self

    def copyto(self, target: NDArrayBase | Device) -> NDArrayBase:
        """Copy into another array (of any backend), or into a new array on `target` device; returns the
        destination."""
        if isinstance(target, NDArrayBase):
            return target.copyfrom(self)
        if isinstance(target, Device):
            return empty(self._shape, self._dtype, target).copyfrom(self)
        raise ArgumentError(f"copyto: target must be an NDArray or a Device, got {type(target).__name__}")

    # --- DLPack producer -------------------------------------------------------------------------------
    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device.device_type, self._device.device_id)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> object:
        self._check_live()
        if stream not in (None, -1):
            raise BufferError(f"__dlpack__: stream {stream!r} given for a host array (must be None)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: cannot export {self._device} memory to device {tuple(dl_device)}")
        src = self
        if copy:
            src = empty(self._shape, self._dtype, self._device).copyfrom(self)
        versioned = max_version is not None and int(max_version[0]) >= capi.DLPACK_MAJOR_VERSION
        if self._readonly and not versioned and not copy:
            raise BufferError("__dlpack__: the array is read-only, which only DLPack >= 1.0 can signal "
                              "(pass max_version=(1, 0) or copy=True)")
        return _export(src, versioned, readonly=src._readonly, copied=bool(copy))


def _compact_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def _check_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        if isinstance(shape, str | bytes):
            raise TypeError
        dims = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise ArgumentError(f"shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ArgumentError(f"shape {dims} has a negative dimension")
    return dims


def _host_device(device: Device | None, what: str) -> Device:
    dev = cpu(0) if device is None else device
    if not isinstance(dev, Device):
        raise ArgumentError(f"{what}: device must be a utvm Device, got {type(dev).__name__}")
    if dev.device_type != DLDeviceType.CPU:
        raise ArrayError(f"{what}: no local memory for {dev}; arrays on a device come from its RPC session")
    return dev


def empty(shape: Any, dtype: str | DataType = "float32", device: Device | None = None) -> NDArray:
    """An uninitialized array, its data aligned to ALIGNMENT bytes."""
    dims = _check_shape(shape)
    dt = dtype if isinstance(dtype, DataType) else DataType(dtype)
    dev = _host_device(device, "empty")
    n = 1
    for d in dims:
        n *= d
    nbytes = n * dt.itemsize
    buf = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    addr = buf.ctypes.data
    return NDArray(addr + (-addr) % ALIGNMENT, dims, dt, dev, owner=buf)


def array(obj: Any, device: Device | None = None, dtype: str | DataType | None = None) -> NDArray:
    """A new host array holding a copy of `obj` (numpy array, an array of any backend or nested sequence)."""
    if isinstance(obj, NDArrayBase):
        src = obj.numpy()
        dt = DataType(dtype) if dtype is not None else obj.datatype
    else:
        try:
            src = np.asarray(obj, dtype=None if dtype is None else numpy_dtype(DataType(dtype)))
        except (TypeError, ValueError) as exc:
            raise ArrayError(f"array: cannot convert {type(obj).__name__} to an array: {exc}") from exc
        try:
            dt = DataType(dtype) if dtype is not None else DataType(src.dtype)
        except DataTypeError as exc:
            raise ArrayError(f"array: {exc}") from exc
    if dt.lanes > 1:
        raise ArrayError(f"array: cannot build a {dt} array from numpy data; use empty() and copyfrom()")
    out = empty(src.shape, dt, _host_device(device, "array"))
    return out.copyfrom(src)


def from_dltensor(ptr: int | ctypes._Pointer, owner: object = None, readonly: bool = False) -> NDArray:
    """An NDArray over the memory a DLTensor describes. Without `owner` it is *borrowed*: valid only while
    whoever provided the DLTensor keeps it alive (e.g. during a C -> Python callback)."""
    addr = ctypes.cast(ptr, ctypes.c_void_p).value if not isinstance(ptr, int) else ptr
    if not addr:
        raise ArgumentError("from_dltensor: NULL DLTensor pointer")
    t = capi.DLTensor.from_address(addr)
    return _from_dl(t, owner, readonly, what="DLTensor")


def _from_dl(t: capi.DLTensor, owner: object, readonly: bool, what: str) -> NDArray:
    try:
        dtype = DataType.from_dl(t.dtype)
    except DataTypeError as exc:
        raise ArrayError(f"{what}: {exc}") from exc
    dev = Device.from_dl(t.device)
    ndim = int(t.ndim)
    if ndim < 0:
        raise ArrayError(f"{what}: negative ndim {ndim}")
    if ndim and not t.shape:
        raise ArrayError(f"{what}: ndim {ndim} with a NULL shape")
    shape = tuple(t.shape[i] for i in range(ndim))
    strides = tuple(t.strides[i] for i in range(ndim)) if (ndim and t.strides) else None
    data = (t.data or 0) + int(t.byte_offset)
    return NDArray(data, shape, dtype, dev, owner=owner, strides=strides, readonly=readonly,
                   borrowed=owner is None)


# --- DLPack: ctypes plumbing around PyCapsule -------------------------------------------------------------
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Capsule names must outlive every capsule: module-level constants.
_NAME = b"dltensor"
_NAME_USED = b"used_dltensor"
_NAME_V = b"dltensor_versioned"
_NAME_V_USED = b"used_dltensor_versioned"

# address of an exported managed tensor -> everything it keeps alive (struct, shape, strides, NDArray)
_EXPORTS: dict[int, tuple[Any, ...]] = {}
_EXPORTS_LOCK = threading.Lock()
_export_ids = itertools.count(1)


@capi.DLPackDeleter
def _managed_deleter(managed: int | None) -> None:
    """DLManagedTensor(Versioned).deleter of our exports: drop what the export kept alive."""
    with _EXPORTS_LOCK:
        _EXPORTS.pop(managed or 0, None)


_DESTRUCTOR_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_DESTRUCTOR_T
def _capsule_destructor(capsule: int | None) -> None:
    """Runs when one of our capsules dies; if no consumer took it (name unchanged), free the export."""
    for name in (_NAME, _NAME_V):
        if _api.PyCapsule_IsValid(capsule, name):
            _managed_deleter(_api.PyCapsule_GetPointer(capsule, name))
            return


_DELETER_ADDR = ctypes.cast(_managed_deleter, ctypes.c_void_p).value
_DESTRUCTOR_ADDR = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def _export(arr: NDArray, versioned: bool, readonly: bool, copied: bool) -> object:
    arr._check_host("__dlpack__")
    ndim = arr.ndim
    shape = (ctypes.c_int64 * max(ndim, 1))(*arr.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(arr.strides or _compact_strides(arr.shape)))
    managed: capi.DLManagedTensor | capi.DLManagedTensorVersioned
    if versioned:
        managed = capi.DLManagedTensorVersioned()
        managed.version.major = capi.DLPACK_MAJOR_VERSION
        managed.version.minor = capi.DLPACK_MINOR_VERSION
        managed.flags = (capi.DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0) | \
            (capi.DLPACK_FLAG_BITMASK_IS_COPIED if copied else 0)
    else:
        managed = capi.DLManagedTensor()
    t = managed.dl_tensor
    t.data = arr.data_ptr or None
    t.device = arr.device.to_dl()
    t.ndim = ndim
    dt = arr.datatype
    if dt.code == DLDataTypeCode.UINT and dt.bits == 1:  # one byte per element: say so the DLPack way
        dt = DataType(DLDataTypeCode.BOOL, 8, dt.lanes)
    t.dtype = dt.to_dl()
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.manager_ctx = next(_export_ids)
    managed.deleter = _DELETER_ADDR
    addr = ctypes.addressof(managed)
    with _EXPORTS_LOCK:
        _EXPORTS[addr] = (managed, shape, strides, arr, arr._owner)  # the owner outlives a free() of arr
    try:
        return _api.PyCapsule_New(addr, _NAME_V if versioned else _NAME, _DESTRUCTOR_ADDR)
    except BaseException:
        _managed_deleter(addr)
        raise


def _call_deleter(deleter: int, managed: int) -> None:
    capi.DLPackDeleter(deleter)(managed)


class _DLPackOwner:
    """Owns an imported DLManagedTensor: calls the producer's deleter when the last NDArray using it dies."""

    def __init__(self, managed: int, deleter: int | None, producer: object) -> None:
        self.producer = producer  # keeps e.g. a numpy array alive for introspection; memory is the tensor's
        if deleter:
            fin = weakref.finalize(self, _call_deleter, deleter, managed)
            fin.atexit = False


def _capsule_name(capsule: object) -> bytes | None:
    if type(capsule).__name__ != "PyCapsule":
        return None
    for name in (_NAME_V, _NAME):
        if _api.PyCapsule_IsValid(id(capsule), name):
            return name
    return None


def from_dlpack(obj: Any) -> NDArray:
    """An NDArray sharing memory with `obj`: anything with `__dlpack__` (numpy arrays, other frameworks'
    tensors, NDArray) or a raw "dltensor" capsule. Only host (CPU) memory can be imported."""
    if isinstance(obj, NDArray):
        return obj
    capsule = obj
    if type(obj).__name__ != "PyCapsule":
        if not hasattr(obj, "__dlpack__"):
            raise ArgumentError(f"from_dlpack: {type(obj).__name__} does not support DLPack (no __dlpack__)")
        if hasattr(obj, "__dlpack_device__"):
            dev_type, dev_id = obj.__dlpack_device__()
            if int(dev_type) != DLDeviceType.CPU:
                where = Device(int(dev_type), int(dev_id))
                raise ArrayError(f"from_dlpack: {type(obj).__name__} lives on {where}; "
                                 "only host (cpu) memory can be imported")
        try:
            capsule = obj.__dlpack__(max_version=(capi.DLPACK_MAJOR_VERSION, capi.DLPACK_MINOR_VERSION))
        except TypeError:  # a producer from before DLPack 1.0
            capsule = obj.__dlpack__()
    name = _capsule_name(capsule)
    if name is None:
        raise ArgumentError(f"from_dlpack: expected a DLPack capsule, got {type(capsule).__name__} "
                            "(a capsule can be consumed only once)")
    managed_addr = _api.PyCapsule_GetPointer(id(capsule), name)
    readonly = False
    if name == _NAME_V:
        m = capi.DLManagedTensorVersioned.from_address(managed_addr)
        if m.version.major != capi.DLPACK_MAJOR_VERSION:
            raise ArrayError(f"from_dlpack: DLPack major version {m.version.major} is not supported "
                             f"(this runtime speaks {capi.DLPACK_MAJOR_VERSION}.x)")
        readonly = bool(m.flags & capi.DLPACK_FLAG_BITMASK_READ_ONLY)
    else:
        m = capi.DLManagedTensor.from_address(managed_addr)
    if int(m.dl_tensor.device.device_type) != DLDeviceType.CPU:
        raise ArrayError(f"from_dlpack: tensor is on {Device.from_dl(m.dl_tensor.device)}; "
                         "only host (cpu) memory can be imported")
    owner = _DLPackOwner(managed_addr, m.deleter, obj)
    # From here the deleter is ours to call (the owner's finalizer does it): mark the capsule consumed.
    if _api.PyCapsule_SetName(capsule, _NAME_V_USED if name == _NAME_V else _NAME_USED) != 0:
        raise ArrayError("from_dlpack: could not mark the capsule as consumed")
    return _from_dl(m.dl_tensor, owner, readonly, what="from_dlpack")
