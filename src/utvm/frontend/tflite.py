"""TFLite flatbuffer -> utvm.ir.Graph, with the PyPI `tflite` package as the parser.

The import has two stages. `_read` walks the flatbuffer into plain Python values (tensors, buffers,
operators with their decoded options) and is the only code that touches the parser: every exception the
parser raises on a truncated or corrupt file becomes a ModelFormatError there. `_Importer` then maps each
TFLite operator to canonical `utvm.ops` nodes (NHWC stays NHWC).

What the import decides, documented here once:

* tensor names are the model's own (a repeated name gets a `#<tensor index>` suffix); node names are the
  name of the node's first output; the graph's inputs/outputs keep the model's order;
* quantization is per tensor, or per channel along the tensor's `quantized_dimension` when it has more
  than one scale; float tensors drop any quantization parameters the converter left on them;
* shapes must be static. A `shape_signature` with -1 in the batch dimension (axis 0) is imported with
  batch 1 (the stored shape); -1 anywhere else raises UnsupportedModelError naming the tensor;
* every tensor of the subgraph (used or not) is checked against `utvm.limits` (elements, bytes, rank,
  the host memory budget, alone and summed) before any conversion, and the imported graph again (it
  may add reshapes): a model declaring a tensor the generated C cannot index, or the host cannot hold,
  is refused with an UnsupportedModelError naming the tensor, its shape and the limit;
* SAME/VALID padding becomes explicit (top, left, bottom, right) with TFLite's rule (the extra odd pixel
  goes at the bottom/right); fused activations become the `activation` attribute. TANH and SIGN_BIT as
  fused activations are refused: TFLite's kernels silently ignore them;
* uint8 tensors (models converted with inference_input_type/inference_output_type = tf.uint8) are
  imported as uint8; only QUANTIZE/DEQUANTIZE compute on them (the QUANTIZE right after a uint8 input and
  right before a uint8 output), every other computing op refuses them with an error naming the node and
  the tensor (data movement, reshape/transpose/concat, carries them, with one quantization throughout);
* hybrid models (int8 weights applied to float32 activations, e.g. kws_ref_model_float32.tflite) are
  refused with an UnsupportedModelError that says so;
* FULLY_CONNECTED flattens its input to [rows, K] with an explicit reshape unless keep_num_dims is set;
  RESHAPE/SQUEEZE/EXPAND_DIMS become `reshape` to the stored output shape; RELU_N1_TO_1 / RELU_0_TO_1
  become `clip`; PAD pads int8 with the output zero point (other types with 0), PADV2 with its constant.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from utvm import custom_ops, limits
from utvm.errors import GraphError, ModelFormatError, UnsupportedModelError, UnsupportedOperatorError
from utvm.ir.graph import Graph, Node, Quantization, Tensor

_TYPES = {0: "float32", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8",
          12: "uint64", 15: "uint32"}  # the unsigned wide types: TFLM signal-library tensors
_TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL", 7: "INT16",
               8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64", 13: "RESOURCE",
               14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4", 18: "BFLOAT16"}
_ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}
_PARSER_ERRORS = (IndexError, struct.error, ValueError, TypeError, AttributeError, UnicodeDecodeError,
                  OverflowError, KeyError, RecursionError, MemoryError)


# --- stage 1: the flatbuffer as plain values ------------------------------------------------------------------
@dataclass
class _RawTensor:
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
class _RawOp:
    index: int
    code: str  # builtin operator name, or "CUSTOM:<code>"
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    #: the fields of operator-specific options: the snake_case keys of _OPTION_FIELDS, and every field of
    #: the builtin options table under its schema getter name (e.g. "BeginMask", "SqueezeDims" as a list)
    options: dict[str, Any] = field(default_factory=dict)
    #: a CUSTOM operator's options (a flexbuffer for TFLM's custom ops; b"" when absent)
    custom_options: bytes = b""


@dataclass
class _RawModel:
    version: int
    description: str
    tensors: list[_RawTensor]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    ops: list[_RawOp]
    buffers: list[bytes]
    n_subgraphs: int


def _np_list(v: Any) -> list:
    return [] if isinstance(v, int) else v.tolist()


def _builtin_names() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}


# options class name per builtin op, and the getters to read (field name -> method)
_OPTION_FIELDS: dict[str, tuple[str, dict[str, str]]] = {
    "CONV_2D": ("Conv2DOptions", {"padding": "Padding", "stride_w": "StrideW", "stride_h": "StrideH",
                                  "activation": "FusedActivationFunction", "dilation_w": "DilationWFactor",
                                  "dilation_h": "DilationHFactor"}),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", {
        "padding": "Padding", "stride_w": "StrideW", "stride_h": "StrideH", "depth_multiplier": "DepthMultiplier",
        "activation": "FusedActivationFunction", "dilation_w": "DilationWFactor", "dilation_h": "DilationHFactor"}),
    "FULLY_CONNECTED": ("FullyConnectedOptions", {
        "activation": "FusedActivationFunction", "weights_format": "WeightsFormat", "keep_num_dims": "KeepNumDims",
        "asymmetric_quantize_inputs": "AsymmetricQuantizeInputs"}),
    "AVERAGE_POOL_2D": ("Pool2DOptions", {"padding": "Padding", "stride_w": "StrideW", "stride_h": "StrideH",
                                          "filter_w": "FilterWidth", "filter_h": "FilterHeight",
                                          "activation": "FusedActivationFunction"}),
    "ADD": ("AddOptions", {"activation": "FusedActivationFunction"}),
    "SUB": ("SubOptions", {"activation": "FusedActivationFunction"}),
    "MUL": ("MulOptions", {"activation": "FusedActivationFunction"}),
    "SOFTMAX": ("SoftmaxOptions", {"beta": "Beta"}),
    "CONCATENATION": ("ConcatenationOptions", {"axis": "Axis", "activation": "FusedActivationFunction"}),
    "MEAN": ("ReducerOptions", {"keep_dims": "KeepDims"}),
    "BATCH_MATMUL": ("BatchMatMulOptions", {"adj_x": "AdjX", "adj_y": "AdjY"}),
}
_OPTION_FIELDS["MAX_POOL_2D"] = _OPTION_FIELDS["AVERAGE_POOL_2D"]


def _option_names() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_") and isinstance(v, int)}


def _all_fields(opts: Any) -> dict[str, Any]:
    """Every scalar and vector field of a builtin options table, by its getter name (vectors as lists)."""
    out: dict[str, Any] = {}
    names = [k for k in dir(type(opts)) if k[:1].isupper() and not k.startswith("GetRootAs") and k != "Init"
             and not k.endswith(("BufferHasIdentifier", "IsNone", "Length"))]
    for k in names:
        if k.endswith("AsNumpy"):
            out[k[:-len("AsNumpy")]] = _np_list(getattr(opts, k)())
        elif f"{k}AsNumpy" not in names:
            try:
                out[k] = getattr(opts, k)()
            except TypeError:  # a getter that takes an index (vector element, sub-table): not a plain field
                continue
    return out


def _read_options(op: Any, code: str) -> dict[str, Any]:
    import tflite

    spec = _OPTION_FIELDS.get(code)
    table = op.BuiltinOptions()
    if table is None:
        return {"_missing": True} if spec is not None else {}
    out: dict[str, Any] = {}
    type_name = _option_names().get(int(op.BuiltinOptionsType()))
    cls = getattr(tflite, type_name, None) if type_name else None
    if cls is not None:
        opts = cls()
        opts.Init(table.Bytes, table.Pos)
        out.update(_all_fields(opts))
    if spec is not None:
        opts = getattr(tflite, spec[0])()
        opts.Init(table.Bytes, table.Pos)
        for key, getter in spec[1].items():
            if hasattr(opts, getter):
                out[key] = getattr(opts, getter)()
    return out


def _custom_options(op: Any) -> bytes:
    if op.CustomOptionsIsNone():
        return b""
    return bytes(op.CustomOptionsAsNumpy().tobytes())


def _read(buf: bytes) -> _RawModel:
    """Walk the flatbuffer into plain values; any parser failure is a ModelFormatError."""
    if len(buf) < 8:
        raise ModelFormatError(f"not a TFLite model: only {len(buf)} bytes")
    if buf[4:8] != b"TFL3":
        raise ModelFormatError(f"not a TFLite model: file identifier is {bytes(buf[4:8])!r}, expected b'TFL3'")
    try:
        return _walk(buf)
    except ModelFormatError:
        raise
    except _PARSER_ERRORS as exc:
        raise ModelFormatError(f"truncated or corrupt TFLite flatbuffer ({len(buf)} bytes): "
                               f"{type(exc).__name__}: {exc}") from exc


def _walk(buf: bytes) -> _RawModel:
    import tflite

    names = _builtin_names()
    model = tflite.Model.GetRootAsModel(buf, 0)
    if model.SubgraphsLength() < 1:
        raise ModelFormatError("TFLite model has no subgraph")
    codes = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        b = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        name = names.get(b, f"BUILTIN_{b}")
        if name == "CUSTOM":
            cc = oc.CustomCode()
            name = f"CUSTOM:{cc.decode('utf-8', 'replace') if cc else '?'}"
        codes.append(name)
    buffers = []
    for i in range(model.BuffersLength()):
        b = model.Buffers(i)
        off, size = int(b.Offset()), int(b.Size())
        if off > 1:
            if off + size > len(buf):
                raise ModelFormatError(f"buffer {i} points past the end of the file ({off}+{size} > {len(buf)})")
            buffers.append(bytes(buf[off:off + size]))
        else:
            data = b.DataAsNumpy()
            buffers.append(b"" if isinstance(data, int) else data.tobytes())
    sg = model.Subgraphs(0)
    tensors = []
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        q = t.Quantization()
        scale, zp, qdim = (), (), 0
        if q is not None:
            scale = tuple(float(s) for s in _np_list(q.ScaleAsNumpy()))
            zp = tuple(int(z) for z in _np_list(q.ZeroPointAsNumpy()))
            qdim = int(q.QuantizedDimension())
        sig = None if t.ShapeSignatureIsNone() else tuple(int(d) for d in _np_list(t.ShapeSignatureAsNumpy()))
        name = t.Name()
        tensors.append(_RawTensor(i, name.decode("utf-8", "replace") if name else f"tensor_{i}",
                                  tuple(int(d) for d in _np_list(t.ShapeAsNumpy())), sig, int(t.Type()),
                                  int(t.Buffer()), scale, zp, qdim, bool(t.IsVariable()), t.Sparsity() is not None))
    ops = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        idx = int(op.OpcodeIndex())
        if not 0 <= idx < len(codes):
            raise ModelFormatError(f"operator {i} uses opcode index {idx}; the model has {len(codes)} opcodes")
        code = codes[idx]
        ops.append(_RawOp(i, code, tuple(int(x) for x in _np_list(op.InputsAsNumpy())),
                          tuple(int(x) for x in _np_list(op.OutputsAsNumpy())), _read_options(op, code),
                          _custom_options(op) if code.startswith("CUSTOM:") else b""))
    desc = model.Description()
    return _RawModel(int(model.Version()), desc.decode("utf-8", "replace") if desc else "", tensors,
                     tuple(int(x) for x in _np_list(sg.InputsAsNumpy())),
                     tuple(int(x) for x in _np_list(sg.OutputsAsNumpy())), ops, buffers, model.SubgraphsLength())


# --- stage 2: canonical graph ---------------------------------------------------------------------------------
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


class _Importer:
    def __init__(self, raw: _RawModel, name: str) -> None:
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
        import warnings

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
            dtype = _TYPES.get(t.type) or _TYPE_NAMES.get(t.type, f"type{t.type}").lower()
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

    def _tensor(self, t: _RawTensor, name: str) -> Tensor:
        if t.type not in _TYPES:
            raise UnsupportedModelError(f"tensor {name!r} (index {t.index}) has type "
                                        f"{_TYPE_NAMES.get(t.type, t.type)}; supported tensor types: "
                                        + ", ".join(sorted(_TYPE_NAMES[k] for k in _TYPES)))
        if t.sparse:
            raise UnsupportedModelError(f"tensor {name!r} (index {t.index}) is sparse; sparse tensors are not "
                                        "supported")
        if t.is_variable and not (self.op_index < len(self.raw.ops)
                                  and self.raw.ops[self.op_index].code in VARIABLE_STATE_OPS):
            raise UnsupportedModelError(f"tensor {name!r} (index {t.index}) is a variable; variable tensors are "
                                        "supported only as the state inputs of "
                                        + (", ".join(sorted(VARIABLE_STATE_OPS)) or "no operator"))
        _check_static(t, name)
        dtype = _TYPES[t.type]
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

    def convert(self, op: _RawOp) -> None:
        conv = _CONVERTERS.get(op.code)
        user_name = op.code.removeprefix("CUSTOM:")
        if custom_ops.is_bound(user_name) and (conv is None or op.code.startswith("CUSTOM:")):
            conv = _user_operator  # --custom-op: an operator utvm lacks (or a CUSTOM one the user overrides)
        if conv is None:
            base = op.code.split(":", 1)[0]
            why = _OUT_OF_SCOPE.get(op.code) or _OUT_OF_SCOPE.get(base)
            if why:
                raise UnsupportedOperatorError(op.code, op.index, (), reason=why)
            raise UnsupportedOperatorError(op.code, op.index, tuple(_CONVERTERS))
        if op.options.get("_missing") and conv is not _user_operator:  # a user operator gets no builtin options
            raise ModelFormatError(f"operator {op.index} ({op.code}) has no builtin options")
        ins = [self.tname(i, f"input {k}") for k, i in enumerate(op.inputs)]
        outs = [self.tname(i, f"output {k}") for k, i in enumerate(op.outputs)]
        if not outs or any(not o for o in outs):
            raise ModelFormatError(f"operator {op.index} ({op.code}) has a missing output")
        conv(self, op, ins, outs)

    def activation(self, op: _RawOp) -> str:
        code = int(op.options.get("activation", 0))
        act = _ACTIVATIONS.get(code)
        if act is None:
            raise ModelFormatError(f"operator {op.index} ({op.code}) has unknown fused activation {code}")
        if act in ("tanh", "sign_bit"):
            raise UnsupportedModelError(f"operator {op.index} ({op.code}): fused activation {act.upper()} is not "
                                        "supported (TFLite's kernels ignore it; supported: NONE, RELU, RELU6, "
                                        "RELU_N1_TO_1)")
        return act

    def check_hybrid(self, op: _RawOp, x: str, w: str) -> None:
        tx, tw = self.tensors[x], self.tensors[w]
        if tx.dtype == "float32" and tw.dtype in ("int8", "uint8"):
            raise UnsupportedModelError(
                f"hybrid model: operator {op.index} ({op.code}) applies {tw.dtype} weights {w!r} to float32 "
                f"activations {x!r}. Hybrid (dynamic-range quantized) models are not supported; use the "
                "fully int8 or the float32 model")


def _user_operator(importer: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
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
_OUT_OF_SCOPE: dict[str, str] = {
    **{code: _VARIABLES_AND_CONTROL_FLOW
       for code in ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "IF", "WHILE")},
    "CUSTOM:ethos-u": "Ethos-U NPU command streams run only on Arm's NPU driver; compile the model before "
                      "Vela's conversion (the plain int8 .tflite) for utvm",
}


class ImportQuirkWarning(UserWarning):
    """A model detail TFLite Micro accepts although the schema says otherwise, imported as TFLM reads it."""


def _replace_qdim(t: _RawTensor, qdim: int) -> _RawTensor:
    import dataclasses

    return dataclasses.replace(t, quantized_dimension=qdim)


def _check_static(t: _RawTensor, name: str) -> None:
    if any(d < 0 for d in t.shape):
        raise UnsupportedModelError(f"tensor {name!r} has a dynamic shape {limits.format_shape(t.shape)}")
    if t.signature is not None and len(t.signature) == len(t.shape):
        dyn = [i for i, d in enumerate(t.signature) if d < 0]
        if any(i != 0 for i in dyn):
            raise UnsupportedModelError(f"tensor {name!r} has a dynamic shape: shape_signature "
                                        f"{limits.format_shape(t.signature)} (only a dynamic batch, axis 0, "
                                        "is imported, as 1)")


def _check_window(op: _RawOp, padding: int, strides: tuple[int, int], dilation: tuple[int, int],
                  window: tuple[int, int], what: str) -> None:
    """The padding mode, strides, dilations and window size of a conv/pool before any arithmetic on them."""
    label = f"operator {op.index} ({op.code})"
    if padding not in (0, 1):
        raise ModelFormatError(f"{label} has unknown padding {padding} (0: SAME, 1: VALID)")
    if min(strides) < 1:
        raise ModelFormatError(f"{label} has strides {list(strides)}; strides must be >= 1")
    if min(dilation) < 1:
        raise ModelFormatError(f"{label} has dilation factors {list(dilation)}; they must be >= 1")
    if min(window) < 1:
        raise ModelFormatError(f"{label}: the {what} is {window[0]}x{window[1]}; it must be at least 1x1")


def _arity(imp: _Importer, op: _RawOp, ins: list[str], lo: int, hi: int) -> None:
    if not lo <= len(ins) <= hi:
        raise ModelFormatError(f"operator {op.index} ({op.code}) has {len(ins)} inputs; expected {lo}..{hi}")
    missing = [k for k in range(lo) if not ins[k]]
    if missing:
        raise ModelFormatError(f"operator {op.index} ({op.code}): required input {missing[0]} is absent (-1)")


def _conv(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 3)
    x, w = imp.tensors[ins[0]], imp.tensors[ins[1]]
    imp.check_hybrid(op, ins[0], ins[1])
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ModelFormatError(f"operator {op.index} ({op.code}): input {x.name!r} and filter {w.name!r} must be "
                               "rank 4")
    o = op.options
    strides = (int(o["stride_h"]), int(o["stride_w"]))
    dilation = (int(o.get("dilation_h", 1)) or 1, int(o.get("dilation_w", 1)) or 1)
    _check_window(op, int(o["padding"]), strides, dilation, (w.shape[1], w.shape[2]), "filter")
    pad = tflite_padding(int(o["padding"]), (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]), strides, dilation)
    bias = ins[2] if len(ins) > 2 else ""
    act = imp.activation(op)
    if op.code == "DEPTHWISE_CONV_2D":
        m = w.shape[3] // x.shape[3] if x.shape[3] else 0
        imp.emit("depthwise_conv2d", [ins[0], ins[1], bias], outs, strides=strides, dilation=dilation,
                 padding=pad, depth_multiplier=m, activation=act)
    else:
        groups = x.shape[3] // w.shape[3] if w.shape[3] else 0
        imp.emit("conv2d", [ins[0], ins[1], bias], outs, strides=strides, dilation=dilation, padding=pad,
                 groups=groups, activation=act)


def _fully_connected(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 3)
    imp.check_hybrid(op, ins[0], ins[1])
    o = op.options
    if int(o.get("weights_format", 0)) != 0:
        raise UnsupportedModelError(f"operator {op.index} (FULLY_CONNECTED): shuffled weights format is not supported")
    if o.get("asymmetric_quantize_inputs"):
        raise UnsupportedModelError(f"operator {op.index} (FULLY_CONNECTED): asymmetric_quantize_inputs (hybrid) "
                                    "is not supported")
    x, w = imp.tensors[ins[0]], imp.tensors[ins[1]]
    if len(w.shape) != 2:
        raise ModelFormatError(f"operator {op.index} (FULLY_CONNECTED): weights {w.name!r} must be rank 2")
    k = w.shape[1]
    src = ins[0]
    if not o.get("keep_num_dims"):
        if k == 0 or x.size % k:
            raise ModelFormatError(f"operator {op.index} (FULLY_CONNECTED): input {x.name!r} of {x.size} elements "
                                   f"is not a multiple of K={k}")
        rows = (x.size // k, k)
        if tuple(x.shape) != rows:
            src = imp.add_tensor(Tensor(f"{x.name}/flatten", rows, x.dtype, x.quant))
            imp.emit("reshape", [ins[0]], [src], shape=rows)
    imp.emit("dense", [src, ins[1], ins[2] if len(ins) > 2 else ""], outs, activation=imp.activation(op))


def _pool(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 1)
    x = imp.tensors[ins[0]]
    if len(x.shape) != 4:
        raise ModelFormatError(f"operator {op.index} ({op.code}): input {x.name!r} must be rank 4")
    o = op.options
    pool = (int(o["filter_h"]), int(o["filter_w"]))
    strides = (int(o["stride_h"]), int(o["stride_w"]))
    _check_window(op, int(o["padding"]), strides, (1, 1), pool, "filter")
    pad = tflite_padding(int(o["padding"]), (x.shape[1], x.shape[2]), pool, strides, (1, 1))
    kind = "avg_pool2d" if op.code == "AVERAGE_POOL_2D" else "max_pool2d"
    extra = {"count_include_pad": False} if kind == "avg_pool2d" else {}
    imp.emit(kind, ins, outs, pool=pool, strides=strides, padding=pad, dilation=(1, 1), ceil_mode=False,
             activation=imp.activation(op), **extra)


def _binary(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    imp.emit(op.code.lower(), ins, outs, activation=imp.activation(op))


def _unary(name: str, **attrs: Any) -> Callable[[_Importer, _RawOp, list[str], list[str]], None]:
    def conv(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
        _arity(imp, op, ins, 1, 1)
        imp.emit(name, ins, outs, **attrs)

    return conv


def _reshape(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 2)
    if op.code == "EXPAND_DIMS":  # TFLite Micro's EXPAND_DIMS copies float32, int8 and int16 only
        _tflm_dtypes(imp, op, ins[0], ("float32", "int8", "int16", "uint8"))
    imp.emit("reshape", [ins[0]], outs, shape=tuple(imp.tensors[outs[0]].shape))


def _softmax(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 1)
    imp.emit("softmax", ins, outs, axis=-1, beta=float(op.options.get("beta", 1.0)))


def _pad(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 3)
    pads = imp.const_ints(op.inputs[1], "paddings")
    x = imp.tensors[ins[0]]
    if pads.shape != (len(x.shape), 2):
        raise ModelFormatError(f"operator {op.index} ({op.code}): paddings shape {list(pads.shape)} does not fit "
                               f"input rank {len(x.shape)}")
    y = imp.tensors[outs[0]]
    value: float | int = 0.0
    if len(ins) > 2 and ins[2]:
        values = imp.const(op.inputs[2], "constant_values")
        if values.size != 1:
            raise ModelFormatError(f"operator {op.index} ({op.code}): constant_values {ins[2]!r} has "
                                   f"{values.size} elements; it must be a scalar")
        value = values.ravel()[0].item()
    elif y.dtype in ("int8", "uint8"):  # TFLite Micro pads the other types with 0
        value = y.quant.zero_point[0] if y.quant is not None else 0
    imp.emit("pad", [ins[0]], outs, pads=tuple((int(a), int(b)) for a, b in pads), value=value)


def _mean(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    from utvm.frontend._tflite_reduce import _int32_const  # int32 only (TFLM), an empty list allowed

    _arity(imp, op, ins, 2, 2)
    axes = tuple(int(a) for a in _int32_const(imp, op, 1, "axis").ravel())
    imp.emit("mean", [ins[0]], outs, axes=axes, keepdims=bool(op.options.get("keep_dims", False)))


def _concat(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    if not ins:
        raise ModelFormatError(f"operator {op.index} (CONCATENATION) has no inputs")
    if imp.activation(op) != "none":
        raise UnsupportedModelError(f"operator {op.index} (CONCATENATION): a fused activation on concatenation "
                                    "is not supported")
    imp.emit("concat", ins, outs, axis=int(op.options.get("axis", 0)))


def _tflm_dtypes(imp: _Importer, op: _RawOp, name: str, dtypes: tuple[str, ...]) -> None:
    """Refuse a dtype TFLite Micro's kernel refuses (uint8 stays: utvm's data movement carries it)."""
    if imp.tensors[name].dtype not in dtypes:
        raise UnsupportedModelError(f"operator {op.index} ({op.code}): input {name!r} is "
                                    f"{imp.tensors[name].dtype}; TFLite Micro's {op.code} supports "
                                    + ", ".join(d for d in dtypes if d != "uint8"))


def _transpose(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    _tflm_dtypes(imp, op, ins[0], ("float32", "int8", "int16", "uint8"))
    perm = tuple(int(p) for p in imp.const_ints(op.inputs[1], "perm").ravel())
    imp.emit("transpose", [ins[0]], outs, perm=perm)


def _batch_matmul(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    if op.options.get("adj_x") or op.options.get("adj_y"):
        raise UnsupportedModelError(f"operator {op.index} (BATCH_MATMUL): adj_x/adj_y are not supported")
    imp.emit("matmul", ins, outs)


_CONVERTERS: dict[str, Callable[[_Importer, _RawOp, list[str], list[str]], None]] = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _conv,
    "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _pool,
    "MAX_POOL_2D": _pool,
    "ADD": _binary,
    "SUB": _binary,
    "MUL": _binary,
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "EXPAND_DIMS": _reshape,
    "SOFTMAX": _softmax,
    "QUANTIZE": _unary("quantize"),
    "DEQUANTIZE": _unary("dequantize"),
    "PAD": _pad,
    "PADV2": _pad,
    "MEAN": _mean,
    "CONCATENATION": _concat,
    "LOGISTIC": _unary("logistic"),
    "TANH": _unary("tanh"),
    "RELU": _unary("relu"),
    "RELU6": _unary("relu6"),
    "RELU_N1_TO_1": _unary("clip", min=-1.0, max=1.0),
    "RELU_0_TO_1": _unary("clip", min=0.0, max=1.0),
    "TRANSPOSE": _transpose,
    "BATCH_MATMUL": _batch_matmul,
}

Converter = Callable[[_Importer, _RawOp, list[str], list[str]], None]

# Operator families in modules of their own (utvm/frontend/_tflite_<family>.py); each registers its
# converters with `converter(...)` when imported here.
_FAMILIES: tuple[str, ...] = ("unary", "binary", "movement", "gather", "reduce", "conv", "recurrent", "signal")


def converter(*codes: str) -> Callable[[Converter], Converter]:
    """Register a converter for TFLite operator codes ("ABS", "CUSTOM:SignalWindow", ...)."""

    def deco(fn: Converter) -> Converter:
        for code in codes:
            if code in _CONVERTERS and _CONVERTERS[code] is not fn:
                raise RuntimeError(f"TFLite operator {code} has two converters")
            _CONVERTERS[code] = fn
        return fn

    return deco


def _load_families() -> None:
    import importlib

    for fam in _FAMILIES:
        importlib.import_module(f"utvm.frontend._tflite_{fam}")


_load_families()
SUPPORTED_OPERATORS = tuple(sorted(_CONVERTERS))


def _importer(model: str | os.PathLike | bytes | bytearray | memoryview, name: str | None) -> _Importer:
    """The model's bytes read and walked, every tensor checked against utvm.limits: ready to convert."""
    if isinstance(model, bytes | bytearray | memoryview):
        buf, gname = bytes(model), name or "model"
    else:
        path = Path(model)
        try:
            buf = path.read_bytes()
        except OSError as exc:
            raise ModelFormatError(f"cannot read TFLite model {str(path)!r}: {exc.strerror or exc}") from exc
        gname = name or _sanitize(path.stem)
    importer = _Importer(_read(buf), gname)
    importer.check_limits()
    return importer


def from_tflite(model: str | os.PathLike | bytes | bytearray | memoryview, *, name: str | None = None) -> Graph:
    """Import a TFLite model (a path or the file's bytes) as a verified utvm Graph."""
    importer = _importer(model, name)
    return _checked(importer.run(), importer.name)


def _checked(graph: Graph, name: str) -> Graph:
    """`graph` if it is within utvm.limits and well formed (utvm.ir.verify: no cycle, no operator writing a
    graph input or a constant, one writer per tensor); else the one error `from_tflite` and `survey` raise."""
    limits.check_graph(graph)
    from utvm.ir.verify import verify

    try:
        verify(graph)
    except GraphError as exc:
        raise UnsupportedModelError(f"TFLite model {name!r} cannot be imported: {exc}") from exc
    return graph


def survey(model: str | os.PathLike | bytes, *, name: str | None = None) -> tuple[Graph | None, list[Problem]]:
    """Everything that keeps a TFLite model from compiling, at once: every operator without a converter or
    with an unsupported configuration, every node whose dtypes or attributes utvm's op or kernel refuse.
    Returns (the graph of what imported, problems in operator order); ([], graph) when it all compiles."""
    from utvm.compiler.kernels import supported_ops
    from utvm.ir.interp import prepare_node

    importer = _importer(model, name)
    raw = importer.raw
    problems: list[Problem] = []
    graph = importer.run(problems)
    if not problems:  # every operator imported: the graph must pass what compile checks (an ill-formed one raises)
        _checked(graph, importer.name)
    op_of_output = {t: (op.index, op.code) for op in raw.ops for t in (importer.names.get(i) for i in op.outputs) if t}
    kernels = set(supported_ops())
    ready = []
    for i, node in enumerate(graph.nodes):
        where = op_of_output.get(node.outputs[0] if node.outputs else "", (i, node.op))
        try:
            prepare_node(graph, i, "double")
        except (UnsupportedModelError, ModelFormatError, GraphError) as exc:
            problems.append(Problem(where[0], where[1], str(exc)))
            continue
        if node.op not in kernels:
            problems.append(Problem(where[0], where[1], f"no C kernel for utvm op {node.op!r}"))
            continue
        ready.append((i, where))
    problems += _kernel_problems(graph, ready)
    problems.sort(key=lambda p: p.index)
    return graph, problems


def _kernel_problems(graph: Graph, ready: list[tuple[int, tuple[int, str]]]) -> list[Problem]:
    """Generate each node's C kernel on its own: a dtype or attribute the kernel refuses is a problem."""
    from utvm.compiler.kernels import get_kernel
    from utvm.compiler.lower import kernel_contexts
    from utvm.errors import CompileError

    where = dict(ready)
    out = []
    try:
        contexts = list(kernel_contexts(graph, "survey", "double"))
    except (CompileError, GraphError, UnsupportedModelError):  # the nodes' own checks named it already
        return out
    for ctx in contexts:
        if ctx.index not in where:
            continue
        try:
            get_kernel(ctx.node, ctx.index)(ctx)
        except (CompileError, GraphError, UnsupportedModelError) as exc:
            out.append(Problem(where[ctx.index][0], where[ctx.index][1], str(exc)))
    return out


def _sanitize(stem: str) -> str:
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in stem)
    return out or "model"
