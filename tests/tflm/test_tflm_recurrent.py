"""Recurrent (stateful) ops against TFLite Micro: SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM.

Every case runs several input sets in a row without a reset: the state streams from set to set in TFLM's
interpreter, utvm's reference interpreter and the generated C (the state block in the workspace), and every
set's outputs must match TFLM (bit-exact for integer models, FLOAT_RTOL for float).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tflite_builder import TFLiteBuilder  # noqa: E402
from tflm_harness import Case, check_cases  # noqa: E402
from utvm.errors import GraphError, UnsupportedModelError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir.verify import verify  # noqa: E402

N_SETS = 4  # input sets in a row: the state must stream across them


# --- SVDF ------------------------------------------------------------------------------------------------------

def svdf_model(dtype: str = "float32", state: str = "int16", *, batch: int = 2, inputs: int = 5, filters: int = 6,
               memory: int = 4, rank: int = 2, bias: bool = True, act: int = 0, seed: int = 0,
               state_zp: int = 0, in_dtype: str | None = None) -> bytes:
    """SVDF [batch, inputs] -> [batch, filters / rank]; `state` is the activation state's (and weights_time's)
    integer type for an int8 model."""
    rng = np.random.default_rng(seed)
    units = filters // rank
    b = TFLiteBuilder()
    if dtype == "float32":
        x = b.tensor("x", (batch, inputs), "float32")
        wf = b.tensor("wf", (filters, inputs), "float32", data=rng.uniform(-0.5, 0.5, (filters, inputs)))
        wt = b.tensor("wt", (filters, memory), "float32", data=rng.uniform(-0.5, 0.5, (filters, memory)))
        bb = b.tensor("b", (units,), "float32", data=rng.uniform(-1, 1, units)) if bias else -1
        st = b.tensor("state", (batch, filters * memory), "float32", is_variable=True)
        y = b.tensor("y", (batch, units), "float32")
    else:
        s_state, s_wt = 0.02, 0.003 if state == "int16" else 0.01
        x = b.tensor("x", (batch, inputs), in_dtype or "int8", scale=0.05, zero_point=3)
        wf = b.tensor("wf", (filters, inputs), "int8", data=rng.integers(-127, 128, (filters, inputs)), scale=0.004)
        lim = 3000 if state == "int16" else 127
        wt = b.tensor("wt", (filters, memory), state, data=rng.integers(-lim, lim + 1, (filters, memory)), scale=s_wt)
        bb = b.tensor("b", (units,), "int32", data=rng.integers(-3000, 3000, units),
                      scale=float(np.float32(s_state) * np.float32(s_wt))) if bias else -1
        st = b.tensor("state", (batch, filters * memory), state, scale=s_state, zero_point=state_zp,
                      is_variable=True)
        y = b.tensor("y", (batch, units), "int8", scale=0.5 if state == "int16" else 0.02, zero_point=-2)
    b.op("SVDF", [x, wf, wt, bb, st], [y], "SVDFOptions", Rank=rank, FusedActivationFunction=act)
    return b.build(inputs=[x], outputs=[y])


def svdf_keyword_model(seed: int = 7) -> bytes:
    """A keyword-spotting stack as TFLM's micro_speech SVDF models are: int8 features -> SVDF (int16 state)
    -> SVDF -> FULLY_CONNECTED -> SOFTMAX."""
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    feat, f1, m1, f2, m2, classes = 16, 8, 6, 8, 4, 4
    x = b.tensor("features", (1, feat), "int8", scale=0.1, zero_point=-10)
    layers = [(feat, f1, m1, 2), (f1 // 2, f2, m2, 1)]
    cur, s_cur = x, 0.1
    for k, (n_in, nf, mem, rank) in enumerate(layers):
        s_state, s_wt = 0.05, 0.0005
        wf = b.tensor(f"wf{k}", (nf, n_in), "int8", data=rng.integers(-127, 128, (nf, n_in)), scale=0.01)
        wt = b.tensor(f"wt{k}", (nf, mem), "int16", data=rng.integers(-4000, 4001, (nf, mem)), scale=s_wt)
        bias = b.tensor(f"b{k}", (nf // rank,), "int32", data=rng.integers(-2000, 2000, nf // rank),
                        scale=float(np.float32(s_state) * np.float32(s_wt)))
        st = b.tensor(f"state{k}", (1, nf * mem), "int16", scale=s_state, zero_point=0, is_variable=True)
        out = b.tensor(f"h{k}", (1, nf // rank), "int8", scale=0.05, zero_point=-128 if k == 0 else 0)
        b.op("SVDF", [cur, wf, wt, bias, st], [out], "SVDFOptions", Rank=rank, FusedActivationFunction=1)
        cur, s_cur = out, 0.05
    w = b.tensor("fc_w", (classes, f2), "int8", data=rng.integers(-127, 128, (classes, f2)), scale=0.002)
    fb = b.tensor("fc_b", (classes,), "int32", data=rng.integers(-500, 500, classes), scale=s_cur * 0.002)
    logits = b.tensor("logits", (1, classes), "int8", scale=0.05, zero_point=5)
    b.op("FULLY_CONNECTED", [cur, w, fb], [logits], "FullyConnectedOptions", FusedActivationFunction=0)
    probs = b.tensor("probs", (1, classes), "int8", scale=1 / 256, zero_point=-128)
    b.op("SOFTMAX", [logits], [probs], "SoftmaxOptions", Beta=1.0)
    return b.build(inputs=[x], outputs=[probs])


def svdf_cases() -> list[Case]:
    return [
        Case("svdf-f32", svdf_model("float32")),
        Case("svdf-f32-relu-rank1", svdf_model("float32", rank=1, act=1, seed=1)),
        Case("svdf-f32-tanh-b1", svdf_model("float32", batch=1, filters=4, memory=3, act=4, seed=2)),
        Case("svdf-f32-relu6-memory1", svdf_model("float32", memory=1, act=3, seed=3)),
        Case("svdf-i8-s16", svdf_model("int8", "int16")),
        Case("svdf-i8-s16-rank1-b1", svdf_model("int8", "int16", batch=1, rank=1, filters=3, memory=8, seed=4)),
        Case("svdf-i8-s8", svdf_model("int8", "int8", state_zp=-5, seed=5)),
        Case("svdf-i8-s8-rank3", svdf_model("int8", "int8", filters=9, rank=3, memory=2, state_zp=7, seed=6)),
        Case("svdf-keyword-i8", svdf_keyword_model()),
        # the same input every run: only the state makes the outputs differ from run to run
        Case("svdf-i8-s16-same-input", svdf_model("int8", "int16", seed=8),
             inputs=lambda rng: [np.full((2, 5), 40, np.int8)]),
    ]


# --- UNIDIRECTIONAL_SEQUENCE_LSTM ---------------------------------------------------------------------------------

def _lstm_op(b: TFLiteBuilder, x: int, y: int, dtype: str, *, batch: int, time: int, features: int, units: int,
             rng: np.random.Generator, time_major: bool = False, cell_clip: float = 0.0, s_in: float = 0.05,
             s_h: float = 1 / 128, zp_h: int = 0, s_c: float = 2.0 ** -11, name: str = "lstm",
             extra: dict[int, int] | None = None, drop: tuple[int, ...] = ()) -> None:
    """Add an UNIDIRECTIONAL_SEQUENCE_LSTM (24 inputs, the variants absent) writing `y`."""
    ins = [-1] * 24
    ins[0] = x
    for k in range(1, 9):
        cols = features if k < 5 else units
        if dtype == "float32":
            ins[k] = b.tensor(f"{name}_w{k}", (units, cols), "float32", data=rng.uniform(-0.6, 0.6, (units, cols)))
        else:
            sw = 0.01 + 0.002 * k
            ins[k] = b.tensor(f"{name}_w{k}", (units, cols), "int8", data=rng.integers(-127, 128, (units, cols)),
                              scale=sw)
    for k in range(12, 16):
        if dtype == "float32":
            ins[k] = b.tensor(f"{name}_b{k}", (units,), "float32", data=rng.uniform(-1, 1, units))
        else:
            bdt = "int32" if dtype == "int8" else "int64"
            sb = float(np.float32(s_in) * np.float32(0.01 + 0.002 * (k - 11)))
            ins[k] = b.tensor(f"{name}_b{k}", (units,), bdt, data=rng.integers(-20000, 20000, units), scale=sb)
    if dtype == "float32":
        ins[18] = b.tensor(f"{name}_h", (batch, units), "float32", is_variable=True)
        ins[19] = b.tensor(f"{name}_c", (batch, units), "float32", is_variable=True)
    else:
        ins[18] = b.tensor(f"{name}_h", (batch, units), dtype, scale=s_h, zero_point=zp_h, is_variable=True)
        ins[19] = b.tensor(f"{name}_c", (batch, units), "int16", scale=s_c, zero_point=0, is_variable=True)
    for k, v in (extra or {}).items():
        ins[k] = v
    for k in drop:
        ins[k] = -1
    b.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], "UnidirectionalSequenceLSTMOptions", FusedActivationFunction=4,
         CellClip=cell_clip, ProjClip=0.0, TimeMajor=time_major, AsymmetricQuantizeInputs=False)


def lstm_model(dtype: str = "int8", *, batch: int = 1, time: int = 3, features: int = 4, units: int = 5,
               time_major: bool = False, cell_clip: float = 0.0, seed: int = 0, zp_in: int = 3, zp_h: int = -7,
               s_c: float = 2.0 ** -11, extra: dict[int, int] | None = None, drop: tuple[int, ...] = ()) -> bytes:
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    shape = (time, batch, features) if time_major else (batch, time, features)
    oshape = (*shape[:2], units)
    if dtype == "float32":
        x = b.tensor("x", shape, "float32")
        y = b.tensor("y", oshape, "float32")
        s_h = 1.0
    else:
        s_h = 1 / 128 if dtype == "int8" else 2.0 ** -15
        zp = zp_h if dtype == "int8" else 0
        x = b.tensor("x", shape, dtype, scale=0.05 if dtype == "int8" else 1 / 8192,
                     zero_point=zp_in if dtype == "int8" else 0)
        y = b.tensor("y", oshape, dtype, scale=s_h, zero_point=zp)
    _lstm_op(b, x, y, dtype, batch=batch, time=time, features=features, units=units, rng=rng,
             time_major=time_major, cell_clip=cell_clip, s_in=0.05 if dtype == "int8" else 1 / 8192, s_h=s_h,
             zp_h=zp_h if dtype == "int8" else 0, s_c=s_c, extra=extra, drop=drop)
    return b.build(inputs=[x], outputs=[y])


def lstm_classifier_model(seed: int = 11, time: int = 6, features: int = 8, units: int = 12, classes: int = 4) -> bytes:
    """An int8 sequence classifier: x[1, T, F] -> UNIDIRECTIONAL_SEQUENCE_LSTM -> FULLY_CONNECTED (per step)
    -> SOFTMAX."""
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("x", (1, time, features), "int8", scale=0.05, zero_point=-4)
    h = b.tensor("h_seq", (1, time, units), "int8", scale=1 / 128, zero_point=2)
    _lstm_op(b, x, h, "int8", batch=1, time=time, features=features, units=units, rng=rng, s_in=0.05,
             s_h=1 / 128, zp_h=2, s_c=2.0 ** -11)
    w = b.tensor("fc_w", (classes, units), "int8", data=rng.integers(-127, 128, (classes, units)), scale=0.02)
    fb = b.tensor("fc_b", (classes,), "int32", data=rng.integers(-300, 300, classes), scale=0.02 / 128)
    logits = b.tensor("logits", (time, classes), "int8", scale=0.1, zero_point=-3)
    b.op("FULLY_CONNECTED", [h, w, fb], [logits], "FullyConnectedOptions", FusedActivationFunction=0)
    probs = b.tensor("probs", (time, classes), "int8", scale=1 / 256, zero_point=-128)
    b.op("SOFTMAX", [logits], [probs], "SoftmaxOptions", Beta=1.0)
    return b.build(inputs=[x], outputs=[probs])


def lstm_cases() -> list[Case]:
    return [
        Case("lstm-i8", lstm_model("int8")),
        Case("lstm-i8-b2-time-major", lstm_model("int8", batch=2, time_major=True, seed=1)),
        Case("lstm-i8-b3-batch-major", lstm_model("int8", batch=3, time=2, units=3, seed=2, zp_h=0)),
        Case("lstm-i8-cell-clip", lstm_model("int8", cell_clip=0.8, seed=3, s_c=2.0 ** -12)),
        Case("lstm-i8-cell-scale-2^-8", lstm_model("int8", seed=4, s_c=2.0 ** -8, features=7, units=6)),
        Case("lstm-i8-classifier", lstm_classifier_model()),
        Case("lstm-i16", lstm_model("int16", seed=7)),
        Case("lstm-i16-b2-time-major-clip", lstm_model("int16", batch=2, time_major=True, cell_clip=1.5, seed=8)),
        Case("lstm-i8-same-input", lstm_model("int8", seed=9), inputs=lambda rng: [np.full((1, 3, 4), -60, np.int8)]),
        Case("lstm-f32", lstm_model("float32")),
        Case("lstm-f32-b2-time-major-clip", lstm_model("float32", batch=2, time_major=True, cell_clip=0.7, seed=5)),
        Case("lstm-f32-b2-batch-major", lstm_model("float32", batch=2, time=4, seed=6)),
    ]


# --- the tests ---------------------------------------------------------------------------------------------------

def all_cases() -> list[Case]:
    return svdf_cases() + lstm_cases()


def test_recurrent_match_tflm_streaming() -> None:
    prepared = check_cases(all_cases(), n_sets=N_SETS, platform="host")
    for p in prepared:  # the same input every run: TFLM's outputs differ only through the streamed state
        if p.case.id.endswith("same-input"):
            assert any(not np.array_equal(p.expected[0][0], e[0]) for e in p.expected[1:]), p.case.id


def _lstm_refused(match: str, **kw: object) -> None:
    with pytest.raises(UnsupportedModelError, match=match):
        from_tflite(lstm_model("int8", **kw))  # type: ignore[arg-type]


def test_lstm_variants_are_refused_naming_the_tensor() -> None:
    # (a weight tensor of the model stands in for the variant's tensor: its presence is what is refused)
    _lstm_refused(r"input 9, cell_to_input_weights \(peephole\) 'lstm_w5', is present", extra={9: 6})
    _lstm_refused(r"input 16, projection_weights 'lstm_w5', is present", extra={16: 6})
    _lstm_refused(r"input 20, input_layer_norm_coefficients 'lstm_w5', is present", extra={20: 6})
    _lstm_refused(r"input 1, input_to_input_weights \(an LSTM without it is CIFG\), is missing", drop=(1,))
    _lstm_refused(r"input 13, forget_gate_bias, is missing", drop=(13,))


def test_lstm_state_must_be_a_variable() -> None:
    m = lstm_model("int8")
    g = from_tflite(m)
    node = g.nodes[0]
    assert node.op == "lstm" and len(node.inputs) == 13 and node.attrs["hidden_zero_point"] == -7
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 2, 3), "float32")
    y = b.tensor("y", (1, 2, 4), "float32")
    _lstm_op(b, x, y, "float32", batch=1, time=2, features=3, units=4, rng=np.random.default_rng(0))
    b._tensors[-2]["var"] = False  # output_state, not a variable
    with pytest.raises(UnsupportedModelError, match="output_state .* must be a variable tensor"):
        from_tflite(b.build(inputs=[x], outputs=[y]))


@pytest.mark.slow
def test_recurrent_on_cortex_m4() -> None:
    cases = {c.id: c for c in all_cases()}
    sample = ("svdf-keyword-i8", "svdf-i8-s8", "svdf-f32", "lstm-i8-classifier", "lstm-i8-b2-time-major",
              "lstm-i8-same-input", "lstm-i16-b2-time-major-clip", "lstm-f32-b2-batch-major")
    check_cases([cases[k] for k in sample], n_sets=3, platform="qemu-cortex-m4")


def test_svdf_int16_input_is_refused_as_tflm_does() -> None:
    with pytest.raises(UnsupportedModelError, match="input 'x' has dtype int16; supported: float32, int8"):
        from_tflite(svdf_model("int8", "int16", in_dtype="int16"))


def test_svdf_without_bias_is_refused() -> None:
    """TFLM's SVDF dereferences the bias (its interpreter crashes on a model without one)."""
    with pytest.raises(UnsupportedModelError, match="SVDF needs its bias input"):
        from_tflite(svdf_model("float32", bias=False))


def test_svdf_state_and_weights_time_types_must_match() -> None:
    """TFLM reads the state as weights_time's type: an int16 state with int8 weights_time is refused."""
    g = from_tflite(svdf_model("int8", "int16"))
    assert g.nodes[0].op == "svdf" and len(g.nodes[0].inputs) == 4  # the variable became node state
    node = g.nodes[0].replace(attrs={**g.nodes[0].attrs, "state_dtype": "int8"})
    with pytest.raises(GraphError, match="TFLM reads the state as the weights_time type"):
        verify(g.with_nodes([node]))


def test_a_variable_tensor_outside_a_stateful_op_is_refused() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4), "float32")
    v = b.tensor("v", (1, 4), "float32", is_variable=True)
    y = b.tensor("y", (1, 4), "float32")
    b.op("ADD", [x, v], [y], "AddOptions", FusedActivationFunction=0)
    with pytest.raises(UnsupportedModelError, match="variable tensors are supported only as the state inputs"):
        from_tflite(b.build(inputs=[x], outputs=[y]))


def test_a_state_shared_by_two_operators_is_refused() -> None:
    b = TFLiteBuilder()
    rng = np.random.default_rng(0)
    x = b.tensor("x", (1, 3), "float32")
    wf = b.tensor("wf", (2, 3), "float32", data=rng.uniform(-1, 1, (2, 3)))
    wt = b.tensor("wt", (2, 2), "float32", data=rng.uniform(-1, 1, (2, 2)))
    bias = b.tensor("b", (2,), "float32", data=np.zeros(2))
    st = b.tensor("state", (1, 4), "float32", is_variable=True)
    y1, y2 = b.tensor("y1", (1, 2), "float32"), b.tensor("y2", (1, 2), "float32")
    for y in (y1, y2):
        b.op("SVDF", [x, wf, wt, bias, st], [y], "SVDFOptions", Rank=1, FusedActivationFunction=0)
    with pytest.raises(UnsupportedModelError, match="variable 'state' is also the state of operator 0"):
        from_tflite(b.build(inputs=[x], outputs=[y1, y2]))
