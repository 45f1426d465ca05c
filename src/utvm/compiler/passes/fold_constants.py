"""Pass `fold_constants`: evaluate at compile time every node whose inputs are all constants.

The node's outputs become constant tensors computed by the node's own reference implementation (so a
folded graph computes exactly what the unfolded one does), in the rounding mode recorded in
`graph.metadata["rounding"]` ("single" when absent). Nodes that write a graph output are kept (a model's
outputs stay computed), as are nodes with no inputs at all.
"""

from __future__ import annotations

import numpy as np

from utvm import custom_ops
from utvm.ir.graph import Graph
from utvm.ops import op_module


def fold_constants(graph: Graph) -> Graph:
    rounding = str(graph.metadata.get("rounding", "single"))
    g = graph
    kept = []
    folded = False
    for node in graph.nodes:
        names = [x for x in node.inputs if x]
        foldable = (node.op != custom_ops.OP  # a user operator is never run at compile time
                    and names and all(g.tensors[x].is_constant for x in names)
                    and not any(o in graph.outputs for o in node.outputs))
        if not foldable:
            kept.append(node)
            continue
        mod = op_module(node.op)
        params = mod.prepare(node, g, rounding)
        spec = getattr(mod, "state_spec", None)
        if spec is not None and spec(params):  # stateful (SVDF, LSTM, a delay line): new output every call
            kept.append(node)
            continue
        args = [g.tensors[x].data if x else None for x in node.inputs]
        while args and args[-1] is None:
            args.pop()
        result = mod.reference(params, *args)
        results = result if isinstance(result, tuple) else (result,)
        tensors = dict(g.tensors)
        for name, value in zip(node.outputs, results, strict=True):
            t = tensors[name]
            tensors[name] = t.replace(data=np.ascontiguousarray(np.asarray(value, dtype=t.dtype)).reshape(t.shape))
        g = g.replace(tensors=tensors)
        folded = True
    if not folded:
        return graph
    return g.with_nodes(kept)
