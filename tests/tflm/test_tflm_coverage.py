"""Coverage of TensorFlow Lite Micro's operators: every builtin TFLM registers imports and has a C kernel,
or is refused on purpose with its reason; the same for TFLM's custom ops.

TFLM_BUILTINS is what `tools/tflm_builtins.py` reports for tflite-micro 0.dev20261023 (each builtin alone
in a model, handed to TFLM's interpreter): 100 builtins.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.compiler.kernels import supported_ops  # noqa: E402
from utvm.errors import UnsupportedOperatorError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.frontend.tflite import OUT_OF_SCOPE, SUPPORTED_OPERATORS  # noqa: E402
from utvm.ops import OP_MODULES  # noqa: E402

TFLM_BUILTINS = (
    "ABS", "ADD", "ADD_N", "ARG_MAX", "ARG_MIN", "ASSIGN_VARIABLE", "AVERAGE_POOL_2D", "BATCH_MATMUL",
    "BATCH_TO_SPACE_ND", "BROADCAST_ARGS", "BROADCAST_TO", "CALL_ONCE", "CAST", "CEIL", "CONCATENATION",
    "CONV_2D", "COS", "CUMSUM", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE", "DEQUANTIZE", "DIV",
    "DYNAMIC_UPDATE_SLICE", "ELU", "EMBEDDING_LOOKUP", "EQUAL", "EXP", "EXPAND_DIMS", "FILL", "FLOOR",
    "FLOOR_DIV", "FLOOR_MOD", "FULLY_CONNECTED", "GATHER", "GATHER_ND", "GREATER", "GREATER_EQUAL",
    "HARD_SWISH", "IF", "L2_NORMALIZATION", "L2_POOL_2D", "LEAKY_RELU", "LESS", "LESS_EQUAL", "LOG",
    "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR", "LOGISTIC", "LOG_SOFTMAX", "MAXIMUM", "MAX_POOL_2D", "MEAN",
    "MINIMUM", "MIRROR_PAD", "MUL", "NEG", "NOT_EQUAL", "PACK", "PAD", "PADV2", "PRELU", "QUANTIZE",
    "READ_VARIABLE", "REDUCE_ALL", "REDUCE_MAX", "REDUCE_MIN", "RELU", "RELU6", "RESHAPE", "RESIZE_BILINEAR",
    "RESIZE_NEAREST_NEIGHBOR", "REVERSE_V2", "ROUND", "RSQRT", "SELECT_V2", "SHAPE", "SIN", "SLICE",
    "SOFTMAX", "SPACE_TO_BATCH_ND", "SPACE_TO_DEPTH", "SPLIT", "SPLIT_V", "SQRT", "SQUARE",
    "SQUARED_DIFFERENCE", "SQUEEZE", "STRIDED_SLICE", "SUB", "SUM", "SVDF", "TANH", "TRANSPOSE",
    "TRANSPOSE_CONV", "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNPACK", "VAR_HANDLE", "WHILE", "ZEROS_LIKE",
)
# TFLM's custom ops (registered by name): the detection post-process and the signal library
TFLM_CUSTOM = ("TFLite_Detection_PostProcess", "SignalWindow", "SignalFftAutoScale", "SignalRfft", "SignalIrfft",
               "SignalEnergy", "SignalFilterBank", "SignalFilterBankSquareRoot",
               "SignalFilterBankSpectralSubtraction", "SignalFilterBankLog", "SignalPCAN", "SignalFramer",
               "SignalStacker", "SignalDelay", "SignalOverlapAdd")


def coverage() -> tuple[list[str], list[str], list[str]]:
    """(supported, refused on purpose, missing) TFLM operators, builtins then custom ops."""
    names = list(TFLM_BUILTINS) + [f"CUSTOM:{c}" for c in TFLM_CUSTOM]
    supported = [n for n in names if n in SUPPORTED_OPERATORS]
    refused = [n for n in names if n in OUT_OF_SCOPE]
    missing = [n for n in names if n not in supported and n not in refused]
    return supported, refused, missing


def test_every_tflm_operator_is_supported_or_refused_with_a_reason() -> None:
    supported, refused, missing = coverage()
    total = len(TFLM_BUILTINS) + len(TFLM_CUSTOM)
    print(f"TFLM operators supported: {len(supported)} / {total} ({len(refused)} out of scope: "
          f"{', '.join(refused)})")
    assert refused == ["ASSIGN_VARIABLE", "CALL_ONCE", "IF", "READ_VARIABLE", "VAR_HANDLE", "WHILE"]
    assert not missing, f"TFLM operators without a converter: {missing}"


def test_every_imported_op_has_reference_semantics_and_a_kernel() -> None:
    kernels = set(supported_ops())
    assert set(OP_MODULES) <= kernels, f"ops without a C kernel: {sorted(set(OP_MODULES) - kernels)}"


@pytest.mark.parametrize("code", ["VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "IF", "WHILE"])
def test_out_of_scope_operators_are_refused_with_the_reason(code: str) -> None:
    b = TFLiteBuilder()
    x, y = b.tensor("x", (1,), "float32"), b.tensor("y", (1,), "float32")
    b.op(code, [x], [y])
    with pytest.raises(UnsupportedOperatorError, match=f"'{code}' at node 0: resource variables and control flow "
                                                       "are out of scope"):
        from_tflite(b.build([x], [y]))


def test_ethos_u_is_refused_with_the_reason() -> None:
    b = TFLiteBuilder()
    x, y = b.tensor("x", (1,), "int8", scale=1.0), b.tensor("y", (1,), "int8", scale=1.0)
    b.custom_op("ethos-u", [x], [y])
    with pytest.raises(UnsupportedOperatorError, match="Ethos-U NPU command streams"):
        from_tflite(b.build([x], [y]))
