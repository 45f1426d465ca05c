"""Size limits at import (utvm.limits): both importers refuse a tensor the generated C cannot index
(elements or bytes over 2**31 - 1, absurd ranks, overflow-prone and negative dims) or the host cannot hold
(UTVM_HOST_MEMORY_BUDGET, per tensor and summed), whatever kind of tensor it is (graph input, graph output,
intermediate, constant), before allocating anything of that size, in one line naming the tensor, its
shape, the count and the limit.

Over-limit models here declare tensors of terabytes: if a check were missing, numpy would fail to allocate
them at once (MemoryError, which the tests would report) rather than exhaust the machine.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tflite_builder import TFLiteBuilder
from utvm import limits
from utvm.errors import ModelError, ModelFormatError, UnsupportedModelError, UtvmError
from utvm.frontend import from_onnx, from_tflite

LIMIT = 2**31 - 1
ITEMSIZE = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "int32": 4, "float32": 4, "int64": 8}
ONNX_TYPES = {"float32": TensorProto.FLOAT, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
              "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
              "bool": TensorProto.BOOL}
KINDS = ("input", "output", "intermediate", "constant")


@pytest.fixture(autouse=True)
def _default_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(limits.HOST_MEMORY_BUDGET_ENV, raising=False)


def _shape_text(shape: tuple[int, ...]) -> str:
    return re.escape(limits.format_shape(shape))


# --- model builders: one tensor of the kind under test has `shape`, every other tensor is small ------------
def _tflite(kind: str, dtype: str, shape: tuple[int, ...], const_bytes: bytes = bytes(16)) -> bytes:
    """The tensor named `big` has `shape`. TFLite shapes are declared, and the importer checks the whole tensor
    table before converting a single operator, so the other tensors need not agree with it."""
    b = TFLiteBuilder()
    small = (1,)
    if kind == "input":
        x, y = b.tensor("big", shape, dtype), b.tensor("y", small, dtype)
        b.op("RESHAPE", [x], [y])
    elif kind == "output":
        x, y = b.tensor("x", small, dtype), b.tensor("big", shape, dtype)
        b.op("RESHAPE", [x], [y])
    elif kind == "intermediate":
        x, t, y = b.tensor("x", small, dtype), b.tensor("big", shape, dtype), b.tensor("y", small, dtype)
        b.op("RESHAPE", [x], [t])
        b.op("RESHAPE", [t], [y])
    else:
        x, y = b.tensor("x", small, dtype), b.tensor("y", small, dtype)
        c = b.tensor("big", shape, dtype)
        b._buffers.append(const_bytes)  # a (short) buffer the builder's own size check would refuse
        b._tensors[c]["buffer"] = len(b._buffers) - 1
        b.op("ADD", [x, c], [y], "AddOptions", FusedActivationFunction=0)
    return b.build(inputs=[x], outputs=[y])


def _raw_tensor(name: str, elem_type: int, shape: tuple[int, ...], raw: bytes) -> onnx.TensorProto:
    """A TensorProto declaring `shape` over `raw` (helper.make_tensor would refuse a short buffer)."""
    t = onnx.TensorProto(name=name, data_type=elem_type, raw_data=raw)
    t.dims.extend(shape)
    return t


def _onnx(kind: str, dtype: str, shape: tuple[int, ...], const_bytes: bytes = bytes(16)) -> bytes:
    """The ONNX value named `big` has `shape`; intermediates and outputs get it from shape inference
    (Concat of a graph input with itself: the input has half the first dimension)."""
    et = ONNX_TYPES[dtype]
    half = (shape[0] // 2, *shape[1:])
    nodes, inits = [], []
    if kind == "input":
        ins, outs = {"big": shape}, {"y": shape}
        nodes.append(helper.make_node("Identity", ["big"], ["y"]))
    elif kind == "output":
        ins, outs = {"x": half}, {"big": shape}
        nodes.append(helper.make_node("Concat", ["x", "x"], ["big"], axis=0))
    elif kind == "intermediate":
        ins, outs = {"x": half}, {"y": (shape[0] * 2, *shape[1:])}
        nodes.append(helper.make_node("Concat", ["x", "x"], ["big"], axis=0))
        nodes.append(helper.make_node("Concat", ["big", "big"], ["y"], axis=0))
    else:
        ins, outs = {"x": (1,)}, {"y": shape}
        inits.append(_raw_tensor("big", et, shape, const_bytes))
        nodes.append(helper.make_node("Add", ["x", "big"], ["y"]))
    graph = helper.make_graph(nodes, "limits", [helper.make_tensor_value_info(k, et, v) for k, v in ins.items()],
                              [helper.make_tensor_value_info(k, et, v) for k, v in outs.items()], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def _tflite_reshape(shape: tuple[int, ...], dtype: str) -> bytes:
    """big -> RESHAPE -> y of the same shape: a consistent model."""
    b = TFLiteBuilder()
    x, y = b.tensor("big", shape, dtype), b.tensor("y", shape, dtype)
    b.op("RESHAPE", [x], [y])
    return b.build(inputs=[x], outputs=[y])


IMPORTERS = {"tflite": (_tflite, from_tflite), "onnx": (_onnx, from_onnx)}


def _supported(importer: str, kind: str, dtype: str) -> bool:
    """ONNX moves only float32/int8 through Concat, so other dtypes reach an intermediate/output only as
    a graph input or constant."""
    return importer == "tflite" or kind in ("input", "constant") or dtype in ("float32", "int8")


def _cases(dtypes: tuple[str, ...]) -> list:
    return [pytest.param(imp, kind, dt, id=f"{imp}-{kind}-{dt}") for imp in IMPORTERS for kind in KINDS
            for dt in dtypes if _supported(imp, kind, dt)]


def _import(importer: str, kind: str, dtype: str, shape: tuple[int, ...], **kw: bytes) -> None:
    build, load = IMPORTERS[importer]
    load(build(kind, dtype, shape, **kw))


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


# --- element count ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("importer,kind,dtype", _cases(("int8", "uint8", "bool")))
def test_element_count_over_the_limit_is_refused(importer: str, kind: str, dtype: str) -> None:
    shape = (2, 2**30)  # 2**31 elements of one byte: one element (and byte) over
    with pytest.raises(UnsupportedModelError) as exc:
        _import(importer, kind, dtype, shape)
    msg = _one_line(exc)
    assert re.search(rf"tensor 'big' {dtype}{_shape_text(shape)} has {2**31} elements, over the limit of "
                     rf"{LIMIT} \(MAX_TENSOR_ELEMENTS", msg), msg


@pytest.mark.parametrize("importer,kind,dtype", [c for c in _cases(("int8", "float32")) if not (
    c.values[0] == "onnx" and c.values[1] in ("output", "intermediate"))])  # ONNX: see the fold tests below
def test_a_terabyte_tensor_is_refused_before_anything_is_allocated(importer: str, kind: str, dtype: str) -> None:
    shape = (2**20, 2**20)  # 2**40 elements
    with pytest.raises(UnsupportedModelError, match=rf"tensor 'big' {dtype}{_shape_text(shape)} has {2**40} "
                                                    "elements, over the limit"):
        _import(importer, kind, dtype, shape)


@pytest.mark.parametrize("importer", IMPORTERS)
@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("where", ["below", "at", "above"])
def test_the_limit_is_exact(monkeypatch: pytest.MonkeyPatch, importer: str, dtype: str, where: str) -> None:
    """The largest tensor of a dtype (2**31 - 1 one-byte elements, (2**31 - 1) // 4 float32s) imports;
    one element more is refused. The host budget is raised: nothing is allocated for inputs/outputs."""
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, str(2**40))
    largest = LIMIT // ITEMSIZE[dtype]
    n = {"below": largest - 1, "at": largest, "above": largest + 1}[where]
    shape = (n,) if n <= LIMIT else (2, n // 2)  # TFLite dims are int32
    if importer == "tflite":
        model = _tflite_reshape(shape, dtype)
    else:
        model = _onnx("input", dtype, shape)
    load = IMPORTERS[importer][1]
    if where == "above":
        what = "elements" if ITEMSIZE[dtype] == 1 else "bytes"
        with pytest.raises(UnsupportedModelError, match=rf"tensor 'big' .* over the limit of {LIMIT} "
                                                        rf"(bytes )?\(MAX_TENSOR_{what.upper()}") as exc:
            load(model)
        _one_line(exc)
    else:
        g = load(model)
        assert g.tensors["big"].shape == shape


# --- bytes -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("importer,kind,dtype", _cases(("int16", "int32", "float32", "int64")))
def test_bytes_over_the_limit_with_few_elements_of_a_wide_dtype(importer: str, kind: str, dtype: str) -> None:
    n = 2**31 // ITEMSIZE[dtype]  # 2**31 bytes: one over; far fewer than 2**31 - 1 elements
    shape = (2, n // 2)
    with pytest.raises(UnsupportedModelError) as exc:
        _import(importer, kind, dtype, shape)
    msg = _one_line(exc)
    assert re.search(rf"tensor 'big' {dtype}{_shape_text(shape)} is {2**31} bytes \({n} elements of "
                     rf"{ITEMSIZE[dtype]} bytes\), over the limit of {LIMIT} bytes \(MAX_TENSOR_BYTES", msg), msg


# --- the host memory budget ----------------------------------------------------------------------------------
@pytest.mark.parametrize("importer,kind,dtype", _cases(("int8", "int32", "float32")))
def test_a_tensor_over_the_host_budget_is_refused(monkeypatch: pytest.MonkeyPatch, importer: str, kind: str,
                                                  dtype: str) -> None:
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, "4096")
    shape = (2, 4096 // ITEMSIZE[dtype])  # 8 KiB; ONNX computes it from an input of 4 KiB
    nbytes = 8192
    with pytest.raises(UnsupportedModelError) as exc:
        _import(importer, kind, dtype, shape, const_bytes=bytes(nbytes))
    msg = _one_line(exc)
    assert re.search(rf"tensor 'big' {dtype}{_shape_text(shape)} is {nbytes} bytes, over the host memory "
                     rf"budget of 4096 bytes \(set UTVM_HOST_MEMORY_BUDGET", msg), msg


@pytest.mark.parametrize("importer", IMPORTERS)
def test_the_sum_of_a_models_tensors_is_held_to_the_host_budget(monkeypatch: pytest.MonkeyPatch,
                                                               importer: str) -> None:
    """Three tensors of 2 KiB each: each fits a 5 KiB budget, together they do not."""
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, "5120")
    shape = (2048,)
    if importer == "tflite":
        b = TFLiteBuilder()
        x, t, y = (b.tensor(n, shape, "int8", scale=0.1, zero_point=0) for n in ("x", "t", "y"))
        b.op("RELU", [x], [t])
        b.op("RELU", [t], [y])
        model = b.build(inputs=[x], outputs=[y])
    else:
        nodes = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
        graph = helper.make_graph(nodes, "sum", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(UnsupportedModelError, match=r"tensor 'y' .*: the 3 tensors of .* so far need 6144 bytes, "
                                                    r"over the host memory budget of 5120 bytes") as exc:
        IMPORTERS[importer][1](model)
    _one_line(exc)
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, "6144")
    assert IMPORTERS[importer][1](model).tensors["y"].nbytes == 2048


def test_the_budget_variable_must_be_a_byte_count(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _tflite("input", "int8", (4,))
    for bad in ("lots", "-1", "0", "1.5"):
        monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, bad)
        with pytest.raises(UtvmError, match=rf"UTVM_HOST_MEMORY_BUDGET='{re.escape(bad)}' is not a positive"):
            from_tflite(model)
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, " 0x1000 ")
    assert limits.host_memory_budget() == 4096


# --- overflow-prone, negative and absurd shapes ---------------------------------------------------------------
@pytest.mark.parametrize("shape,count", [
    ((65536, 65536, 65536, 65536), 2**64),            # the int64 product wraps to 0
    ((65536, 65536, 65536, 65536, 3), 3 * 2**64),     # ... to 0 again
    ((LIMIT, LIMIT, LIMIT), LIMIT**3),                # int32 dims, product far past int64
    ((0, 1, 1), None),                                # no elements is fine...
], ids=["2^64", "3*2^64", "limit^3", "empty"])
@pytest.mark.parametrize("importer", IMPORTERS)
def test_shape_products_do_not_overflow(importer: str, shape: tuple[int, ...], count: int | None) -> None:
    if count is None:
        g = from_tflite(_tflite_reshape(shape, "int8")) if importer == "tflite" else from_onnx(
            _onnx("input", "int8", shape))
        assert g.tensors["big"].size == 0
        return
    with pytest.raises(UnsupportedModelError, match=rf"tensor 'big' int8{_shape_text(shape)} has {count} elements"):
        _import(importer, "input", "int8", shape)


@pytest.mark.parametrize("importer", IMPORTERS)
def test_int64_dims_past_the_limit(importer: str) -> None:
    """ONNX dims are int64: [2**32, 2**32] has 2**64 elements (0 in int64), and [0, 2**40] none at all, but
    its extent 2**40 would still be a loop bound. TFLite dims are int32: the largest one is fine alone."""
    if importer == "onnx":
        with pytest.raises(UnsupportedModelError, match=r"tensor 'big' int8\[4294967296, 4294967296\] has "
                                                        r"dimension 4294967296 \(axis 0\), over the limit"):
            from_onnx(_onnx("input", "int8", (2**32, 2**32)))
        with pytest.raises(UnsupportedModelError, match=r"\[0, 1099511627776\] has dimension 1099511627776 "
                                                        r"\(axis 1\)"):
            from_onnx(_onnx("input", "int8", (0, 2**40)))
    else:
        g = from_tflite(_tflite_reshape((0, LIMIT), "int8"))
        assert g.tensors["big"].shape == (0, LIMIT)


@pytest.mark.parametrize("importer,kind", [(i, k) for i in IMPORTERS for k in KINDS if not (
    i == "onnx" and k in ("output", "intermediate"))])  # ONNX infers those: they cannot be declared negative
def test_negative_dims_are_refused_naming_the_tensor(importer: str, kind: str) -> None:
    with pytest.raises(ModelError, match=r"'big'.*(dynamic shape|negative dimension).*-1") as exc:
        _import(importer, kind, "int8", (-1, -1))
    _one_line(exc)


@pytest.mark.parametrize("importer", IMPORTERS)
def test_absurd_ranks_are_refused(importer: str) -> None:
    shape = (1,) * 100
    with pytest.raises(UnsupportedModelError, match=r"tensor 'big' int8\[1, 1, 1, 1, 1, 1, 1, 1, \.\.\. \(100 dims\)\] "
                                                    r"has rank 100, over the limit of 32 \(MAX_TENSOR_RANK\)"):
        _import(importer, "input", "int8", shape)
    g = IMPORTERS[importer][1](IMPORTERS[importer][0]("input", "int8", (1,) * 32))
    assert len(g.tensors["big"].shape) == 32


# --- ONNX: constants made at import ---------------------------------------------------------------------------
def _onnx_model(nodes: list, inputs: dict, outputs: dict, inits: list | None = None) -> bytes:
    graph = helper.make_graph(nodes, "fold",
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
                              inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def test_onnx_broadcasting_fold_is_checked_before_numpy_computes_it() -> None:
    """[2**20, 1] + [1, 2**20] of constants would be a 4 TiB array."""
    a = onnx.numpy_helper.from_array(np.zeros((2**20, 1), np.float32), "a")
    b = onnx.numpy_helper.from_array(np.zeros((1, 2**20), np.float32), "b")
    nodes = [helper.make_node("Add", ["a", "b"], ["big"]), helper.make_node("Add", ["x", "big"], ["y"])]
    model = _onnx_model(nodes, {"x": [1]}, {"y": [2**20, 2**20]}, [a, b])
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(Add\): tensor 'big' float32\[1048576, 1048576\] has "
                                                    rf"{2**40} elements, over the limit") as exc:
        from_onnx(model)
    _one_line(exc)


def test_onnx_concat_fold_of_one_constant_many_times_is_checked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.HOST_MEMORY_BUDGET_ENV, str(1 << 20))
    a = onnx.numpy_helper.from_array(np.zeros((1, 1024), np.float32), "a")
    nodes = [helper.make_node("Concat", ["a"] * 1000, ["big"], axis=0), helper.make_node("Add", ["x", "big"], ["y"])]
    model = _onnx_model(nodes, {"x": [1]}, {"y": [1000, 1024]}, [a])
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(Concat\): tensor 'big' float32\[1000, 1024\] is "
                                                    r"4096000 bytes, over the host memory budget"):
        from_onnx(model)


def test_onnx_constant_node_is_checked_before_it_is_decoded() -> None:
    value = _raw_tensor("v", TensorProto.FLOAT, (2**20, 2**20), bytes(16))
    nodes = [helper.make_node("Constant", [], ["big"], value=value), helper.make_node("Add", ["x", "big"], ["y"])]
    model = _onnx_model(nodes, {"x": [1]}, {"y": [2**20, 2**20]})
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(Constant\) attribute 'value': tensor 'big' "
                                                    r"float32\[1048576, 1048576\] has"):
        from_onnx(model)


def test_onnx_initializer_with_a_short_buffer_is_a_format_error() -> None:
    """Within the limits, a buffer that does not hold the declared shape is an inconsistent file."""
    with pytest.raises(ModelFormatError, match=r"name: big\) raw_data size \(16 bytes\) is too small"):
        from_onnx(_onnx("constant", "float32", (4, 4), const_bytes=bytes(16)))


def test_onnx_external_data_is_not_read_for_a_model_given_as_bytes(tmp_path) -> None:  # noqa: ANN001
    t = helper.make_tensor("big", TensorProto.FLOAT, [4], bytes(16), raw=True)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="weights.bin")
    graph = helper.make_graph([helper.make_node("Add", ["x", "big"], ["y"])], "ext",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [t])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (tmp_path / "weights.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    with pytest.raises(ModelFormatError, match=r"initializer 'big' keeps its data in the external file "
                                               r"'weights.bin'"):
        from_onnx(model.SerializeToString())
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    g = from_onnx(path)  # from its path, the data beside it is read
    assert g.tensors["big"].data.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_onnx_external_data_is_size_checked_before_it_is_read(tmp_path) -> None:  # noqa: ANN001
    t = _raw_tensor("big", TensorProto.FLOAT, (2**20, 2**20), b"")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="weights.bin")
    graph = helper.make_graph([helper.make_node("Add", ["x", "big"], ["y"])], "ext",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**20, 2**20])], [t])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (tmp_path / "weights.bin").write_bytes(bytes(16))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(UnsupportedModelError, match=r"external data: tensor 'big' float32\[1048576, 1048576\] has"):
        from_onnx(path)
