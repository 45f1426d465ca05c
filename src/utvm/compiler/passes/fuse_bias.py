"""Pass `fuse_bias`: a float32 conv2d / depthwise_conv2d / dense followed by `add` (or `sub`) of a
constant that varies only along the output channels becomes the op with that constant in its bias.

Conditions: the producer has float32 constant weights, a constant or absent bias and no fused activation;
its output is read only by that add/sub and is not a graph output; the constant broadcasts as a per-
channel vector (every dimension 1 except possibly the last, which is the channel count or 1), and the
add/sub output has the producer's output shape. The fused op keeps its op, attributes and name, takes the
add's activation and writes the add's output. int8 adds requantize, so they are never fused.
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.passes._util import consumers, fresh_name, sole_use
from utvm.ir.graph import Graph, Node, Tensor

PRODUCERS = ("conv2d", "depthwise_conv2d", "dense")


def _channel_vector(c: np.ndarray, channels: int) -> np.ndarray | None:
    if c.ndim == 0:
        return np.full(channels, c, dtype=np.float32)
    if any(d != 1 for d in c.shape[:-1]) or c.shape[-1] not in (1, channels):
        return None
    return np.broadcast_to(c.reshape(-1), (channels,)).astype(np.float32)


def _try(graph: Graph, uses: dict[str, list[int]], i: int, taken: set[str]) -> tuple[int, Node, Tensor] | None:
    node = graph.nodes[i]
    if node.op not in PRODUCERS or node.attrs.get("activation", "none") != "none" or len(node.inputs) < 2:
        return None
    y = node.outputs[0]
    j = sole_use(graph, uses, y)
    if j is None:
        return None
    user = graph.nodes[j]
    if user.op not in ("add", "sub") or graph.tensors[y].dtype != "float32":
        return None
    if tuple(graph.tensors[user.outputs[0]].shape) != tuple(graph.tensors[y].shape):
        return None
    other = user.inputs[1] if user.inputs[0] == y else user.inputs[0]
    if user.op == "sub" and user.inputs[0] != y:
        return None  # c - y is not a bias
    t_c = graph.tensors.get(other)
    w = graph.tensors[node.inputs[1]]
    if t_c is None or t_c.data is None or t_c.dtype != "float32" or w.data is None or w.dtype != "float32":
        return None
    channels = graph.tensors[y].shape[-1]
    vec = _channel_vector(t_c.data, channels)
    if vec is None:
        return None
    old = graph.tensors.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if old is not None and old.data is None:
        return None
    base = old.data.astype(np.float32) if old is not None else np.zeros(channels, np.float32)
    bias = (base + vec if user.op == "add" else base - vec).astype(np.float32)
    name = fresh_name(graph, taken, f"{node.name or y}_bias")
    fused = node.replace(inputs=(node.inputs[0], node.inputs[1], name), outputs=user.outputs,
                         attrs={**node.attrs, "activation": user.attrs.get("activation", "none")})
    return j, fused, Tensor(name, (channels,), "float32", None, bias)


def fuse_bias(graph: Graph) -> Graph:
    while True:
        uses = consumers(graph)
        taken: set[str] = set()
        for i in range(len(graph.nodes)):
            hit = _try(graph, uses, i, taken)
            if hit is None:
                continue
            j, fused, bias = hit
            nodes = [fused if k == j else n for k, n in enumerate(graph.nodes) if k != i]
            graph = graph.with_nodes(nodes, [bias])
            break
        else:
            return graph
