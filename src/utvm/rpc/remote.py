"""Remote objects of an RPC session: functions, modules, tensors and time evaluators on the device.

They are the `rpc` backend's side of the runtime's shared interface (docs/architecture.md §3): RemoteFunction IS-A
`utvm.runtime.PackedFunc` (it overrides the invoke hook, so arguments are converted and checked by
`utvm.runtime.convert_arg` exactly as for the local backend; `__call__` is overridden only to add, to
convert_arg's error for a str holding a NUL, the byte the device would cut it at), RemoteModule IS-A
`utvm.runtime.Module`
(it overrides only the lookup hook), RemoteNDArray IS-A `utvm.runtime.NDArrayBase`, and TimeEvaluator is
the runtime's. Code written against those types runs on either backend.

They are handles: each call goes through the `utvm.rpc.client.Session` that made the object, which checks
that the object still belongs to the live session (see `Session.reconnect` and the session restarts after
link errors). Objects that hold device resources give them back with `free()`, `with`, or when they are
garbage collected (the release is then sent before the session's next request, never from the collector).
While the session is out of step (a request failed between its write and its reply) `free()` sends nothing:
an array's memory is freed by the device when the next session starts, and a function handle's release is
sent after that restart.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from utvm.errors import ArgumentError, DataTypeError, RemoteProtocolError
from utvm.rpc.protocol import DLDataType, DLDevice, DLTensorRef
from utvm.runtime.backend import TimeEvaluator
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device
from utvm.runtime.module import Module
from utvm.runtime.ndarray_base import NDArrayBase
from utvm.runtime.packed_func import PackedFunc
from utvm.runtime.typecodes import DLDataTypeCode, TypeCode

if TYPE_CHECKING:
    from utvm.rpc.client import Session

__all__ = ["CPU", "RemoteFunction", "RemoteModule", "RemoteNDArray", "TimeEvaluator"]

CPU = DLDevice(1, 0)  # the device's memory as the CRT names it (kDLCPU, 0)


def dl_dtype(dtype: Any) -> DLDataType:
    """A DLDataType from a DLDataType, a runtime DataType, a numpy dtype or a dtype string."""
    if isinstance(dtype, DLDataType):
        return dtype
    if all(hasattr(dtype, a) for a in ("code", "bits", "lanes")):
        return DLDataType(int(dtype.code), int(dtype.bits), int(dtype.lanes))
    import numpy as np

    try:
        npd = np.dtype(dtype)
    except TypeError as exc:
        raise ArgumentError(f"cannot use {dtype!r} as a tensor dtype: {exc}") from exc
    kinds = {
        "f": DLDataTypeCode.FLOAT,
        "i": DLDataTypeCode.INT,
        "u": DLDataTypeCode.UINT,
        "b": DLDataTypeCode.BOOL,
    }
    if npd.kind not in kinds or npd.shape != ():
        raise ArgumentError(f"tensor dtype {npd} has no DLPack equivalent here (use int/uint/float/bool)")
    return DLDataType(int(kinds[npd.kind]), npd.itemsize * 8, 1)


def numpy_dtype(dt: DLDataType) -> Any:
    import numpy as np

    names = {
        DLDataTypeCode.FLOAT: "f",
        DLDataTypeCode.INT: "i",
        DLDataTypeCode.UINT: "u",
        DLDataTypeCode.BOOL: "b",
    }
    if dt.lanes != 1 or dt.code not in names or dt.bits % 8:
        raise ArgumentError(f"tensor dtype (code {dt.code}, bits {dt.bits}, lanes {dt.lanes}) has no numpy equivalent")
    if dt.code == DLDataTypeCode.BOOL:
        return np.dtype(np.bool_)
    return np.dtype(f"<{names[DLDataTypeCode(dt.code)]}{dt.bits // 8}")


def brief_repr(s: str, limit: int = 40) -> str:
    """repr(s), cut to about `limit` characters with an ellipsis (error messages stay one readable line)."""
    if len(s) <= limit:
        return repr(s)
    r = repr(s[: limit - 8])
    return f"{r[:-1]}\u2026{r[-1]} ({len(s):,} characters)"


def nul_byte(s: str) -> int:
    """The byte offset of the first NUL in the UTF-8 form of `s`, -1 if none: where the device, which reads
    strings as C strings, would cut it."""
    nul = s.find("\0")
    return nul if nul <= 0 else len(s[:nul].encode("utf-8", errors="surrogatepass"))


def c_string_problem(s: str, label: str) -> str:
    """Why the device, reading C strings (UTF-8 up to the first NUL), would not see `s` (the `label`) as it
    is; "" if it would."""
    pos = nul_byte(s)
    if pos >= 0:
        return (
            f"{label} holds a NUL character at byte {pos}; the device reads it as a C string and would see "
            f"only {brief_repr(s[: s.find(chr(0))])}"
        )
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{label} cannot be encoded as UTF-8 (character {exc.start} is a lone surrogate)"
    return ""


def c_contiguous(a: Any) -> Any:
    """`a` as a C-contiguous array of its own shape (np.ascontiguousarray would make a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


class RemoteFunction(PackedFunc):
    """A function on the device; calling it runs it there. It takes what every PackedFunc takes (int,
    float, str, bytes, None, DataType, Device, arrays, functions, modules); arrays, functions and modules
    must be this session's (RemoteNDArray, RemoteFunction, RemoteModule), anything else is refused with an
    ArgumentError naming the function and the argument."""

    array_hint = "upload numpy arrays to the device with session.array(...)"

    def __init__(self, session: Session, handle: int, name: str, owned: bool = False) -> None:
        super().__init__(None, name)
        self.session, self.handle = session, handle
        self._generation = session._generation
        self._freed = False
        # A handle a call returned (a time evaluator, a module function) is released with FreeHandle.
        self._finalizer = (
            weakref.finalize(self, session._defer_free_handle, handle, self._generation) if owned else None
        )

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    def _invoke(self, args: list[tuple[TypeCode, Any]]) -> Any:
        if self._freed:
            raise ArgumentError(f"{self!r} was freed")
        session = self.session
        if self._generation != session._generation:
            session._check_generation(self._generation, f"function {self._name!r}")  # raises
        return session._call(self.handle, args, self._name)

    def free(self) -> None:
        """Release the device's handle now (FreeHandle) rather than when this object is collected."""
        if self._finalizer is not None and not self._freed:
            self._freed = True
            self._finalizer.detach()
            self.session._free_handle(self.handle, self._generation)

    def __repr__(self) -> str:
        return f"<RemoteFunction {self._name} handle=0x{self.handle:08x}>"


class RemoteModule(Module):
    """A module on the device (the system library, or one a function returned)."""

    type_key = "rpc"

    def __init__(self, session: Session, handle: int, name: str = "module") -> None:
        self.session, self.handle, self.name = session, handle, name
        self._generation = session._generation

    def _get_function(self, name: str, query_imports: bool) -> PackedFunc | None:
        sess = self.session
        sess._check_generation(self._generation, f"module {self.name}")
        if "\0" in name:
            return None
        getter = sess.get_function("tvm.rpc.server.ModuleGetFunction")
        assert getter is not None
        f = getter(self, name, int(query_imports))
        if f is None:
            return None
        if not isinstance(f, RemoteFunction):
            raise RemoteProtocolError(f"ModuleGetFunction({name!r}) returned {f!r}, not a function")
        f.name = f"{self.name}.{name}" if self.name != "module" else name
        return f

    def _not_found(self, name: str) -> str:
        return f"{self.name} on the device has no function {name!r}"

    def time_evaluator(self, name: str, **kwargs: Any) -> TimeEvaluator:
        return self.session.time_evaluator(name, module=self, **kwargs)

    def __repr__(self) -> str:
        return f"<RemoteModule {self.name} handle=0x{self.handle:08x}>"


class RemoteNDArray(NDArrayBase):
    """A tensor in device memory (allocated with DevAllocData, freed with DevFreeData).

    `numpy()` downloads it, `copyfrom(array)` uploads into it; both go in chunks that fit the negotiated
    maximum packet size. Free it with `free()` (or `with`); a dropped array is freed before the next request.
    `device` is the device's own memory as its CRT names it (cpu(0)); `dl_dtype`/`dl_device` are the wire forms.
    """

    def __init__(
        self,
        session: Session,
        data: int,
        shape: Sequence[int],
        dtype: DLDataType,
        device: DLDevice = CPU,
        owned: bool = True,
    ) -> None:
        self.session = session
        self.data = data
        self._shape = tuple(int(d) for d in shape)
        self.dl_dtype = dl_dtype(dtype)
        self.dl_device = device if isinstance(device, DLDevice) else DLDevice(device.device_type, device.device_id)
        self._generation = session._generation
        self._epoch = session._memory_epoch
        self._freed = not owned
        self._finalizer = weakref.finalize(self, session._defer_free, data, self._epoch) if owned else None

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def datatype(self) -> DataType:
        dt = self.dl_dtype
        return DataType(dt.code, dt.bits, dt.lanes)

    @property
    def dtype(self) -> str:
        try:
            return str(self.datatype)
        except DataTypeError:
            return f"dl({self.dl_dtype.code},{self.dl_dtype.bits},{self.dl_dtype.lanes})"

    @property
    def device(self) -> Device:
        return Device(self.dl_device.device_type, self.dl_device.device_id)

    @property
    def nbytes(self) -> int:
        return self.size * self.dl_dtype.itemsize

    @property
    def freed(self) -> bool:
        """True after `free()` of an array this session allocated (arrays a call returned are borrowed)."""
        return self._freed and self._finalizer is not None

    def tensor(self, byte_offset: int = 0) -> DLTensorRef:
        if self.freed:
            raise ArgumentError(f"{self!r} was freed")
        session = self.session
        if self._generation != session._generation:
            session._check_generation(self._generation, repr(self))  # raises
        if self._epoch != session._memory_epoch:
            session._check_epoch(self._epoch, repr(self))  # raises
        return DLTensorRef(self.data, self.dl_device, self.dl_dtype, self._shape, byte_offset)

    def numpy(self) -> Any:
        import numpy as np

        out = np.empty(self._shape, dtype=numpy_dtype(self.dl_dtype))
        self.session._copy_from_remote(self, memoryview(out).cast("B") if out.nbytes else memoryview(b""))
        return out

    def copyfrom(self, source: Any) -> RemoteNDArray:
        """Upload `source` (a numpy array, an array of any backend, or a nested sequence) into this array."""
        import numpy as np

        if isinstance(source, NDArrayBase):
            source = source.numpy()
        src = c_contiguous(np.asarray(source, dtype=numpy_dtype(self.dl_dtype)))
        if src.shape != self._shape:
            raise ArgumentError(f"copyfrom: source shape {src.shape} does not match the remote array's {self._shape}")
        self.session._copy_to_remote(self, memoryview(src).cast("B") if src.nbytes else memoryview(b""))
        return self

    def free(self) -> None:
        if not self._freed:
            self._freed = True
            if self._finalizer is not None:
                self._finalizer.detach()
            self.session._free_data(self.data, self._epoch)

    def __enter__(self) -> RemoteNDArray:
        return self

    def __repr__(self) -> str:
        return f"<RemoteNDArray shape={self._shape} dtype={self.dtype} data=0x{self.data:x}>"
