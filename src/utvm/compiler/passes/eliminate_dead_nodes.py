"""Pass `eliminate_dead_nodes`: drop nodes none of whose outputs is read by a live node or is a graph
output (repeated, so dead chains go entirely), and the tensors only they referenced."""

from __future__ import annotations

from utvm.ir.graph import Graph


def eliminate_dead_nodes(graph: Graph) -> Graph:
    live: set[str] = set(graph.outputs)
    keep = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs):
            keep.append(node)
            live.update(x for x in node.inputs if x)
    if len(keep) == len(graph.nodes):
        return graph
    return graph.with_nodes(reversed(keep))
