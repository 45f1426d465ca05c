"""Small graph-rewriting helpers shared by the passes."""

from __future__ import annotations

from collections import defaultdict

from utvm.ir.graph import Graph, Node
from utvm.support import names


def consumers(graph: Graph) -> dict[str, list[int]]:
    """tensor name -> indices of the nodes that read it."""
    uses: dict[str, list[int]] = defaultdict(list)
    for i, n in enumerate(graph.nodes):
        for name in n.inputs:
            if name:
                uses[name].append(i)
    return uses


def producers(graph: Graph) -> dict[str, int]:
    return {name: i for i, n in enumerate(graph.nodes) for name in n.outputs}


def sole_use(graph: Graph, uses: dict[str, list[int]], tensor: str) -> int | None:
    """The one node reading `tensor`, if exactly one does and the tensor is not a graph output."""
    readers = uses.get(tensor, [])
    if len(readers) != 1 or tensor in graph.outputs:
        return None
    return readers[0]


def rename_inputs(node: Node, mapping: dict[str, str]) -> Node:
    if not any(x in mapping for x in node.inputs):
        return node
    return node.replace(inputs=tuple(mapping.get(x, x) if x else x for x in node.inputs))


def fresh_name(graph: Graph, taken: set[str], base: str) -> str:
    """A tensor name free in `graph` and `taken` (utvm.support.names.fresh_name); added to `taken`."""
    return names.fresh_name(base, taken, graph.tensors)


def const_data(graph: Graph, name: str):  # noqa: ANN201 - np.ndarray | None
    t = graph.tensors.get(name) if name else None
    return None if t is None else t.data
