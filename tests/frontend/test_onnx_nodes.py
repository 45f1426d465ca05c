"""ONNX backend node tests (models/onnx/onnx_node_subset) through `from_onnx` + `run_reference`.

Every directory is tested; none is skipped. A directory whose op we support must match its stored
outputs and onnxruntime within 1e-5 relative / 1e-4 absolute. The others must be refused with a clear
error, and the exclusions are listed here, in one place:

- EXCLUDED: directories whose op utvm does not import (not in `SUPPORTED_OPS`), with the op and the
  reason; import must raise UnsupportedOperatorError naming the op, node 0 and the supported set;
- REFUSED: directories of a supported op whose variant utvm refuses, with the text the
  UnsupportedModelError must contain.

Each supported directory runs twice: "as_is" (every model input a runtime input, except where the op
needs a constant: then the import must say so) and "frozen" (inputs after the first turned into
constants, which exercises the constant paths: dense from Gemm/MatMul, OHWI weights, folding).
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx_helpers import NODE_TESTS, assert_close, load_data_set, ort_run, run_graph

from utvm.errors import UnsupportedModelError, UnsupportedOperatorError
from utvm.frontend.onnx import SUPPORTED_OPS, from_onnx

# --- the exclusions (one place) -----------------------------------------------------------------------
_NO_OP = "no canonical utvm op to map it to (see utvm.ops)"
# directory -> (its op, why utvm does not import that op); import must raise UnsupportedOperatorError
EXCLUDED: dict[str, tuple[str, str]] = {
    "test_div": ("Div", _NO_OP),
    "test_div_bcast": ("Div", _NO_OP),
    "test_div_example": ("Div", _NO_OP),
    "test_div_int32_trunc": ("Div", _NO_OP),
    "test_div_int8": ("Div", _NO_OP),
    "test_div_uint8": ("Div", _NO_OP),
    "test_elu": ("Elu", _NO_OP),
    "test_elu_default": ("Elu", _NO_OP),
    "test_elu_example": ("Elu", _NO_OP),
    "test_hardsigmoid": ("HardSigmoid", _NO_OP),
    "test_hardsigmoid_default": ("HardSigmoid", _NO_OP),
    "test_hardsigmoid_example": ("HardSigmoid", _NO_OP),
    "test_hardswish": ("HardSwish", _NO_OP),
    "test_leakyrelu": ("LeakyRelu", _NO_OP),
    "test_leakyrelu_default": ("LeakyRelu", _NO_OP),
    "test_leakyrelu_example": ("LeakyRelu", _NO_OP),
    "test_logsoftmax_axis_0": ("LogSoftmax", _NO_OP),
    "test_logsoftmax_axis_1": ("LogSoftmax", _NO_OP),
    "test_logsoftmax_axis_2": ("LogSoftmax", _NO_OP),
    "test_logsoftmax_default_axis": ("LogSoftmax", _NO_OP),
    "test_logsoftmax_example_1": ("LogSoftmax", _NO_OP),
    "test_logsoftmax_large_number": ("LogSoftmax", _NO_OP),
    "test_logsoftmax_negative_axis": ("LogSoftmax", _NO_OP),
    "test_lrn": ("LRN", _NO_OP),
    "test_lrn_default": ("LRN", _NO_OP),
    "test_max_example": ("Max", _NO_OP),
    "test_max_float32": ("Max", _NO_OP),
    "test_max_float64": ("Max", _NO_OP),
    "test_max_int32": ("Max", _NO_OP),
    "test_max_int64": ("Max", _NO_OP),
    "test_max_int8": ("Max", _NO_OP),
    "test_max_one_input": ("Max", _NO_OP),
    "test_max_two_inputs": ("Max", _NO_OP),
    "test_max_uint8": ("Max", _NO_OP),
    "test_min_example": ("Min", _NO_OP),
    "test_min_float32": ("Min", _NO_OP),
    "test_min_float64": ("Min", _NO_OP),
    "test_min_int32": ("Min", _NO_OP),
    "test_min_int64": ("Min", _NO_OP),
    "test_min_int8": ("Min", _NO_OP),
    "test_min_one_input": ("Min", _NO_OP),
    "test_min_two_inputs": ("Min", _NO_OP),
    "test_min_uint8": ("Min", _NO_OP),
    "test_prelu_broadcast": ("PRelu", _NO_OP),
    "test_prelu_example": ("PRelu", _NO_OP),
}
_INT_ARITH = "integer arithmetic on unquantized tensors is not supported"
REFUSED: dict[str, str] = {
    "test_add_int8": _INT_ARITH,
    "test_add_uint8": _INT_ARITH,
    "test_sub_int8": _INT_ARITH,
    "test_sub_uint8": _INT_ARITH,
    "test_mul_int8": _INT_ARITH,
    "test_mul_uint8": _INT_ARITH,
    "test_maxpool_2d_uint8": "has dtype uint8; MaxPool supports float32, int8",
    "test_dropout_default_mask": "the Dropout mask output 'z' is not supported",
    "test_dropout_default_mask_ratio": "the Dropout mask output 'z' is not supported",
    "test_edge_pad": "has dtype int32; Pad supports float32",
    "test_reflect_pad": "has dtype int32; Pad supports float32",
}
# ops whose non-data inputs must be constants (the "as_is" run must refuse them as runtime inputs)
CONST_INPUT_OPS = {"Reshape", "Clip", "Pad", "Squeeze", "Unsqueeze", "ReduceMean", "QuantizeLinear",
                   "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}
_STATIC = "utvm's int8 path needs static scales and requantizes to int8"
_ASYMMETRIC = "take symmetric weights"
# quantized ops (utvm.frontend._onnx_quant) whose conformance case utvm refuses even with every input but the
# first frozen, with the text the UnsupportedModelError must contain: the cases test variants (asymmetric
# weights, per-axis activations, int32 accumulators) outside the int8 path
QUANT_REFUSED: dict[str, str] = {
    "test_convinteger_with_padding": _STATIC,
    "test_convinteger_without_padding": _STATIC,
    "test_matmulinteger": _STATIC,
    "test_dequantizelinear_axis": "per-axis quantization of the input (activations) is not supported",
    "test_quantizelinear_axis": "per-axis quantization of the output (activations) is not supported",
    "test_qlinearconv": _ASYMMETRIC,
    "test_qlinearmatmul_2D_int8_float32": _ASYMMETRIC,
    "test_qlinearmatmul_2D_uint8_float32": _ASYMMETRIC,
    "test_qlinearmatmul_3D_int8_float32": "must be a constant matrix",
    "test_qlinearmatmul_3D_uint8_float32": "must be a constant matrix",
}


@functools.cache
def _model(name: str) -> onnx.ModelProto:
    return onnx.load(str(NODE_TESTS / name / "model.onnx"))


def _ops_of(name: str) -> tuple[str, ...]:
    return tuple(n.op_type for n in _model(name).graph.node)


def _n_inputs(name: str) -> int:
    return len(_model(name).graph.input)


def _dirs() -> list[str]:
    if not NODE_TESTS.is_dir():
        return []
    return sorted(p.name for p in NODE_TESTS.iterdir() if (p / "model.onnx").is_file())


ALL = _dirs()
SUPPORTED = [d for d in ALL if d not in EXCLUDED and d not in REFUSED and d not in QUANT_REFUSED]


def _case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    d = NODE_TESTS / name
    model = onnx.load(str(d / "model.onnx"))
    inputs, outputs = load_data_set(d / "test_data_set_0")
    names = [i.name for i in model.graph.input]
    return model, dict(zip(names, inputs, strict=True)), outputs


def test_the_corpus_is_there_and_fully_classified() -> None:
    assert len(ALL) == 214, f"expected the 214 node tests of models/MANIFEST.md in {NODE_TESTS}, found {len(ALL)}"
    not_supported = sorted(d for d in ALL if any(op not in SUPPORTED_OPS for op in _ops_of(d)))
    assert not_supported == sorted(EXCLUDED), "EXCLUDED must list exactly the directories of unsupported ops"
    assert all(_ops_of(d) == (op,) for d, (op, _) in EXCLUDED.items())
    assert set(REFUSED) <= set(ALL) and set(QUANT_REFUSED) <= set(ALL)
    assert all(op in SUPPORTED_OPS for d in REFUSED for op in _ops_of(d)), "REFUSED is for supported ops only"
    # the ops the issue lists must all be supported
    issue_ops = {"Conv", "Gemm", "MatMul", "Add", "Mul", "Relu", "MaxPool", "AveragePool",
                 "GlobalAveragePool", "Reshape", "Flatten", "Softmax", "BatchNormalization", "Concat",
                 "Transpose", "Clip"}
    assert issue_ops <= set(SUPPORTED_OPS)
    assert len(SUPPORTED) >= 140


@pytest.mark.parametrize("name", SUPPORTED)
def test_node_as_is(name: str) -> None:
    model, feeds, expected = _case(name)
    op = _ops_of(name)[0]
    if op in CONST_INPUT_OPS and len(feeds) > 1:
        with pytest.raises(UnsupportedModelError, match="must be a constant"):
            from_onnx(model)
        return
    graph = from_onnx(model)
    assert list(graph.inputs) == list(feeds), "graph inputs keep the model's names and order"
    assert list(graph.outputs) == [o.name for o in model.graph.output]
    for name_in, x in feeds.items():
        t = graph.tensors[name_in]
        assert (t.shape, t.dtype) == (x.shape, str(x.dtype)), f"input {name_in!r} keeps the model's layout"
    got = run_graph(graph, feeds)
    assert_close(got, expected, f"{name} vs stored outputs")
    assert_close(got, ort_run(model, feeds), f"{name} vs onnxruntime")


FROZEN = [d for d in SUPPORTED if _n_inputs(d) > 1]


@pytest.mark.parametrize("name", FROZEN)
def test_node_frozen(name: str) -> None:
    model, feeds, expected = _case(name)
    first, *rest = feeds
    graph = from_onnx(model, freeze={k: feeds[k] for k in rest})
    assert list(graph.inputs) == [first]
    assert_close(run_graph(graph, feeds), expected, f"{name} (frozen) vs stored outputs")


@pytest.mark.parametrize("name", sorted(EXCLUDED))
def test_node_unsupported_op(name: str) -> None:
    model, _, _ = _case(name)
    op = EXCLUDED[name][0]
    with pytest.raises(UnsupportedOperatorError) as info:
        from_onnx(model)
    err = info.value
    assert (err.op, err.node) == (op, 0)
    assert f"unsupported operator {op!r} at node 0" in str(err)
    assert "Conv" in err.supported and "Gemm" in err.supported, "the message lists the supported set"


@pytest.mark.parametrize("name", sorted(QUANT_REFUSED))
def test_node_quantized_variant_refused(name: str) -> None:
    model, feeds, _ = _case(name)
    if _ops_of(name)[0] in CONST_INPUT_OPS and len(feeds) > 1:  # as is: the scales are runtime inputs
        with pytest.raises(UnsupportedModelError, match="must be a constant|static scales"):
            from_onnx(model)
    first, *rest = feeds
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(model, freeze={k: feeds[k] for k in rest})
    assert QUANT_REFUSED[name] in str(info.value) and "node 0" in str(info.value)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_node_refused_variant(name: str) -> None:
    model, _, _ = _case(name)
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(model)
    assert not isinstance(info.value, UnsupportedOperatorError)
    assert REFUSED[name] in str(info.value)
    assert "node 0" in str(info.value), "the message names the node"
