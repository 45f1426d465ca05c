"""The reference interpreter: runs a Graph node by node with the numpy semantics of `utvm.ops`.

This is the executable definition of what a model means; generated C is held to it bit-exactly for int8.
`rounding` picks the requantization rounding ("single": TFLite/ai-edge-litert, "double": TFLM/gemmlowp).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from utvm.errors import GraphError, UnsupportedOperatorError
from utvm.ir.graph import Graph
from utvm.ops import OP_MODULES, _quant, op_module


def prepare_node(graph: Graph, index: int, rounding: str = "single") -> Any:
    """The `<Op>Params` of node `index` (what the code generator emits and `reference` reads)."""
    node = graph.nodes[index]
    if node.op not in OP_MODULES:
        raise UnsupportedOperatorError(node.op, index, tuple(OP_MODULES))
    return op_module(node.op).prepare(node, graph, rounding)


def prepare_graph(graph: Graph, rounding: str = "single") -> list[Any]:
    """Params for every node, in execution order."""
    _quant.check_rounding(rounding)
    return [prepare_node(graph, i, rounding) for i in range(len(graph.nodes))]


def _check_inputs(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    if not isinstance(inputs, Mapping):
        raise GraphError(f"inputs must be a dict from input name to array (graph inputs: {list(graph.inputs)})")
    unknown = sorted(set(inputs) - set(graph.inputs))
    if unknown:
        raise GraphError(f"unknown input(s) {unknown}; graph {graph.name!r} has inputs {list(graph.inputs)}")
    out = {}
    for name in graph.inputs:
        if name not in inputs:
            raise GraphError(f"missing input {name!r}; graph {graph.name!r} has inputs {list(graph.inputs)}")
        t = graph.tensor(name)
        a = np.asarray(inputs[name])
        if tuple(a.shape) != tuple(t.shape):
            raise GraphError(f"input {name!r}: shape {list(a.shape)} does not match the graph's {list(t.shape)}")
        if str(a.dtype) != t.dtype:
            raise GraphError(f"input {name!r}: dtype {a.dtype} does not match the graph's {t.dtype}")
        out[name] = a
    return out


def run_reference(graph: Graph, inputs: Mapping[str, Any], rounding: str = "single", *,
                  intermediates: bool = False,
                  state: dict[str, list[np.ndarray]] | None = None) -> dict[str, np.ndarray]:
    """Run `graph` on `inputs` (input name -> array of the declared shape and dtype).

    Returns output name -> array in the graph's output order; with `intermediates`, every tensor computed
    along the way (inputs and outputs included, constants excluded) in execution order.

    Stateful ops (SVDF, LSTM, the signal library's delay lines) keep state between calls, as the device
    does: their module defines `state_spec(params) -> [(shape, dtype), ...]` (zero-initialised arrays) and
    its `reference(params, *arrays, state=[...])` updates them in place. `state` maps a node's name (or
    `#<index>`) to its arrays: pass the same dict to successive calls to stream, as the firmware does
    across calls; None runs from the zero state (the first call after boot).
    """
    _quant.check_rounding(rounding)
    env: dict[str, np.ndarray] = {k: t.data for k, t in graph.tensors.items() if t.data is not None}
    computed: dict[str, np.ndarray] = dict(_check_inputs(graph, inputs))
    env.update(computed)
    for i, node in enumerate(graph.nodes):
        params = prepare_node(graph, i, rounding)
        args = []
        for name in node.inputs:
            if not name:
                args.append(None)
                continue
            if name not in env:
                raise GraphError(f"{node.label(i)}: input tensor {name!r} has no value yet "
                                 "(not a graph input, constant or earlier output)")
            args.append(env[name])
        while args and args[-1] is None:
            args.pop()
        module = op_module(node.op)
        spec_fn = getattr(module, "state_spec", None)
        spec = spec_fn(params) if spec_fn is not None else []
        if spec:
            key = node.name or f"#{i}"
            store = state if state is not None else {}
            if key not in store:
                store[key] = [np.zeros(shape, dtype=dtype) for shape, dtype in spec]
            result = module.reference(params, *args, state=store[key])
        else:
            result = module.reference(params, *args)
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(node.outputs):
            raise GraphError(f"{node.label(i)}: produced {len(results)} outputs, declares {len(node.outputs)}")
        for name, value in zip(node.outputs, results, strict=True):
            t = graph.tensor(name)
            value = np.asarray(value)
            if tuple(value.shape) != tuple(t.shape) or str(value.dtype) != t.dtype:
                raise GraphError(f"{node.label(i)}: output {name!r} came out {value.dtype}{list(value.shape)}, "
                                 f"declared {t.dtype}{list(t.shape)}")
            env[name] = value
            computed[name] = value
    if intermediates:
        return computed
    missing = [o for o in graph.outputs if o not in env]
    if missing:
        raise GraphError(f"graph outputs {missing} are never computed")
    return {o: env[o] for o in graph.outputs}


