"""`utvm.nd`: NDArray construction, as in `utvm.nd.array(np_array, utvm.runtime.cpu(0))`."""

from __future__ import annotations

from utvm.runtime.ndarray import NDArray, array, empty, from_dlpack, from_dltensor, numpy_dtype

__all__ = ["NDArray", "array", "empty", "from_dlpack", "from_dltensor", "numpy_dtype"]
