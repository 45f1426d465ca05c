"""Per-layer statistics of a graph: parameters (constant data the ops read) and multiply-accumulates."""

from __future__ import annotations

from dataclasses import dataclass

from utvm.ir.graph import Graph

# inputs that are operands (shape vectors, pads, axes) rather than parameters, per op: input index >= this
_OPERAND_INPUTS_FROM = {"reshape": 1, "transpose": 1, "pad": 1, "mean": 1}


@dataclass(frozen=True)
class LayerStats:
    index: int
    op: str
    name: str
    output_shape: tuple[int, ...]
    dtype: str
    params: int  # elements of constant inputs used as weights/biases/tables (shared constants counted once overall)
    macs: int    # multiply-accumulates (conv / depthwise / dense / matmul); 0 for other ops


def _prod(xs: tuple[int, ...]) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def node_macs(graph: Graph, index: int) -> int:
    node = graph.nodes[index]
    out = graph.tensors[node.outputs[0]].shape if node.outputs else ()
    if node.op in ("conv2d", "depthwise_conv2d") and len(node.inputs) > 1:
        w = graph.tensors[node.inputs[1]].shape
        per_output = w[1] * w[2] * (w[3] if node.op == "conv2d" else 1)
        return _prod(out) * per_output
    if node.op == "dense" and len(node.inputs) > 1:
        return _prod(out) * graph.tensors[node.inputs[1]].shape[1]
    if node.op == "matmul":
        a = graph.tensors[node.inputs[0]].shape
        return _prod(out) * (a[-1] if a else 1)
    return 0


def layer_stats(graph: Graph) -> list[LayerStats]:
    rows = []
    for i, node in enumerate(graph.nodes):
        first_operand = _OPERAND_INPUTS_FROM.get(node.op, len(node.inputs))
        params = sum(graph.tensors[x].size for k, x in enumerate(node.inputs)
                     if x and k < first_operand and graph.tensors[x].is_constant)
        out = graph.tensors[node.outputs[0]] if node.outputs else None
        rows.append(LayerStats(i, node.op, node.name, tuple(out.shape) if out else (), out.dtype if out else "",
                               params, node_macs(graph, i)))
    return rows


def parameter_count(graph: Graph) -> int:
    """Elements of all constant tensors read as parameters (each tensor counted once)."""
    seen: set[str] = set()
    total = 0
    for node in graph.nodes:
        first_operand = _OPERAND_INPUTS_FROM.get(node.op, len(node.inputs))
        for k, x in enumerate(node.inputs):
            if x and k < first_operand and x not in seen and graph.tensors[x].is_constant:
                seen.add(x)
                total += graph.tensors[x].size
    return total
