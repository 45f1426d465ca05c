"""Graph IR (tensors, nodes, graphs), the reference interpreter and the graph checker.

    from utvm.ir import Graph, run_reference, verify
"""

from __future__ import annotations

from utvm.ir.graph import DTYPES, Graph, Node, Quantization, Tensor
from utvm.ir.interp import run_reference

# Imported by name last: the submodule utvm.ir.verify would otherwise shadow the function of that name.
from utvm.ir.verify import verify

__all__ = ["DTYPES", "Graph", "Node", "Quantization", "Tensor", "run_reference", "verify"]
