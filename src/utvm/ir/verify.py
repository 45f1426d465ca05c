"""Structural and type checking of a Graph: every error names the node (index, op, name) or tensor at fault.

Run between compiler passes in tests (`utvm.ir.verify(graph)`); the `validate` pass wraps it.
"""

from __future__ import annotations

from utvm.errors import GraphError, UnsupportedOperatorError
from utvm.ir.graph import Graph
from utvm.ops import OP_MODULES, op_module


def verify(graph: Graph) -> None:
    """Raise GraphError (or UnsupportedOperatorError) unless `graph` is well formed:

    * graph inputs are non-constant tensors no node produces; graph outputs exist and are computed;
    * every node's op is known, its inputs exist and are available (graph inputs, constants or outputs of
      earlier nodes: the node order is a valid execution order), every tensor is produced at most once;
    * each node's shape/dtype inference (`utvm.ops.<family>.infer`) agrees with its declared outputs.
    """
    for name, t in graph.tensors.items():
        if name != t.name:
            raise GraphError(f"tensor table key {name!r} holds tensor named {t.name!r}")
    available: set[str] = set()
    for name in graph.inputs:
        t = graph.tensor(name)
        if t.is_constant:
            raise GraphError(f"graph input {name!r} is a constant")
        available.add(name)
    available.update(k for k, t in graph.tensors.items() if t.is_constant)
    produced: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        label = node.label(i)
        if node.op not in OP_MODULES:
            raise UnsupportedOperatorError(node.op, f"{i} ({node.name!r})" if node.name else i, tuple(OP_MODULES))
        for k, name in enumerate(node.inputs):
            if not name:
                continue
            if name not in graph.tensors:
                raise GraphError(f"{label}: input {k} names tensor {name!r}, which the graph does not have")
            if name not in available:
                raise GraphError(f"{label}: input {k} {name!r} is used before it is computed")
        for name in node.outputs:
            if name not in graph.tensors:
                raise GraphError(f"{label}: output {name!r} is not a tensor of the graph")
            if name in produced:
                raise GraphError(f"{label}: output {name!r} is already produced by node {produced[name]}")
            if name in graph.inputs or graph.tensors[name].is_constant:
                raise GraphError(f"{label}: output {name!r} is a graph input or constant")
            produced[name] = i
        try:
            inferred = op_module(node.op).infer(node, graph)
        except GraphError:
            raise
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:  # attributes the op cannot use
            raise GraphError(f"{label}: cannot infer its outputs from attributes {dict(node.attrs)} "
                             f"({type(exc).__name__}: {exc})") from exc
        if len(inferred) != len(node.outputs):
            raise GraphError(f"{label}: infers {len(inferred)} outputs, declares {len(node.outputs)}")
        for name, (shape, dtype) in zip(node.outputs, inferred, strict=True):
            t = graph.tensors[name]
            if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
                raise GraphError(f"{label}: output {name!r} is declared {t.dtype}{list(t.shape)} but the op "
                                 f"computes {dtype}{list(shape)}")
        available.update(node.outputs)
    for name in graph.outputs:
        if name not in graph.tensors:
            raise GraphError(f"graph output {name!r} is not a tensor of the graph")
        if name not in available:
            raise GraphError(f"graph output {name!r} is never computed")
