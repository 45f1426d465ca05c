"""Bad input to from_tflite: every case raises ModelFormatError or UnsupportedModelError (never a parser
traceback), and the message names the thing at fault (file, tensor, operator, node index)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from utvm.support.models import models_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.errors import (  # noqa: E402
    ModelError,
    ModelFormatError,
    UnsupportedModelError,
    UnsupportedOperatorError,
)
from utvm.frontend import from_tflite  # noqa: E402
from utvm.frontend.tflite import SUPPORTED_OPERATORS  # noqa: E402
from utvm.ir import run_reference  # noqa: E402

MODELS = models_dir()
KWS = MODELS / "mlperf_tiny" / "kws_ref_model.tflite"


def relu_model(dtype: str = "int8", shape=(1, 4), signature=None, type_code=None, code: str = "RELU") -> bytes:  # noqa: ANN001
    b = TFLiteBuilder()
    q = {"scale": 0.1, "zero_point": 0} if dtype != "float32" else {}
    x = b.tensor("in", shape, dtype, shape_signature=signature, type_code=type_code, **q)
    y = b.tensor("out", shape, dtype, type_code=type_code, **q)
    b.op(code, [x], [y])
    return b.build([x], [y])


# --- not a model / truncated / corrupt ---------------------------------------------------------------------
def test_empty_and_foreign_bytes() -> None:
    with pytest.raises(ModelFormatError, match="only 0 bytes"):
        from_tflite(b"")
    onnx_bytes = (MODELS / "onnx" / "mnist-8" / "model.onnx").read_bytes()
    with pytest.raises(ModelFormatError, match="file identifier"):
        from_tflite(onnx_bytes)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match="nope.tflite"):
        from_tflite(tmp_path / "nope.tflite")


def test_truncated_files_are_format_errors() -> None:
    data = KWS.read_bytes()
    # (the file's last 4 bytes are padding nothing refers to: cutting only them leaves a complete model)
    cuts = sorted({8, 12, 16, 24, 32, 64, 100, 256, 1000, *range(2000, len(data), 1931), len(data) - 5})
    for cut in cuts:
        with pytest.raises(ModelFormatError, match="truncated or corrupt|bytes") as err:
            from_tflite(data[:cut])
        assert "TFLite" in str(err.value) or "bytes" in str(err.value), cut


def test_corrupt_bytes_never_escape_as_other_exceptions() -> None:
    """Random byte changes: the import either succeeds (and the graph then runs or is refused with a
    ModelError) or raises a ModelError; nothing else escapes."""
    data = bytearray(KWS.read_bytes())
    rng = np.random.default_rng(11)
    outcomes = {"imported": 0, "refused": 0, "ran": 0}
    for _ in range(150):
        bad = bytearray(data)
        # flips in the flatbuffer's tables (the first and the last 2 KiB hold offsets, tables and scales)
        region = rng.choice([0, len(data) - 2048])
        for pos in rng.integers(region, region + 2048, rng.integers(1, 6)):
            bad[max(8, int(pos))] = int(rng.integers(0, 256))
        try:
            g = from_tflite(bytes(bad))
            outcomes["imported"] += 1
        except ModelError as exc:
            assert str(exc)
            outcomes["refused"] += 1
            continue
        if all(g.tensors[n].size < 100_000 for n in g.inputs):
            try:
                run_reference(g, {n: np.zeros(g.tensors[n].shape, g.tensors[n].dtype) for n in g.inputs})
                outcomes["ran"] += 1
            except ModelError:
                pass
    assert outcomes["refused"] > 0 and outcomes["ran"] > 0


def test_operator_with_out_of_range_tensor_index() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "int8", scale=0.1, zero_point=0)
    y = b.tensor("y", (1, 4), "int8", scale=0.1, zero_point=0)
    b.op("RELU", [x], [y])
    b._ops[0]["inputs"] = [7]
    with pytest.raises(ModelFormatError, match="operator 0 input 0 refers to tensor 7; the subgraph has 2"):
        from_tflite(b.build([x], [y]))


def test_operator_with_out_of_range_opcode() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "int8", scale=0.1, zero_point=0)
    y = b.tensor("y", (1, 4), "int8", scale=0.1, zero_point=0)
    b.op("RELU", [x], [y])
    b._ops[0]["opcode"] = 5
    with pytest.raises(ModelFormatError, match="operator 0 uses opcode index 5"):
        from_tflite(b.build([x], [y]))


# --- unsupported but well-formed ---------------------------------------------------------------------------
def test_unsupported_operator_names_op_node_and_supported_set() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "float32")
    y = b.tensor("y", (1, 4), "float32")
    z = b.tensor("z", (1, 4), "float32")
    b.op("RELU", [x], [y])
    b.op("LSH_PROJECTION", [y], [z])
    with pytest.raises(UnsupportedOperatorError) as err:
        from_tflite(b.build([x], [z]))
    e = err.value
    assert e.op == "LSH_PROJECTION" and e.node == 1
    msg = str(e)
    assert "'LSH_PROJECTION'" in msg and "node 1" in msg and "CONV_2D" in msg and "FULLY_CONNECTED" in msg
    assert set(e.supported) == set(SUPPORTED_OPERATORS)


def test_custom_operator_is_named() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "float32")
    y = b.tensor("y", (1, 4), "float32")
    b.custom_op("MyFancyOp", [x], [y])
    with pytest.raises(UnsupportedOperatorError, match="CUSTOM:MyFancyOp.*node 0"):
        from_tflite(b.build([x], [y]))


@pytest.mark.parametrize(("type_code", "type_name"), [(1, "FLOAT16"), (5, "STRING"), (8, "COMPLEX64"),
                                                      (18, "BFLOAT16")])
def test_unsupported_tensor_type_names_tensor_and_type(type_code: int, type_name: str) -> None:
    with pytest.raises(UnsupportedModelError, match=f"tensor 'in' .*{type_name}.*supported tensor types"):
        from_tflite(relu_model("float32", type_code=type_code))


def test_uint8_activations_are_refused_naming_node_and_tensor() -> None:
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(relu 'out'\).*'in' has dtype uint8"):
        from_tflite(relu_model("uint8"))


def test_dynamic_shape_is_refused_naming_the_tensor() -> None:
    with pytest.raises(UnsupportedModelError, match=r"tensor 'in' has a dynamic shape.*\[1, -1\]"):
        from_tflite(relu_model(shape=(1, 4), signature=(1, -1)))


def test_dynamic_batch_is_imported_as_one() -> None:
    g = from_tflite(relu_model(shape=(1, 4), signature=(-1, 4)))
    assert g.tensors["in"].shape == (1, 4)


def test_fused_tanh_activation_is_refused() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "float32")
    z = b.tensor("z", (1, 4), "float32")
    y = b.tensor("y", (1, 4), "float32")
    b.op("ADD", [x, z], [y], "AddOptions", FusedActivationFunction=4)
    with pytest.raises(UnsupportedModelError, match="operator 0 .ADD.: fused activation TANH"):
        from_tflite(b.build([x, z], [y]))


def test_hybrid_fully_connected_is_refused() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 8), "float32")
    w = b.tensor("w", (4, 8), "int8", data=np.ones((4, 8)), scale=0.1, zero_point=0)
    y = b.tensor("y", (1, 4), "float32")
    b.op("FULLY_CONNECTED", [x, w, -1], [y], "FullyConnectedOptions")
    with pytest.raises(UnsupportedModelError, match="hybrid model: operator 0 .FULLY_CONNECTED. applies int8 weights"):
        from_tflite(b.build([x], [y]))


def test_non_constant_paddings_are_refused() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "float32")
    p = b.tensor("p", (2, 2), "int32")
    y = b.tensor("y", (1, 6), "float32")
    b.op("PAD", [x, p], [y])
    with pytest.raises(UnsupportedModelError, match="operator 0: paddings 'p' must be a constant"):
        from_tflite(b.build([x, p], [y]))


def test_inconsistent_output_shape_names_the_node() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "float32")
    z = b.tensor("z", (1, 4), "float32")
    y = b.tensor("y", (1, 5), "float32")
    b.op("ADD", [x, z], [y], "AddOptions")
    with pytest.raises(UnsupportedModelError, match=r"node 0 \(add 'y'\): output 'y' is declared float32\[1, 5\]"):
        from_tflite(b.build([x, z], [y]))


def test_constant_buffer_of_wrong_size_names_the_tensor() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "float32")
    c = b.tensor("c", (1, 4), "float32", data=np.ones(4, np.float32))
    y = b.tensor("y", (1, 4), "float32")
    b.op("ADD", [x, c], [y], "AddOptions")
    b._tensors[c]["shape"] = [1, 5]
    b._tensors[y]["shape"] = [1, 5]
    with pytest.raises(ModelFormatError, match="tensor 'c': buffer 1 holds 16 bytes"):
        from_tflite(b.build([x], [y]))
