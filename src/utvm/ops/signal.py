"""The signal op family: TensorFlow Lite Micro's signal library (the audio front end), as TFLM computes it.

All of these are TFLM CUSTOM ops ("SignalWindow", ...) whose options come from a flexbuffer; the importer
(utvm.frontend._tflite_signal) fills every attribute. Integer semantics are TFLM's, bit for bit, including
its wrap-arounds (the C code of signal/src/*.cc computes in uint32/uint64 and int16 stores wrap):

  signal_window          (x int16[..., n], w int16[k])  shift=int  -> int16 like x
                         y = sat16((x * w[i mod k]) >> shift), the flat input taken in chunks of k
  signal_fft_auto_scale  (x int16[n])  -> (int16[n], int32[]): x << s and s = max(0, 15 - msb(max |x|))
                         (TFLM: msb(0) is 32 and |INT16_MIN| stays INT16_MIN, both giving s = 0)
  signal_rfft            (x T[..., n])  fft_length=int -> T[..., fft_length + 2] (interleaved re, im of
                         fft_length / 2 + 1 bins per row; rows zero-padded to fft_length). T int16, int32:
                         KISS FFT's fixed-point real FFT (each radix-r stage divides by r); float32: the DFT.
  signal_irfft           (X T[..., fft_length + 2])  fft_length=int -> T[..., fft_length]; int16/int32 KISS
                         FFT's fixed-point inverse (scaled by 1/fft_length-ish per stage), float32 the
                         inverse DFT (TFLM divides KISS FFT's result by fft_length).
  signal_energy          (x int16[2m])  start_index end_index -> uint32[m]: re^2 + im^2 for bins
                         start_index <= i < end_index (TFLM leaves the others unwritten; here they are 0)
  signal_filter_bank     (x uint32[n], weights, unweights, channel_frequency_starts, channel_weight_starts,
                         channel_widths: int16 constants)  num_channels -> uint64[num_channels]
  signal_filter_bank_square_root (x uint64[n], scale_bits int32[]) -> uint32[n]: isqrt64(x) >> scale_bits
  signal_filter_bank_log (x uint32[n])  input_correction_bits output_scale -> int16[n] (TFLM's Log32)
  signal_pcan            (x uint32[n], noise_estimate uint32[n], gain_lut int16[>=125])  snr_shift
                         -> uint32[n] (per-channel automatic gain control, fixed point)

Stateful ops (`state_spec` lists their state; the C kernels keep the same values in their persistent block):

  signal_framer          (x int16[..., k * frame_step])  frame_size frame_step prefill=bool
                         -> (int16[..., k, frame_size], bool[] output_valid): a FIFO per row
  signal_stacker         (x int16[num_channels])  num_channels stacker_left_context stacker_right_context
                         stacker_step -> (int16[num_channels * (left + right + 1)], bool[])
  signal_delay           (x int16[..., n])  delay_length -> int16[..., n] (each row delayed)
  signal_overlap_add     (x T[..., frames, frame_size])  frame_step -> T[..., frames * frame_step]; T int16
                         (saturating) or float32
  signal_filter_bank_spectral_subtraction (x uint32[n])  smoothing one_minus_smoothing alternate_smoothing
                         alternate_one_minus_smoothing min_signal_remaining smoothing_bits
                         spectral_subtraction_bits clamping=bool num_channels -> (uint32[n], noise uint32[n])

Where TFLM leaves an output unwritten (a framer frame or stacker output not yet valid), its value is
whatever the arena held; utvm writes zeros (framer) or repeats the last valid output (stacker, which is
what a TFLM model output shows once one was written).

The FFTs support an even fft_length >= 4 whose half factors into 2, 3, 4 and 5 (KISS FFT's specialised
butterflies); other lengths are refused: KISS FFT would use its generic butterfly, whose scratch TFLM's
build cannot allocate (it crashes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c

OPS: tuple[str, ...] = ("signal_window", "signal_fft_auto_scale", "signal_rfft", "signal_irfft", "signal_energy",
                        "signal_filter_bank", "signal_filter_bank_square_root", "signal_filter_bank_log",
                        "signal_pcan", "signal_framer", "signal_stacker", "signal_delay", "signal_overlap_add",
                        "signal_filter_bank_spectral_subtraction")

PCAN_LUT_MIN = 4 * 32 - 3  # WideDynamicFunction reads lut[4 * msb(x) - 6 + 2] with msb(x) <= 32


# --- what each op's kernel and reference need (prepare's result): one dataclass per op, or per group of ops that
# need exactly the same numbers. `op` is the node's op (a class may serve several). ----------------------------
@dataclass(frozen=True)
class WindowParams:
    """signal_window: `rows` chunks of `length` samples (the window's length), each times the window."""

    op: str
    rows: int
    length: int
    shift: int


@dataclass(frozen=True)
class VectorParams:
    """signal_fft_auto_scale, signal_filter_bank_square_root: one vector of n values."""

    op: str
    n: int


@dataclass(frozen=True)
class FftParams:
    """signal_rfft, signal_irfft: `rows` rows of `length` values of `dtype` (rfft: samples, zero-padded to
    fft_length; irfft: fft_length + 2 interleaved re, im). The tables come from fft_* below."""

    op: str
    dtype: str
    fft_length: int
    rows: int
    length: int


@dataclass(frozen=True)
class EnergyParams:
    """signal_energy: `bins` complex bins in, of which [start, end) are computed."""

    op: str
    bins: int
    start: int
    end: int


@dataclass(frozen=True)
class FilterBankParams:
    """signal_filter_bank: the configuration constants, num_channels + 1 entries of each per-channel table."""

    op: str
    num_channels: int
    weights: tuple[int, ...]
    unweights: tuple[int, ...]
    freq_starts: tuple[int, ...]
    weight_starts: tuple[int, ...]
    widths: tuple[int, ...]


@dataclass(frozen=True)
class FilterBankLogParams:
    op: str
    n: int
    correction_bits: int
    output_scale: int


@dataclass(frozen=True)
class PcanParams:
    op: str
    n: int
    snr_shift: int


@dataclass(frozen=True)
class FramerParams:
    """signal_framer: `outer` rows, each of n_frames * frame_step samples, with a FIFO of its own."""

    op: str
    frame_size: int
    frame_step: int
    prefill: bool
    outer: int
    n_frames: int


@dataclass(frozen=True)
class StackerParams:
    """signal_stacker: its FIFO counted in values: frame_size = num_channels * (left + right + 1) out,
    frame_step = num_channels * stacker_step dropped per output; `left` copies of the first input pre-fill it."""

    op: str
    num_channels: int
    left: int
    frame_size: int
    frame_step: int


@dataclass(frozen=True)
class DelayParams:
    """signal_delay: `outer` rows of `length` samples, each delayed by delay_length."""

    op: str
    outer: int
    length: int
    delay_length: int


@dataclass(frozen=True)
class OverlapAddParams:
    """signal_overlap_add: `outer` rows of n_frames frames of frame_size values of `dtype`."""

    op: str
    dtype: str
    frame_size: int
    frame_step: int
    n_frames: int
    outer: int


@dataclass(frozen=True)
class SpectralSubtractionParams:
    """signal_filter_bank_spectral_subtraction. smoothing: (smoothing, one_minus_smoothing) for even channels,
    then the alternate pair for odd ones."""

    op: str
    num_channels: int
    smoothing: tuple[int, int, int, int]
    clamping: bool
    min_signal_remaining: int
    smoothing_bits: int
    spectral_subtraction_bits: int


SignalParams = (WindowParams | VectorParams | FftParams | EnergyParams | FilterBankParams | FilterBankLogParams
                | PcanParams | FramerParams | StackerParams | DelayParams | OverlapAddParams
                | SpectralSubtractionParams)


def _int_attr(node: Node, graph: Graph, key: str) -> int:
    v = c.attr(node, graph, key)
    if isinstance(v, bool) or int(v) != v:
        raise c.fail(node, graph, f"attribute {key!r} must be an integer, got {v!r}")
    return int(v)


def _rank1(node: Node, graph: Graph, t, role: str) -> None:  # noqa: ANN001
    if len(t.shape) != 1:
        raise c.fail(node, graph, f"{role} {t.name!r} must be rank 1 (TFLM), got shape {list(t.shape)}")


def _fft_length(node: Node, graph: Graph) -> int:
    n = _int_attr(node, graph, "fft_length")
    if n < 4 or n % 2 or any(f not in FFT_RADICES for f in fft_factors(n // 2)):
        raise c.fail(node, graph, f"fft_length {n} is not supported: it must be even, >= 4, and half of it a "
                                  "product of 2, 3 and 5 (KISS FFT's butterflies TFLM can run)")
    return n


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    op = node.op
    if op == "signal_window":
        c.check_count(node, graph, 2)
        x, w = c.req(node, graph, 0), c.req(node, graph, 1)
        c.check_dtype(node, graph, x, ("int16",), "input")
        c.check_dtype(node, graph, w, ("int16",), "window weights")
        _rank1(node, graph, w, "window weights")
        if len(x.shape) < 1:
            raise c.fail(node, graph, f"input {x.name!r} must have rank >= 1")
        size = math.prod(x.shape)
        if w.shape[0] < 1 or size % w.shape[0]:
            raise c.fail(node, graph, f"input size {size} is not a multiple of the window length {w.shape[0]}")
        shift = _int_attr(node, graph, "shift")
        if not 0 <= shift <= 31:
            raise c.fail(node, graph, f"shift {shift} must be in [0, 31]")
        return [(tuple(x.shape), "int16")]
    if op == "signal_fft_auto_scale":
        c.check_count(node, graph, 1, 2)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("int16",), "input")
        _rank1(node, graph, x, "input")
        return [(tuple(x.shape), "int16"), ((), "int32")]
    if op in ("signal_rfft", "signal_irfft"):
        c.check_count(node, graph, 1)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("int16", "int32", "float32"), "input")
        if len(x.shape) < 1:
            raise c.fail(node, graph, f"input {x.name!r} must have rank >= 1")
        n = _fft_length(node, graph)
        last = x.shape[-1]
        if op == "signal_rfft":
            if last > n:
                raise c.fail(node, graph, f"rows of {last} samples are longer than fft_length {n}")
            return [((*x.shape[:-1], n + 2), x.dtype)]
        if last != n + 2:
            raise c.fail(node, graph, f"input rows hold {last} values; fft_length {n} needs {n + 2} "
                                      f"(fft_length / 2 + 1 complex bins)")
        return [((*x.shape[:-1], n), x.dtype)]
    if op == "signal_energy":
        c.check_count(node, graph, 1)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("int16",), "input")
        _rank1(node, graph, x, "input")
        if x.shape[0] % 2:
            raise c.fail(node, graph, f"input {x.name!r} holds complex values: its length {x.shape[0]} must be even")
        m = x.shape[0] // 2
        s, e = _int_attr(node, graph, "start_index"), _int_attr(node, graph, "end_index")
        if not 0 <= s <= e <= m:
            raise c.fail(node, graph, f"start_index {s} / end_index {e} must satisfy 0 <= start <= end <= {m}")
        return [((m,), "uint32")]
    if op == "signal_filter_bank":
        c.check_count(node, graph, 6)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("uint32",), "input")
        _rank1(node, graph, x, "input")
        nch = _int_attr(node, graph, "num_channels")
        if nch < 1:
            raise c.fail(node, graph, f"num_channels {nch} must be >= 1")
        roles = ("weights", "unweights", "channel_frequency_starts", "channel_weight_starts", "channel_widths")
        for k, role in enumerate(roles, start=1):
            t = c.req(node, graph, k)
            c.check_dtype(node, graph, t, ("int16",), role)
            _rank1(node, graph, t, role)
            if t.data is None:
                raise c.fail(node, graph, f"{role} {t.name!r} must be a constant")
        return [((nch,), "uint64")]
    if op == "signal_filter_bank_square_root":
        c.check_count(node, graph, 2)
        x, s = c.req(node, graph, 0), c.req(node, graph, 1)
        c.check_dtype(node, graph, x, ("uint64",), "input")
        c.check_dtype(node, graph, s, ("int32",), "scale_bits")
        _rank1(node, graph, x, "input")
        if len(s.shape) != 0:
            raise c.fail(node, graph, f"scale_bits {s.name!r} must be a scalar (rank 0)")
        return [(tuple(x.shape), "uint32")]
    if op == "signal_filter_bank_log":
        c.check_count(node, graph, 1)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("uint32",), "input")
        _rank1(node, graph, x, "input")
        cb = _int_attr(node, graph, "input_correction_bits")
        _int_attr(node, graph, "output_scale")
        if not 0 <= cb <= 31:
            raise c.fail(node, graph, f"input_correction_bits {cb} must be in [0, 31]")
        return [(tuple(x.shape), "int16")]
    if op == "signal_pcan":
        c.check_count(node, graph, 3)
        x, ne, lut = (c.req(node, graph, k) for k in range(3))
        c.check_dtype(node, graph, x, ("uint32",), "input")
        c.check_dtype(node, graph, ne, ("uint32",), "noise_estimate")
        c.check_dtype(node, graph, lut, ("int16",), "gain_lut")
        for t, role in ((x, "input"), (ne, "noise_estimate"), (lut, "gain_lut")):
            _rank1(node, graph, t, role)
        if x.shape[0] < 1 or ne.shape != x.shape:
            raise c.fail(node, graph, f"input {list(x.shape)} and noise_estimate {list(ne.shape)} must have the same "
                                      "non-zero length")
        if lut.shape[0] < PCAN_LUT_MIN:
            raise c.fail(node, graph, f"gain_lut {lut.name!r} has {lut.shape[0]} entries; TFLM reads up to "
                                      f"{PCAN_LUT_MIN}")
        sh = _int_attr(node, graph, "snr_shift")
        if not 0 <= sh <= 63:
            raise c.fail(node, graph, f"snr_shift {sh} must be in [0, 63]")
        return [(tuple(x.shape), "uint32")]
    if op == "signal_framer":
        c.check_count(node, graph, 1, 2)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("int16",), "input")
        if len(x.shape) < 1:
            raise c.fail(node, graph, f"input {x.name!r} must have rank >= 1")
        size, step = _int_attr(node, graph, "frame_size"), _int_attr(node, graph, "frame_step")
        inner = x.shape[-1]
        if size < 1 or step < 1 or inner < step or inner % step:
            raise c.fail(node, graph, f"frame_size {size} / frame_step {step} do not frame rows of {inner} samples "
                                      "(TFLM: frame_step >= 1 divides the innermost dimension)")
        if bool(c.attr(node, graph, "prefill")) and size < step:
            raise c.fail(node, graph, f"prefill needs frame_size {size} >= frame_step {step}")
        return [((*x.shape[:-1], inner // step, size), "int16"), ((), "bool")]
    if op == "signal_stacker":
        c.check_count(node, graph, 1, 2)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("int16",), "input")
        _rank1(node, graph, x, "input")
        nc = _int_attr(node, graph, "num_channels")
        left, right = _int_attr(node, graph, "stacker_left_context"), _int_attr(node, graph, "stacker_right_context")
        step = _int_attr(node, graph, "stacker_step")
        if nc < 1 or x.shape[0] != nc:
            raise c.fail(node, graph, f"num_channels {nc} must equal the input length {x.shape[0]}")
        if left < 0 or right < 0 or not 1 <= step <= left + right + 1:
            raise c.fail(node, graph, f"contexts ({left}, {right}) and step {step} must satisfy left, right >= 0 and "
                                      "1 <= step <= left + right + 1")
        return [((nc * (left + right + 1),), "int16"), ((), "bool")]
    if op == "signal_delay":
        c.check_count(node, graph, 1)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("int16",), "input")
        if len(x.shape) < 1 or x.shape[-1] < 1:
            raise c.fail(node, graph, f"input {x.name!r} needs rank >= 1 and a non-empty innermost dimension")
        if _int_attr(node, graph, "delay_length") < 0:
            raise c.fail(node, graph, "delay_length must be >= 0")
        return [(tuple(x.shape), "int16")]
    if op == "signal_overlap_add":
        c.check_count(node, graph, 1)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("int16", "float32"), "input")
        if len(x.shape) < 2:
            raise c.fail(node, graph, f"input {x.name!r} must have rank >= 2 ([..., frames, frame_size])")
        step = _int_attr(node, graph, "frame_step")
        if not 1 <= step <= x.shape[-1]:
            raise c.fail(node, graph, f"frame_step {step} must be in [1, frame_size {x.shape[-1]}]")
        return [((*x.shape[:-2], x.shape[-2] * step), x.dtype)]
    if op == "signal_filter_bank_spectral_subtraction":
        c.check_count(node, graph, 1, 2)
        x = c.req(node, graph, 0)
        c.check_dtype(node, graph, x, ("uint32",), "input")
        _rank1(node, graph, x, "input")
        nch = _int_attr(node, graph, "num_channels")
        if x.shape[0] != nch:
            raise c.fail(node, graph, f"num_channels {nch} must equal the input length {x.shape[0]}")
        for k in ("smoothing", "one_minus_smoothing", "alternate_smoothing", "alternate_one_minus_smoothing",
                  "min_signal_remaining"):
            if not 0 <= _int_attr(node, graph, k) < 2**32:
                raise c.fail(node, graph, f"{k} must be in [0, 2^32)")
        for k in ("smoothing_bits", "spectral_subtraction_bits"):
            if not 0 <= _int_attr(node, graph, k) <= 31:
                raise c.fail(node, graph, f"{k} must be in [0, 31]")
        return [((nch,), "uint32"), ((nch,), "uint32")]
    raise c.fail(node, graph, f"unknown signal op {op!r}")


def state_spec(p: SignalParams) -> list[tuple[tuple[int, ...], str]]:
    """Zero-initialised state (see utvm.ir.interp); the C kernels keep the same values in `state`."""
    if isinstance(p, FramerParams):  # per row: fill level relative to the initial one, and the FIFO
        return [((p.outer,), "int32"), ((p.outer, p.frame_size + p.frame_step), "int16")]
    if isinstance(p, StackerParams):  # (fill level, first frame seen), the FIFO, the last output
        return [((2,), "int32"), ((p.frame_size,), "int16"), ((p.frame_size,), "int16")]
    if isinstance(p, DelayParams):
        return [((p.outer, p.delay_length), "int16")] if p.delay_length else []
    if isinstance(p, OverlapAddParams):
        return [((p.outer, p.frame_size), p.dtype)]
    if isinstance(p, SpectralSubtractionParams):
        return [((p.num_channels,), "uint32")]
    return []


def prepare(node: Node, graph: Graph, rounding: str = "double") -> SignalParams:
    infer(node, graph)
    x = c.req(node, graph, 0)
    op = node.op
    if op == "signal_window":
        k = c.req(node, graph, 1).shape[0]
        return WindowParams(op, rows=math.prod(x.shape) // k, length=k, shift=_int_attr(node, graph, "shift"))
    if op in ("signal_fft_auto_scale", "signal_filter_bank_square_root"):
        return VectorParams(op, n=x.shape[0])
    if op in ("signal_rfft", "signal_irfft"):
        return FftParams(op, dtype=x.dtype, fft_length=_int_attr(node, graph, "fft_length"),
                         rows=math.prod(x.shape[:-1]), length=x.shape[-1])
    if op == "signal_energy":
        return EnergyParams(op, bins=x.shape[0] // 2, start=_int_attr(node, graph, "start_index"),
                            end=_int_attr(node, graph, "end_index"))
    if op == "signal_filter_bank":
        nch = _int_attr(node, graph, "num_channels")
        arrs = [c.ints(np.asarray(c.req(node, graph, k).data).reshape(-1)) for k in range(1, 6)]
        w, uw, fs, ws, wd = arrs
        for name, a in (("channel_frequency_starts", fs), ("channel_weight_starts", ws), ("channel_widths", wd)):
            if len(a) < nch + 1:
                raise c.fail(node, graph, f"{name} has {len(a)} entries; num_channels {nch} needs {nch + 1}")
        n_in = x.shape[0]
        for i in range(nch + 1):
            if wd[i] < 0 or fs[i] < 0 or ws[i] < 0 or fs[i] + wd[i] > n_in or ws[i] + wd[i] > min(len(w), len(uw)):
                raise c.fail(node, graph, f"channel {i} (frequency start {fs[i]}, weight start {ws[i]}, width "
                                          f"{wd[i]}) reads outside the input ({n_in}) or the weights "
                                          f"({len(w)}, {len(uw)})")
        return FilterBankParams(op, num_channels=nch, weights=w, unweights=uw, freq_starts=fs[:nch + 1],
                                weight_starts=ws[:nch + 1], widths=wd[:nch + 1])
    if op == "signal_filter_bank_log":
        return FilterBankLogParams(op, n=x.shape[0], correction_bits=_int_attr(node, graph, "input_correction_bits"),
                                   output_scale=_int_attr(node, graph, "output_scale"))
    if op == "signal_pcan":
        return PcanParams(op, n=x.shape[0], snr_shift=_int_attr(node, graph, "snr_shift"))
    if op == "signal_framer":
        inner = x.shape[-1]
        step = _int_attr(node, graph, "frame_step")
        return FramerParams(op, frame_size=_int_attr(node, graph, "frame_size"), frame_step=step,
                            prefill=bool(c.attr(node, graph, "prefill")), outer=math.prod(x.shape) // inner,
                            n_frames=inner // step)
    if op == "signal_stacker":
        nc = _int_attr(node, graph, "num_channels")
        left, right = _int_attr(node, graph, "stacker_left_context"), _int_attr(node, graph, "stacker_right_context")
        return StackerParams(op, num_channels=nc, left=left, frame_size=nc * (left + right + 1),
                             frame_step=nc * _int_attr(node, graph, "stacker_step"))
    if op == "signal_delay":
        inner = x.shape[-1]
        return DelayParams(op, outer=math.prod(x.shape) // inner, length=inner,
                           delay_length=_int_attr(node, graph, "delay_length"))
    if op == "signal_overlap_add":
        size, n_frames = x.shape[-1], x.shape[-2]
        return OverlapAddParams(op, dtype=x.dtype, frame_size=size, frame_step=_int_attr(node, graph, "frame_step"),
                                n_frames=n_frames, outer=math.prod(x.shape) // (size * n_frames))
    if op == "signal_filter_bank_spectral_subtraction":
        sm = tuple(_int_attr(node, graph, k) for k in ("smoothing", "one_minus_smoothing", "alternate_smoothing",
                                                        "alternate_one_minus_smoothing"))
        return SpectralSubtractionParams(op, num_channels=_int_attr(node, graph, "num_channels"),
                                         smoothing=sm,  # type: ignore[arg-type]
                                         clamping=bool(c.attr(node, graph, "clamping")),
                                         min_signal_remaining=_int_attr(node, graph, "min_signal_remaining"),
                                         smoothing_bits=_int_attr(node, graph, "smoothing_bits"),
                                         spectral_subtraction_bits=_int_attr(node, graph, "spectral_subtraction_bits"))
    raise c.fail(node, graph, f"unknown signal op {op!r}")


# --- integer helpers (TFLM's signal/src, in Python ints) ---------------------------------------------------
def _wrap(v: np.ndarray | int, bits: int) -> np.ndarray:
    """Two's complement wrap of int64 values to `bits` (a store into an intN_t)."""
    v = np.asarray(v, dtype=np.int64)
    if bits == 64:
        return v
    half = np.int64(1) << np.int64(bits - 1)
    return ((v + half) & np.int64((1 << bits) - 1)) - half


def msb32(x: int) -> int:
    """MostSignificantBit32 as TFLM builds it (GCC): bit length, and 32 for 0."""
    x &= 0xFFFFFFFF
    return x.bit_length() if x else 32


def _isqrt(num: int, bits: int) -> int:
    """TFLM's Sqrt32 (bits = 32) / Sqrt64 (bits = 64): bit-by-bit integer square root, rounded up when the
    remainder exceeds the root (unless the root is already the largest value of half the width)."""
    res = 0
    mbn = (bits - num.bit_length()) | 1
    bit = 1 << (bits - 1 - mbn)
    for _ in range((bits - 1 - mbn) // 2 + 1):
        if num >= res + bit:
            num -= res + bit
            res = (res >> 1) + bit
        else:
            res >>= 1
        bit >>= 2
    if num > res and res != (1 << (bits // 2)) - 1:
        res += 1
    return res & 0xFFFFFFFF


def sqrt64(num: int) -> int:
    if num == 0:
        return 0
    return _isqrt(num, 32 if num >> 32 == 0 else 64)


LOG_LUT = (
    0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797, 2944, 3087, 3224, 3358,
    3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549, 4633, 4714, 4791, 4864, 4934, 5001, 5063, 5123,
    5178, 5231, 5280, 5326, 5368, 5408, 5444, 5477, 5507, 5533, 5557, 5578, 5595, 5610, 5622, 5631, 5637, 5640, 5641,
    5638, 5633, 5626, 5615, 5602, 5586, 5568, 5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332, 5291, 5249, 5203, 5156,
    5106, 5054, 5000, 4944, 4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264, 4184, 4103, 4020, 3935, 3848,
    3759, 3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875, 2768, 2659, 2549, 2437, 2323, 2207, 2090, 1971, 1851,
    1729, 1605, 1480, 1353, 1224, 1094, 963, 830, 695, 559, 421, 282, 142, 0, 0)


def log32(x: int, out_scale: int) -> int:
    """TFLM's Log32: ln(x) * out_scale in Q16-ish fixed point (x > 1), all uint32 arithmetic."""
    integer = msb32(x) - 1
    frac = x - (1 << integer)  # < 2^31: fits the int32 TFLM keeps it in
    frac = frac << (16 - integer) if integer < 16 else frac >> (integer - 16)
    base_seg = frac >> 9
    c0, c1 = LOG_LUT[base_seg], LOG_LUT[base_seg + 1]
    rel_pos = ((c1 - c0) * (frac - 512 * base_seg)) >> 16
    fraction = (frac + c0 + rel_pos) & 0xFFFFFFFF
    log2 = ((integer << 16) + fraction) & 0xFFFFFFFF
    loge = ((45426 * log2 + 32768) >> 16) & 0xFFFFFFFF
    return ((((out_scale & 0xFFFFFFFF) * loge) + 32768) & 0xFFFFFFFF) >> 16


def _s16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def wide_dynamic_function(x: int, lut: np.ndarray) -> int:
    if x <= 2:
        return int(lut[x])
    interval = msb32(x)
    base = 4 * interval - 6
    frac = ((x << (11 - interval)) if interval < 11 else (x >> (interval - 11))) & 0x3FF
    result = (int(lut[base + 2]) * frac) >> 5
    result = _s32(result + _s32((int(lut[base + 1]) & 0xFFFFFFFF) << 5))
    result = _s32(result * frac)
    result = _s32(result + (1 << 14)) >> 15
    result += int(lut[base])
    return _s16(result)


def pcan_shrink(x: int) -> int:
    if x < (2 << 12):
        return ((x * x) & 0xFFFFFFFF) >> 20
    return ((x >> 6) - (1 << 6)) & 0xFFFFFFFF


# --- KISS FFT (fixed point), as TFLM builds it -------------------------------------------------------------
def fft_factors(n: int) -> list[int]:
    """KISS FFT's kf_factor: the radices of a complex length n, fours first, then twos, then odd primes
    (the first factor above floor(sqrt(n)) takes the rest)."""
    out = []
    p = 4
    floor_sqrt = math.floor(math.sqrt(n))
    while True:
        while n % p:
            p = 2 if p == 4 else (3 if p == 2 else p + 2)
            if p > floor_sqrt:
                p = n
        n //= p
        out.append(p)
        if n <= 1:
            return out


FFT_RADICES = (2, 3, 4, 5)  # TFLM's build has no scratch for KISS FFT's generic butterfly (it crashes)


def fft_stages(n: int) -> list[tuple[int, int]]:
    """KISS FFT's stages of a complex length n, outermost first: (radix p, sub-length m), m being n divided by
    this and every earlier radix (kf_work runs them innermost first; stage (p, m) has fstride n / (p * m))."""
    out, m = [], n
    for p in fft_factors(n):
        m //= p
        out.append((p, m))
    return out


def fft_leaf_order(n: int) -> list[int]:
    """The input index each output slot of kf_work's recursion starts from (mixed-radix digit reversal)."""

    def build(offset: int, fstride: int, factors: list[int]) -> list[int]:
        if not factors:
            return [offset]
        res: list[int] = []
        for q in range(factors[0]):
            res += build(offset + q * fstride, fstride * factors[0], factors[1:])
        return res

    return build(0, 1, fft_factors(n))


def fft_twiddles(n: int, inverse: bool, dtype: str) -> list[tuple[float, float]]:
    pi = math.pi
    out = []
    for i in range(n):
        phase = -2 * pi * i / n
        if inverse:
            phase *= -1
        out.append(_cexp(phase, dtype))
    return out


def fft_super_twiddles(nfft: int, inverse: bool, dtype: str) -> list[tuple[float, float]]:
    ncfft = nfft // 2
    out = []
    for i in range(ncfft // 2):
        phase = -math.pi * ((i + 1) / ncfft + 0.5)
        if inverse:
            phase *= -1
        out.append(_cexp(phase, dtype))
    return out


def _cexp(phase: float, dtype: str) -> tuple[float, float]:
    if dtype == "float32":
        return float(np.float32(math.cos(phase))), float(np.float32(math.sin(phase)))
    smax = 32767 if dtype == "int16" else 2147483647
    return math.floor(0.5 + smax * math.cos(phase)), math.floor(0.5 + smax * math.sin(phase))


class _Fixed:
    """KISS FFT fixed-point arithmetic on int64 numpy arrays (values of an int16 or int32 scalar type)."""

    def __init__(self, dtype: str) -> None:
        self.bits = 16 if dtype == "int16" else 32
        self.frac = self.bits - 1
        self.smax = (1 << self.frac) - 1

    def st(self, v: np.ndarray) -> np.ndarray:
        return _wrap(v, self.bits)

    def sround(self, v: np.ndarray) -> np.ndarray:
        return self.st((v + (1 << (self.frac - 1))) >> self.frac)

    def fixdiv(self, v: np.ndarray, k: int) -> np.ndarray:
        return self.sround(v * (self.smax // k))

    def cmul(self, ar: np.ndarray, ai: np.ndarray, br: np.ndarray, bi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.sround(ar * br - ai * bi), self.sround(ar * bi + ai * br)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.st(a + b)

    def smul(self, a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
        """S_MUL / C_MULBYSCALAR: sround(a * b)."""
        return self.sround(a * b)

    @staticmethod
    def halve(a: np.ndarray) -> np.ndarray:
        """HALF_OF(x) of one scalar: an arithmetic shift."""
        return a >> 1

    def half(self, s: np.ndarray) -> np.ndarray:
        """HALF_OF(a + b) given the exact sum: int16 shifts the int sum; int32 wraps the sum first."""
        if self.bits == 16:
            return self.st(s >> 1)
        return self.st(self.st(s) >> 1)


def _kiss_fft(fx: _Fixed, re: np.ndarray, im: np.ndarray, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """kiss_fft of n complex values (radices 2, 3, 4 and 5), fixed point; returns new arrays."""
    n = len(re)
    order = np.asarray(fft_leaf_order(n))
    tw = np.asarray(fft_twiddles(n, inverse, "int16" if fx.bits == 16 else "int32"), dtype=np.int64)
    twr, twi = tw[:, 0], tw[:, 1]
    fr, fi = re[order].copy(), im[order].copy()
    for p, m in reversed(fft_stages(n)):  # innermost first
        fstride = n // (p * m)
        blocks = np.arange(0, n, p * m)
        u = np.arange(m)
        idx = (blocks[:, None] + u[None, :]).reshape(-1)
        uu = np.tile(u, len(blocks))
        if p == 2:
            a_r, a_i = fx.fixdiv(fr[idx], 2), fx.fixdiv(fi[idx], 2)
            b_r, b_i = fx.fixdiv(fr[idx + m], 2), fx.fixdiv(fi[idx + m], 2)
            t_r, t_i = fx.cmul(b_r, b_i, twr[uu * fstride], twi[uu * fstride])
            fr[idx + m], fi[idx + m] = fx.add(a_r, -t_r), fx.add(a_i, -t_i)
            fr[idx], fi[idx] = fx.add(a_r, t_r), fx.add(a_i, t_i)
        elif p == 3:
            x = [(fx.fixdiv(fr[idx + q * m], 3), fx.fixdiv(fi[idx + q * m], 3)) for q in range(3)]
            e3i = twi[fstride * m]
            s1 = fx.cmul(*x[1], twr[uu * fstride], twi[uu * fstride])
            s2 = fx.cmul(*x[2], twr[2 * uu * fstride], twi[2 * uu * fstride])
            s3 = (fx.add(s1[0], s2[0]), fx.add(s1[1], s2[1]))
            s0 = (fx.add(s1[0], -s2[0]), fx.add(s1[1], -s2[1]))
            f1 = (fx.st(x[0][0] - fx.halve(s3[0])), fx.st(x[0][1] - fx.halve(s3[1])))
            s0 = (fx.smul(s0[0], e3i), fx.smul(s0[1], e3i))
            fr[idx], fi[idx] = fx.add(x[0][0], s3[0]), fx.add(x[0][1], s3[1])
            fr[idx + 2 * m], fi[idx + 2 * m] = fx.add(f1[0], s0[1]), fx.add(f1[1], -s0[0])
            fr[idx + m], fi[idx + m] = fx.add(f1[0], -s0[1]), fx.add(f1[1], s0[0])
        elif p == 5:
            x = [(fx.fixdiv(fr[idx + q * m], 5), fx.fixdiv(fi[idx + q * m], 5)) for q in range(5)]
            yar, yai = twr[fstride * m], twi[fstride * m]
            ybr, ybi = twr[2 * fstride * m], twi[2 * fstride * m]
            s1 = fx.cmul(*x[1], twr[uu * fstride], twi[uu * fstride])
            s2 = fx.cmul(*x[2], twr[2 * uu * fstride], twi[2 * uu * fstride])
            s3 = fx.cmul(*x[3], twr[3 * uu * fstride], twi[3 * uu * fstride])
            s4 = fx.cmul(*x[4], twr[4 * uu * fstride], twi[4 * uu * fstride])
            s7 = (fx.add(s1[0], s4[0]), fx.add(s1[1], s4[1]))
            s10 = (fx.add(s1[0], -s4[0]), fx.add(s1[1], -s4[1]))
            s8 = (fx.add(s2[0], s3[0]), fx.add(s2[1], s3[1]))
            s9 = (fx.add(s2[0], -s3[0]), fx.add(s2[1], -s3[1]))
            x0 = x[0]
            fr[idx], fi[idx] = fx.st(x0[0] + s7[0] + s8[0]), fx.st(x0[1] + s7[1] + s8[1])
            s5 = (fx.st(x0[0] + fx.smul(s7[0], yar) + fx.smul(s8[0], ybr)),
                  fx.st(x0[1] + fx.smul(s7[1], yar) + fx.smul(s8[1], ybr)))
            s6 = (fx.st(fx.smul(s10[1], yai) + fx.smul(s9[1], ybi)),
                  fx.st(-fx.smul(s10[0], yai) - fx.smul(s9[0], ybi)))
            fr[idx + m], fi[idx + m] = fx.add(s5[0], -s6[0]), fx.add(s5[1], -s6[1])
            fr[idx + 4 * m], fi[idx + 4 * m] = fx.add(s5[0], s6[0]), fx.add(s5[1], s6[1])
            s11 = (fx.st(x0[0] + fx.smul(s7[0], ybr) + fx.smul(s8[0], yar)),
                   fx.st(x0[1] + fx.smul(s7[1], ybr) + fx.smul(s8[1], yar)))
            s12 = (fx.st(-fx.smul(s10[1], ybi) + fx.smul(s9[1], yai)),
                   fx.st(fx.smul(s10[0], ybi) - fx.smul(s9[0], yai)))
            fr[idx + 2 * m], fi[idx + 2 * m] = fx.add(s11[0], s12[0]), fx.add(s11[1], s12[1])
            fr[idx + 3 * m], fi[idx + 3 * m] = fx.add(s11[0], -s12[0]), fx.add(s11[1], -s12[1])
        else:  # p == 4
            x = [(fx.fixdiv(fr[idx + q * m], 4), fx.fixdiv(fi[idx + q * m], 4)) for q in range(4)]
            s0 = fx.cmul(*x[1], twr[uu * fstride], twi[uu * fstride])
            s1 = fx.cmul(*x[2], twr[2 * uu * fstride], twi[2 * uu * fstride])
            s2 = fx.cmul(*x[3], twr[3 * uu * fstride], twi[3 * uu * fstride])
            s5 = (fx.add(x[0][0], -s1[0]), fx.add(x[0][1], -s1[1]))
            f0 = (fx.add(x[0][0], s1[0]), fx.add(x[0][1], s1[1]))
            s3 = (fx.add(s0[0], s2[0]), fx.add(s0[1], s2[1]))
            s4 = (fx.add(s0[0], -s2[0]), fx.add(s0[1], -s2[1]))
            fr[idx + 2 * m], fi[idx + 2 * m] = fx.add(f0[0], -s3[0]), fx.add(f0[1], -s3[1])
            fr[idx], fi[idx] = fx.add(f0[0], s3[0]), fx.add(f0[1], s3[1])
            if inverse:
                fr[idx + m], fi[idx + m] = fx.add(s5[0], -s4[1]), fx.add(s5[1], s4[0])
                fr[idx + 3 * m], fi[idx + 3 * m] = fx.add(s5[0], s4[1]), fx.add(s5[1], -s4[0])
            else:
                fr[idx + m], fi[idx + m] = fx.add(s5[0], s4[1]), fx.add(s5[1], -s4[0])
                fr[idx + 3 * m], fi[idx + 3 * m] = fx.add(s5[0], -s4[1]), fx.add(s5[1], s4[0])
    return fr, fi


def _rfft_fixed(row: np.ndarray, nfft: int, dtype: str) -> np.ndarray:
    fx = _Fixed(dtype)
    ncfft = nfft // 2
    x = np.zeros(nfft, dtype=np.int64)
    x[:len(row)] = row
    tr, ti = _kiss_fft(fx, x[0::2].copy(), x[1::2].copy(), False)
    st = np.asarray(fft_super_twiddles(nfft, False, dtype), dtype=np.int64)
    out_r = np.zeros(ncfft + 1, dtype=np.int64)
    out_i = np.zeros(ncfft + 1, dtype=np.int64)
    dr, di = fx.fixdiv(tr[0], 2), fx.fixdiv(ti[0], 2)
    out_r[0], out_r[ncfft] = fx.add(dr, di), fx.add(dr, -di)
    k = np.arange(1, ncfft // 2 + 1)
    pk_r, pk_i = fx.fixdiv(tr[k], 2), fx.fixdiv(ti[k], 2)
    pnk_r, pnk_i = fx.fixdiv(tr[ncfft - k], 2), fx.fixdiv(fx.st(-ti[ncfft - k]), 2)
    f1_r, f1_i = fx.add(pk_r, pnk_r), fx.add(pk_i, pnk_i)
    f2_r, f2_i = fx.add(pk_r, -pnk_r), fx.add(pk_i, -pnk_i)
    tw_r, tw_i = fx.cmul(f2_r, f2_i, st[k - 1, 0], st[k - 1, 1])
    out_r[k], out_i[k] = fx.half(f1_r + tw_r), fx.half(f1_i + tw_i)
    out_r[ncfft - k], out_i[ncfft - k] = fx.half(f1_r - tw_r), fx.half(tw_i - f1_i)
    res = np.empty(2 * (ncfft + 1), dtype=np.int64)
    res[0::2], res[1::2] = out_r, out_i
    return res


def _irfft_fixed(row: np.ndarray, nfft: int, dtype: str) -> np.ndarray:
    fx = _Fixed(dtype)
    ncfft = nfft // 2
    fr_, fi_ = row[0::2].astype(np.int64), row[1::2].astype(np.int64)
    st = np.asarray(fft_super_twiddles(nfft, True, dtype), dtype=np.int64)
    tr = np.zeros(ncfft, dtype=np.int64)
    ti = np.zeros(ncfft, dtype=np.int64)
    tr[0] = fx.fixdiv(fx.add(fr_[0], fr_[ncfft]), 2)
    ti[0] = fx.fixdiv(fx.add(fr_[0], -fr_[ncfft]), 2)
    k = np.arange(1, ncfft // 2 + 1)
    fk_r, fk_i = fx.fixdiv(fr_[k], 2), fx.fixdiv(fi_[k], 2)
    nk_r, nk_i = fx.fixdiv(fr_[ncfft - k], 2), fx.fixdiv(fx.st(-fi_[ncfft - k]), 2)
    ek_r, ek_i = fx.add(fk_r, nk_r), fx.add(fk_i, nk_i)
    t_r, t_i = fx.add(fk_r, -nk_r), fx.add(fk_i, -nk_i)
    ok_r, ok_i = fx.cmul(t_r, t_i, st[k - 1, 0], st[k - 1, 1])
    tr[k], ti[k] = fx.add(ek_r, ok_r), fx.add(ek_i, ok_i)
    tr[ncfft - k] = fx.add(ek_r, -ok_r)
    ti[ncfft - k] = fx.st(-fx.add(ek_i, -ok_i))
    yr, yi = _kiss_fft(fx, tr, ti, True)
    out = np.empty(nfft, dtype=np.int64)
    out[0::2], out[1::2] = yr, yi
    return out


def _rows(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, x.shape[-1]) if x.size else x.reshape(0, x.shape[-1] if x.ndim else 0)


def _stateful(p: SignalParams, arrays: tuple[np.ndarray, ...],
              state: list[np.ndarray]) -> np.ndarray | tuple[np.ndarray, ...]:
    if isinstance(p, FramerParams):
        x = arrays[0].reshape(p.outer, -1)
        cnt, buf = state
        base = p.frame_size - p.frame_step if p.prefill else 0
        out = np.zeros((p.outer, p.n_frames, p.frame_size), dtype=np.int16)
        valid = True
        size, step = p.frame_size, p.frame_step
        for r in range(p.outer):
            n = base + int(cnt[r])
            for f in range(p.n_frames):
                buf[r, n:n + step] = x[r, f * step:(f + 1) * step]
                n += step
                if n >= size:
                    out[r, f] = buf[r, :size]
                    buf[r, :n - step] = buf[r, step:n].copy()
                    n -= step
                else:
                    valid = False  # TFLM leaves this frame unwritten; utvm writes zeros
            cnt[r] = n - base
        return out.reshape(*arrays[0].shape[:-1], p.n_frames, p.frame_size), np.array(valid)
    if isinstance(p, StackerParams):
        x = arrays[0]
        info, buf, last = state
        nc = p.num_channels
        n = int(info[0])
        buf[n:n + nc] = x
        n += nc
        if not info[1]:
            for _ in range(p.left):
                buf[n:n + nc] = x
                n += nc
            info[1] = 1
        if n >= p.frame_size:
            out = buf[:p.frame_size].copy()
            last[...] = out
            buf[:n - p.frame_step] = buf[p.frame_step:n].copy()
            n -= p.frame_step
            valid = True
        else:  # TFLM leaves the output unwritten: it still holds the last output (zeros before the first)
            out = last.copy()
            valid = False
        info[0] = n
        return out, np.array(valid)
    if isinstance(p, DelayParams):
        x = arrays[0].reshape(p.outer, p.length)
        (buf,) = state
        cat = np.concatenate([buf, x], axis=1)
        buf[...] = cat[:, p.length:]
        return cat[:, :p.length].reshape(arrays[0].shape).astype(np.int16)
    if isinstance(p, OverlapAddParams):
        x = arrays[0].reshape(p.outer, p.n_frames, p.frame_size)
        (buf,) = state
        step = p.frame_step
        out = np.zeros((p.outer, p.n_frames * step), dtype=x.dtype)
        for r in range(p.outer):
            for f in range(p.n_frames):
                if p.dtype == "int16":
                    buf[r] = np.clip(buf[r].astype(np.int32) + x[r, f], -32768, 32767).astype(np.int16)
                else:
                    buf[r] = buf[r] + x[r, f]
                out[r, f * step:(f + 1) * step] = buf[r, :step]
                buf[r, :p.frame_size - step] = buf[r, step:].copy()
                buf[r, p.frame_size - step:] = 0
        return out.reshape(*arrays[0].shape[:-2], p.n_frames * step)
    if isinstance(p, SpectralSubtractionParams):
        (noise,) = state
        m32 = 0xFFFFFFFF
        out = []
        for i, v in enumerate(int(a) for a in arrays[0].tolist()):
            sm, oms = (p.smoothing[0], p.smoothing[1]) if i % 2 == 0 else (p.smoothing[2], p.smoothing[3])
            sig = (v << p.smoothing_bits) & m32
            ne = (((sig * sm + int(noise[i]) * oms) & ((1 << 64) - 1)) >> p.spectral_subtraction_bits) & m32
            est = ne
            if est > sig:
                est = sig
                if p.clamping:
                    ne = est
            noise[i] = ne
            floor = ((v * p.min_signal_remaining) >> p.spectral_subtraction_bits) & m32
            sub = (sig - est) >> p.smoothing_bits
            out.append(max(sub, floor))
        return np.array(out, dtype=np.uint32), noise.copy()
    raise ValueError(f"unknown stateful signal op {p.op!r}")


def reference(p: SignalParams, *arrays: np.ndarray,
              state: list[np.ndarray] | None = None) -> np.ndarray | tuple[np.ndarray, ...]:
    op = p.op
    if isinstance(p, DelayParams) and not p.delay_length:
        return arrays[0].copy()
    if state is not None:
        return _stateful(p, arrays, state)
    if isinstance(p, WindowParams):
        x, w = arrays[0], arrays[1]
        k = p.length
        flat = x.reshape(-1, k).astype(np.int64)
        raw = (flat * w.astype(np.int64)[None, :]) >> p.shift
        return np.clip(raw, -32768, 32767).astype(np.int16).reshape(x.shape)
    if op == "signal_fft_auto_scale":
        x = arrays[0]
        mx = 0
        for v in x.tolist():
            if v > mx:
                mx = v
            elif -v > mx:
                mx = _s16(-v)
        s = max(0, 16 - msb32(mx) - 1)
        y = _wrap(x.astype(np.int64) << s, 16).astype(np.int16)
        return y, np.array(s, dtype=np.int32)
    if isinstance(p, FftParams) and op == "signal_rfft":
        x = arrays[0]
        rows = _rows(x)
        n = p.fft_length
        if p.dtype == "float32":
            pad = np.zeros((rows.shape[0], n), dtype=np.float64)
            pad[:, :rows.shape[1]] = rows
            f = np.fft.rfft(pad, n=n, axis=1)
            out = np.empty((rows.shape[0], n + 2), dtype=np.float32)
            out[:, 0::2], out[:, 1::2] = f.real, f.imag
        else:
            out = np.stack([_rfft_fixed(r.astype(np.int64), n, p.dtype) for r in rows]).astype(p.dtype) \
                if rows.shape[0] else np.zeros((0, n + 2), dtype=p.dtype)
        return out.reshape(*x.shape[:-1], n + 2)
    if isinstance(p, FftParams):  # signal_irfft
        x = arrays[0]
        rows = _rows(x)
        n = p.fft_length
        if p.dtype == "float32":
            spec = rows[:, 0::2].astype(np.float64) + 1j * rows[:, 1::2].astype(np.float64)
            out = np.fft.irfft(spec, n=n, axis=1).astype(np.float32)
        else:
            out = np.stack([_irfft_fixed(r, n, p.dtype) for r in rows]).astype(p.dtype) \
                if rows.shape[0] else np.zeros((0, n), dtype=p.dtype)
        return out.reshape(*x.shape[:-1], n)
    if isinstance(p, EnergyParams):
        x = arrays[0].astype(np.int64)
        re, im = x[0::2], x[1::2]
        out = np.zeros(len(re), dtype=np.uint64)
        sl = slice(p.start, p.end)
        out[sl] = ((re[sl] * re[sl]) + (im[sl] * im[sl])).astype(np.uint64) & np.uint64(0xFFFFFFFF)
        return out.astype(np.uint32)
    if isinstance(p, FilterBankParams):
        x = [int(v) for v in arrays[0].tolist()]
        mask = (1 << 64) - 1
        acc_w, acc_u = 0, 0
        res = []
        for i in range(p.num_channels + 1):
            fs, ws = p.freq_starts[i], p.weight_starts[i]
            for j in range(p.widths[i]):
                acc_w = (acc_w + (p.weights[ws + j] & mask) * x[fs + j]) & mask
                acc_u = (acc_u + (p.unweights[ws + j] & mask) * x[fs + j]) & mask
            res.append(acc_w)
            acc_w, acc_u = acc_u, 0
        return np.array(res[1:], dtype=np.uint64)
    if op == "signal_filter_bank_square_root":
        x, s = arrays[0], int(arrays[1])
        vals = [sqrt64(int(v)) for v in x.tolist()]
        return np.array([v >> s if 0 <= s < 32 else 0 for v in vals], dtype=np.uint32)
    if isinstance(p, FilterBankLogParams):
        res = []
        for v in arrays[0].tolist():
            scaled = (int(v) << p.correction_bits) & 0xFFFFFFFF
            res.append(min(log32(scaled, p.output_scale), 32767) if scaled > 1 else 0)
        return np.array(res, dtype=np.int16)
    if isinstance(p, PcanParams):
        x, ne, lut = arrays
        res = []
        for v, n in zip(x.tolist(), ne.tolist(), strict=True):
            gain = wide_dynamic_function(int(n), lut) & 0xFFFFFFFF
            snr = ((int(v) * gain) >> p.snr_shift) & 0xFFFFFFFF
            res.append(pcan_shrink(snr))
        return np.array(res, dtype=np.uint32)
    raise ValueError(f"unknown signal op {op!r}")
