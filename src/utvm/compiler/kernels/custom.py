"""C for the user operator `custom` (utvm.ops.custom, docs/custom_ops.md).

The kernel body is the same in every convention: it describes the node's tensors as an array of
`UtvmCustomTensor` (<tvm/runtime/crt/utvm_custom_op.h>; inputs, then outputs, contiguous) and returns
`<func>_user(tensors, num_inputs, tensors + num_inputs, num_outputs)`. How `<func>_user` reaches the user's
function depends on the convention, so the code generator asks `call_source` for it, once per file:

- unpacked API (and the C interface): a direct call of the user's `symbol` with the node's option bytes;
- packed API: through the function environment, as TVM's generated code calls an extern packed function:
  `TVMBackendGetFuncFromEnv(&<prefix>_custom_module, "NAME", &fn)`, resolved once and cached in a static,
  then `TVMFuncCall` with the tensors as DLTensors plus a last kTVMOpaqueHandle argument, the node's
  `UtvmCustomCall` (quantization and option bytes, which a DLTensor cannot carry). The module it names is
  a small function registry in the same file holding one packed wrapper per user operator (the CRT's
  TVMBackendGetFuncFromEnv looks in the calling module first, then the global registry, so firmware may
  also register its own packed function of that name globally instead: not when the module has it).
"""

from __future__ import annotations

from collections.abc import Sequence

from utvm import custom_ops
from utvm.compiler.kernels import DL_TYPES, KernelCode, KernelContext, c_literal, define_helper, register
from utvm.errors import CompileError
from utvm.ir.graph import Node

HEADER = "tvm/runtime/crt/utvm_custom_op.h"
define_helper("custom_op_h", f"#include <{HEADER}>", "")

_SIGNATURE = ("(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs, "
              "int32_t num_outputs, const uint8_t* options, int32_t options_size)")


def _binding(name: str, label: str) -> custom_ops.CBinding:
    b = custom_ops.c_binding(name)
    if b is None:
        raise CompileError(f"{label}: user operator {name!r} has no C implementation (bind one with "
                           f"--custom-op {name}=FILE.c:symbol, or utvm.custom_ops.bind_c)")
    return b


@register(custom_ops.OP)
def custom(ctx: KernelContext) -> KernelCode:
    p = ctx.params()
    _binding(p.name, ctx.label)
    ctx.file.require("custom_op_h")
    n_in, n_out = len(p.inputs), len(p.outputs)
    if n_in + n_out > custom_ops.MAX_TENSORS:
        raise ctx.error(f"user operator {p.name!r} has {n_in + n_out} tensors; at most {custom_ops.MAX_TENSORS} "
                        "(inputs + outputs)")
    lines = [f"UtvmCustomTensor t[{n_in + n_out}];"]
    exprs = [f"(void*){ctx.inputs[i]}" for i in range(n_in)] + [f"(void*){o}" for o in ctx.outputs]
    for k, (spec, expr) in enumerate(zip((*p.inputs, *p.outputs), exprs, strict=True)):
        code, bits = DL_TYPES[spec.dtype]
        shape = ctx.table("int64_t", list(spec.shape) or [1], f"shape{k}")
        lines += [f"t[{k}].data = {expr};", f"t[{k}].dtype_code = {code}U;", f"t[{k}].dtype_bits = {bits}U;",
                  f"t[{k}].ndim = {len(spec.shape)};", f"t[{k}].shape = {shape};",
                  f"t[{k}].scale = {c_literal(spec.scale, 'float32')};",
                  f"t[{k}].zero_point = {c_literal(spec.zero_point, 'int32')};"]
    lines.append(f"return {ctx.func_name}_user(t, {n_in}, t + {n_in}, {n_out});")
    return KernelCode("\n".join(lines))


def _bytes_init(data: bytes) -> str:
    return ", ".join(f"0x{b:02x}U" for b in data)


def call_source(funcs: Sequence[tuple[str, Node]], prefix: str, packed: bool) -> str:
    """The file-scope C that defines `<func>_user` for every user-operator function of a file: `funcs` lists
    (operator function name, node) of the nodes whose op is `custom`; "" when there are none."""
    if not funcs:
        return ""
    from utvm.compiler.codegen import PACKED_PARAMS, registry_names_literal

    out = ["/* User operators (docs/custom_ops.md): the functions the application provides. */"]
    symbols: dict[str, str] = {}  # name -> symbol
    for _fname, node in funcs:
        name = str(node.attrs["name"])
        symbols.setdefault(name, _binding(name, f"user operator {name!r}").symbol)
    for sym in dict.fromkeys(symbols.values()):
        out.append(f"int32_t {sym}{_SIGNATURE};")
    out.append("")
    user_sig = ("(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs, "
                "int32_t num_outputs)")
    wrappers: dict[str, str] = {}
    if packed:
        out += ["#include <tvm/runtime/c_backend_api.h>", "#include <tvm/runtime/crt/module.h>", ""]
        for k, (name, sym) in enumerate(symbols.items()):
            w = f"{prefix}_custom_packed{k}"
            wrappers[name] = w
            out.append(f"""\
/* '{name}' as a packed function: (DLTensor inputs..., DLTensor outputs..., const UtvmCustomCall*) -> {sym}. */
static int {w}({PACKED_PARAMS}) {{
  UtvmCustomTensor t[UTVM_CUSTOM_OP_MAX_TENSORS];
  const UtvmCustomCall* call;
  int32_t i;
  (void)out_ret_value;
  (void)resource_handle;
  if (num_args < 1 || type_codes[num_args - 1] != (int)kTVMOpaqueHandle) {{
    TVMAPISetLastErrorf("{name}: the last argument must be the call's UtvmCustomCall (an opaque handle)");
    return (int)kTvmErrorFunctionCallWrongArgType;
  }}
  call = (const UtvmCustomCall*)args[num_args - 1].v_handle;
  if (call == NULL || call->num_inputs + call->num_outputs != num_args - 1 ||
      num_args - 1 > UTVM_CUSTOM_OP_MAX_TENSORS) {{
    TVMAPISetLastErrorf("{name}: %d arguments do not match the call's tensors", num_args);
    return (int)kTvmErrorFunctionCallNumArguments;
  }}
  for (i = 0; i < num_args - 1; ++i) {{
    const DLTensor* d = (const DLTensor*)args[i].v_handle;
    if ((type_codes[i] != (int)kTVMDLTensorHandle && type_codes[i] != (int)kTVMNDArrayHandle) || d == NULL) {{
      TVMAPISetLastErrorf("{name}: argument %d is not a DLTensor", (int)i);
      return (int)kTvmErrorFunctionCallWrongArgType;
    }}
    t[i] = call->tensors[i];
    t[i].data = (void*)((uint8_t*)d->data + d->byte_offset);
  }}
  *out_ret_tcode = (int)kTVMNullptr;
  return (int){sym}(t, call->num_inputs, t + call->num_inputs, call->num_outputs, call->options,
                 call->options_size);
}}
""")
        names = list(symbols)
        out += [f"static const TVMBackendPackedCFunc {prefix}_custom_funcs[{len(names)}] = {{",
                ",\n".join(f"  {wrappers[n]}" for n in names), "};",
                f"static const char {prefix}_custom_names[] =\n    {registry_names_literal(names)};",
                f"static const TVMFuncRegistry {prefix}_custom_registry = {{{prefix}_custom_names, "
                f"{prefix}_custom_funcs}};",
                "/* The module the operators pass to TVMBackendGetFuncFromEnv: the packed user operators. */",
                f"static const TVMModule {prefix}_custom_module = {{&{prefix}_custom_registry}};", ""]
    for fname, node in funcs:
        name = str(node.attrs["name"])
        options = bytes.fromhex(str(node.attrs.get("options", "")))
        opt = "NULL"
        if options:
            opt = f"{fname}_options"
            out.append(f"static const uint8_t {opt}[{len(options)}] = {{{_bytes_init(options)}}};")
        if not packed:
            out.append(f"static int32_t {fname}_user{user_sig} {{\n"
                       f"  return {symbols[name]}(inputs, num_inputs, outputs, num_outputs, {opt}, "
                       f"{len(options)});\n}}\n")
            continue
        out.append(f"""\
/* '{name}' through the function environment: looked up once, then called with DLTensors. The tensor
 * descriptions are contiguous (outputs follow inputs). */
static int32_t {fname}_user{user_sig} {{
  static TVMFunctionHandle fn = NULL;
  DLTensor d[UTVM_CUSTOM_OP_MAX_TENSORS];
  TVMValue v[UTVM_CUSTOM_OP_MAX_TENSORS + 1];
  int c[UTVM_CUSTOM_OP_MAX_TENSORS + 1];
  TVMValue rv;
  int rc;
  int32_t i;
  UtvmCustomCall call;
  if (fn == NULL) {{
    int err = TVMBackendGetFuncFromEnv((void*)&{prefix}_custom_module, "{name}", &fn);
    if (err != 0) {{
      return (int32_t)err;
    }}
  }}
  (void)outputs;
  for (i = 0; i < num_inputs + num_outputs; ++i) {{
    d[i].data = inputs[i].data;
    d[i].device.device_type = kDLCPU;
    d[i].device.device_id = 0;
    d[i].ndim = inputs[i].ndim;
    d[i].dtype.code = inputs[i].dtype_code;
    d[i].dtype.bits = inputs[i].dtype_bits;
    d[i].dtype.lanes = 1U;
    d[i].shape = (int64_t*)inputs[i].shape;
    d[i].strides = NULL;
    d[i].byte_offset = 0U;
    v[i].v_handle = &d[i];
    c[i] = (int)kTVMDLTensorHandle;
  }}
  call.num_inputs = num_inputs;
  call.num_outputs = num_outputs;
  call.tensors = inputs;
  call.options = {opt};
  call.options_size = {len(options)};
  v[i].v_handle = (void*)&call;
  c[i] = (int)kTVMOpaqueHandle;
  return (int32_t)TVMFuncCall(fn, v, c, (int)(i + 1), &rv, &rc);
}}
""")
    return "\n".join(out).rstrip() + "\n"
