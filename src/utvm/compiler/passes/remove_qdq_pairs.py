"""Pass `remove_qdq_pairs`: remove quantization round trips that change nothing.

- dequantize(x) -> quantize with the same scale and zero point as x: readers of the quantize use x (the
  round trip is exact: float(s * (q - z)) / s rounds back to q - z for every int8 q);
- quantize int8 -> int8 with identical input and output quantization (an identity requantization).

Only int8 is considered: a quantize to or from uint8 (model I/O) always stays.

quantize -> dequantize (float -> int8 -> float) loses precision, so it is kept.
"""

from __future__ import annotations

from utvm.compiler.passes._util import consumers, producers, rename_inputs
from utvm.ir.graph import Graph, Node


def _same_q(graph: Graph, a: str, b: str) -> bool:
    qa, qb = graph.tensors[a].quant, graph.tensors[b].quant
    return (qa is not None and qb is not None and len(qa.scale) == 1 and len(qb.scale) == 1
            and qa.scale[0] == qb.scale[0] and qa.zero_point[0] == qb.zero_point[0])


def remove_qdq_pairs(graph: Graph) -> Graph:
    prod = producers(graph)
    uses = consumers(graph)
    mapping: dict[str, str] = {}
    drop: set[int] = set()
    for i, node in enumerate(graph.nodes):
        if node.op != "quantize" or node.outputs[0] in graph.outputs:
            continue
        src, dst = node.inputs[0], node.outputs[0]
        t_src = graph.tensors[src]
        if graph.tensors[dst].dtype != "int8":  # int8 <-> uint8 is never an identity (the ranges differ)
            continue
        if t_src.dtype == "int8":
            if _same_q(graph, src, dst):
                mapping[dst] = src
                drop.add(i)
            continue
        p = prod.get(src)
        if p is None or graph.nodes[p].op != "dequantize":
            continue
        orig = graph.nodes[p].inputs[0]
        if graph.tensors[orig].dtype == "int8" and _same_q(graph, orig, dst):
            mapping[dst] = orig
            drop.add(i)
            if len(uses.get(src, [])) == 1 and src not in graph.outputs:
                drop.add(p)
    if not drop:
        return graph

    def resolve(name: str) -> str:
        while name in mapping:
            name = mapping[name]
        return name

    nodes: list[Node] = []
    for i, n in enumerate(graph.nodes):
        if i in drop:
            continue
        nodes.append(rename_inputs(n, {k: resolve(k) for k in n.inputs if k in mapping}))
    return graph.with_nodes(nodes)
