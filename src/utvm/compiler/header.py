"""The model header `tvmgen_<model>.h` (DESIGN.md §7) and its one mapping from metadata.json.

Every macro in the header is computed from metadata.json by `header_macros(metadata)`, and the header is
written from that same function, so the two cannot disagree. The mapping, for model `<m>` (upper-cased:
`<M>`) and `main = modules.<m>.memory.functions.main[0]`:

    TVMGEN_<M>_<NAME>_SIZE        = main.inputs.<name>.size   (bytes; one per input)
    TVMGEN_<M>_<NAME>_SIZE        = main.outputs.<name>.size  (bytes; one per output)
    TVMGEN_<M>_WORKSPACE_SIZE     = main.workspace_size_bytes
    TVMGEN_<M>_LOWER_BOUND_SIZE   = modules.<m>.memory.plan.lower_bound_bytes
    TVMGEN_<M>_NUM_INPUTS         = len(modules.<m>.utvm.inputs)   (input names in model order)
    TVMGEN_<M>_NUM_OUTPUTS        = len(modules.<m>.utvm.outputs)  (output names in model order)

`<NAME>` is the tensor name with every non-alphanumeric character replaced by `_`, upper-cased
(`serving_default_input_1:0` -> `SERVING_DEFAULT_INPUT_1_0`). Struct fields keep the sanitized name's
case (a leading digit or a C keyword gets a leading/trailing `_`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from utvm.compiler.kernels import C_TYPES
from utvm.compiler.lower import C_KEYWORDS, sanitize
from utvm.errors import CompileError
from utvm.ir.graph import Graph
from utvm.support.ctext import c_comment


@dataclass(frozen=True, slots=True)
class IOTensor:
    name: str  # the model's tensor name
    field: str  # member of struct tvmgen_<m>_inputs / _outputs
    param: str  # parameter name in generated functions (in_<field> / out_<field>)
    dtype: str
    shape: tuple[int, ...]
    size: int  # bytes


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
            out.append(IOTensor(n, f, pfx + f, t.dtype, t.shape, t.nbytes))
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


def header_macros(metadata: Mapping[str, Any], model_name: str | None = None) -> dict[str, int]:
    """The header's macros, computed from metadata.json (the documented mapping above)."""
    modules = metadata["modules"]
    name = model_name or next(iter(modules))
    mod = modules[name]
    main = mod["memory"]["functions"]["main"][0]
    up = sanitize(name).upper()
    out: dict[str, int] = {}
    for tname, info in main["inputs"].items():
        out[macro_name(name, tname)] = int(info["size"])
    for tname, info in main["outputs"].items():
        out[macro_name(name, tname)] = int(info["size"])
    out[f"TVMGEN_{up}_WORKSPACE_SIZE"] = int(main["workspace_size_bytes"])
    out[f"TVMGEN_{up}_LOWER_BOUND_SIZE"] = int(mod["memory"]["plan"]["lower_bound_bytes"])
    out[f"TVMGEN_{up}_NUM_INPUTS"] = len(mod["utvm"]["inputs"])
    out[f"TVMGEN_{up}_NUM_OUTPUTS"] = len(mod["utvm"]["outputs"])
    return out


def header_source(iface: ModelInterface, metadata: Mapping[str, Any], interface_api: str, unpacked_api: bool,
                  workspace: str, version: str) -> str:
    m = iface.model_name
    prefix = f"tvmgen_{m}"
    guard = f"TVMGEN_{m.upper()}_H_"
    macros = header_macros(metadata, m)
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
            f" *   TVMExecute(&{prefix}_model, &in, &out, {'&context' if workspace == 'user' else 'NULL'});",
        ]
        if workspace == "user":
            lines.append(f" * The workspace ({prefix.upper()}_WORKSPACE_SIZE bytes, 16-byte aligned) comes from "
                         "the TVMContext (TVMSetWorkspaces).")
    lines += [" */", f"#ifndef {guard}", f"#define {guard}", "", "#include <stddef.h>", "#include <stdint.h>"]
    if interface_api == "c":
        lines.append("#include <tvm/runtime/crt/tvm_micro_backend.h>")
    else:
        lines.append("#include <tvm/runtime/c_runtime_api.h>")
    lines += ["", "#ifdef __cplusplus", "extern \"C\" {", "#endif", ""]
    done: set[str] = set()
    for kind, xs in (("Input", iface.inputs), ("Output", iface.outputs)):
        for x in xs:
            name = macro_name(m, x.name)
            if name not in done:
                done.add(name)
                lines.append(f"/*! {kind} {c_comment(repr(x.name))}: {x.dtype}{list(x.shape)} */")
                lines.append(f"#define {name} {macros[name]}")
    up = m.upper()
    for key, what in (("WORKSPACE_SIZE", "Workspace pool (16-byte aligned)"),
                      ("LOWER_BOUND_SIZE", "Lower bound of any static plan of this model's workspace"),
                      ("NUM_INPUTS", "Number of inputs"), ("NUM_OUTPUTS", "Number of outputs")):
        lines.append(f"/*! {what} */")
        lines.append(f"#define TVMGEN_{up}_{key} {macros[f'TVMGEN_{up}_{key}']}")
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
        ctx = ", TVMContext* context" if workspace == "user" else ""
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
    if header_plan(metadata, m).get("persistent"):  # stateful operators
        ws = " (the workspace passed to the runs)" if workspace == "user" else ""
        lines += ["", f"/*! Zero the state the model keeps from run to run{ws}: a new stream, as after boot. */",
                  f"void {prefix}_reset_state({'void* workspace' if workspace == 'user' else 'void'});"]
    lines += ["", "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)
