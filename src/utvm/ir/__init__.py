"""Graph IR (tensors, nodes, graphs) and the reference interpreter entry point."""

from __future__ import annotations

from utvm.ir.graph import DTYPES, Graph, Node, Quantization, Tensor

__all__ = ["DTYPES", "Graph", "Node", "Quantization", "Tensor", "run_reference", "verify"]


def run_reference(graph: Graph, inputs, **kwargs):  # noqa: ANN001, ANN003 - defined in utvm.ir.interp
    from utvm.ir.interp import run_reference as _run

    return _run(graph, inputs, **kwargs)


def verify(graph: Graph) -> None:
    from utvm.ir.verify import verify as _verify

    _verify(graph)
