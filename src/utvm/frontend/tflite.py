"""TFLite flatbuffer -> utvm.ir.Graph, with the PyPI `tflite` package as the parser.

The import has two stages. `_read` walks the flatbuffer into plain Python values (tensors, buffers,
operators with their decoded options) and is the only code that touches the parser: every exception the
parser raises on a truncated or corrupt file becomes a ModelFormatError there. The `Importer`
(utvm.frontend._tflite_core) then maps each TFLite operator to canonical `utvm.ops` nodes (NHWC stays NHWC).

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

Layout: this module is stage 1 and the entry points (`from_tflite`, `survey`). Stage 2's `Importer`, the
converter registry (`converter`) and the helpers converters share live in utvm.frontend._tflite_core; the
converters themselves in one module per operator family, utvm/frontend/_tflite_<family>.py (FAMILIES).
"""

from __future__ import annotations

import importlib
import os
import struct
from pathlib import Path
from typing import Any

from utvm import limits
from utvm.errors import GraphError, ModelFormatError, UnsupportedModelError
from utvm.frontend._tflite_core import (
    CONVERTERS,
    OUT_OF_SCOPE,
    Importer,
    ImportQuirkWarning,
    Problem,
    RawModel,
    RawOp,
    RawTensor,
)
from utvm.ir.graph import Graph

__all__ = ["OUT_OF_SCOPE", "SUPPORTED_OPERATORS", "ImportQuirkWarning", "Problem", "from_tflite", "survey"]

_PARSER_ERRORS = (IndexError, struct.error, ValueError, TypeError, AttributeError, UnicodeDecodeError,
                  OverflowError, KeyError, RecursionError, MemoryError)


# --- stage 1: the flatbuffer as plain values (utvm.frontend._tflite_core.RawModel) ------------------------------
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


def _read(buf: bytes) -> RawModel:
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


def _walk(buf: bytes) -> RawModel:
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
        tensors.append(RawTensor(i, name.decode("utf-8", "replace") if name else f"tensor_{i}",
                                 tuple(int(d) for d in _np_list(t.ShapeAsNumpy())), sig, int(t.Type()),
                                 int(t.Buffer()), scale, zp, qdim, bool(t.IsVariable()), t.Sparsity() is not None))
    ops = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        idx = int(op.OpcodeIndex())
        if not 0 <= idx < len(codes):
            raise ModelFormatError(f"operator {i} uses opcode index {idx}; the model has {len(codes)} opcodes")
        code = codes[idx]
        ops.append(RawOp(i, code, tuple(int(x) for x in _np_list(op.InputsAsNumpy())),
                         tuple(int(x) for x in _np_list(op.OutputsAsNumpy())), _read_options(op, code),
                         _custom_options(op) if code.startswith("CUSTOM:") else b""))
    desc = model.Description()
    return RawModel(int(model.Version()), desc.decode("utf-8", "replace") if desc else "", tensors,
                    tuple(int(x) for x in _np_list(sg.InputsAsNumpy())),
                    tuple(int(x) for x in _np_list(sg.OutputsAsNumpy())), ops, buffers, model.SubgraphsLength())


# --- stage 2: the converters, one module per operator family ---------------------------------------------------
#: utvm/frontend/_tflite_<family>.py; each registers its converters with `converter(...)` when imported here
FAMILIES: tuple[str, ...] = ("conv", "unary", "binary", "movement", "gather", "reduction", "recurrent", "signal")

for _family in FAMILIES:
    importlib.import_module(f"utvm.frontend._tflite_{_family}")
SUPPORTED_OPERATORS = tuple(sorted(CONVERTERS))


def _importer(model: str | os.PathLike | bytes | bytearray | memoryview, name: str | None) -> Importer:
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
    importer = Importer(_read(buf), gname)
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
