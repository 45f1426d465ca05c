"""Whole models against TFLite Micro's interpreter, and the CLI around TFLM parity.

- A model shaped like TFLM's own `person_detect.tflite`: conv / depthwise / pointwise / average pool /
  fully connected / softmax, int8 with per-channel weights, whose rank-1 bias tensors carry
  `quantized_dimension = 3` (the schema says the dimension must exist; TFLM reads one scale per channel
  along the only axis, and a single scale as per-tensor). utvm imports it as TFLM reads it, with a warning
  naming each tensor, and runs it bit-exact with TFLM on the host (C and RPC) and on qemu-cortex-m4.
- An int16-activation (16x8) model: pad, conv, leaky relu, strided slice, transpose conv, the same way.
- `utvm info` lists every unsupported operator of a model at once; `utvm run --check --oracle ...`.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402
from tflm_harness import Case, check_cases  # noqa: E402
from utvm.cli import EXIT_MODEL, EXIT_ORACLE, EXIT_USAGE, main  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.frontend.tflite import ImportQuirkWarning  # noqa: E402


def _conv_block(b: TFLiteBuilder, rng: np.random.Generator, x: int, x_shape: tuple[int, ...], s_in: float,
                name: str, out_c: int, kernel: int, stride: int, depthwise: bool, s_out: float, zp_out: int,
                per_tensor_bias: bool = False) -> tuple[int, tuple[int, ...]]:
    n, h, w, c = x_shape
    if depthwise:
        wshape = (1, kernel, kernel, c)
        out_c = c
    else:
        wshape = (out_c, kernel, kernel, c)
    w_scales = rng.uniform(0.004, 0.02, out_c)
    weights = rng.integers(-127, 128, wshape).astype(np.int8)
    wt = b.tensor(f"{name}/weights", wshape, "int8", data=weights, scale=list(w_scales), zero_point=0,
                  axis=3 if depthwise else 0)
    bias = rng.integers(-2000, 2000, out_c).astype(np.int32)
    b_scales = [s_in * s for s in w_scales]
    if per_tensor_bias:  # one scale on a rank-1 tensor, still claiming dimension 3
        bt = b.tensor(f"{name}/bias", (out_c,), "int32", data=bias, scale=b_scales[0], zero_point=0, axis=3)
    else:
        bt = b.tensor(f"{name}/bias", (out_c,), "int32", data=bias, scale=b_scales, zero_point=[0] * out_c, axis=3)
    oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
    y = b.tensor(f"{name}/out", (n, oh, ow, out_c), "int8", scale=s_out, zero_point=zp_out)
    if depthwise:
        b.op("DEPTHWISE_CONV_2D", [x, wt, bt], [y], "DepthwiseConv2DOptions", Padding=0, StrideW=stride,
             StrideH=stride, DepthMultiplier=1, FusedActivationFunction=3, DilationWFactor=1, DilationHFactor=1)
    else:
        b.op("CONV_2D", [x, wt, bt], [y], "Conv2DOptions", Padding=0, StrideW=stride, StrideH=stride,
             FusedActivationFunction=3, DilationWFactor=1, DilationHFactor=1)
    return y, (n, oh, ow, out_c)


def person_detect_like(seed: int = 7, *, per_tensor_bias: bool = False) -> bytes:
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("input", (1, 24, 24, 1), "int8", scale=0.0078, zero_point=-1)
    t, shape = _conv_block(b, rng, x, (1, 24, 24, 1), 0.0078, "conv0", 8, 3, 2, False, 0.02, -128)
    t, shape = _conv_block(b, rng, t, shape, 0.02, "dw1", 8, 3, 1, True, 0.03, -128, per_tensor_bias)
    t, shape = _conv_block(b, rng, t, shape, 0.03, "pw1", 16, 1, 1, False, 0.04, -128)
    t, shape = _conv_block(b, rng, t, shape, 0.04, "dw2", 16, 3, 2, True, 0.05, -128)
    t, shape = _conv_block(b, rng, t, shape, 0.05, "pw2", 16, 1, 1, False, 0.05, -128)
    pooled = b.tensor("pool", (1, 1, 1, 16), "int8", scale=0.05, zero_point=-128)
    b.op("AVERAGE_POOL_2D", [t], [pooled], "Pool2DOptions", Padding=1, StrideW=shape[2], StrideH=shape[1],
         FilterWidth=shape[2], FilterHeight=shape[1], FusedActivationFunction=0)
    flat = b.tensor("flat", (1, 16), "int8", scale=0.05, zero_point=-128)
    newshape = b.tensor("newshape", (2,), "int32", data=np.array([1, 16], np.int32))
    b.op("RESHAPE", [pooled, newshape], [flat])
    fw = b.tensor("fc/weights", (2, 16), "int8", data=rng.integers(-127, 128, (2, 16)).astype(np.int8),
                  scale=0.01, zero_point=0)
    fb = b.tensor("fc/bias", (2,), "int32", data=rng.integers(-500, 500, 2).astype(np.int32),
                  scale=0.05 * 0.01, zero_point=0, axis=3)
    logits = b.tensor("logits", (1, 2), "int8", scale=0.1, zero_point=5)
    b.op("FULLY_CONNECTED", [flat, fw, fb], [logits], "FullyConnectedOptions", FusedActivationFunction=0,
         WeightsFormat=0, KeepNumDims=False)
    probs = b.tensor("probs", (1, 2), "int8", scale=1 / 256, zero_point=-128)
    b.op("SOFTMAX", [logits], [probs], "SoftmaxOptions", Beta=1.0)
    return b.build([x], [probs])


def test_rank1_quantized_dimension_imports_as_tflm_reads_it_with_a_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = from_tflite(person_detect_like(per_tensor_bias=True))
    msgs = [str(w.message) for w in caught if issubclass(w.category, ImportQuirkWarning)]
    # every rank-1 bias is named: 5 conv biases and the fully connected one
    for name in ("conv0/bias", "dw1/bias", "pw1/bias", "dw2/bias", "pw2/bias", "fc/bias"):
        assert any(f"'{name}'" in m and "quantized_dimension 3" in m for m in msgs), (name, msgs)
    assert g.tensors["conv0/bias"].quant.axis == 0 and len(g.tensors["conv0/bias"].quant.scale) == 8
    assert g.tensors["dw1/bias"].quant.axis is None  # one scale: per tensor, as TFLM


def test_person_detect_like_model_is_bit_exact_with_tflm() -> None:
    check_cases([Case("person-detect-like", person_detect_like()),
                 Case("person-detect-like-per-tensor-bias", person_detect_like(3, per_tensor_bias=True))],
                n_sets=3, platform="host")


@pytest.mark.slow
def test_person_detect_like_model_on_cortex_m4() -> None:
    check_cases([Case("person-detect-like", person_detect_like())], n_sets=2, builds=(),
                platform="qemu-cortex-m4")


def model_16x8(seed: int = 1) -> bytes:
    """int16 activations end to end (16x8): PAD -> CONV_2D (int64 bias) -> LEAKY_RELU -> STRIDED_SLICE
    (strided) -> TRANSPOSE_CONV (stride 2, int64 bias)."""
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("input", (1, 10, 10, 2), "int16", scale=0.001, zero_point=0)
    pads = b.tensor("pads", (4, 2), "int32", data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))
    xp = b.tensor("padded", (1, 12, 12, 2), "int16", scale=0.001, zero_point=0)
    b.op("PAD", [x, pads], [xp], "PadOptions")
    w = b.tensor("conv/w", (4, 3, 3, 2), "int8", data=rng.integers(-127, 128, (4, 3, 3, 2)).astype(np.int8),
                 scale=list(rng.uniform(0.002, 0.01, 4)), zero_point=[0] * 4, axis=0)
    bias = b.tensor("conv/b", (4,), "int64", data=rng.integers(-5000, 5000, 4).astype(np.int64),
                    scale=[0.001 * 0.005] * 4, zero_point=[0] * 4)
    c = b.tensor("conv", (1, 10, 10, 4), "int16", scale=0.002, zero_point=0)
    b.op("CONV_2D", [xp, w, bias], [c], "Conv2DOptions", Padding=1, StrideW=1, StrideH=1,
         FusedActivationFunction=0, DilationWFactor=1, DilationHFactor=1)
    lr = b.tensor("leaky", (1, 10, 10, 4), "int16", scale=0.0015, zero_point=0)
    b.op("LEAKY_RELU", [c], [lr], "LeakyReluOptions", Alpha=0.1)
    begin = b.tensor("begin", (4,), "int32", data=np.array([0, 1, 1, 0], np.int32))
    end = b.tensor("end", (4,), "int32", data=np.array([1, 9, 9, 4], np.int32))
    strides = b.tensor("strides", (4,), "int32", data=np.array([1, 2, 2, 1], np.int32))
    ss = b.tensor("sliced", (1, 4, 4, 4), "int16", scale=0.0015, zero_point=0)
    b.op("STRIDED_SLICE", [lr, begin, end, strides], [ss], "StridedSliceOptions", BeginMask=0, EndMask=0,
         EllipsisMask=0, NewAxisMask=0, ShrinkAxisMask=0)
    osh = b.tensor("out_shape", (4,), "int32", data=np.array([1, 8, 8, 3], np.int32))
    tw = b.tensor("tconv/w", (3, 3, 3, 4), "int8", data=rng.integers(-127, 128, (3, 3, 3, 4)).astype(np.int8),
                  scale=list(rng.uniform(0.002, 0.01, 3)), zero_point=[0] * 3, axis=0)
    tb = b.tensor("tconv/b", (3,), "int64", data=rng.integers(-3000, 3000, 3).astype(np.int64),
                  scale=[0.0015 * 0.005] * 3, zero_point=[0] * 3)
    y = b.tensor("output", (1, 8, 8, 3), "int16", scale=0.003, zero_point=0)
    b.op("TRANSPOSE_CONV", [osh, tw, ss, tb], [y], "TransposeConvOptions", Padding=0, StrideW=2, StrideH=2,
         FusedActivationFunction=0)
    return b.build([x], [y])


def test_int16_model_is_bit_exact_with_tflm() -> None:
    check_cases([Case("model-16x8", model_16x8()), Case("model-16x8-b", model_16x8(2))], n_sets=3, platform="host")


@pytest.mark.slow
def test_int16_model_on_cortex_m4() -> None:
    check_cases([Case("model-16x8", model_16x8())], n_sets=2, builds=(), platform="qemu-cortex-m4")


@pytest.mark.slow
def test_cli_run_checks_person_detect_like_against_tflm_on_cortex_m4(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pd.tflite"
    path.write_bytes(person_detect_like())
    assert main(["run", str(path), "--platform", "qemu-cortex-m4", "--rounding", "double", "--check", "--seed", "5",
                 "-q"]) == 0
    assert "check against TFLite Micro's kernels (tflite-micro): OK (bit-exact)" in capsys.readouterr().out


def _unsupported_model() -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 8), "float32")
    y = b.tensor("y", (1, 8), "float32")
    z = b.tensor("z", (1, 8), "float32")
    h = b.tensor("handle", (1,), "int32")
    w = b.tensor("w", (1, 8), "float32")
    v = b.tensor("v", (1, 8), "float16")
    b.custom_op("MyVendorOp", [x], [y])
    b.op("ADD", [y, x], [z], "AddOptions", FusedActivationFunction=0)
    b.op("VAR_HANDLE", [], [h])
    b.op("WHILE", [z], [w])
    b.op("ADD", [z, z], [v], "AddOptions", FusedActivationFunction=0)  # a tensor type utvm lacks
    return b.build([x], [z])


def test_info_lists_every_unsupported_operator_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "partial.tflite"
    path.write_bytes(_unsupported_model())
    assert main(["info", str(path)]) == EXIT_MODEL
    cap = capsys.readouterr()
    assert "not supported: 4 operators" in cap.out
    table = cap.out[cap.out.index("not supported"):]
    for op in ("CUSTOM:MyVendorOp", "VAR_HANDLE", "WHILE", "ADD"):
        assert op in table, op
    assert "out of scope" in table and "FLOAT16" in table  # the reason, not only the name
    assert "add" in cap.out.split("not supported")[0]  # what does import is still summarised
    assert "4 unsupported operator(s)" in cap.err and "CUSTOM:MyVendorOp" in cap.err
    assert main(["info", "--json", str(path)]) == EXIT_MODEL
    s = json.loads(capsys.readouterr().out)
    assert [u["op"] for u in s["unsupported"]] == ["CUSTOM:MyVendorOp", "VAR_HANDLE", "WHILE", "ADD"]
    assert [u["index"] for u in s["unsupported"]] == [0, 2, 3, 4]


def test_compile_names_the_quirk_and_run_checks_against_tflm(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pd.tflite"
    path.write_bytes(person_detect_like(per_tensor_bias=True))
    assert main(["compile", str(path), "-o", str(tmp_path / "pd.tar"), "-q"]) == 0
    err = capsys.readouterr().err
    assert "utvm compile: warning: tensor 'dw1/bias'" in err and "as TFLite Micro does" in err
    assert main(["run", str(path), "--rounding", "double", "--check", "--seed", "3", "-q"]) == 0
    out = capsys.readouterr().out
    assert "check against TFLite Micro's kernels (tflite-micro): OK (bit-exact)" in out, out
    # LiteRT refuses the very quirk TFLM accepts: the oracle's own error, exit status 9
    assert main(["run", str(path), "--rounding", "double", "--oracle", "litert", "--seed", "3", "-q"]) == EXIT_ORACLE
    assert "quantized_dimension must be in range" in capsys.readouterr().err
    assert main(["run", str(path), "--oracle", "onnxruntime", "-q", "--seed", "1"]) == EXIT_USAGE
    assert "--oracle onnxruntime checks onnx models" in capsys.readouterr().err


def audio_preprocessor_like(step: int = 160, frame: int = 240, fft_length: int = 256, nch: int = 16,
                            start: int = 4, end: int = 100) -> bytes:
    """A microphone-to-features model shaped like TFLM's audio_preprocessor_int8.tflite: the signal-library
    front end (framer, window, auto scale, rfft, energy, filter bank, sqrt, spectral subtraction, PCAN, log)
    with the energy bins outside [start, end) zeroed by CAST uint32->int32, STRIDED_SLICE, CONCATENATION and
    CAST back, and an int8 feature tail (CAST to float, MUL, ADD, DIV, MINIMUM/MAXIMUM clip, CAST to int8)."""
    from flatbuffers import flexbuffers
    from test_tflm_signal import _opts, mel_config, pcan_lut  # the signal ops' own test builders

    b = TFLiteBuilder()
    x = b.tensor("audio", (step,), "int16")
    fr, fv = b.tensor("frames", (1, frame), "int16"), b.tensor("frame_valid", (), "bool")
    b.custom_op("SignalFramer", [x], [fr, fv],
                bytes(flexbuffers.Dumps({"frame_size": frame, "frame_step": step, "prefill": True})))
    w = b.tensor("hann", (frame,), "int16", data=(np.hanning(frame) * 4095).astype(np.int16))
    xw = b.tensor("windowed", (1, frame), "int16")
    b.custom_op("SignalWindow", [fr, w], [xw], _opts(shift=12))
    flat = b.tensor("flat", (frame,), "int16")
    b.op("RESHAPE", [xw, b.tensor("shape", (1,), "int32", data=np.array([frame], np.int32))], [flat])
    xs, sb = b.tensor("scaled", (frame,), "int16"), b.tensor("scale_bits", (), "int32")
    b.custom_op("SignalFftAutoScale", [flat], [xs, sb])
    spec = b.tensor("spectrum", (fft_length + 2,), "int16")
    b.custom_op("SignalRfft", [xs], [spec], _opts(T=7, fft_length=fft_length))
    n_bins = fft_length // 2 + 1
    en = b.tensor("energy", (n_bins,), "uint32")
    b.custom_op("SignalEnergy", [spec], [en], _opts(end_index=n_bins, start_index=0))
    # zero the bins the filter bank does not read, in int32 (as the converter emits it)
    en32 = b.tensor("energy_i32", (n_bins,), "int32")
    b.op("CAST", [en], [en32])
    kept = b.tensor("energy_used", (end - start,), "int32")
    b.op("STRIDED_SLICE", [en32, b.tensor("b0", (1,), "int32", data=np.array([start], np.int32)),
                           b.tensor("e0", (1,), "int32", data=np.array([end], np.int32)),
                           b.tensor("s0", (1,), "int32", data=np.array([1], np.int32))], [kept],
         "StridedSliceOptions", BeginMask=0, EndMask=0, EllipsisMask=0, NewAxisMask=0, ShrinkAxisMask=0)
    lo = b.tensor("zeros_lo", (start,), "int32", data=np.zeros(start, np.int32))
    hi = b.tensor("zeros_hi", (n_bins - end,), "int32", data=np.zeros(n_bins - end, np.int32))
    masked32 = b.tensor("energy_masked_i32", (n_bins,), "int32")
    b.op("CONCATENATION", [lo, kept, hi], [masked32], "ConcatenationOptions", Axis=0, FusedActivationFunction=0)
    masked = b.tensor("energy_masked", (n_bins,), "uint32")
    b.op("CAST", [masked32], [masked])
    cfg = [b.tensor(f"fb{k}", a.shape, "int16", data=a) for k, a in enumerate(mel_config(n_bins, nch, 3, start, end))]
    fb = b.tensor("filterbank", (nch,), "uint64")
    b.custom_op("SignalFilterBank", [masked, *cfg], [fb], _opts(num_channels=nch))
    sq = b.tensor("sqrt", (nch,), "uint32")
    b.custom_op("SignalFilterBankSquareRoot", [fb, sb], [sq])
    ss, ne = b.tensor("subtracted", (nch,), "uint32"), b.tensor("noise", (nch,), "uint32")
    opts = {"alternate_one_minus_smoothing": 16384 - 328, "alternate_smoothing": 328, "clamping": False,
            "min_signal_remaining": 819, "num_channels": nch, "one_minus_smoothing": 16384 - 655, "smoothing": 655,
            "smoothing_bits": 10, "spectral_subtraction_bits": 14}
    b.custom_op("SignalFilterBankSpectralSubtraction", [sq], [ss, ne], bytes(flexbuffers.Dumps(opts)))
    pc = b.tensor("pcan", (nch,), "uint32")
    b.custom_op("SignalPCAN", [ss, ne, b.tensor("lut", (125,), "int16", data=pcan_lut())], [pc], _opts(snr_shift=6))
    lg = b.tensor("log", (nch,), "int16")
    b.custom_op("SignalFilterBankLog", [pc], [lg], _opts(input_correction_bits=3, output_scale=1600))
    # int8 features: (log * 25.6 / 26 - 128 + ...) clipped, as a converter's float tail emits it
    f = b.tensor("log_f", (nch,), "float32")
    b.op("CAST", [lg], [f])

    def scalar(name: str, v: float) -> int:
        return b.tensor(name, (1,), "float32", data=np.array([v], np.float32))

    t1, t2, t3 = (b.tensor(n, (nch,), "float32") for n in ("mul", "add", "div"))
    b.op("MUL", [f, scalar("gain", 25.6)], [t1], "MulOptions", FusedActivationFunction=0)
    b.op("ADD", [t1, scalar("offset", -12800.0)], [t2], "AddOptions", FusedActivationFunction=0)
    b.op("DIV", [t2, scalar("range", 100.0)], [t3], "DivOptions", FusedActivationFunction=0)
    t4, t5 = b.tensor("min", (nch,), "float32"), b.tensor("max", (nch,), "float32")
    b.op("MINIMUM", [t3, scalar("hi", 127.0)], [t4])
    b.op("MAXIMUM", [t4, scalar("lo", -128.0)], [t5])
    feat = b.tensor("features", (nch,), "int8")
    b.op("CAST", [t5], [feat])
    return b.build([x], [feat, fv])


def _audio(rng: np.random.Generator) -> list[np.ndarray]:
    t = np.arange(160) / 16000.0
    tone = 6000 * np.sin(2 * np.pi * rng.uniform(200, 3000) * t) + rng.normal(0, 300, 160)
    return [np.clip(tone, -32768, 32767).astype(np.int16)]


def test_audio_preprocessor_like_model_streams_bit_exact_with_tflm() -> None:
    # 6 frames in a row: the framer, the spectral subtraction's noise estimate stream from call to call
    check_cases([Case("audio-preprocessor-like", audio_preprocessor_like(), inputs=_audio)], n_sets=6,
                platform="host")


@pytest.mark.slow
def test_audio_preprocessor_like_model_on_cortex_m4() -> None:
    check_cases([Case("audio-preprocessor-like", audio_preprocessor_like(), inputs=_audio)], n_sets=4, builds=(),
                platform="qemu-cortex-m4")
