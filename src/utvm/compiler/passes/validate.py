"""Pass `validate`: check shapes, dtypes and structure (utvm.ir.verify); returns the graph unchanged.

Raises GraphError (or UnsupportedOperatorError) naming the node, and the tensor, at fault.
"""

from __future__ import annotations

from utvm.ir.graph import Graph
from utvm.ir.verify import verify


def validate(graph: Graph) -> Graph:
    verify(graph)
    return graph
