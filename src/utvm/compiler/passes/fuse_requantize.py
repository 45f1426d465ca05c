"""Pass `fuse_requantize`: the QDQ form of a quantized layer becomes the int8 operator.

    x_q --dequantize--> x_f ─┐
    w_q --dequantize--> w_f ─┼─ conv2d / depthwise_conv2d / dense (float32, [bias_f], activation) --> y_f
                    [bias_f] ┘                                                  y_f --quantize--> y_q

becomes `op(x_q, w_q, bias_q) -> y_q` in int8, with the requantization (s_x * s_w / s_y) and the clamp of
the activation folded into the op (TFLite's int8 semantics, see utvm.ops.conv2d / utvm.ops.dense), and

    bias_q[o] = round(bias_f[o] / (s_x * s_w[o]))      (int32, round half to even; scale s_x * s_w[o])

Conditions: x_q is int8 with per-tensor quantization; w_q is a constant int8 tensor, symmetric (zero point
0), per-tensor or per-channel along the op's output-channel axis; bias_f is absent or a float32 constant;
y_f is read only by the quantize (to int8, per-tensor) and is not a graph output. The dequantize nodes stay
for any other reader (eliminate_dead_nodes removes them otherwise). The result differs from the float
graph only by the quantization of the result (the point of QDQ).

An int8 op followed by an int8 -> int8 quantize is NOT fused: requantizing twice rounds twice, so the
fusion would not be exact.
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.passes._util import consumers, fresh_name, producers, sole_use
from utvm.ir.graph import Graph, Node, Quantization, Tensor

CHANNEL_AXIS = {"conv2d": 0, "depthwise_conv2d": 3, "dense": 0}


def _dequantized(graph: Graph, prod: dict[str, int], name: str) -> str | None:
    """The int8 tensor `name` was dequantized from, if it is the output of a dequantize node."""
    p = prod.get(name)
    if p is None or graph.nodes[p].op != "dequantize":
        return None
    src = graph.nodes[p].inputs[0]
    return src if graph.tensors[src].dtype == "int8" else None


def _try(graph: Graph, uses: dict[str, list[int]], prod: dict[str, int], i: int, taken: set[str]
         ) -> tuple[int, Node, list[Tensor]] | None:
    node = graph.nodes[i]
    axis = CHANNEL_AXIS.get(node.op)
    if axis is None or len(node.inputs) < 2 or graph.tensors[node.outputs[0]].dtype != "float32":
        return None
    j = sole_use(graph, uses, node.outputs[0])
    if j is None or graph.nodes[j].op != "quantize":
        return None
    y_q = graph.tensors[graph.nodes[j].outputs[0]]
    if y_q.dtype != "int8":
        return None
    x_name = _dequantized(graph, prod, node.inputs[0])
    w_name = _dequantized(graph, prod, node.inputs[1])
    if x_name is None or w_name is None:
        return None
    x_q, w_q = graph.tensors[x_name], graph.tensors[w_name]
    if (w_q.data is None or w_q.quant is None or x_q.quant is None or y_q.quant is None
            or len(x_q.quant.scale) != 1 or len(y_q.quant.scale) != 1 or any(z != 0 for z in w_q.quant.zero_point)):
        return None
    channels = w_q.shape[axis]
    if len(w_q.quant.scale) > 1 and (w_q.quant.axis != axis or len(w_q.quant.scale) != channels):
        return None
    w_scales = np.broadcast_to(np.asarray(w_q.quant.scale, np.float64), (channels,))
    bias_scales = x_q.quant.scale[0] * w_scales
    inputs = [x_name, w_name]
    extra: list[Tensor] = []
    b_name = node.inputs[2] if len(node.inputs) > 2 else ""
    if b_name:
        b = graph.tensors[b_name]
        if b.data is None or b.dtype != "float32" or b.shape != (channels,):
            return None
        q = np.rint(b.data.astype(np.float64) / bias_scales)
        if np.any(np.abs(q) > 2**31 - 1):
            return None
        name = fresh_name(graph, taken, f"{b_name}_int32")
        per_channel = len(w_q.quant.scale) > 1
        quant = Quantization(tuple(float(s) for s in (bias_scales if per_channel else bias_scales[:1])),
                             (0,) * (channels if per_channel else 1), 0 if per_channel else None)
        extra.append(Tensor(name, (channels,), "int32", quant, q.astype(np.int32)))
        inputs.append(name)
    fused = node.replace(inputs=tuple(inputs), outputs=graph.nodes[j].outputs)
    return j, fused, extra


def fuse_requantize(graph: Graph) -> Graph:
    while True:
        uses, prod = consumers(graph), producers(graph)
        taken: set[str] = set()
        for i in range(len(graph.nodes)):
            hit = _try(graph, uses, prod, i, taken)
            if hit is None:
                continue
            j, fused, extra = hit
            graph = graph.with_nodes([fused if k == j else n for k, n in enumerate(graph.nodes) if k != i], extra)
            break
        else:
            return graph
