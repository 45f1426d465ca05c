"""ONNX import state: layout-tracked values, the node being imported, and the IR being built.

An ONNX value (`Value`) is held in up to two IR tensors: its canonical (ONNX, NCHW) form, named like the
ONNX value, and for 4-D values an NHWC form (`<name>_nhwc`), each made on first use. `Importer.canonical`
and `Importer.nhwc` return a form, emitting one layout change (or transposing a constant) when needed.

Every tensor goes through `Importer.tally` (`utvm.limits`): IR tensors when they are added, constant values
when they are defined, and (by the callers) initializers, Constant nodes and folded constants *before*
their data is decoded or computed. `Importer.where` names what is being imported for those errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from utvm import limits
from utvm.errors import GraphError, ModelFormatError, UnsupportedModelError
from utvm.ir.graph import Node, Quantization, Tensor

INT8_IDENTITY = Quantization((1.0,), (0,))
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)

# ONNX TensorProto element types we import -> numpy dtype names (all in utvm.ir.DTYPES)
ELEM_TYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
}


def contig(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy-if-needed that keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    return np.asarray(a, order="C")


def elem_type_name(t: int) -> str:
    try:
        import onnx

        return str(onnx.TensorProto.DataType.Name(t))
    except (ValueError, ImportError):
        return f"element type {t}"


@dataclass
class Value:
    """One ONNX value during import: its canonical shape/dtype and the IR tensors holding it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    const: np.ndarray | None = None
    nchw: str | None = None  # IR tensor with the canonical (ONNX-layout) data
    nhwc: str | None = None  # IR tensor with the data transposed by TO_NHWC (4-D values only)

    @property
    def nhwc_only(self) -> bool:
        return self.nhwc is not None and self.nchw is None


@dataclass
class Ctx:
    """The ONNX node being imported: for attributes, inputs and error messages."""

    index: int
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    opset: int

    @property
    def label(self) -> str:
        where = f"node {self.index}"
        return f"{where} ({self.op} {self.name!r})" if self.name else f"{where} ({self.op})"

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def ints(self, key: str, default: Sequence[int] | None = None) -> tuple[int, ...] | None:
        v = self.attrs.get(key)
        if v is None:
            return tuple(default) if default is not None else None
        return tuple(int(x) for x in v)


class Importer:
    """The IR under construction (tensors, nodes), the ONNX values seen so far, and the names taken."""

    def __init__(self, model: Any, freeze: Mapping[str, np.ndarray]):
        self.opset = default_opset(model)
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.values: dict[str, Value] = {}
        self.reserved: set[str] = set()
        self.freeze = dict(freeze)
        self.tally = limits.Tally(model="the ONNX model")
        self.where = ""  # "initializer", "graph input", the label of the node being imported, ...

    def account(self, name: str, shape: Sequence[int], dtype: str) -> None:
        """Check a tensor about to be made against utvm.limits and add it to the model's total."""
        self.tally.add(name, shape, dtype, self.where)

    # --- naming and emission ------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.reserved or name in self.tensors:
            name, k = f"{base}_{k}", k + 1
        self.reserved.add(name)
        return name

    def add_tensor(self, name: str, shape: Sequence[int], dtype: str, data: np.ndarray | None = None, *,
                   counted: bool = False) -> str:
        """Add an IR tensor; `counted`: its data is a constant value already accounted for."""
        if not counted:
            self.account(name, shape, dtype)
        # a plain ONNX int8 tensor is exactly an int8 tensor with the identity quantization (real == q)
        quant = INT8_IDENTITY if dtype == "int8" else None
        try:
            self.tensors[name] = Tensor(name, tuple(int(d) for d in shape), dtype, quant, data)
        except GraphError as exc:
            raise UnsupportedModelError(str(exc)) from None
        return name

    def emit(self, ctx: Ctx, op: str, inputs: Sequence[str], output: str, shape: Sequence[int], dtype: str,
             attrs: Mapping[str, Any] | None = None, suffix: str = "") -> str:
        self.add_tensor(output, shape, dtype)
        base = ctx.name or f"{ctx.op}_{ctx.index}"
        self.nodes.append(Node(op, tuple(inputs), (output,), dict(attrs or {}), base + suffix))
        return output

    def temp(self, ctx: Ctx, op: str, inputs: Sequence[str], shape: Sequence[int], dtype: str,
             attrs: Mapping[str, Any] | None = None, hint: str = "") -> str:
        """Emit a helper node whose output is an internal tensor (not an ONNX value)."""
        base = ctx.outputs[0] if ctx.outputs and ctx.outputs[0] else f"{ctx.op}_{ctx.index}"
        hint = hint or op
        return self.emit(ctx, op, inputs, self.fresh(f"{base}_{hint}"), shape, dtype, attrs, f"/{hint}")

    def constant(self, data: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        return self.add_tensor(name, data.shape, str(data.dtype), contig(data))

    def transpose(self, ctx: Ctx, src: str, dst: str, out_shape: Sequence[int], dtype: str,
                  perm: Sequence[int], suffix: str) -> str:
        """A layout change: a `reshape` (a pure alias) when it only moves size-1 axes, else a `transpose`."""
        in_shape = self.tensors[src].shape
        moved = [p for p in perm if in_shape[p] != 1]
        if moved == sorted(moved):
            attrs: dict[str, Any] = {"shape": tuple(out_shape)}
            return self.emit(ctx, "reshape", [src], dst, out_shape, dtype, attrs, suffix)
        return self.emit(ctx, "transpose", [src], dst, out_shape, dtype, {"perm": tuple(perm)}, suffix)

    # --- layout forms ------------------------------------------------------------------------------------
    def canonical(self, v: Value, ctx: Ctx) -> str:
        """The IR tensor holding `v` in ONNX layout (made on first use)."""
        if v.nchw is None:
            name = v.name if v.name not in self.tensors else self.fresh(v.name)
            if v.const is not None:
                self.add_tensor(name, v.shape, v.dtype, contig(v.const), counted=True)
            else:
                assert v.nhwc is not None
                self.transpose(ctx, v.nhwc, name, v.shape, v.dtype, TO_NCHW, f"/{v.name}_to_nchw")
            v.nchw = name
        return v.nchw

    def nhwc(self, v: Value, ctx: Ctx) -> str:
        """The IR tensor holding 4-D `v` in NHWC layout (made on first use)."""
        assert len(v.shape) == 4, v
        if v.nhwc is None:
            name = self.fresh(f"{v.name}_nhwc")
            shape = tuple(v.shape[p] for p in TO_NHWC)
            if v.const is not None:
                self.add_tensor(name, shape, v.dtype, contig(v.const.transpose(TO_NHWC)))
            else:
                src = self.canonical(v, ctx)
                self.transpose(ctx, src, name, shape, v.dtype, TO_NHWC, f"/{v.name}_to_nhwc")
            v.nhwc = name
        return v.nhwc

    def define(self, onnx_name: str, shape: Sequence[int], dtype: str,
               layout: str = "nchw") -> tuple[Value, str]:
        """A new ONNX value produced by a node; returns it and the IR tensor name the node must write."""
        shape = tuple(int(d) for d in shape)
        v = Value(onnx_name, shape, dtype)
        self.values[onnx_name] = v
        if layout == "nhwc":
            v.nhwc = self.fresh(f"{onnx_name}_nhwc")
            self.add_tensor(v.nhwc, tuple(shape[p] for p in TO_NHWC), dtype)
            return v, v.nhwc
        v.nchw = onnx_name if onnx_name not in self.tensors else self.fresh(onnx_name)
        self.add_tensor(v.nchw, shape, dtype)
        return v, v.nchw

    def define_const(self, onnx_name: str, data: np.ndarray, *, counted: bool = False) -> None:
        """A constant ONNX value; `counted`: the caller accounted for it before making `data`."""
        dtype = str(data.dtype)
        if dtype not in ELEM_TYPES.values():
            raise UnsupportedModelError(f"constant {onnx_name!r} has unsupported dtype {dtype}")
        if not counted:
            self.account(onnx_name, data.shape, dtype)
        self.values[onnx_name] = Value(onnx_name, tuple(data.shape), dtype, const=data)

    def new_node(self, ctx: Ctx, op: str, inputs: Sequence[str], out: str, shape: Sequence[int], dtype: str,
                 attrs: Mapping[str, Any] | None = None, layout: str = "nchw") -> Value:
        """Emit the node producing ONNX value `out` (in `layout`)."""
        v, ir = self.define(out, shape, dtype, layout)
        base = ctx.name or f"{ctx.op}_{ctx.index}"
        self.nodes.append(Node(op, tuple(inputs), (ir,), dict(attrs or {}), base))
        return v

    # --- inputs of the current node -------------------------------------------------------------------------
    def value(self, ctx: Ctx, i: int, required: bool = True) -> Value | None:
        if i >= len(ctx.inputs) or not ctx.inputs[i]:
            if required:
                raise ModelFormatError(f"{ctx.label}: missing required input {i}")
            return None
        try:
            return self.values[ctx.inputs[i]]
        except KeyError:
            raise ModelFormatError(f"{ctx.label}: input {ctx.inputs[i]!r} is not defined before use"
                                   ) from None

    def const_input(self, ctx: Ctx, i: int, what: str, integer: bool = False) -> np.ndarray | None:
        """Constant input `i` (None if absent); `integer`: it must hold integers (axes, shapes, pads)."""
        v = self.value(ctx, i, required=False)
        if v is None:
            return None
        if v.const is None:
            raise UnsupportedModelError(
                f"{ctx.label}: input {i} ({what}) {v.name!r} must be a constant (an initializer or a "
                "Constant node); dynamic values are not supported (freeze it with "
                "from_onnx(..., freeze={name: array}))")
        if integer and v.const.dtype.kind not in "iu":
            raise ModelFormatError(f"{ctx.label}: input {i} ({what}) {v.name!r} must be an integer tensor, not "
                                   f"{v.const.dtype}")
        return v.const


def default_opset(model: Any) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1 if model.opset_import else 0


def refuse_external(t: Any, what: str) -> None:
    from onnx import TensorProto

    if t.data_location == TensorProto.EXTERNAL:
        loc = next((e.value for e in t.external_data if e.key == "location"), "?")
        raise ModelFormatError(f"{what} {t.name!r} keeps its data in the external file {loc!r}; external data "
                               "is read only for a model loaded from its path")


def to_array(t: Any, what: str) -> np.ndarray:
    """The data of TensorProto `t` (already checked against the limits) as an array of its declared shape."""
    import onnx.numpy_helper as nh

    try:
        data = np.asarray(nh.to_array(t))
    except Exception as exc:
        raise ModelFormatError(f"{what} {t.name!r} cannot be decoded: {type(exc).__name__}: "
                               f"{str(exc)[:200]}") from None
    if tuple(data.shape) != tuple(t.dims):
        raise ModelFormatError(f"{what} {t.name!r} decodes to shape {list(data.shape)}, declared "
                               f"{limits.format_shape(t.dims)}")
    return data
