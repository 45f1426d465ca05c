"""Remote objects of an RPC session: functions, modules, tensors and time evaluators on the device.

They are handles: each call goes through the `utvm.rpc.client.Session` that made the object, which checks
that the object still belongs to the live session (see `Session.reconnect` and the session restarts after
link errors). Objects that hold device resources give them back with `free()`, `with`, or when they are
garbage collected (the release is then sent before the session's next request, never from the collector).
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from utvm.errors import ArgumentError, FunctionNotFoundError, RemoteProtocolError
from utvm.rpc.protocol import DLDataType, DLDevice, DLTensorRef
from utvm.runtime.typecodes import DLDataTypeCode

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


def c_contiguous(a: Any) -> Any:
    """`a` as a C-contiguous array of its own shape (np.ascontiguousarray would make a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


class RemoteFunction:
    """A function on the device; calling it runs it there. Arguments: int, float, str, bytes, None,
    RemoteNDArray, RemoteFunction, RemoteModule, DLDataType/DLDevice (or runtime DataType/Device)."""

    def __init__(self, session: Session, handle: int, name: str, owned: bool = False) -> None:
        self.session, self.handle, self.name = session, handle, name
        self._generation = session._generation
        self._freed = False
        # A handle a call returned (a time evaluator, a module function) is released with FreeHandle.
        self._finalizer = (
            weakref.finalize(self, session._defer_free_handle, handle, self._generation) if owned else None
        )

    def __call__(self, *args: Any) -> Any:
        if self._freed:
            raise ArgumentError(f"{self!r} was freed")
        self.session._check_generation(self._generation, f"function {self.name!r}")
        return self.session._call(self.handle, args, self.name)

    def free(self) -> None:
        """Release the device's handle now (FreeHandle) rather than when this object is collected."""
        if self._finalizer is not None and not self._freed:
            self._freed = True
            self._finalizer.detach()
            self.session._free_handle(self.handle, self._generation)

    def __repr__(self) -> str:
        return f"<RemoteFunction {self.name} handle=0x{self.handle:08x}>"


class TimeEvaluator:
    """A timer made by Session.time_evaluator: calling it with the function's arguments returns `repeat`
    mean seconds per call. It holds one of the device's time-evaluator slots until `free()` (or `with`,
    or garbage collection)."""

    def __init__(self, timer: RemoteFunction, repeat: int) -> None:
        self.timer, self.repeat = timer, repeat

    def __call__(self, *args: Any) -> list[float]:
        raw = self.timer(*args)
        if not isinstance(raw, bytes) or len(raw) != 8 * self.repeat:
            raise RemoteProtocolError(
                f"{self.timer.name} returned {raw!r:.60}, expected {self.repeat} doubles as bytes"
            )
        return list(struct.unpack(f"<{self.repeat}d", raw))

    def free(self) -> None:
        self.timer.free()

    def __enter__(self) -> TimeEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


class RemoteModule:
    """A module on the device (the system library, or one a function returned)."""

    def __init__(self, session: Session, handle: int, name: str = "module") -> None:
        self.session, self.handle, self.name = session, handle, name
        self._generation = session._generation

    def get_function(self, name: str, allow_missing: bool = False) -> RemoteFunction | None:
        sess = self.session
        sess._check_generation(self._generation, f"module {self.name}")
        getter = sess.get_function("tvm.rpc.server.ModuleGetFunction")
        f = getter(self, name, 0)
        if f is None:
            if allow_missing:
                return None
            raise FunctionNotFoundError(f"{self.name} on the device has no function {name!r}")
        if not isinstance(f, RemoteFunction):
            raise RemoteProtocolError(f"ModuleGetFunction({name!r}) returned {f!r}, not a function")
        f.name = f"{self.name}.{name}" if self.name != "module" else name
        return f

    def time_evaluator(self, name: str, **kwargs: Any) -> TimeEvaluator:
        return self.session.time_evaluator(name, module=self, **kwargs)

    def __repr__(self) -> str:
        return f"<RemoteModule {self.name} handle=0x{self.handle:08x}>"


class RemoteNDArray:
    """A tensor in device memory (allocated with DevAllocData, freed with DevFreeData).

    `numpy()` downloads it, `copyfrom(array)` uploads into it; both go in chunks that fit the negotiated
    maximum packet size. Free it with `free()` (or `with`); a dropped array is freed before the next request.
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
        self.shape = tuple(int(d) for d in shape)
        self.dl_dtype = dtype
        self.device = device
        self._generation = session._generation
        self._epoch = session._memory_epoch
        self._freed = not owned
        self._finalizer = weakref.finalize(self, session._defer_free, data, self._epoch) if owned else None

    @property
    def dtype(self) -> str:
        try:
            return str(numpy_dtype(self.dl_dtype))
        except ArgumentError:
            return f"dl({self.dl_dtype.code},{self.dl_dtype.bits},{self.dl_dtype.lanes})"

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dl_dtype.itemsize

    def tensor(self, byte_offset: int = 0) -> DLTensorRef:
        if self._freed and self._finalizer is not None:
            raise ArgumentError(f"{self!r} was freed")
        self.session._check_generation(self._generation, repr(self))
        self.session._check_epoch(self._epoch, repr(self))
        return DLTensorRef(self.data, self.device, self.dl_dtype, self.shape, byte_offset)

    def numpy(self) -> Any:
        import numpy as np

        out = np.empty(self.shape, dtype=numpy_dtype(self.dl_dtype))
        self.session._copy_from_remote(self, memoryview(out).cast("B") if out.nbytes else memoryview(b""))
        return out

    def copyfrom(self, source: Any) -> RemoteNDArray:
        import numpy as np

        src = c_contiguous(np.asarray(source, dtype=numpy_dtype(self.dl_dtype)))
        if src.shape != self.shape:
            raise ArgumentError(f"copyfrom: source shape {src.shape} does not match the remote array's {self.shape}")
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

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __repr__(self) -> str:
        return f"<RemoteNDArray shape={self.shape} dtype={self.dtype} data=0x{self.data:x}>"
