"""NDArray: numpy copies, DLPack zero-copy exchange in both directions, lifetimes and bad input."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import utvm.nd as nd
from utvm.errors import ArgumentError, ArrayError
from utvm.runtime import DataType, cpu, ext_dev
from utvm.runtime import ndarray as ndmod

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64", "bool",
          "complex64"]


def _sample(dtype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2, size=shape) if dtype == "bool" else rng.integers(-50, 50, size=shape)
    return values.astype(dtype)


# --- numpy ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_array_numpy_round_trip(dtype: str) -> None:
    src = _sample(dtype)
    a = nd.array(src)
    assert a.shape == (2, 3) and a.dtype == dtype and a.datatype == DataType(dtype) and a.device == cpu(0)
    out = a.numpy()
    assert out.dtype == src.dtype and np.array_equal(out, src)
    src[0, 0] = 1  # array() copied: the NDArray is independent of its source
    out[0, 1] = 1  # numpy() copied: the result is independent of the NDArray
    assert np.array_equal(a.numpy(), _sample(dtype))


def test_array_from_lists_and_dtype() -> None:
    a = nd.array([[1, 2], [3, 4]], dtype="int8")
    assert a.dtype == "int8" and a.numpy().tolist() == [[1, 2], [3, 4]]
    assert nd.array([1.5]).dtype == "float64"
    assert nd.array(np.float32(3)).shape == ()
    b = nd.array(a, dtype="int32")
    assert b.dtype == "int32" and b.numpy().tolist() == [[1, 2], [3, 4]]
    assert np.asarray(a).tolist() == [[1, 2], [3, 4]]  # __array__


def test_empty_is_aligned_and_sized() -> None:
    for shape in [(), (0,), (1,), (3, 5), (7, 1, 2)]:
        a = nd.empty(shape, "float32")
        assert a.shape == shape and a.data_ptr % ndmod.ALIGNMENT == 0
        assert a.nbytes == 4 * a.size and a.ndim == len(shape)
    assert nd.empty(4, "int8").shape == (4,)


def test_copyfrom_and_copyto() -> None:
    a = nd.empty((2, 2), "int32")
    assert a.copyfrom(np.array([[1, 2], [3, 4]])) is a
    assert a.numpy().tolist() == [[1, 2], [3, 4]]
    b = nd.empty((2, 2), "int32").copyfrom(a)
    assert b.numpy().tolist() == [[1, 2], [3, 4]]
    c = a.copyto(cpu(0))
    assert c.data_ptr != a.data_ptr and c.numpy().tolist() == [[1, 2], [3, 4]]
    d = nd.empty((2, 2), "int32")
    assert a.copyto(d) is d and d.numpy().tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ArgumentError, match="copyto: target must be"):
        a.copyto("cpu")  # type: ignore[arg-type]


def test_copyfrom_shape_mismatch_names_both_shapes() -> None:
    a = nd.empty((2, 3), "float32")
    with pytest.raises(ArrayError, match=r"source shape \(3, 2\) does not match array shape \(2, 3\)"):
        a.copyfrom(np.zeros((3, 2)))
    with pytest.raises(ArrayError, match="cannot convert"):
        a.copyfrom([["x", "y", "z"], ["a", "b", "c"]])


def test_vector_lanes_become_trailing_axis() -> None:
    a = nd.empty((2,), "float32x4")
    assert a.nbytes == 32
    a.copyfrom(np.arange(8, dtype="float32").reshape(2, 4))
    assert a.numpy().shape == (2, 4) and a.numpy()[1, 3] == 7.0
    with pytest.raises(ArrayError, match="float32x4"):
        nd.array(np.zeros(3), dtype="float32x4")


def test_types_without_numpy_equivalent() -> None:
    a = nd.empty((8,), "uint1")
    assert a.nbytes == 8
    with pytest.raises(ArrayError, match="uint1 has no numpy equivalent"):
        a.numpy()
    assert nd.empty((2,), "bfloat16").numpy().dtype == np.uint16  # raw bits


def test_bad_inputs() -> None:
    with pytest.raises(ArrayError, match=r"no local memory for ext_dev\(0\)"):
        nd.array(np.zeros(2), ext_dev(0))
    with pytest.raises(ArgumentError, match="negative dimension"):
        nd.empty((2, -1))
    with pytest.raises(ArgumentError, match="shape must be a sequence"):
        nd.empty("big")
    with pytest.raises(ArgumentError, match="device must be a utvm Device"):
        nd.empty((1,), "int8", "cpu")  # type: ignore[arg-type]
    with pytest.raises(ArrayError, match="no DataType equivalent"):
        nd.array(np.array(["a", "b"]))


def test_handle_describes_the_array() -> None:
    a = nd.array(np.arange(6, dtype="int16").reshape(2, 3))
    t = a.handle.contents
    assert t.data == a.data_ptr and t.ndim == 2 and [t.shape[0], t.shape[1]] == [2, 3]
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (0, 16, 1)
    assert (t.device.device_type, t.device.device_id) == (1, 0) and not t.strides and t.byte_offset == 0
    view = nd.from_dltensor(a.handle)  # a borrowed view of the same memory
    assert view.data_ptr == a.data_ptr and np.array_equal(view.numpy(), a.numpy())
    with pytest.raises(ArgumentError, match="NULL DLTensor"):
        nd.from_dltensor(0)


# --- DLPack: utvm -> numpy --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_dlpack_shares_memory(dtype: str) -> None:
    a = nd.array(_sample(dtype))
    view = np.from_dlpack(a)
    assert view.dtype == np.dtype(dtype) and np.array_equal(view, a.numpy())
    assert view.ctypes.data == a.data_ptr  # no copy
    view[1, 2] = view[0, 0]
    assert a.numpy()[1, 2] == view[0, 0]


@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 0, 3), (1, 2, 3, 4)])
def test_dlpack_shapes(shape: tuple[int, ...]) -> None:
    src = np.arange(int(np.prod(shape)), dtype="float32").reshape(shape)
    a = nd.array(src)
    assert np.array_equal(np.from_dlpack(a), src)
    assert np.array_equal(nd.from_dlpack(np.from_dlpack(a)).numpy(), src)


def test_capsule_kinds_and_device() -> None:
    before = set(ndmod._EXPORTS)
    a = nd.array(np.zeros(3, "float32"))
    assert a.__dlpack_device__() == (1, 0)
    assert '"dltensor"' in repr(a.__dlpack__())
    assert '"dltensor_versioned"' in repr(a.__dlpack__(max_version=(1, 0)))
    assert '"dltensor"' in repr(a.__dlpack__(max_version=(0, 8)))
    with pytest.raises(BufferError, match="cannot export"):
        a.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream"):
        a.__dlpack__(stream=1)
    gc.collect()
    assert set(ndmod._EXPORTS) == before  # unconsumed capsules released their exports


def test_dlpack_copy_flag() -> None:
    a = nd.array(np.arange(3, dtype="int32"))
    b = np.from_dlpack(a, copy=True)
    b[0] = 99
    assert a.numpy()[0] == 0


def test_export_keeps_the_producer_alive() -> None:
    before = set(ndmod._EXPORTS)
    a = nd.array(np.arange(1000, dtype="int64"))
    view = np.from_dlpack(a)
    del a
    gc.collect()
    assert len(ndmod._EXPORTS) == len(before) + 1  # the export still holds the NDArray
    np.testing.assert_array_equal(view, np.arange(1000))
    del view
    gc.collect()
    assert set(ndmod._EXPORTS) == before  # numpy called our deleter


# --- DLPack: numpy -> utvm --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dlpack_numpy_shares_memory(dtype: str) -> None:
    src = _sample(dtype)
    a = nd.from_dlpack(src)
    assert a.dtype == dtype and a.shape == src.shape and a.data_ptr == src.ctypes.data
    src[0, 0] = src[1, 1]
    assert a.numpy()[0, 0] == src[1, 1]
    a.copyfrom(np.zeros_like(src))
    assert not src.any()


@pytest.mark.parametrize("make", [
    lambda x: x[:, ::2], lambda x: x.T, lambda x: x[::-1], lambda x: x[1:, 1:], lambda x: x[..., 1],
], ids=["step", "transpose", "reversed", "offset", "column"])
def test_from_dlpack_strided_views(make) -> None:  # noqa: ANN001
    base = np.arange(24, dtype="float32").reshape(4, 6)
    src = make(base)
    a = nd.from_dlpack(src)
    assert a.shape == src.shape
    np.testing.assert_array_equal(a.numpy(), src)
    np.testing.assert_array_equal(np.from_dlpack(a), src)  # and back out, strides included


def test_from_dlpack_read_only() -> None:
    src = np.arange(4)
    src.flags.writeable = False
    a = nd.from_dlpack(src)
    assert a.readonly
    with pytest.raises(ArrayError, match="read-only"):
        a.copyfrom(np.zeros(4))
    back = np.from_dlpack(a)  # versioned export carries the read-only flag
    assert not back.flags.writeable and np.array_equal(back, src)
    with pytest.raises(BufferError, match="read-only"):
        a.__dlpack__()


def test_import_keeps_the_source_alive() -> None:
    src = np.arange(100, dtype="int32")
    a = nd.from_dlpack(src)
    del src
    gc.collect()
    np.testing.assert_array_equal(a.numpy(), np.arange(100))


def test_import_calls_the_producer_deleter() -> None:
    before = set(ndmod._EXPORTS)
    producer = nd.array(np.arange(5, dtype="int32"))
    imported = nd.from_dlpack(producer.__dlpack__())  # our own capsule, consumed by our consumer
    assert len(ndmod._EXPORTS) == len(before) + 1
    np.testing.assert_array_equal(imported.numpy(), np.arange(5))
    del imported
    gc.collect()
    assert set(ndmod._EXPORTS) == before


def test_round_trip_without_copies() -> None:
    a = nd.array(np.arange(6, dtype="float32"))
    b = nd.from_dlpack(np.from_dlpack(a))
    assert b.data_ptr == a.data_ptr
    b.copyfrom(np.full(6, 2, "float32"))
    assert a.numpy().tolist() == [2.0] * 6
    assert nd.from_dlpack(a) is a


def test_legacy_only_producer() -> None:
    src = np.arange(3, dtype="int8")

    class Legacy:
        def __dlpack__(self) -> object:  # no keyword arguments: a pre-1.0 producer
            return src.__dlpack__()

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    a = nd.from_dlpack(Legacy())
    assert a.numpy().tolist() == [0, 1, 2] and a.data_ptr == src.ctypes.data


def test_from_dlpack_bad_inputs() -> None:
    with pytest.raises(ArgumentError, match="list does not support DLPack"):
        nd.from_dlpack([1, 2])

    class OnGpu:
        def __dlpack__(self, **kw: object) -> object:
            raise AssertionError("must not be asked for a capsule")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 0)

    with pytest.raises(ArrayError, match=r"cuda\(0\); only host"):
        nd.from_dlpack(OnGpu())
    capsule = np.arange(2).__dlpack__()
    nd.from_dlpack(capsule)
    with pytest.raises(ArgumentError, match="consumed only once"):
        nd.from_dlpack(capsule)
    not_dlpack = ctypes.pythonapi.PyCapsule_New
    not_dlpack.restype = ctypes.py_object
    with pytest.raises(ArgumentError, match="expected a DLPack capsule"):
        nd.from_dlpack(not_dlpack(ctypes.c_void_p(8), b"other", None))


# --- the shared array interface (NDArrayBase) and free() ----------------------------------------------------
def test_ndarray_is_an_ndarray_base() -> None:
    from utvm.runtime import NDArrayBase

    a = nd.array(np.arange(6, dtype="int16").reshape(2, 3))
    assert isinstance(a, NDArrayBase)
    assert (a.shape, a.dtype, a.datatype, a.device, a.ndim, a.size, a.nbytes) == \
        ((2, 3), "int16", DataType("int16"), cpu(0), 2, 6, 12)
    np.testing.assert_array_equal(np.asarray(a), a.asnumpy())


def test_free_makes_the_array_unusable() -> None:
    a = nd.array(np.arange(4, dtype="float32"))
    assert not a.freed
    with a:
        pass
    assert a.freed and "freed" in repr(a)
    a.free()  # idempotent
    for use in (a.numpy, lambda: a.handle, lambda: a.copyfrom(np.zeros(4, "float32")), a.__dlpack__,
                lambda: np.from_dlpack(a)):
        with pytest.raises(ArgumentError, match="was freed"):
            use()


def test_views_and_exports_outlive_free() -> None:
    src = np.arange(1000, dtype="float32")
    a = nd.array(src)
    view = np.from_dlpack(a)  # zero copy: shares a's memory
    capsule_holder = nd.from_dlpack(a.__dlpack__())  # an export consumed by another NDArray
    a.free()
    del a
    gc.collect()
    junk = [np.full(1000, -1.0, dtype="float32") for _ in range(50)]  # reuse freed memory if any was freed
    np.testing.assert_array_equal(view, src)
    np.testing.assert_array_equal(capsule_holder.numpy(), src)
    del junk
