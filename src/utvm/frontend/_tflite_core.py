"""The core the TFLite converters share (utvm.frontend.tflite and its families, `_tflite_<family>.py`).

Stage 1 of the import (utvm.frontend.tflite) reads the flatbuffer into the plain values defined here
(`RawModel`: `RawTensor`s, `RawOp`s with their decoded options, buffers). Stage 2 is the `Importer`: it
maps each operator to canonical utvm.ops nodes with the converter registered for its code
(`@converter("ADD", ...)`, in the family modules) and builds the graph. The helpers below are what the
converters have in common: input counts, constant operands, fused activations, window checks, TFLite's
SAME/VALID padding, TFLite Micro's dtype limits.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utvm import custom_ops, limits
from utvm.errors import GraphError, ModelFormatError, UnsupportedModelError, UnsupportedOperatorError
from utvm.ir.graph import Graph, Node, Quantization, Tensor

#: TFLite TensorType -> IR dtype (the types utvm imports)
TYPES = {0: "float32", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8",
         12: "uint64", 15: "uint32"}  # the unsigned wide types: TFLM signal-library tensors
TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL", 7: "INT16",
              8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64", 13: "RESOURCE",
              14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4", 18: "BFLOAT16"}
#: TFLite ActivationFunctionType -> utvm.ops activation name
ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}


# --- stage 1's values: the flatbuffer as plain Python data --------------------------------------------------------
@dataclass
class RawTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    signature: tuple[int, ...] | None
    type: int
    buffer: int
    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    quantized_dimension: int
    is_variable: bool
    sparse: bool


@dataclass
class RawOp:
    index: int
    code: str  # builtin operator name, or "CUSTOM:<code>"
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    #: the fields of operator-specific options: the snake_case keys of utvm.frontend.tflite's _OPTION_FIELDS,
    #: and every field of the builtin options table under its schema getter name (e.g. "BeginMask",
    #: "SqueezeDims" as a list)
    options: dict[str, Any] = field(default_factory=dict)
    #: a CUSTOM operator's options (a flexbuffer for TFLM's custom ops; b"" when absent)
    custom_options: bytes = b""


@dataclass
class RawModel:
    version: int
    description: str
    tensors: list[RawTensor]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    ops: list[RawOp]
    buffers: list[bytes]
    n_subgraphs: int


# --- the converter registry --------------------------------------------------------------------------------------
Converter = Callable[["Importer", RawOp, list[str], list[str]], None]
#: TFLite operator code ("ADD", "CUSTOM:SignalWindow", ...) -> its converter
CONVERTERS: dict[str, Converter] = {}


def converter(*codes: str) -> Callable[[Converter], Converter]:
    """Register a converter for TFLite operator codes ("ABS", "CUSTOM:SignalWindow", ...)."""

    def deco(fn: Converter) -> Converter:
        for code in codes:
            if code in CONVERTERS and CONVERTERS[code] is not fn:
                raise RuntimeError(f"TFLite operator {code} has two converters")
            CONVERTERS[code] = fn
        return fn

    return deco


# --- stage 2: the canonical graph ------------------------------------------------------------------------------------
def _same_out(x: int, stride: int) -> int:
    return (x + stride - 1) // stride


def tflite_padding(mode: int, in_hw: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int],
                   dilation: tuple[int, int]) -> tuple[int, int, int, int]:
    """TFLite's SAME (0) / VALID (1) padding as explicit (top, left, bottom, right)."""
    if mode == 1:
        return (0, 0, 0, 0)
    pads = []
    for size, k, s, d in zip(in_hw, kernel, strides, dilation, strict=True):
        eff = (k - 1) * d + 1
        out = _same_out(size, s)
        total = max(0, (out - 1) * s + eff - size)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


#: operators whose variable inputs (is_variable: SVDF's activation_state, LSTM's output and cell state) their
#: converters turn into node state (the input is dropped; the op keeps it across runs); others are refused
VARIABLE_STATE_OPS: set[str] = set()


class Importer:
    """One model's conversion: the tensors converted so far (by name), the nodes emitted, and what the
    converters call (`tname`, `const`, `const_ints`, `add_tensor`, `emit`, `activation`, `warn`, ...)."""

    def __init__(self, raw: RawModel, name: str) -> None:
        self.raw = raw
        self.name = name
        self.tensors: dict[str, Tensor] = {}
        self.names: dict[int, str] = {}
        self.nodes: list[Node] = []
        self.op_index = 0
        self.warned: set[str] = set()
        seen: set[str] = set()
        for t in raw.tensors:
            n = t.name if t.name not in seen else f"{t.name}#{t.index}"
            seen.add(n)
            self.names[t.index] = n

    def warn(self, message: str) -> None:
        """A quirk imported the way TFLite Micro reads it: said once, as a Python warning (the CLI prints it)."""
        if message not in self.warned:
            self.warned.add(message)
            warnings.warn(message, ImportQuirkWarning, stacklevel=4)

    def check_limits(self) -> None:
        """Every tensor of the subgraph against utvm.limits, before anything is converted or allocated."""
        raw = self.raw
        tally = limits.Tally(model=f"TFLite model {self.name!r}")
        ins, outs = set(raw.inputs), set(raw.outputs)
        for t in raw.tensors:
            name = self.names[t.index]
            _check_static(t, name)
            if t.index in ins:
                what = "graph input"
            elif t.index in outs:
                what = "graph output"
            elif 0 < t.buffer < len(raw.buffers) and raw.buffers[t.buffer]:
                what = "constant"
            else:
                what = "intermediate"
            dtype = TYPES.get(t.type) or TYPE_NAMES.get(t.type, f"type{t.type}").lower()
            tally.add(name, t.shape, dtype, f"{what} (index {t.index})")

    # tensors ----------------------------------------------------------------------------------------------
    def tname(self, index: int, what: str) -> str:
        if index < 0:
            return ""
        if index >= len(self.raw.tensors):
            raise ModelFormatError(f"operator {self.op_index} {what} refers to tensor {index}; the subgraph has "
                                   f"{len(self.raw.tensors)} tensors")
        name = self.names[index]
        if name not in self.tensors:
            self.tensors[name] = self._tensor(self.raw.tensors[index], name)
        return name

    def _tensor(self, t: RawTensor, name: str) -> Tensor:
        if t.type not in TYPES:
            raise UnsupportedModelError(f"tensor {name!r} (index {t.index}) has type "
                                        f"{TYPE_NAMES.get(t.type, t.type)}; supported tensor types: "
                                        + ", ".join(sorted(TYPE_NAMES[k] for k in TYPES)))
        if t.sparse:
            raise UnsupportedModelError(f"tensor {name!r} (index {t.index}) is sparse; sparse tensors are not "
                                        "supported")
        if t.is_variable and not (self.op_index < len(self.raw.ops)
                                  and self.raw.ops[self.op_index].code in VARIABLE_STATE_OPS):
            raise UnsupportedModelError(f"tensor {name!r} (index {t.index}) is a variable; variable tensors are "
                                        "supported only as the state inputs of "
                                        + (", ".join(sorted(VARIABLE_STATE_OPS)) or "no operator"))
        _check_static(t, name)
        dtype = TYPES[t.type]
        quant = None
        if t.scale and dtype != "float32":
            zps = t.zero_point or (0,)
            if len(t.scale) == 1:
                if t.quantized_dimension and not 0 <= t.quantized_dimension < max(1, len(t.shape)):
                    # TFLM reads one scale as per-tensor whatever the dimension says (e.g. person_detect's
                    # rank-1 biases carry quantized_dimension = 3); so do we, and say so.
                    self.warn(f"tensor {name!r} (index {t.index}): quantized_dimension {t.quantized_dimension} is "
                              f"outside its rank-{len(t.shape)} shape; read as per-tensor, as TFLite Micro does")
                quant = Quantization((t.scale[0],), (zps[0],), None)
            else:
                qd = t.quantized_dimension
                if len(t.shape) == 1 and not 0 <= qd < 1 and t.shape[0] == len(t.scale):
                    self.warn(f"tensor {name!r} (index {t.index}): quantized_dimension {qd} of a rank-1 tensor "
                              "read as 0, as TFLite Micro does")
                    t = _replace_qdim(t, 0)
                if not 0 <= t.quantized_dimension < len(t.shape) or t.shape[t.quantized_dimension] != len(t.scale):
                    raise ModelFormatError(f"tensor {name!r}: {len(t.scale)} per-channel scales do not match "
                                           f"dimension {t.quantized_dimension} of shape {list(t.shape)}")
                quant = Quantization(t.scale, zps if len(zps) == len(t.scale) else (zps[0],) * len(t.scale),
                                     t.quantized_dimension)
        data = None
        if 0 < t.buffer < len(self.raw.buffers) and self.raw.buffers[t.buffer]:
            raw = self.raw.buffers[t.buffer]
            np_dt = np.dtype(dtype).newbyteorder("<")
            n = limits.tensor_size(t.shape, dtype)[0]  # exact: check_limits bounded it already
            if len(raw) != n * np_dt.itemsize:
                raise ModelFormatError(f"tensor {name!r}: buffer {t.buffer} holds {len(raw)} bytes, shape "
                                       f"{list(t.shape)} of {dtype} needs {n * np_dt.itemsize}")
            data = np.frombuffer(raw, dtype=np_dt).astype(dtype).reshape(t.shape)
        elif t.buffer >= len(self.raw.buffers):
            raise ModelFormatError(f"tensor {name!r} refers to buffer {t.buffer}; the model has "
                                   f"{len(self.raw.buffers)} buffers")
        return Tensor(name, tuple(t.shape), dtype, quant, data)

    def add_tensor(self, t: Tensor) -> str:
        base, k = t.name, 1
        while t.name in self.tensors or t.name in self.names.values():
            t = t.replace(name=f"{base}_{k}")
            k += 1
        self.tensors[t.name] = t
        return t.name

    def const(self, index: int, what: str) -> np.ndarray:
        name = self.tname(index, what)
        t = self.tensors.get(name)
        if not name or t is None or t.data is None:
            raise UnsupportedModelError(f"operator {self.op_index}: {what} {name!r} must be a constant")
        return t.data

    def const_ints(self, index: int, what: str) -> np.ndarray:
        """A constant integer input (axes, permutations, paddings)."""
        data = self.const(index, what)
        if data.dtype.kind not in "iu":
            raise ModelFormatError(f"operator {self.op_index}: {what} {self.names[index]!r} must be an integer "
                                   f"tensor, not {data.dtype}")
        return data

    def emit(self, op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> None:
        self.nodes.append(Node(op, tuple(inputs), tuple(outputs), attrs, outputs[0] if outputs else ""))

    # operators ------------------------------------------------------------------------------------------------
    def run(self, problems: list[Problem] | None = None) -> Graph:
        """The canonical graph. With `problems`, an operator that cannot be imported is recorded there (and
        left out of the graph) instead of raising, so a survey sees every one at once."""
        raw = self.raw
        for op in raw.ops:
            self.op_index = op.index
            try:
                self.convert(op)
            except (UnsupportedModelError, ModelFormatError, GraphError) as exc:
                if problems is None:
                    raise
                problems.append(Problem(op.index, op.code, _reason(exc)))
        inputs = [self.tname(i, "graph input") for i in raw.inputs]
        outputs = [self.tname(i, "graph output") for i in raw.outputs]
        if problems is not None:  # outputs of left-out operators would have no producer
            produced = {o for n in self.nodes for o in n.outputs} | set(inputs)
            outputs = [o for o in outputs if o in produced or self.tensors[o].data is not None]
        if any(not n for n in inputs + outputs):
            raise ModelFormatError("a graph input or output refers to tensor -1")
        meta = {"source": "tflite", "tflite_schema_version": raw.version}
        if raw.description:
            meta["description"] = raw.description
        g = Graph(self.tensors, tuple(self.nodes), tuple(inputs), tuple(outputs), self.name, meta)
        return g.with_nodes(g.nodes)

    def convert(self, op: RawOp) -> None:
        conv = CONVERTERS.get(op.code)
        user_name = op.code.removeprefix("CUSTOM:")
        if custom_ops.is_bound(user_name) and (conv is None or op.code.startswith("CUSTOM:")):
            conv = _user_operator  # --custom-op: an operator utvm lacks (or a CUSTOM one the user overrides)
        if conv is None:
            base = op.code.split(":", 1)[0]
            why = OUT_OF_SCOPE.get(op.code) or OUT_OF_SCOPE.get(base)
            if why:
                raise UnsupportedOperatorError(op.code, op.index, (), reason=why)
            raise UnsupportedOperatorError(op.code, op.index, tuple(CONVERTERS))
        if op.options.get("_missing") and conv is not _user_operator:  # a user operator gets no builtin options
            raise ModelFormatError(f"operator {op.index} ({op.code}) has no builtin options")
        ins = [self.tname(i, f"input {k}") for k, i in enumerate(op.inputs)]
        outs = [self.tname(i, f"output {k}") for k, i in enumerate(op.outputs)]
        if not outs or any(not o for o in outs):
            raise ModelFormatError(f"operator {op.index} ({op.code}) has a missing output")
        conv(self, op, ins, outs)

    def activation(self, op: RawOp) -> str:
        """The fused activation of an operator whose options are read by name (`activation`, tflite.py's
        option table): TANH and SIGN_BIT are refused, which TFLite's kernels ignore."""
        return fused_activation(op, "activation", note="TFLite's kernels ignore it; ")

    def check_hybrid(self, op: RawOp, x: str, w: str) -> None:
        tx, tw = self.tensors[x], self.tensors[w]
        if tx.dtype == "float32" and tw.dtype in ("int8", "uint8"):
            raise UnsupportedModelError(
                f"hybrid model: operator {op.index} ({op.code}) applies {tw.dtype} weights {w!r} to float32 "
                f"activations {x!r}. Hybrid (dynamic-range quantized) models are not supported; use the "
                "fully int8 or the float32 model")


def _user_operator(importer: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    """A bound user operator (utvm.custom_ops): the canonical op `custom` with the CUSTOM op's raw options."""
    outputs = [[list(importer.tensors[o].shape), importer.tensors[o].dtype] for o in outs]
    attrs = {"name": op.code.removeprefix("CUSTOM:"), "options": op.custom_options.hex(), "outputs": outputs}
    importer.nodes.append(Node(custom_ops.OP, tuple(ins), tuple(outs), attrs, outs[0]))


@dataclass(frozen=True)
class Problem:
    """Why one operator of a model cannot be imported or compiled (`survey`)."""

    index: int
    op: str
    reason: str


def _reason(exc: Exception) -> str:
    if isinstance(exc, UnsupportedOperatorError):
        return exc.reason or "no converter for this operator"
    return str(exc)


_VARIABLES_AND_CONTROL_FLOW = ("resource variables and control flow are out of scope for utvm: it compiles one "
                               "static subgraph")
#: operators refused on purpose, with the reason shown instead of the supported list
OUT_OF_SCOPE: dict[str, str] = {
    **{code: _VARIABLES_AND_CONTROL_FLOW
       for code in ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "IF", "WHILE")},
    "CUSTOM:ethos-u": "Ethos-U NPU command streams run only on Arm's NPU driver; compile the model before "
                      "Vela's conversion (the plain int8 .tflite) for utvm",
}


class ImportQuirkWarning(UserWarning):
    """A model detail TFLite Micro accepts although the schema says otherwise, imported as TFLM reads it."""


def _replace_qdim(t: RawTensor, qdim: int) -> RawTensor:
    return dataclasses.replace(t, quantized_dimension=qdim)


def _check_static(t: RawTensor, name: str) -> None:
    if any(d < 0 for d in t.shape):
        raise UnsupportedModelError(f"tensor {name!r} has a dynamic shape {limits.format_shape(t.shape)}")
    if t.signature is not None and len(t.signature) == len(t.shape):
        dyn = [i for i, d in enumerate(t.signature) if d < 0]
        if any(i != 0 for i in dyn):
            raise UnsupportedModelError(f"tensor {name!r} has a dynamic shape: shape_signature "
                                        f"{limits.format_shape(t.signature)} (only a dynamic batch, axis 0, "
                                        "is imported, as 1)")


def check_window(op: RawOp, padding: int, strides: tuple[int, int], dilation: tuple[int, int],
                 window: tuple[int, int], what: str) -> None:
    """The padding mode, strides, dilations and window size of a conv/pool before any arithmetic on them."""
    if padding not in (0, 1):
        raise ModelFormatError(f"{label(op)} has unknown padding {padding} (0: SAME, 1: VALID)")
    if min(strides) < 1:
        raise ModelFormatError(f"{label(op)} has strides {list(strides)}; strides must be >= 1")
    if min(dilation) < 1:
        raise ModelFormatError(f"{label(op)} has dilation factors {list(dilation)}; they must be >= 1")
    if min(window) < 1:
        raise ModelFormatError(f"{label(op)}: the {what} is {window[0]}x{window[1]}; it must be at least 1x1")


def arity(imp: Importer, op: RawOp, ins: list[str], lo: int, hi: int) -> None:
    """lo..hi inputs, the first lo of them present."""
    if not lo <= len(ins) <= hi:
        raise ModelFormatError(f"{label(op)} has {len(ins)} inputs; expected {lo}..{hi}")
    missing = [k for k in range(lo) if not ins[k]]
    if missing:
        raise ModelFormatError(f"{label(op)}: required input {missing[0]} is absent (-1)")


def tflm_dtypes(imp: Importer, op: RawOp, name: str, dtypes: tuple[str, ...]) -> None:
    """Refuse a dtype TFLite Micro's kernel refuses (uint8 stays: utvm's data movement carries it)."""
    if imp.tensors[name].dtype not in dtypes:
        raise UnsupportedModelError(f"{label(op)}: input {name!r} is "
                                    f"{imp.tensors[name].dtype}; TFLite Micro's {op.code} supports "
                                    + ", ".join(d for d in dtypes if d != "uint8"))


# --- helpers of the converters -------------------------------------------------------------------------------------
def label(op: RawOp) -> str:
    """How messages name an operator: `operator 3 (ADD)`."""
    return f"operator {op.index} ({op.code})"


def fused_activation(op: RawOp, key: str = "FusedActivationFunction", *, refuse: bool = True,
                     note: str = "") -> str:
    """The operator's fused activation (a utvm.ops activation name) from option `key`. TANH and SIGN_BIT are
    refused unless `refuse` is off (the recurrent ops apply them); `note` goes before the supported list."""
    code = int(op.options.get(key, 0))
    act = ACTIVATIONS.get(code)
    if act is None:
        raise ModelFormatError(f"{label(op)} has unknown fused activation {code}")
    if refuse and act in ("tanh", "sign_bit"):
        raise UnsupportedModelError(f"{label(op)}: fused activation {act.upper()} is not supported ({note}supported: "
                                    "NONE, RELU, RELU6, RELU_N1_TO_1)")
    return act


def int32_const(imp: Importer, op: RawOp, k: int, what: str) -> np.ndarray:
    """Constant input k, which TFLite Micro requires to be int32 (an empty list allowed)."""
    t = imp.tensors[imp.tname(op.inputs[k], what)]
    if not np.issubdtype(np.dtype(t.dtype), np.integer):
        return imp.const_ints(op.inputs[k], what)  # a ModelFormatError naming the non-integer tensor
    if t.dtype != "int32":
        raise UnsupportedModelError(f"{label(op)}: {what} {t.name!r} is {t.dtype}; TFLite Micro takes only int32")
    if t.size == 0:  # an empty axis list has no data to store
        return np.zeros((0,), np.int32)
    return imp.const_ints(op.inputs[k], what)

