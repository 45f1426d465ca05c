"""batch_norm: inference-mode batch normalisation over the last (channel) axis, float32.

    batch_norm(x[..., C], scale[C], bias[C], mean[C], var[C])  epsilon=float
    y = (x - mean) / sqrt(var + epsilon) * scale + bias

The ONNX frontend produces it (NHWC, so channels are last); the pass `fold_batch_norm` folds it into a
preceding conv2d / depthwise_conv2d / dense whenever it can, so on-device code rarely sees it. When it
stays, it runs as one multiply-add per element: `y = x * multiplier[c] + offset[c]`, with

    multiplier = scale / sqrt(var + epsilon)      (float32)
    offset     = bias - mean * multiplier        (float32)

`prepare` computes both once when the four parameter tensors are constants; `reference` does the same
arithmetic from the arrays otherwise, so constant and runtime parameters give identical results. The fold
pass uses `fold_factors` too, so folded and unfolded graphs share one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops._common import OutType, attr, check_count, check_dtype, fail, out, req

OPS: tuple[str, ...] = ("batch_norm",)

PARAM_ROLES = ("scale", "bias", "mean", "var")


@dataclass(frozen=True, slots=True)
class BatchNormAttrs:
    epsilon: float


@dataclass(frozen=True, slots=True)
class BatchNormParams:
    """Everything a batch_norm kernel needs.

    channels:   C, the size of the last axis of x.
    epsilon:    added to the variance.
    multiplier: float32[C] `scale / sqrt(var + epsilon)`, or None when the parameters are runtime tensors.
    offset:     float32[C] `bias - mean * multiplier`, or None likewise.
    """

    channels: int
    epsilon: float
    multiplier: np.ndarray | None
    offset: np.ndarray | None


def attrs_of(node: Node, graph: Graph) -> BatchNormAttrs:
    eps = float(attr(node, graph, "epsilon"))
    if not eps >= 0.0:
        raise fail(node, graph, f"epsilon {eps} must be non-negative")
    return BatchNormAttrs(eps)


def fold_factors(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray,
                 epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, offset), float32[C]: batch_norm(x) == x * multiplier + offset."""
    f32 = np.float32
    multiplier = (np.asarray(scale, f32) / np.sqrt(np.asarray(var, f32) + f32(epsilon))).astype(f32)
    offset = (np.asarray(bias, f32) - np.asarray(mean, f32) * multiplier).astype(f32)
    return multiplier, offset


def infer(node: Node, graph: Graph) -> list[OutType]:
    check_count(node, graph, 5)
    attrs_of(node, graph)
    x = req(node, graph, 0)
    check_dtype(node, graph, x, ("float32",), "input")
    if not x.shape:
        raise fail(node, graph, f"input {x.name!r} is a scalar; batch_norm needs a channel axis")
    c = x.shape[-1]
    for i, role in enumerate(PARAM_ROLES, start=1):
        t = req(node, graph, i)
        check_dtype(node, graph, t, ("float32",), role)
        if t.shape != (c,):
            raise fail(node, graph, f"{role} {t.name!r} has shape {list(t.shape)}, expected [{c}] (the "
                                    f"last axis of {x.name!r} {list(x.shape)})")
    return [(x.shape, "float32")]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> BatchNormParams:
    """`rounding` is unused (float only); it is accepted for the common op-module signature."""
    infer(node, graph)
    eps = attrs_of(node, graph).epsilon
    y = out(node, graph)
    params = [req(node, graph, i) for i in range(1, 5)]
    channels = req(node, graph, 0).shape[-1]
    if y.dtype != "float32":
        raise fail(node, graph, f"output {y.name!r} has dtype {y.dtype}; batch_norm is float32 only")
    if all(p.data is not None for p in params):
        multiplier, offset = fold_factors(*(p.data for p in params), eps)  # type: ignore[misc]
        return BatchNormParams(channels, eps, multiplier, offset)
    return BatchNormParams(channels, eps, None, None)


def reference(params: BatchNormParams, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
              var: np.ndarray) -> np.ndarray:
    if params.multiplier is not None and params.offset is not None:
        multiplier, offset = params.multiplier, params.offset
    else:
        multiplier, offset = fold_factors(scale, bias, mean, var, params.epsilon)
    return (np.asarray(x, np.float32) * multiplier + offset).astype(np.float32)
