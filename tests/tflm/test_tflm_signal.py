"""TFLite Micro's signal library (the audio front end's CUSTOM ops) against TFLM's own kernels.

Single-op models of every supported op and dtype (the stateful ones streamed over several input sets), and
the chained front end (framer -> window -> reshape -> fft auto scale -> rfft -> energy -> filter bank ->
square root -> spectral subtraction -> PCAN -> log) end to end, small and at micro_speech's sizes.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from flatbuffers import flexbuffers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tflite_builder import TFLiteBuilder  # noqa: E402
from tflm_harness import Case, check_cases, prepare  # noqa: E402
from utvm.errors import UnsupportedModelError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402

_T = {"int16": 7, "int32": 2, "float32": 0}


def _opts(**kw: int) -> bytes:
    return bytes(flexbuffers.Dumps(kw))


def window(shape: tuple[int, ...], k: int, shift: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("x", shape, "int16")
    w = b.tensor("w", (k,), "int16", data=rng.integers(-32768, 32768, size=k).astype(np.int16))
    y = b.tensor("y", shape, "int16")
    b.custom_op("SignalWindow", [x, w], [y], _opts(shift=shift))
    return b.build([x], [y])


def fft_auto_scale(n: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (n,), "int16")
    y = b.tensor("y", (n,), "int16")
    s = b.tensor("s", (), "int32")
    b.custom_op("SignalFftAutoScale", [x], [y, s])
    return b.build([x], [y, s])


def rfft(dtype: str, shape: tuple[int, ...], n: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype)
    y = b.tensor("y", (*shape[:-1], n + 2), dtype)
    b.custom_op("SignalRfft", [x], [y], _opts(T=_T[dtype], fft_length=n))
    return b.build([x], [y])


def irfft(dtype: str, rows: tuple[int, ...], n: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (*rows, n + 2), dtype)
    y = b.tensor("y", (*rows, n), dtype)
    b.custom_op("SignalIrfft", [x], [y], _opts(T=_T[dtype], fft_length=n))
    return b.build([x], [y])


def energy(m: int, start: int, end: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (2 * m,), "int16")
    y = b.tensor("y", (m,), "uint32")
    b.custom_op("SignalEnergy", [x], [y], _opts(end_index=end, start_index=start))
    return b.build([x], [y])


def mel_config(n_in: int, nch: int, seed: int = 0, lo: int = 1, hi: int | None = None) -> list[np.ndarray]:
    """A filter bank configuration of the shape TFLM's front end uses (overlapping channels reading bins
    lo .. hi - 1 of n_in; random weights in [0, 4096), unweights 4096 - weights)."""
    rng = np.random.default_rng(seed)
    edges = np.linspace(lo, (n_in if hi is None else hi) - 1, nch + 2).astype(int)
    fs, ws, wd = [], [], []
    pos = 0
    for i in range(nch + 1):
        lo, hi = edges[i], max(edges[i + 1], edges[i] + 1)
        fs.append(lo)
        ws.append(pos)
        wd.append(hi - lo)
        pos += hi - lo
    weights = rng.integers(0, 4096, size=pos).astype(np.int16)
    unweights = (4096 - weights).astype(np.int16)
    return [weights, unweights, np.array(fs, np.int16), np.array(ws, np.int16), np.array(wd, np.int16)]


def filter_bank(n_in: int, nch: int, seed: int = 0) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (n_in,), "uint32")
    cfg = [b.tensor(f"c{k}", a.shape, "int16", data=a) for k, a in enumerate(mel_config(n_in, nch, seed))]
    y = b.tensor("y", (nch,), "uint64")
    b.custom_op("SignalFilterBank", [x, *cfg], [y], _opts(num_channels=nch))
    return b.build([x], [y])


def filter_bank_sqrt(n: int, scale_bits: int) -> bytes:
    """scale_bits is a constant here (the oracle cannot feed a rank-0 model input; the front-end case feeds
    it from SignalFftAutoScale at run time)."""
    b = TFLiteBuilder()
    x = b.tensor("x", (n,), "uint64")
    s = b.tensor("s", (), "int32", data=np.array(scale_bits, np.int32))
    y = b.tensor("y", (n,), "uint32")
    b.custom_op("SignalFilterBankSquareRoot", [x, s], [y])
    return b.build([x], [y])


def filter_bank_log(n: int, correction: int, scale: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (n,), "uint32")
    y = b.tensor("y", (n,), "int16")
    b.custom_op("SignalFilterBankLog", [x], [y], _opts(input_correction_bits=correction, output_scale=scale))
    return b.build([x], [y])


def pcan_lut(strength: float = 0.95, offset: float = 80.0, gain_bits: int = 21) -> np.ndarray:
    """The gain LUT of TFLM's PCAN front end (pcan_gain_control_util's construction, in float)."""
    def gain(x: float) -> int:
        return int(math.floor((x + offset) ** -strength * (1 << gain_bits) + 0.5))
    lut = np.zeros(125, dtype=np.int64)
    lut[0], lut[1], lut[2] = gain(0), gain(1), gain(2)
    for interval in range(2, 33):
        x0 = 1 << (interval - 1)
        x1 = x0 + (x0 >> 1)
        x2 = x0 + x0 if interval < 32 else x0 + (x0 - 1)
        y0, y1, y2 = gain(x0), gain(x1), gain(x2)
        d1, d2 = y1 - y0, y2 - y0
        a1 = 4 * d1 - d2
        a2 = d2 - a1
        k = 4 * interval - 6
        lut[k], lut[k + 1], lut[k + 2] = y0, a1, a2
    return np.clip(lut, -32768, 32767).astype(np.int16)


def pcan(n: int, snr_shift: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (n,), "uint32")
    ne = b.tensor("ne", (n,), "uint32")
    lut = b.tensor("lut", (125,), "int16", data=pcan_lut())
    y = b.tensor("y", (n,), "uint32")
    b.custom_op("SignalPCAN", [x, ne, lut], [y], _opts(snr_shift=snr_shift))
    return b.build([x, ne], [y])


def framer(shape: tuple[int, ...], size: int, step: int, prefill: bool) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, "int16")
    y = b.tensor("y", (*shape[:-1], shape[-1] // step, size), "int16")
    v = b.tensor("valid", (), "bool")
    b.custom_op("SignalFramer", [x], [y, v],
                bytes(flexbuffers.Dumps({"frame_size": size, "frame_step": step, "prefill": prefill})))
    return b.build([x], [y, v])


def stacker(nc: int, left: int, right: int, step: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (nc,), "int16")
    y = b.tensor("y", (nc * (left + right + 1),), "int16")
    v = b.tensor("valid", (), "bool")
    b.custom_op("SignalStacker", [x], [y, v], _opts(num_channels=nc, stacker_left_context=left,
                                                    stacker_right_context=right, stacker_step=step))
    return b.build([x], [y, v])


def delay(shape: tuple[int, ...], length: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, "int16")
    y = b.tensor("y", shape, "int16")
    b.custom_op("SignalDelay", [x], [y], _opts(delay_length=length))
    return b.build([x], [y])


def overlap_add(dtype: str, shape: tuple[int, ...], step: int) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype)
    y = b.tensor("y", (*shape[:-2], shape[-2] * step), dtype)
    b.custom_op("SignalOverlapAdd", [x], [y], _opts(T=_T[dtype], frame_step=step))
    return b.build([x], [y])


def spectral_subtraction(n: int, clamping: bool, smoothing: int = 655, alt: int = 328, bits: int = 10,
                         ss_bits: int = 14, min_remaining: int = 819) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (n,), "uint32")
    y = b.tensor("y", (n,), "uint32")
    ne = b.tensor("noise", (n,), "uint32")
    opts = {"alternate_one_minus_smoothing": (1 << ss_bits) - alt, "alternate_smoothing": alt, "clamping": clamping,
            "min_signal_remaining": min_remaining, "num_channels": n,
            "one_minus_smoothing": (1 << ss_bits) - smoothing, "smoothing": smoothing, "smoothing_bits": bits,
            "spectral_subtraction_bits": ss_bits}
    b.custom_op("SignalFilterBankSpectralSubtraction", [x], [y, ne], bytes(flexbuffers.Dumps(opts)))
    return b.build([x], [y, ne])


def _u32(rng: np.random.Generator, n: int, hi_bits: int = 32) -> np.ndarray:
    """uint32 values of every magnitude: random bit lengths up to hi_bits, plus 0, 1, 2."""
    bits = rng.integers(0, hi_bits + 1, size=n)
    v = np.array([int(rng.integers(0, 1 << int(b))) if b else 0 for b in bits], dtype=np.uint64)
    v[:3] = [0, 1, 2][: min(3, n)]
    return v.astype(np.uint32)


def _u64(rng: np.random.Generator, n: int) -> np.ndarray:
    bits = rng.integers(0, 65, size=n)
    vals = [int(rng.integers(0, 1 << min(int(b), 62))) << max(0, int(b) - 62) if b else 0 for b in bits]
    vals[:4] = [0, 1, (1 << 64) - 1, (1 << 32) - 1][: min(4, n)]
    return np.array(vals, dtype=np.uint64)


def _i16_scaled(rng: np.random.Generator, shape: tuple[int, ...], bits: int) -> np.ndarray:
    return rng.integers(-(1 << bits), 1 << bits, size=shape).astype(np.int16)


def front_end(step: int = 32, frame: int = 48, fft_length: int = 64, nch: int = 8, start: int = 0,
              end: int | None = None) -> bytes:
    """The audio front end of TFLM's micro_speech preprocessor: framer -> window -> (reshape) -> auto scale ->
    rfft -> energy -> filter bank -> square root -> spectral subtraction -> PCAN -> log. The filter bank
    reads energy bins start .. end - 1 only (TFLM leaves the others unwritten)."""
    b = TFLiteBuilder()
    x = b.tensor("audio", (step,), "int16")
    fr = b.tensor("frames", (1, frame), "int16")
    fv = b.tensor("frame_valid", (), "bool")
    b.custom_op("SignalFramer", [x], [fr, fv],
                bytes(flexbuffers.Dumps({"frame_size": frame, "frame_step": step, "prefill": True})))
    w = b.tensor("hann", (frame,), "int16", data=(np.hanning(frame) * 4095).astype(np.int16))
    xw = b.tensor("windowed", (1, frame), "int16")
    b.custom_op("SignalWindow", [fr, w], [xw], _opts(shift=12))
    shp = b.tensor("shape", (1,), "int32", data=np.array([frame], np.int32))
    flat = b.tensor("flat", (frame,), "int16")
    b.op("RESHAPE", [xw, shp], [flat])
    xs = b.tensor("scaled", (frame,), "int16")
    sb = b.tensor("scale_bits", (), "int32")
    b.custom_op("SignalFftAutoScale", [flat], [xs, sb])
    spec = b.tensor("spectrum", (fft_length + 2,), "int16")
    b.custom_op("SignalRfft", [xs], [spec], _opts(T=7, fft_length=fft_length))
    n_bins = fft_length // 2 + 1
    end = n_bins if end is None else end
    en = b.tensor("energy", (n_bins,), "uint32")
    b.custom_op("SignalEnergy", [spec], [en], _opts(end_index=end, start_index=start))
    cfg = [b.tensor(f"fb{k}", a.shape, "int16", data=a)
           for k, a in enumerate(mel_config(n_bins, nch, 3, max(start, 1), end))]
    fb = b.tensor("filterbank", (nch,), "uint64")
    b.custom_op("SignalFilterBank", [en, *cfg], [fb], _opts(num_channels=nch))
    sq = b.tensor("sqrt", (nch,), "uint32")
    b.custom_op("SignalFilterBankSquareRoot", [fb, sb], [sq])
    ss = b.tensor("subtracted", (nch,), "uint32")
    ne = b.tensor("noise", (nch,), "uint32")
    opts = {"alternate_one_minus_smoothing": 16384 - 328, "alternate_smoothing": 328, "clamping": False,
            "min_signal_remaining": 819, "num_channels": nch, "one_minus_smoothing": 16384 - 655, "smoothing": 655,
            "smoothing_bits": 10, "spectral_subtraction_bits": 14}
    b.custom_op("SignalFilterBankSpectralSubtraction", [sq], [ss, ne], bytes(flexbuffers.Dumps(opts)))
    pc = b.tensor("pcan", (nch,), "uint32")
    lut = b.tensor("lut", (125,), "int16", data=pcan_lut())
    b.custom_op("SignalPCAN", [ss, ne, lut], [pc], _opts(snr_shift=6))
    lg = b.tensor("log", (nch,), "int16")
    b.custom_op("SignalFilterBankLog", [pc], [lg], _opts(input_correction_bits=3, output_scale=1600))
    return b.build([x], [lg, spec, sq, ne, fv])


def _cases() -> list[Case]:
    cases = [
        Case("window-1d", window((32,), 32, 12)),
        Case("window-2d-shift0", window((3, 8), 8, 0), ranges={0: (-5, 5)}),
        Case("window-rank3-shift15", window((2, 2, 6), 6, 15)),
        Case("fft-auto-scale", fft_auto_scale(16), inputs=lambda r: [_i16_scaled(r, (16,), 9)]),
        Case("fft-auto-scale-full", fft_auto_scale(8)),
        Case("fft-auto-scale-zero", fft_auto_scale(4), inputs=lambda r: [np.zeros(4, np.int16)]),
        Case("fft-auto-scale-min", fft_auto_scale(4),
             inputs=lambda r: [np.array([3, -32768, 5, 0], np.int16)]),
        Case("energy-full", energy(17, 0, 17)),
        Case("filter-bank", filter_bank(33, 6), inputs=lambda r: [_u32(r, 33)]),
        Case("filter-bank-1ch", filter_bank(9, 1, 2), inputs=lambda r: [_u32(r, 9, 20)]),
        Case("fb-sqrt", filter_bank_sqrt(24, 7), inputs=lambda r: [_u64(r, 24)]),
        Case("fb-sqrt-s0", filter_bank_sqrt(8, 0), inputs=lambda r: [_u64(r, 8)]),
        Case("fb-sqrt-s15", filter_bank_sqrt(8, 15), inputs=lambda r: [_u64(r, 8)]),
        Case("fb-log", filter_bank_log(40, 3, 1600), inputs=lambda r: [_u32(r, 40)]),
        Case("fb-log-c0", filter_bank_log(20, 0, 65535), inputs=lambda r: [_u32(r, 20)]),
        Case("pcan", pcan(40, 6), inputs=lambda r: [_u32(r, 40, 20), _u32(r, 40)]),
        Case("pcan-shift12", pcan(12, 12), inputs=lambda r: [_u32(r, 12), _u32(r, 12, 24)]),
    ]
    for dt in ("int16", "int32"):
        full = {0: (-(2**15), 2**15 - 1)} if dt == "int16" else {0: (-(2**31), 2**31 - 1)}
        cases += [
            Case(f"rfft-{dt}-64", rfft(dt, (64,), 64), ranges=full),
            Case(f"rfft-{dt}-pad-2d", rfft(dt, (3, 20), 32), ranges=full),
            Case(f"rfft-{dt}-4", rfft(dt, (4,), 4), ranges=full),
            Case(f"rfft-{dt}-8", rfft(dt, (2, 8), 8), ranges=full),
            Case(f"rfft-{dt}-512", rfft(dt, (480,), 512), ranges=full),
            Case(f"irfft-{dt}-64", irfft(dt, (), 64), ranges=full),
            Case(f"irfft-{dt}-16-2d", irfft(dt, (2,), 16), ranges=full),
            Case(f"irfft-{dt}-8", irfft(dt, (), 8), ranges=full),
            # radices 3 and 5 (KISS FFT's kf_bfly3 / kf_bfly5)
            Case(f"rfft-{dt}-12", rfft(dt, (2, 12), 12), ranges=full),
            Case(f"rfft-{dt}-20", rfft(dt, (20,), 20), ranges=full),
            Case(f"rfft-{dt}-480", rfft(dt, (400,), 480), ranges=full),
            Case(f"irfft-{dt}-60", irfft(dt, (), 60), ranges=full),
            Case(f"irfft-{dt}-30", irfft(dt, (2,), 30), ranges=full),
        ]
    cases += [
        Case("rfft-float32-64", rfft("float32", (64,), 64), atol=1e-4),
        Case("rfft-float32-pad-2d", rfft("float32", (2, 3, 10), 16), atol=1e-4),
        Case("rfft-float32-60", rfft("float32", (50,), 60), atol=1e-4),
        Case("irfft-float32-20", irfft("float32", (), 20), atol=1e-5),
        Case("irfft-float32-32", irfft("float32", (2,), 32), atol=1e-5),
    ]
    return cases


def _stateful_cases() -> list[Case]:
    return [
        Case("framer-prefill", framer((16,), 10, 4, True)),
        Case("framer-2d-prefill", framer((2, 6), 8, 3, True)),
        Case("framer-step-eq-size", framer((12,), 6, 6, False)),
        Case("framer-small", framer((8,), 3, 4, False)),
        Case("stacker-right0", stacker(4, 2, 0, 1)),
        Case("stacker-step2", stacker(3, 1, 0, 2)),
        Case("delay", delay((10,), 3)),
        Case("delay-long", delay((2, 4), 9)),
        Case("delay-0", delay((5,), 0)),
        Case("overlap-add-int16", overlap_add("int16", (3, 8), 4)),
        Case("overlap-add-int16-3d", overlap_add("int16", (2, 2, 6), 3)),
        Case("overlap-add-float32", overlap_add("float32", (2, 5), 2)),
        Case("spectral-subtraction", spectral_subtraction(12, False), inputs=lambda r: [_u32(r, 12, 22)]),
        Case("spectral-subtraction-clamp", spectral_subtraction(12, True), inputs=lambda r: [_u32(r, 12, 22)]),
        Case("front-end", front_end(), ranges={0: (-8000, 8000)}),
        # micro_speech's sizes: 30 ms windows every 20 ms at 16 kHz, 512-point FFT, 40 channels, bins 4..240
        Case("front-end-micro-speech", front_end(320, 480, 512, 40, 4, 241), ranges={0: (-3000, 3000)}),
        Case("spectral-subtraction-wide", spectral_subtraction(8, True, 16000, 9000, 4, 14, 3000),
             inputs=lambda r: [_u32(r, 8)]),
    ]


def test_signal_stateful_against_tflm() -> None:
    """Delay lines, framer/stacker FIFOs, overlap-add and noise estimates, streamed over 4 input sets."""
    check_cases(_stateful_cases(), n_sets=4, platform="host")


def test_signal_ops_against_tflm() -> None:
    check_cases(_cases(), platform="host")


@pytest.mark.slow
def test_signal_ops_on_cortex_m4() -> None:
    names = ("window-2d-shift0", "rfft-int16-512", "rfft-int16-480", "irfft-int32-30", "rfft-int32-64",
             "irfft-int16-64", "irfft-int32-16-2d", "fb-sqrt", "fb-log", "pcan", "filter-bank",
             "fft-auto-scale-min", "rfft-float32-64", "irfft-float32-32", "energy-full", "front-end",
             "front-end-micro-speech", "framer-2d-prefill", "stacker-step2", "delay-long", "overlap-add-int16",
             "overlap-add-float32", "spectral-subtraction-clamp")
    sample = [c for c in _cases() + _stateful_cases() if c.id in names]
    assert len(sample) == len(names)
    check_cases(sample, n_sets=3, platform="qemu-cortex-m4", builds=())


def test_energy_partial_range() -> None:
    """Bins outside [start_index, end_index) are not written by TFLM; utvm writes 0 there. Compare the
    computed range only (TFLM's others hold whatever its arena held)."""
    (p,) = prepare([Case("energy-part", energy(9, 2, 7))])
    from utvm.ir import run_reference

    got = run_reference(p.graph, dict(zip(p.graph.inputs, p.sets[0], strict=True)))[p.graph.outputs[0]]
    np.testing.assert_array_equal(got[2:7], p.expected[0][0][2:7])
    assert not got[:2].any() and not got[7:].any()


@pytest.mark.parametrize("model", [framer((4,), 10, 2, False), stacker(2, 1, 2, 1), stacker(2, 0, 3, 3)],
                         ids=["framer", "stacker-right2", "stacker-step3"])
def test_filling(model: bytes) -> None:
    """Until a framer's first frames or a stacker's right context are filled, TFLM reports output_valid
    false and leaves the output unwritten: whatever its arena held (utvm: zeros, then the last output).
    Compare the flag always and the output once valid, streaming over 6 input sets (reference interpreter
    and generated C)."""
    from utvm.compiler import compile
    from utvm.compiler.local import LocalModel
    from utvm.ir import run_reference

    (p,) = prepare([Case("filling", model)], n_sets=6)
    c_model = LocalModel(compile(p.graph, rounding="double"), opt="-O2")
    state: dict = {}
    seen = set()
    for k, (s, (want_y, want_v)) in enumerate(zip(p.sets, p.expected, strict=True)):
        got = run_reference(p.graph, dict(zip(p.graph.inputs, s, strict=True)), state=state)
        c_y, c_v = c_model.run(s)
        for y, v in ((got[p.graph.outputs[0]], got[p.graph.outputs[1]]), (c_y, c_v)):
            assert bool(v) == bool(want_v), k
            if bool(want_v):
                np.testing.assert_array_equal(y, want_y)
        seen.add(bool(want_v))
    assert seen == {False, True}


def test_signal_errors() -> None:
    with pytest.raises(UnsupportedModelError, match="product of 2, 3 and 5"):
        from_tflite(rfft("int16", (28,), 28))  # 14 = 2 * 7: KISS FFT's generic butterfly
    with pytest.raises(UnsupportedModelError, match="must be even"):
        from_tflite(irfft("int32", (), 10 + 1))
    with pytest.raises(UnsupportedModelError, match="longer than fft_length"):
        from_tflite(rfft("int16", (40,), 32))
    with pytest.raises(UnsupportedModelError, match="multiple of the window length"):
        from_tflite(window((10,), 4, 1))
    b = TFLiteBuilder()
    x = b.tensor("x", (8,), "int32")
    y = b.tensor("y", (4,), "uint32")
    b.custom_op("SignalEnergy", [x], [y], _opts(end_index=4, start_index=0))
    with pytest.raises(UnsupportedModelError, match="int32; supported: int16"):
        from_tflite(b.build([x], [y]))
    b = TFLiteBuilder()  # a filter bank configuration computed at run time
    x = b.tensor("x", (9,), "uint32")
    cfg = [b.tensor(f"c{k}", a.shape, "int16", data=None if k == 2 else a)
           for k, a in enumerate(mel_config(9, 2))]
    y = b.tensor("y", (2,), "uint64")
    b.custom_op("SignalFilterBank", [x, *cfg], [y], _opts(num_channels=2))
    with pytest.raises(UnsupportedModelError, match="must be a constant"):
        from_tflite(b.build([x, cfg[2]], [y]))
    b = TFLiteBuilder()  # PCAN's gain LUT too short for TFLM's lookup
    x = b.tensor("x", (4,), "uint32")
    ne = b.tensor("ne", (4,), "uint32")
    lut = b.tensor("lut", (100,), "int16", data=pcan_lut()[:100])
    y = b.tensor("y", (4,), "uint32")
    b.custom_op("SignalPCAN", [x, ne, lut], [y], _opts(snr_shift=6))
    with pytest.raises(UnsupportedModelError, match="gain_lut"):
        from_tflite(b.build([x, ne], [y]))
    b = TFLiteBuilder()  # SignalOverlapAdd has int16 and float32 kernels only
    x = b.tensor("x", (2, 4), "int32")
    y = b.tensor("y", (4,), "int32")
    b.custom_op("SignalOverlapAdd", [x], [y], _opts(T=2, frame_step=2))
    with pytest.raises(UnsupportedModelError, match="TensorType 2"):
        from_tflite(b.build([x], [y]))
    b = TFLiteBuilder()
    x = b.tensor("x", (8,), "int16")
    y = b.tensor("y", (10,), "int16")
    b.custom_op("SignalRfft", [x], [y], _opts(T=9, fft_length=8))
    with pytest.raises(UnsupportedModelError, match="TensorType 9"):
        from_tflite(b.build([x], [y]))
