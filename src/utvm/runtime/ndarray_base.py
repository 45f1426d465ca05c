"""NDArrayBase: the tensor interface every backend's arrays share (docs/architecture.md §3).

`utvm.runtime.NDArray` (host memory, the `local` backend) and `utvm.rpc.RemoteNDArray` (device memory
over an RPC session) both derive from it, so code that takes an array works with either:

    arr.shape, arr.dtype ("float32"), arr.datatype (DataType), arr.device (Device), arr.ndim, arr.size,
    arr.nbytes, arr.numpy() (a host copy), arr.copyfrom(numpy array or any NDArrayBase), arr.copyto(other),
    arr.free() (give the memory back now; later use raises ArgumentError), arr.freed, `with arr: ...`,
    np.asarray(arr)

Every NDArrayBase is passed to a PackedFunc as a DLTensor (type code 7); the backend of the function
decides whether it can take that array (a host array cannot go to a device, nor a device array to C
code in this process) and says so naming the function and the argument. This module does not import
numpy; `numpy()` and `__array__` of the subclasses do.
"""

from __future__ import annotations

import abc
from typing import Any

from utvm.errors import ArgumentError
from utvm.runtime.datatype import DataType
from utvm.runtime.device import Device


class NDArrayBase(abc.ABC):
    """A tensor of some backend. Subclasses give shape, datatype, device, numpy, copyfrom and free."""

    __slots__ = ()

    # --- description -----------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """The dimensions, a tuple of ints."""

    @property
    @abc.abstractmethod
    def datatype(self) -> DataType:
        """The element type as a DataType."""

    @property
    @abc.abstractmethod
    def device(self) -> Device:
        """Where the memory is, as the owning runtime names it (a device's own memory is its cpu(0))."""

    @property
    def dtype(self) -> str:
        """The element type as a string ("float32"); `datatype` gives the DataType."""
        return str(self.datatype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.datatype.itemsize

    # --- contents --------------------------------------------------------------------------------------
    @abc.abstractmethod
    def numpy(self) -> Any:
        """A copy of the contents as a numpy array (in host memory)."""

    def asnumpy(self) -> Any:
        return self.numpy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    @abc.abstractmethod
    def copyfrom(self, source: Any) -> NDArrayBase:
        """Copy `source` (an NDArrayBase of any backend, a numpy array or a nested sequence) into this
        array; returns self. The source's shape must match."""

    def copyto(self, target: Any) -> NDArrayBase:
        """Copy into `target`, an array of any backend; returns the target."""
        if isinstance(target, NDArrayBase):
            return target.copyfrom(self)
        raise ArgumentError(f"copyto: target must be an NDArray, got {type(target).__name__}")

    # --- life time -------------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def freed(self) -> bool:
        """True once `free()` released the memory; using the array then raises ArgumentError."""

    @abc.abstractmethod
    def free(self) -> None:
        """Release the memory now rather than when the array is collected. Idempotent."""

    def __enter__(self) -> NDArrayBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()
