"""The model header `tvmgen_<model>.h` (docs/architecture.md §7) and its one mapping from metadata.json.

Every macro in the header is computed from metadata.json by `header_macros(metadata)`, and the header is
written from that same function, so the two cannot disagree. The mapping, for model `<m>` (upper-cased:
`<M>`) and `main = modules.<m>.memory.functions.main[0]`:

    TVMGEN_<M>_<NAME>_SIZE        = main.inputs.<name>.size   (bytes; one per input)
    TVMGEN_<M>_<NAME>_SIZE        = main.outputs.<name>.size  (bytes; one per output)
    TVMGEN_<M>_WORKSPACE_SIZE     = main.workspace_size_bytes  (with memory pools: the total of the pools)
    TVMGEN_<M>_LOWER_BOUND_SIZE   = modules.<m>.memory.plan.lower_bound_bytes
    TVMGEN_<M>_NUM_INPUTS         = len(modules.<m>.utvm.inputs)   (input names in model order)
    TVMGEN_<M>_NUM_OUTPUTS        = len(modules.<m>.utvm.outputs)  (output names in model order)
    TVMGEN_<M>_UTVM_VERSION_MAJOR = modules.<m>.utvm.utvm_version.major   (of utvm.__version__; also
    TVMGEN_<M>_UTVM_VERSION_MINOR = modules.<m>.utvm.utvm_version.minor    _MINOR, _PATCH, and the string
    TVMGEN_<M>_UTVM_VERSION_PATCH = modules.<m>.utvm.utvm_version.patch    TVMGEN_<M>_UTVM_VERSION)
    TVMGEN_<M>_MODEL_HASH         = modules.<m>.utvm.model_hash  (a string: SHA-256, hex, of src/<m>.json)

and for every input and output, `t = main.inputs.<name>` (or `main.outputs.<name>`):

    TVMGEN_<M>_<NAME>_RANK          = t.rank                  (= len(t.shape))
    TVMGEN_<M>_<NAME>_DIM_<i>       = t.shape[i]              (i = 0 .. rank-1)
    TVMGEN_<M>_<NAME>_NUM_ELEMENTS  = t.num_elements
    TVMGEN_<M>_<NAME>_DTYPE         = t.dtype                 (a string: "int8", "float32", ...)
    TVMGEN_<M>_<NAME>_DTYPE_CODE    = t.dtype_code            (DLPack: 0 int, 1 uint, 2 float, 6 bool)
    TVMGEN_<M>_<NAME>_DTYPE_BITS    = t.dtype_bits
    TVMGEN_<M>_<NAME>_C_TYPE        = t.c_type                (a type name: int8_t, float, ...)
    TVMGEN_<M>_<NAME>_QUANTIZED     = 1 if t.quantization is not null else 0
    per-tensor (t.quantization.axis is null):
    TVMGEN_<M>_<NAME>_SCALE         = t.quantization.scale[0]       (float32, as an exact hex float: 0x1.8p-3f)
    TVMGEN_<M>_<NAME>_ZERO_POINT    = t.quantization.zero_point[0]
    per-channel (no single scale is given, it would mislead):
    TVMGEN_<M>_<NAME>_QUANT_AXIS    = t.quantization.axis
    TVMGEN_<M>_<NAME>_QUANT_CHANNELS = len(t.quantization.scale)

and with `--params external` (`params = modules.<m>.utvm.params`, the blob's layout: utvm.compiler.params):

    TVMGEN_<M>_PARAMS_SIZE        = params.size_bytes    (bytes of the parameter blob, params.bin)
    TVMGEN_<M>_PARAMS_NUM_ARRAYS  = len(params.arrays)
    TVMGEN_<M>_PARAMS_ALIGNMENT   = params.alignment     (where the blob must start: a multiple of it)
    TVMGEN_<M>_PARAMS_HASH        = params.model_hash    (a string: SHA-256, hex, of the code reading it)

and with memory pools (`--memory-pool`; `pools = modules.<m>.memory.pools`, in order of preference, which
is the order of TVMContext.workspace):

    TVMGEN_<M>_NUM_WORKSPACE_POOLS      = len(pools)
    TVMGEN_<M>_<POOL>_WORKSPACE_SIZE    = pools[i].size_bytes     (<POOL>: the pool name, upper-cased)
    TVMGEN_<M>_<POOL>_WORKSPACE_INDEX   = i

The quantization is the graph tensor's (utvm.ir.Quantization): real = scale * (q - zero_point).
`header_macros` gives integers as `int` and everything else as its C text (strings quoted).

`<NAME>` is the tensor name with every non-alphanumeric character replaced by `_`, upper-cased
(`serving_default_input_1:0` -> `SERVING_DEFAULT_INPUT_1_0`). Struct fields keep the sanitized name's
case (a leading digit or a C keyword gets a leading/trailing `_`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from utvm.compiler.kernels import C_TYPES, DL_TYPES
from utvm.compiler.lower import C_KEYWORDS, sanitize
from utvm.compiler.memory import pool_macro_prefix
from utvm.errors import CompileError
from utvm.ir.graph import Graph, Quantization
from utvm.support.ctext import c_comment, c_string


@dataclass(frozen=True, slots=True)
class IOTensor:
    name: str  # the model's tensor name
    field: str  # member of struct tvmgen_<m>_inputs / _outputs
    param: str  # parameter name in generated functions (in_<field> / out_<field>)
    dtype: str
    shape: tuple[int, ...]
    size: int  # bytes
    quant: Quantization | None = None  # the graph tensor's (None: not quantized)

    def to_json(self) -> dict[str, Any]:
        """The tensor's entry in metadata.json (`main.inputs.<name>` / `main.outputs.<name>`)."""
        code, bits = DL_TYPES[self.dtype]
        n = 1
        for d in self.shape:
            n *= d
        return {"size": self.size, "dtype": self.dtype, "shape": list(self.shape), "rank": len(self.shape),
                "num_elements": n, "dtype_code": code, "dtype_bits": bits, "c_type": C_TYPES[self.dtype],
                "quantization": None if self.quant is None else self.quant.to_json()}


@dataclass(frozen=True, slots=True)
class ModelInterface:
    model_name: str
    inputs: tuple[IOTensor, ...]
    outputs: tuple[IOTensor, ...]


def field_name(tensor: str) -> str:
    f = sanitize(tensor)
    if f[0].isdigit():
        f = "_" + f
    if f in C_KEYWORDS:
        f += "_"
    return f


def macro_name(model: str, tensor: str) -> str:
    return f"TVMGEN_{sanitize(model).upper()}_{sanitize(tensor).upper()}_SIZE"


def model_interface(graph: Graph, model_name: str) -> ModelInterface:
    def make(names: tuple[str, ...], kind: str) -> tuple[IOTensor, ...]:
        out = []
        seen: dict[str, str] = {}
        for n in names:
            t = graph.tensor(n)
            f = field_name(n)
            if f in seen and seen[f] != n:
                raise CompileError(f"model {kind}s {seen[f]!r} and {n!r} have the same C name {f!r}; rename one")
            seen[f] = n
            k = 1
            while any(x.field == f for x in out):  # the same tensor listed twice: one member each
                f = f"{field_name(n)}_{k}"
                k += 1
            pfx = "in_" if kind == "input" else "out_"
            out.append(IOTensor(n, f, pfx + f, t.dtype, t.shape, t.nbytes, t.quant))
        return tuple(out)

    iface = ModelInterface(model_name, make(graph.inputs, "input"), make(graph.outputs, "output"))
    macros: dict[str, str] = {}
    reserved = {f"TVMGEN_{model_name.upper()}_{k}" for k in ("WORKSPACE_SIZE", "LOWER_BOUND_SIZE")}
    for x in (*iface.inputs, *iface.outputs):
        m = macro_name(model_name, x.name)
        if m in reserved:
            raise CompileError(f"tensor {x.name!r} would define {m}, which the header reserves; rename it")
        if m in macros and macros[m] != x.name:
            raise CompileError(f"tensors {macros[m]!r} and {x.name!r} both map to header macro {m}; rename one")
        macros[m] = x.name
    return iface


def header_plan(metadata: Mapping[str, Any], model_name: str | None = None) -> Mapping[str, Any]:
    """The memory plan in metadata.json (modules.<m>.memory.plan)."""
    modules = metadata["modules"]
    return modules[model_name or next(iter(modules))]["memory"]["plan"]


def graph_hash(graph_json: str | bytes) -> str:
    """The model hash: SHA-256 (hex) of the compiled graph's serialization, the MLF's src/<m>.json."""
    data = graph_json.encode() if isinstance(graph_json, str) else graph_json
    return hashlib.sha256(data).hexdigest()


def model_hash(graph: Graph) -> str:
    """`graph_hash` of `graph.to_json()` (TVMGEN_<M>_MODEL_HASH, metadata.json modules.<m>.utvm.model_hash)."""
    return graph_hash(graph.to_json())


def version_parts(version: str) -> dict[str, int]:
    """{"major", "minor", "patch"} of a version string "X.Y.Z[suffix]" (utvm.__version__)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if m is None:
        raise CompileError(f"version {version!r} is not MAJOR.MINOR.PATCH")
    return {"major": int(m[1]), "minor": int(m[2]), "patch": int(m[3])}


def float32_literal(x: float) -> str:
    """`x` rounded to float32, as a C99 hex float literal that is exactly that float (0x1.8p-3f)."""
    v = float(np.float32(x))
    if v != v or v in (float("inf"), float("-inf")):
        raise CompileError(f"scale {x!r} is not a finite float32")
    text = v.hex()  # [-]0x1.8000000000000p-3
    mant, exp = text.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}f"


def _tensor_macros(name: str, tname: str, info: Mapping[str, Any]) -> dict[str, int | str]:
    base = macro_name(name, tname)[: -len("_SIZE")]
    shape = [int(d) for d in info["shape"]]
    out: dict[str, int | str] = {f"{base}_SIZE": int(info["size"]), f"{base}_RANK": int(info["rank"])}
    for i, d in enumerate(shape):
        out[f"{base}_DIM_{i}"] = d
    out[f"{base}_NUM_ELEMENTS"] = int(info["num_elements"])
    out[f"{base}_DTYPE"] = f'"{c_string(str(info["dtype"]))}"'
    out[f"{base}_DTYPE_CODE"] = int(info["dtype_code"])
    out[f"{base}_DTYPE_BITS"] = int(info["dtype_bits"])
    out[f"{base}_C_TYPE"] = str(info["c_type"])
    q = info["quantization"]
    out[f"{base}_QUANTIZED"] = 0 if q is None else 1
    if q is not None and q["axis"] is None:
        out[f"{base}_SCALE"] = float32_literal(float(q["scale"][0]))
        out[f"{base}_ZERO_POINT"] = int(q["zero_point"][0])
    elif q is not None:
        out[f"{base}_QUANT_AXIS"] = int(q["axis"])
        out[f"{base}_QUANT_CHANNELS"] = len(q["scale"])
    return out


def header_macros(metadata: Mapping[str, Any], model_name: str | None = None) -> dict[str, int | str]:
    """The header's macros, computed from metadata.json (the documented mapping above): integers as `int`,
    the rest as C text. Two tensors whose macros would clash raise CompileError naming both."""
    modules = metadata["modules"]
    name = model_name or next(iter(modules))
    mod = modules[name]
    main = mod["memory"]["functions"]["main"][0]
    up = sanitize(name).upper()
    out: dict[str, int | str] = {}
    owner: dict[str, str] = {}
    for tname, info in (*main["inputs"].items(), *main["outputs"].items()):
        for macro, value in _tensor_macros(name, tname, info).items():
            if macro in owner and owner[macro] != tname:
                raise CompileError(f"tensors {owner[macro]!r} and {tname!r} both define header macro {macro}; "
                                   "rename one")
            owner[macro] = tname
            out[macro] = value
    model: dict[str, int | str] = {
        f"TVMGEN_{up}_WORKSPACE_SIZE": int(main["workspace_size_bytes"]),
        f"TVMGEN_{up}_LOWER_BOUND_SIZE": int(mod["memory"]["plan"]["lower_bound_bytes"]),
        f"TVMGEN_{up}_NUM_INPUTS": len(mod["utvm"]["inputs"]),
        f"TVMGEN_{up}_NUM_OUTPUTS": len(mod["utvm"]["outputs"]),
    }
    extra = mod["utvm"]
    if "utvm_version" in extra:  # archives written before utvm recorded these lack them
        v = extra["utvm_version"]
        model[f"TVMGEN_{up}_UTVM_VERSION"] = f'"{c_string(str(v["string"]))}"'
        for part in ("major", "minor", "patch"):
            model[f"TVMGEN_{up}_UTVM_VERSION_{part.upper()}"] = int(v[part])
    if "model_hash" in extra:
        model[f"TVMGEN_{up}_MODEL_HASH"] = f'"{c_string(str(extra["model_hash"]))}"'
    model.update(params_macros(mod, up))
    pools = pool_macros(mod, up)
    pool_of = {f"{pool_macro_prefix(up, str(p['name']))}_WORKSPACE_{k}": str(p["name"])
               for p in mod["memory"].get("pools") or [] for k in ("SIZE", "INDEX")}
    model.update(pools)
    for macro, value in model.items():
        if macro in owner and macro in pool_of:
            raise CompileError(f"tensor {owner[macro]!r} and memory pool {pool_of[macro]!r} both define header "
                               f"macro {macro}; rename one")
        if macro in owner:
            raise CompileError(f"tensor {owner[macro]!r} would define {macro}, which the header reserves; rename it")
        out[macro] = value
    return out


def params_macros(mod: Mapping[str, Any], up: str) -> dict[str, int | str]:
    """The parameter blob's macros of a module of metadata.json (none without --params external)."""
    p = mod["utvm"].get("params")
    if not p:
        return {}
    return {f"TVMGEN_{up}_PARAMS_SIZE": int(p["size_bytes"]), f"TVMGEN_{up}_PARAMS_NUM_ARRAYS": len(p["arrays"]),
            f"TVMGEN_{up}_PARAMS_ALIGNMENT": int(p["alignment"]),
            f"TVMGEN_{up}_PARAMS_HASH": f'"{c_string(str(p["model_hash"]))}"'}


def reset_state_signature(prefix: str, user_ws: bool, pooled: bool = False) -> str:
    """The C signature of the generated state reset of a model with stateful operators (with memory pools
    and a user workspace it takes the pools' pointers, as TVMContext.workspace does)."""
    if user_ws and pooled:
        return f"void {prefix}_reset_state(void* const* workspaces)"
    return f"void {prefix}_reset_state({'void* workspace' if user_ws else 'void'})"


def pool_macros(mod: Mapping[str, Any], up: str) -> dict[str, int]:
    """The memory-pool macros of a module of metadata.json (none without --memory-pool)."""
    pools = mod["memory"].get("pools") or []
    if not pools:
        return {}
    out = {f"TVMGEN_{up}_NUM_WORKSPACE_POOLS": len(pools)}
    for i, p in enumerate(pools):
        base = pool_macro_prefix(up, str(p["name"]))
        if f"{base}_WORKSPACE_SIZE" in out:
            raise CompileError(f"memory pools: two pools define {base}_WORKSPACE_SIZE (names are compared ignoring "
                               "case)")
        out[f"{base}_WORKSPACE_SIZE"] = int(p["size_bytes"])
        out[f"{base}_WORKSPACE_INDEX"] = i
    return out


def params_info(prefix: str) -> str:
    """The name of a model's `const TVMParamsInfo` (--params external)."""
    return f"{prefix}_params_info"


def header_source(iface: ModelInterface, metadata: Mapping[str, Any], interface_api: str, unpacked_api: bool,
                  workspace: str, version: str) -> str:
    m = iface.model_name
    prefix = f"tvmgen_{m}"
    guard = f"TVMGEN_{m.upper()}_H_"
    macros = header_macros(metadata, m)
    main = metadata["modules"][m]["memory"]["functions"]["main"][0]
    io = {**main["inputs"], **main["outputs"]}
    extra = metadata["modules"][m]["utvm"]
    context = bool(extra.get("operator_context"))  # every operator takes the context (codegen.Options)
    external = bool(extra.get("params"))  # --params external
    run_context = workspace == "user" or context
    lines = [
        "/*",
        f" * {prefix}.h -- interface of model '{m}' (generated by utvm {version}; do not edit).",
        " *",
        " * Every macro is also in metadata.json (mapping: utvm.compiler.header). Sizes are in bytes.",
    ]
    if interface_api == "c":
        lines += [
            " * Run the model with the stable runtime API (tvm/runtime/crt/tvm_micro_runtime.h):",
            f" *   struct {prefix}_inputs in = {{...}}; struct {prefix}_outputs out = {{...}};",
            f" *   TVMExecute(&{prefix}_model, &in, &out, {'&context' if run_context else 'NULL'});",
        ]
        if workspace == "user" and metadata["modules"][m]["memory"].get("pools"):
            lines.append(" * The workspaces, one per memory pool in pool order (<POOL>_WORKSPACE_SIZE bytes each, "
                         "aligned), come from the TVMContext: a `static const TVMContext` or TVMSetWorkspaces.")
        elif workspace == "user":
            lines.append(f" * The workspace ({prefix.upper()}_WORKSPACE_SIZE bytes, 16-byte aligned) comes from "
                         "the TVMContext: a `static const TVMContext` (it may live in flash) or TVMSetWorkspaces.")
    if external:
        how = (f"TVMSetParameters(&context, &{params_info(prefix)}, blob, size)." if interface_api == "c" else
               f"{prefix}_set_parameters(blob, size) (over RPC: {prefix}_set_params).")
        lines += [" * The weights are not in the code (--params external): the context carries the parameter blob",
                  f" * (params.bin, {prefix.upper()}_PARAMS_SIZE bytes, {prefix.upper()}_PARAMS_ALIGNMENT-byte "
                  "aligned), put there once", f" * validated by {how}"]
    elif context:
        lines.append(" * Every operator receives the context (a user operator reads the application's handle in it).")
    lines += [" */", f"#ifndef {guard}", f"#define {guard}", "", "#include <stddef.h>", "#include <stdint.h>"]
    if interface_api == "c":
        lines.append("#include <tvm/runtime/crt/tvm_micro_backend.h>")
    else:
        lines.append("#include <tvm/runtime/c_runtime_api.h>")
        if context:
            lines.append("#include <tvm/runtime/crt/tvm_micro_backend.h>")
    lines += ["", "#ifdef __cplusplus", "extern \"C\" {", "#endif", ""]
    done: set[str] = set()
    for kind, xs in (("Input", iface.inputs), ("Output", iface.outputs)):
        for x in xs:
            name = macro_name(m, x.name)
            if name not in done:
                done.add(name)
                q = x.quant
                what = ("not quantized" if q is None else
                        f"quantized, real = scale * (q - zero_point), scale {float(q.scale[0]):.9g}"
                        if q.axis is None else f"quantized per channel along axis {q.axis}")
                lines.append(f"/*! {kind} {c_comment(repr(x.name))}: {x.dtype}{list(x.shape)}, {what} */")
                lines += [f"#define {k} {macros[k]}" for k in _tensor_macros(m, x.name, io[x.name])]
    up = m.upper()
    for key, what in (("WORKSPACE_SIZE", "Workspace pool (16-byte aligned)"),
                      ("LOWER_BOUND_SIZE", "Lower bound of any static plan of this model's workspace"),
                      ("NUM_INPUTS", "Number of inputs"), ("NUM_OUTPUTS", "Number of outputs"),
                      ("UTVM_VERSION", "Version of the utvm that generated this code"),
                      ("UTVM_VERSION_MAJOR", ""), ("UTVM_VERSION_MINOR", ""), ("UTVM_VERSION_PATCH", ""),
                      ("MODEL_HASH", "SHA-256 of the compiled graph (the MLF's src/<model>.json)")):
        macro = f"TVMGEN_{up}_{key}"
        if macro not in macros:
            continue
        if what:
            lines.append(f"/*! {what} */")
        lines.append(f"#define {macro} {macros[macro]}")
    params_lines = params_macros(metadata["modules"][m], up)
    if params_lines:
        lines.append("/*! The parameter blob (--params external): its size, arrays, alignment and model hash */")
        lines += [f"#define {k} {macros[k]}" for k in params_lines]
    pool_lines = pool_macros(metadata["modules"][m], up)
    if pool_lines:
        lines.append("/*! Memory pools, in order of preference (= TVMContext.workspace order); "
                     f"TVMGEN_{up}_WORKSPACE_SIZE is their total */")
        lines += [f"#define {k} {macros[k]}" for k in pool_lines]
    lines.append("")
    if interface_api == "c":
        for which, xs in (("inputs", iface.inputs), ("outputs", iface.outputs)):
            lines.append(f"/*! Model {which}, one pointer each (in model order). */")
            lines.append(f"struct {prefix}_{which} {{")
            for x in xs:
                lines.append(f"  {C_TYPES[x.dtype]}* {x.field};")
            if not xs:
                lines.append("  void* unused_;")
            lines.append("};\n")
        ctx = ", const TVMContext* context" if run_context else ""
        lines += [
            "/*! Run the model: 0 on success, else an error code (tvm/runtime/crt/error_codes.h). */",
            f"int32_t {prefix}_run(struct {prefix}_inputs* inputs, struct {prefix}_outputs* outputs{ctx});",
            "",
            "/*! The model descriptor for TVMExecute / TVMGetWorkspaceSize. */",
            f"extern const TVMModel {prefix}_model;",
        ]
    else:
        lines += [
            "/*! Run the model: a PackedFunc over DLTensors (inputs..., outputs...). */",
            f"int {prefix}_run(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,",
            "                 int* out_ret_tcode, void* resource_handle);",
        ]
        if not unpacked_api:
            lines += [f"int {prefix}___tvm_main__(TVMValue* args, int* type_codes, int num_args,",
                      "                 TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle);"]
    if context:
        lines += ["", "/*! The model's own context: the one its packed entry points and RPC adapter run with. */",
                  f"TVMContext* {prefix}_context(void);"]
    if external:
        lines += ["", "/*! What the model expects of its parameter blob (TVMSetParameters, TVMValidateParameters). */",
                  f"extern const TVMParamsInfo {params_info(prefix)};",
                  "/*! Validate a parameter blob and make it the parameters of the model's own context. */",
                  f"int32_t {prefix}_set_parameters(const void* blob, size_t size);"]
    if header_plan(metadata, m).get("persistent"):  # stateful operators
        ws = " (the workspace passed to the runs)" if workspace == "user" else ""
        lines += ["", f"/*! Zero the state the model keeps from run to run{ws}: a new stream, as after boot. */",
                  reset_state_signature(prefix, workspace == "user", bool(pool_lines)) + ";"]
    lines += ["", "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)
