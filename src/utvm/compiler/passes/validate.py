"""Pass `validate`: check sizes (utvm.limits), shapes, dtypes and structure (utvm.ir.verify); returns the graph
unchanged.

Raises CompileError for a tensor over a limit of utvm.limits (the generated C cannot index it or the host
cannot hold the model: the importers refuse such models, this is the safety net for graphs built in
Python), naming the node and the tensor; GraphError (or UnsupportedOperatorError) naming the node, and
the tensor, at fault for an ill-formed graph.
"""

from __future__ import annotations

from utvm import limits
from utvm.errors import CompileError
from utvm.ir.graph import Graph
from utvm.ir.verify import verify


def validate(graph: Graph) -> Graph:
    limits.check_graph(graph, error=CompileError)
    verify(graph)
    return graph
