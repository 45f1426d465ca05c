"""Pass `fold_batch_norm`: fold an inference batch_norm into the conv2d / depthwise_conv2d / dense before it.

batch_norm(x) == x * multiplier + offset per output channel (see `utvm.ops.batch_norm.fold_factors`), so
for a producer computing `x = W * in + b` it is the same as a producer with

    W' = W * multiplier   (along the output-channel axis: 0 of OHWI and of dense [O, K], 3 of 1HW(C*M))
    b' = b * multiplier + offset          (b = 0 when the producer has no bias)

A batch_norm is folded only when all of this holds; otherwise it is left in place (it has a reference
implementation and runs as a per-channel multiply-add):

- its input is produced by conv2d, depthwise_conv2d or dense with float32 constant weights and a constant
  (or absent) bias, and no fused activation;
- that output feeds nothing else and is not a graph output;
- scale, bias, mean and var are float32 constants.

The folded producer keeps its op, attributes and name, takes the batch_norm's place in the node order and
writes the batch_norm's output tensor.
"""

from __future__ import annotations

import numpy as np

from utvm.ir.graph import Graph, Node, Tensor
from utvm.ops.batch_norm import fold_factors

# producer op -> the output-channel axis of its weight
FOLDABLE = {"conv2d": 0, "depthwise_conv2d": 3, "dense": 0}


def _const(graph: Graph, name: str) -> np.ndarray | None:
    t = graph.tensors.get(name) if name else None
    if t is None or t.data is None or t.dtype != "float32" or t.quant is not None:
        return None
    return t.data


def _fresh(graph: Graph, taken: set[str], base: str) -> str:
    name, k = base, 1
    while name in graph.tensors or name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _try_fold(graph: Graph, bn: Node, producer: Node, taken: set[str]) -> tuple[Node, list[Tensor]] | None:
    axis = FOLDABLE.get(producer.op)
    if axis is None or producer.attrs.get("activation", "none") != "none" or len(producer.outputs) != 1:
        return None
    x = producer.outputs[0]
    if x in graph.outputs or len(graph.consumers(x)) != 1 or graph.tensors[x].dtype != "float32":
        return None
    w = _const(graph, producer.inputs[1]) if len(producer.inputs) > 1 else None
    has_bias = len(producer.inputs) > 2 and bool(producer.inputs[2])
    b = _const(graph, producer.inputs[2]) if has_bias else None
    params = [_const(graph, n) for n in bn.inputs[1:5]]
    if w is None or (has_bias and b is None) or len(params) != 4 or any(p is None for p in params):
        return None
    channels = w.shape[axis]
    if any(p is None or p.shape != (channels,) for p in params):
        return None
    multiplier, offset = fold_factors(*params, float(bn.attrs["epsilon"]))  # type: ignore[arg-type]
    bshape = [1] * w.ndim
    bshape[axis] = channels
    w_new = (w * multiplier.reshape(bshape)).astype(np.float32)
    b_old = b if b is not None else np.zeros(channels, np.float32)
    b_new = (b_old * multiplier + offset).astype(np.float32)
    w_name = _fresh(graph, taken, f"{producer.inputs[1]}_bn")
    b_name = _fresh(graph, taken, f"{producer.inputs[2] if has_bias else bn.outputs[0]}_bias_bn")
    tensors = [Tensor(w_name, w_new.shape, "float32", None, w_new),
               Tensor(b_name, b_new.shape, "float32", None, b_new)]
    folded = producer.replace(inputs=(producer.inputs[0], w_name, b_name), outputs=bn.outputs)
    return folded, tensors


def fold_batch_norm(graph: Graph) -> Graph:
    """Fold every foldable batch_norm into its producer (see the module docstring), repeating until none
    is left (so a chain conv -> batch_norm -> batch_norm folds entirely). Returns `graph` itself when
    nothing folds, else a new graph."""
    while True:
        folded = _fold_once(graph)
        if folded is graph:
            return graph
        graph = folded


def _fold_once(graph: Graph) -> Graph:
    replace: dict[int, Node] = {}
    drop: set[int] = set()
    extra: list[Tensor] = []
    taken: set[str] = set()
    for i, node in enumerate(graph.nodes):
        if node.op != "batch_norm" or not node.inputs:
            continue
        p = graph.producer(node.inputs[0])
        if p is None or p in replace or p in drop:
            continue
        result = _try_fold(graph, node, graph.nodes[p], taken)
        if result is None:
            continue
        folded, tensors = result
        # the producer moves to the batch_norm's position: its input is computed before it, and every
        # consumer of the batch_norm's output comes after it
        drop.add(p)
        replace[i] = folded
        extra.extend(tensors)
    if not replace:
        return graph
    nodes = [replace.get(i, n) for i, n in enumerate(graph.nodes) if i not in drop]
    return graph.with_nodes(nodes, extra)
