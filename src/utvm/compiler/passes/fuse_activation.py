"""Pass `fuse_activation`: relu / relu6 / clip after an op with an `activation` attribute becomes that
fused activation, when it computes exactly the same thing.

Producers: conv2d, depthwise_conv2d, dense, add, sub, mul, max_pool2d, avg_pool2d with activation
"none", whose output is read only by the activation node and is not a graph output. Mapping: relu ->
"relu", relu6 -> "relu6", clip(0, inf) -> "relu", clip(0, 6) -> "relu6", clip(-1, 1) -> "relu_n1_to_1";
other clip ranges stay separate. int8: only when the activation's input and output quantization are equal
(its requantization is then the identity and its clamp range is the fused range, see utvm.ops._quant).
The fused op keeps its op, attributes and name, and writes the activation's output.
"""

from __future__ import annotations

from utvm.compiler.passes._util import consumers, sole_use
from utvm.ir.graph import Graph

PRODUCERS = ("conv2d", "depthwise_conv2d", "dense", "add", "sub", "mul", "max_pool2d", "avg_pool2d")
_CLIPS = {(0.0, float("inf")): "relu", (0.0, 6.0): "relu6", (-1.0, 1.0): "relu_n1_to_1"}


def fused_name(op: str, attrs: dict) -> str | None:
    if op in ("relu", "relu6"):
        return op
    if op == "clip":
        return _CLIPS.get((float(attrs.get("min", float("-inf"))), float(attrs.get("max", float("inf")))))
    return None


def fuse_activation(graph: Graph) -> Graph:
    while True:
        uses = consumers(graph)
        for i, node in enumerate(graph.nodes):
            if node.op not in PRODUCERS or node.attrs.get("activation", "none") != "none":
                continue
            j = sole_use(graph, uses, node.outputs[0])
            if j is None:
                continue
            act = graph.nodes[j]
            name = fused_name(act.op, dict(act.attrs))
            if name is None:
                continue
            t_in, t_out = graph.tensors[act.inputs[0]], graph.tensors[act.outputs[0]]
            if t_in.dtype != "float32" and t_in.quant != t_out.quant:
                continue
            fused = node.replace(outputs=act.outputs, attrs={**node.attrs, "activation": name})
            graph = graph.with_nodes([fused if k == j else n for k, n in enumerate(graph.nodes) if k != i])
            break
        else:
            return graph
