"""ONNX frontend: `from_onnx(path_or_model) -> utvm.ir.Graph`.

Theory of operation
-------------------
ONNX is NCHW; the IR is NHWC (see `utvm.ops`). The import is *layout tracking*: every ONNX value is held
in up to two forms, its canonical (ONNX, NCHW) form and, for 4-D values, an NHWC form (the canonical data
transposed by (0, 2, 3, 1)). Each form is an IR tensor made on demand; asking for a form that does not
exist yet emits one `transpose` node (constants are transposed at import instead). So:

- conv, pooling and batch norm read and write NHWC;
- elementwise ops (Relu, Clip, Add, ...) follow their inputs' layout (constants are transposed to match);
- shape-sensitive ops (Reshape, Flatten, Gemm, MatMul, opset < 13 Softmax) read the canonical form;
  Transpose, Concat, Softmax >= 13, Pad and ReduceMean read whichever form saves a transpose;
- graph inputs and outputs keep the model's own names, shapes and layout.

The canonical form of ONNX value `v` is the IR tensor named `v`; the NHWC form gets a fresh name
(`v_nhwc`). Identity and inference-mode Dropout are aliases. Ops whose inputs are all constant are
evaluated at import (e.g. mnist's Reshape of a weight). Every problem is reported as a
`utvm.errors.ModelError` naming the node or tensor at fault; no exception from inside `onnx` escapes.

Sizes: every tensor (graph inputs, initializers, Constant nodes, node outputs, folded constants, the
layout copies) is checked against `utvm.limits` with the shape the import infers for it, and summed
against the host memory budget, *before* its data is decoded or computed; the imported graph is checked
once more. External data is read only for a model loaded from a path, after the initializers' declared
sizes passed that check; a model given as bytes or a ModelProto that still points at external files is
refused (reading files named by the model relative to the working directory is not what a caller expects).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from utvm import custom_ops, limits
from utvm.errors import (
    GraphError,
    ModelError,
    ModelFormatError,
    UnsupportedModelError,
    UnsupportedOperatorError,
)
from utvm.frontend._onnx_ops import HANDLERS, SUPPORTED_OPS, try_fold
from utvm.frontend._onnx_quant import fuse_qdq, propagate_quant, refuse_dynamic
from utvm.frontend._onnx_state import (
    ELEM_TYPES,
    TO_NCHW,
    Ctx,
    Importer,
    Value,
    elem_type_name,
    refuse_external,
    to_array,
)
from utvm.ir.graph import Graph, Node

__all__ = ["SUPPORTED_OPS", "from_onnx"]


# ================================================================================================ loading
def _load(path_or_model: Any) -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - onnx is a hard dependency
        raise UnsupportedModelError(f"the 'onnx' package is needed to import ONNX models: {exc}") from None
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    if isinstance(path_or_model, str | os.PathLike):
        path = os.fspath(path_or_model)
        if not os.path.isfile(path):
            raise ModelFormatError(f"ONNX model file {path!r} does not exist")
        where = f" {path!r}"
    elif isinstance(path_or_model, bytes | bytearray | memoryview):
        where = ""
    else:
        kind = type(path_or_model).__name__
        raise TypeError(f"from_onnx takes a path, bytes or an onnx.ModelProto, not {kind}")
    try:
        if not where:
            return onnx.load_model_from_string(bytes(path_or_model))
        model = onnx.load_model(path, load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError, ...
        raise ModelFormatError(f"cannot parse ONNX model{where}: truncated or corrupt ({type(exc).__name__}: "
                               f"{str(exc)[:200]})") from None
    _load_external_data(model, path)
    return model


def _external_tensors(model: Any) -> list[Any]:
    """The initializers and Constant-node tensors of the main graph that keep their data in a file."""
    from onnx import AttributeProto, TensorProto

    out = [t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    for node in model.graph.node:
        out += [a.t for a in node.attribute
                if a.type == AttributeProto.TENSOR and a.t.data_location == TensorProto.EXTERNAL]
    return out


def _load_external_data(model: Any, path: str) -> None:
    """Read the external data of a model loaded from `path`, once its declared sizes are within limits."""
    external = _external_tensors(model)
    if not external:
        return
    from onnx.external_data_helper import load_external_data_for_tensor

    tally = limits.Tally(model=f"ONNX model {path!r}")
    for t in external:
        dtype = ELEM_TYPES.get(t.data_type) or elem_type_name(t.data_type).lower()
        tally.add(t.name, tuple(t.dims), dtype, "external data")
    base = os.path.dirname(os.path.abspath(path))
    for t in external:
        try:
            load_external_data_for_tensor(t, base)
        except Exception as exc:  # missing file, outside the model's directory, out of bounds, ...
            raise ModelFormatError(f"ONNX model {path!r}: cannot read the external data of tensor {t.name!r}: "
                                   f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _pin_shapes(model: Any, shapes: Mapping[str, Sequence[int]]) -> Any:
    """A copy of `model` whose graph inputs named in `shapes` have those static shapes."""
    import onnx

    inputs = {vi.name: vi for vi in model.graph.input}
    unknown = sorted(set(shapes) - set(inputs))
    if unknown:
        raise UnsupportedModelError(f"shapes: {unknown} are not graph inputs")
    pinned = onnx.ModelProto()
    pinned.CopyFrom(model)
    for vi in pinned.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            del dims[:]
            for d in shapes[vi.name]:
                dims.add().dim_value = int(d)
    return pinned


def _check_text(g: Any) -> None:
    """Every name the import uses is text: protobuf hands a string field that is not UTF-8 over as bytes."""
    def check(value: Any, where: str) -> None:
        if isinstance(value, bytes):
            raise ModelFormatError(f"{where} {value[:60]!r} is not UTF-8 text")

    check(g.name, "the graph name")
    for kind, items in (("graph input", g.input), ("graph output", g.output), ("initializer", g.initializer)):
        for i, item in enumerate(items):
            check(item.name, f"{kind} {i}: the name")
    for index, node in enumerate(g.node):
        where = f"node {index}"
        for field in ("name", "op_type", "domain"):
            check(getattr(node, field), f"{where}: the {field}")
        for k, name in enumerate(node.input):
            check(name, f"{where}: input {k}")
        for k, name in enumerate(node.output):
            check(name, f"{where}: output {k}")
        for a in node.attribute:
            check(a.name, f"{where}: an attribute name")


def _validate(model: Any) -> None:
    """Structure, operators and graph inputs first (errors that name the culprit), then onnx's checker."""
    import onnx

    if not model.HasField("graph") or not model.graph.output:
        raise ModelFormatError("not an ONNX model: no graph with outputs (truncated or corrupt file?)")
    g = model.graph
    _check_text(g)
    refuse_dynamic(model)  # a dynamically quantized model: that is the reason, whatever else it holds
    for index, node in enumerate(g.node):  # unsupported operators first: the most useful message
        if _op_name(node) not in HANDLERS and not custom_ops.is_bound(_op_name(node)):
            raise UnsupportedOperatorError(_op_name(node), index, SUPPORTED_OPS)
    consts = {t.name for t in g.initializer}
    for vi in g.input:
        if vi.name not in consts:
            _static_shape(vi, "input")
    for t in _external_tensors(model):  # a model loaded from its path has its external data read already
        refuse_external(t, "initializer" if t in g.initializer else "Constant value")
    for t in g.initializer:  # declared sizes before onnx's checker compares them with the data
        if t.data_type in ELEM_TYPES:
            limits.check_tensor(t.name, tuple(t.dims), ELEM_TYPES[t.data_type], what="initializer")
    for index, node in enumerate(g.node):
        for a in node.attribute:
            if a.HasField("t") and a.t.data_type in ELEM_TYPES:
                what = f"node {index} ({_op_name(node)}) attribute {a.name!r}"
                limits.check_tensor(node.output[0] if node.output else a.t.name, tuple(a.t.dims),
                                    ELEM_TYPES[a.t.data_type], what=what)
    for vi in g.output:
        if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
            raise ModelFormatError(f"graph output {vi.name!r} has no shape (ONNX requires one on graph "
                                   "outputs)")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        msg = str(exc).strip().splitlines()
        raise ModelFormatError(f"invalid ONNX model: {' '.join(msg)[:300]}") from None


def _static_shape(vi: Any, what: str) -> tuple[int, ...]:
    t = vi.type
    if not t.HasField("tensor_type"):
        raise UnsupportedModelError(
            f"{what} {vi.name!r} is not a tensor (sequence/map/optional types are not supported)")
    tt = t.tensor_type
    if tt.elem_type not in ELEM_TYPES:
        raise UnsupportedModelError(
            f"{what} {vi.name!r} has unsupported element type {elem_type_name(tt.elem_type)} "
            f"(supported: {', '.join(sorted(ELEM_TYPES.values()))})")
    if not tt.HasField("shape"):
        raise UnsupportedModelError(f"{what} {vi.name!r} has no shape; dynamic shapes are not supported")
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if not d.HasField("dim_value"):
            sym = f" {d.dim_param!r}" if d.dim_param else ""
            raise UnsupportedModelError(
                f"{what} {vi.name!r} has a dynamic dimension{sym} (axis {i}); dynamic shapes are not "
                "supported: "
                "re-export with static shapes or pin them with from_onnx(..., shapes={name: shape})")
        dims.append(int(d.dim_value))
    limits.check_tensor(vi.name, dims, ELEM_TYPES[tt.elem_type], what=f"graph {what}")
    return tuple(dims)


def _user_operator(imp: Importer, ctx: Ctx, node: Any, declared: Mapping[str, Any]) -> None:
    """An op type utvm lacks, bound by the user (utvm.custom_ops): the canonical op `custom` over the ONNX
    (canonical layout) tensors; its outputs' shapes and dtypes must be declared in the model (value_info or
    graph outputs: ONNX's shape inference does not know the op); options = its `options` string attribute's
    raw bytes (b"" without one)."""
    ins = []
    for i, name in enumerate(ctx.inputs):
        if not name:
            raise UnsupportedModelError(f"{ctx.label}: input {i} is absent; a user operator's inputs are all given")
        v = imp.value(ctx, i)
        assert v is not None
        ins.append(imp.canonical(v, ctx))
    outs, shapes = [], []
    for name in ctx.outputs:
        vi = declared.get(name)
        if vi is None:
            raise UnsupportedModelError(f"{ctx.label}: output {name!r} of user operator {ctx.op!r} has no declared "
                                        "type and shape (add a value_info for it)")
        shape = _static_shape(vi, f"output of user operator {ctx.op!r}")
        dtype = ELEM_TYPES[vi.type.tensor_type.elem_type]
        _v, ir = imp.define(name, shape, dtype)
        outs.append(ir)
        shapes.append([list(shape), dtype])
    options = b"".join(a.s for a in node.attribute if a.name == "options" and a.type == a.STRING)
    attrs = {"name": ctx.op, "options": options.hex(), "outputs": shapes}
    imp.nodes.append(Node(custom_ops.OP, tuple(ins), tuple(outs), attrs, ctx.name or f"{ctx.op}_{ctx.index}"))


def _op_name(node: Any) -> str:
    domain = node.domain or ""
    return str(node.op_type) if domain in ("", "ai.onnx") else f"{domain}.{node.op_type}"


def _import(model: Any, freeze: Mapping[str, np.ndarray], pinned: bool) -> Graph:
    import onnx

    imp = Importer(model, freeze)
    g = model.graph
    imp.graph_output_names = {o.name for o in g.output}  # type: ignore[attr-defined]
    if imp.opset == 0:
        raise ModelFormatError("ONNX model declares no default-domain opset")
    names = [i.name for i in g.input] + [t.name for t in g.initializer]
    names += [o for n in g.node for o in n.output]
    for name in names:
        if name:
            imp.reserved.add(name)

    imp.where = "initializer"
    for t in g.initializer:
        if t.data_type not in ELEM_TYPES:
            raise UnsupportedModelError(
                f"initializer {t.name!r} has unsupported element type {elem_type_name(t.data_type)}")
        refuse_external(t, "initializer")
        imp.account(t.name, tuple(t.dims), ELEM_TYPES[t.data_type])  # before decoding anything
        data = to_array(t, "initializer")
        imp.define_const(t.name, data, counted=True)
    graph_inputs: list[str] = []
    imp.where = "graph input"
    for vi in g.input:
        if vi.name in imp.values:  # IR < 4 lists initializers as inputs too
            continue
        shape = _static_shape(vi, "input")
        dtype = ELEM_TYPES[vi.type.tensor_type.elem_type]
        if vi.name in imp.freeze:
            data = np.asarray(imp.freeze[vi.name])
            if tuple(data.shape) != shape or str(data.dtype) != dtype:
                raise UnsupportedModelError(f"freeze: value for input {vi.name!r} is "
                                            f"{data.dtype}{list(data.shape)}, "
                                            f"the model declares {dtype}{list(shape)}")
            imp.define_const(vi.name, data)
            continue
        imp.values[vi.name] = Value(vi.name, shape, dtype, nchw=vi.name)
        imp.add_tensor(vi.name, shape, dtype)
        graph_inputs.append(vi.name)
    unknown = set(imp.freeze) - {vi.name for vi in g.input}
    if unknown:
        raise UnsupportedModelError(f"freeze: {sorted(unknown)} are not graph inputs")

    declared = {vi.name: vi for vi in (*g.value_info, *g.output)}  # the output shapes of user operators
    for index, node in enumerate(g.node):
        op = _op_name(node)
        ctx = Ctx(index, op, node.name, list(node.input), list(node.output), {}, imp.opset)
        imp.where = ctx.label
        for a in node.attribute:
            try:
                v = onnx.helper.get_attribute_value(a)
            except Exception as exc:
                raise ModelFormatError(f"{ctx.label}: attribute {a.name!r} cannot be read: {exc}") from None
            if isinstance(v, bytes) and op in HANDLERS:  # a user operator's options stay raw bytes
                try:
                    v = v.decode()
                except UnicodeDecodeError as exc:
                    raise ModelFormatError(f"{ctx.label}: attribute {a.name!r} is not UTF-8 text (byte "
                                           f"{exc.start}: {v[exc.start:exc.start + 1]!r})") from None
            ctx.attrs[a.name] = v
        if not ctx.outputs or not ctx.outputs[0]:
            raise ModelFormatError(f"{ctx.label}: has no output")
        for n in ctx.inputs:
            if n and n not in imp.values:
                raise ModelFormatError(f"{ctx.label}: input {n!r} is not defined before use")
        try:
            if op not in HANDLERS:  # bound by the user (_validate refused the others)
                _user_operator(imp, ctx, node, declared)
            elif not try_fold(imp, ctx):
                HANDLERS[op](imp, ctx)
        except ModelError:
            raise
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:  # malformed attributes
            raise ModelFormatError(f"{ctx.label}: cannot import ({type(exc).__name__}: {exc})") from None

    outputs: list[str] = []
    out_ctx = Ctx(len(g.node), "output", "", [], [], {}, imp.opset)
    imp.where = "graph output"
    for vi in g.output:
        v = imp.values.get(vi.name)
        if v is None:
            raise ModelFormatError(f"graph output {vi.name!r} is not produced by any node")
        tt = vi.type.tensor_type
        if tt.elem_type in ELEM_TYPES and ELEM_TYPES[tt.elem_type] != v.dtype:
            raise ModelFormatError(f"graph output {vi.name!r} is declared {ELEM_TYPES[tt.elem_type]}, "
                                   f"computes {v.dtype}")
        declared = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if not pinned and tt.HasField("shape") and (len(declared) != len(v.shape) or any(
                d is not None and d != e for d, e in zip(declared, v.shape, strict=False))):
            raise ModelFormatError(f"graph output {vi.name!r} is declared with shape {declared}, computes "
                                   f"{list(v.shape)}")
        if v.nchw != vi.name:
            if v.nchw is None and v.nhwc is not None and vi.name not in imp.tensors:
                imp.transpose(out_ctx, v.nhwc, vi.name, v.shape, v.dtype, TO_NCHW, f"/{vi.name}_to_nchw")
            else:  # an alias (Identity), a graph input or a constant: copy it out under the output's name
                src = imp.canonical(v, out_ctx)
                if vi.name in imp.tensors:
                    raise ModelFormatError(f"graph output {vi.name!r} clashes with another tensor")
                imp.emit(out_ctx, "reshape", [src], vi.name, v.shape, v.dtype, {"shape": v.shape},
                         f"/{vi.name}_copy")
        outputs.append(vi.name)

    propagate_quant(imp.tensors, imp.nodes)
    metadata = {"source": "onnx", "opset": imp.opset, "ir_version": int(model.ir_version),
                "producer": f"{model.producer_name} {model.producer_version}".strip()}
    graph = Graph(imp.tensors, tuple(imp.nodes), tuple(graph_inputs), tuple(outputs), g.name or "onnx_model",
                  metadata)
    graph = graph.with_nodes(graph.nodes)
    limits.check_graph(graph)
    return graph


def from_onnx(path_or_model: Any, *, freeze: Mapping[str, np.ndarray] | None = None,
              shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Import an ONNX model (a path, serialized bytes or an `onnx.ModelProto`) as a utvm IR graph.

    `freeze` turns graph inputs into constants (name -> array), e.g. weights fed as inputs or a Reshape's
    shape; `shapes` pins graph input shapes (name -> static shape) when the model's are dynamic.
    Raises ModelFormatError (corrupt/truncated/ill-formed), UnsupportedOperatorError (op name, node index,
    supported set) or UnsupportedModelError (unsupported types, dynamic shapes, attributes).
    """
    model = _load(path_or_model)
    if shapes:
        model = _pin_shapes(model, shapes)
    _validate(model)
    model, _fused = fuse_qdq(model)  # QDQ groups -> quantized nodes (utvm.frontend._onnx_quant)
    try:
        return _import(model, freeze or {}, bool(shapes))
    except GraphError as exc:  # a Tensor/Node refused what we built: an ill-formed model
        raise ModelFormatError(str(exc)) from None



def survey(path_or_model: Any) -> tuple[Graph | None, list[Any]]:
    """Everything that keeps an ONNX model from importing, at once: every node whose operator has no
    handler; when all have one, the first error the import meets (ONNX import is whole-graph: a node's
    layout depends on its producers). Returns (graph or None, problems) as `utvm.frontend.tflite.survey`."""
    from utvm.frontend.tflite import Problem

    model = _load(path_or_model)
    problems = [Problem(i, _op_name(n), "no converter for this operator")
                for i, n in enumerate(model.graph.node) if _op_name(n) not in HANDLERS]
    if problems:
        return None, problems
    try:
        return from_onnx(model), []
    except UnsupportedOperatorError as exc:
        return None, [Problem(int(exc.node) if str(exc.node).isdigit() else -1, exc.op, exc.reason or str(exc))]
    except (UnsupportedModelError, ModelFormatError) as exc:
        return None, [Problem(-1, "", str(exc))]
