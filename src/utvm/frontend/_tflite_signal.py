"""TFLite import of the signal operator family (utvm.ops.signal): TFLite Micro's signal library.

TFLite Micro's signal library ops are CUSTOM operators ("SignalWindow", ...) whose options are a flexbuffer
map; TFLM reads its values by position in key order, we read them by key (the same values for the maps
TensorFlow's converter writes). Semantics: utvm.ops.signal.
"""

from __future__ import annotations

from typing import Any

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend._tflite_core import Importer, RawOp, arity, converter, label

# TensorType codes of the FFTs' "T" option
_FFT_TYPES = {0: "float32", 2: "int32", 7: "int16"}


def _options(op: RawOp, keys: tuple[str, ...], bools: tuple[str, ...] = ()) -> dict[str, Any]:
    if not op.custom_options:
        raise ModelFormatError(f"{label(op)} has no custom options; it needs {', '.join(keys)}")
    from flatbuffers import flexbuffers

    try:
        root = flexbuffers.Loads(op.custom_options)
    except Exception as exc:  # noqa: BLE001 - any parser failure is a format error
        raise ModelFormatError(f"{label(op)}: custom options are not a flexbuffer map: {exc}") from exc
    if not isinstance(root, dict):
        raise ModelFormatError(f"{label(op)}: custom options are a flexbuffer {type(root).__name__}, not a map")
    out = {}
    for k in keys:
        if k not in root:
            raise ModelFormatError(f"{label(op)}: custom options lack {k!r} (have {sorted(root)})")
        v = root[k]
        if k in bools and isinstance(v, bool | int):  # TFLM's ElementAsBool: any non-zero value is true
            out[k] = bool(v)
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise ModelFormatError(f"{label(op)}: custom option {k!r} must be an integer, got {v!r}")
        out[k] = int(v)
    return out


def _outs(op: RawOp, outs: list[str], n: int) -> None:
    if len(outs) != n:
        raise ModelFormatError(f"{label(op)} has {len(outs)} outputs; expected {n}")


def _check_t(imp: Importer, op: RawOp, ins: list[str], t: int, types: dict[int, str], supported: str) -> None:
    """Option T (a TensorType code): one of `types` (TFLM's `supported` ones), and the input's dtype."""
    if t not in types:
        raise UnsupportedModelError(f"{label(op)}: T = TensorType {t} is not supported (TFLM: {supported})")
    dt = imp.tensors[ins[0]].dtype
    if dt != types[t]:
        raise ModelFormatError(f"{label(op)}: T says {types[t]} but input {ins[0]!r} is {dt}")


@converter("CUSTOM:SignalWindow")
def _window(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    _outs(op, outs, 1)
    o = _options(op, ("shift",))
    imp.emit("signal_window", ins, outs, shift=o["shift"])


@converter("CUSTOM:SignalFftAutoScale")
def _fft_auto_scale(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 2)
    imp.emit("signal_fft_auto_scale", ins, outs)


@converter("CUSTOM:SignalRfft", "CUSTOM:SignalIrfft")
def _rfft(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 1)
    o = _options(op, ("T", "fft_length"))
    _check_t(imp, op, ins, o["T"], _FFT_TYPES, "INT16, INT32, FLOAT32")
    name = "signal_rfft" if op.code.endswith("SignalRfft") else "signal_irfft"
    imp.emit(name, ins, outs, fft_length=o["fft_length"])


@converter("CUSTOM:SignalEnergy")
def _energy(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 1)
    o = _options(op, ("end_index", "start_index"))
    imp.emit("signal_energy", ins, outs, start_index=o["start_index"], end_index=o["end_index"])


@converter("CUSTOM:SignalFilterBank")
def _filter_bank(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 6, 6)
    _outs(op, outs, 1)
    o = _options(op, ("num_channels",))
    imp.emit("signal_filter_bank", ins, outs, num_channels=o["num_channels"])


@converter("CUSTOM:SignalFilterBankSquareRoot")
def _filter_bank_sqrt(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    _outs(op, outs, 1)
    imp.emit("signal_filter_bank_square_root", ins, outs)


@converter("CUSTOM:SignalFilterBankLog")
def _filter_bank_log(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 1)
    o = _options(op, ("input_correction_bits", "output_scale"))
    imp.emit("signal_filter_bank_log", ins, outs, input_correction_bits=o["input_correction_bits"],
             output_scale=o["output_scale"])


@converter("CUSTOM:SignalPCAN")
def _pcan(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 3, 3)
    _outs(op, outs, 1)
    o = _options(op, ("snr_shift",))
    imp.emit("signal_pcan", ins, outs, snr_shift=o["snr_shift"])


@converter("CUSTOM:SignalFramer")
def _framer(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 2)
    o = _options(op, ("frame_size", "frame_step", "prefill"), bools=("prefill",))
    imp.emit("signal_framer", ins, outs, frame_size=o["frame_size"], frame_step=o["frame_step"],
             prefill=o["prefill"])


@converter("CUSTOM:SignalStacker")
def _stacker(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 2)
    keys = ("num_channels", "stacker_left_context", "stacker_right_context", "stacker_step")
    imp.emit("signal_stacker", ins, outs, **_options(op, keys))


@converter("CUSTOM:SignalDelay")
def _delay(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 1)
    imp.emit("signal_delay", ins, outs, delay_length=_options(op, ("delay_length",))["delay_length"])


@converter("CUSTOM:SignalOverlapAdd")
def _overlap_add(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 1)
    o = _options(op, ("T", "frame_step"))
    _check_t(imp, op, ins, o["T"], {0: "float32", 7: "int16"}, "INT16, FLOAT32")
    imp.emit("signal_overlap_add", ins, outs, frame_step=o["frame_step"])


@converter("CUSTOM:SignalFilterBankSpectralSubtraction")
def _spectral_subtraction(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    _outs(op, outs, 2)
    keys = ("alternate_one_minus_smoothing", "alternate_smoothing", "clamping", "min_signal_remaining",
            "num_channels", "one_minus_smoothing", "smoothing", "smoothing_bits", "spectral_subtraction_bits")
    imp.emit("signal_filter_bank_spectral_subtraction", ins, outs, **_options(op, keys, bools=("clamping",)))
