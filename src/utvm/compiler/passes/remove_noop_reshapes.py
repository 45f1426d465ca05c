"""Pass `remove_noop_reshapes`: remove reshapes that do not change the shape and transposes with the
identity permutation (their readers use the input directly), and collapse reshape -> reshape chains into
one reshape when the inner reshape has no other reader.

A no-op whose output is a graph output is removed only when its input is computed by a node that nothing
else reads (that node then writes the graph output directly); otherwise it stays.
"""

from __future__ import annotations

from utvm.compiler.passes._util import consumers, producers, rename_inputs
from utvm.ir.graph import Graph


def _is_noop(graph: Graph, i: int) -> bool:
    node = graph.nodes[i]
    if node.op == "reshape":
        return tuple(graph.tensors[node.inputs[0]].shape) == tuple(graph.tensors[node.outputs[0]].shape)
    if node.op == "transpose":
        perm = tuple(node.attrs.get("perm", ()))
        return perm == tuple(range(len(perm)))
    return False


def _rewrite_once(graph: Graph) -> Graph | None:
    uses = consumers(graph)
    prod = producers(graph)
    for i, node in enumerate(graph.nodes):
        if node.op not in ("reshape", "transpose") or not node.inputs:
            continue
        src, dst = node.inputs[0], node.outputs[0]
        p = prod.get(src)
        sole_reader = len(uses.get(src, [])) == 1 and src not in graph.outputs
        if _is_noop(graph, i):
            if dst not in graph.outputs:
                nodes = [rename_inputs(n, {dst: src}) for k, n in enumerate(graph.nodes) if k != i]
                return graph.with_nodes(nodes)
            if p is not None and sole_reader:
                prev = graph.nodes[p]
                renamed = prev.replace(outputs=tuple(dst if o == src else o for o in prev.outputs))
                nodes = [renamed if k == p else n for k, n in enumerate(graph.nodes) if k != i]
                return graph.with_nodes(nodes)
            continue
        if node.op == "reshape" and p is not None and graph.nodes[p].op == "reshape" and sole_reader:
            inner = graph.nodes[p]
            merged = node.replace(inputs=(inner.inputs[0],))
            nodes = [merged if k == i else n for k, n in enumerate(graph.nodes) if k != p]
            return graph.with_nodes(nodes)
    return None


def remove_noop_reshapes(graph: Graph) -> Graph:
    while True:
        rewritten = _rewrite_once(graph)
        if rewritten is None:
            return graph
        graph = rewritten
