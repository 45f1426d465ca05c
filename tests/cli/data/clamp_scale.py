"""The numpy twins of clamp_scale.c (the reference interpreter's implementations of its user operators)."""

from __future__ import annotations

import numpy as np

from utvm.custom_ops import CustomTensor


def clamp_scale(inputs: list[CustomTensor], outputs: list[CustomTensor], options: bytes) -> int:
    lo, hi = np.frombuffer(options[:2], np.int8).astype(np.int32)
    mul, shift = options[2], options[3]
    if lo > hi:
        return 42
    v = (inputs[0].data.astype(np.int32) - inputs[0].zero_point) * mul
    q = np.floor_divide(v, 1 << shift) + outputs[0].zero_point
    outputs[0].data[...] = np.clip(q, lo, hi).astype(np.int8)
    return 0


def scale_clamp_f32(inputs: list[CustomTensor], outputs: list[CustomTensor], options: bytes) -> None:
    a, lo, hi = np.frombuffer(options, "<f4")
    outputs[0].data[...] = np.minimum(np.maximum(inputs[0].data * a, lo), hi)
