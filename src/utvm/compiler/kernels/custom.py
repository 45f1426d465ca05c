"""C for the user operator `custom` (utvm.ops.custom, docs/custom_ops.md).

The kernel body is the same in every convention: it describes the node's tensors as an array of
`UtvmCustomTensor` (<tvm/runtime/crt/utvm_custom_op.h>; inputs, then outputs, contiguous) and calls
`<func>_user(tensors, num_inputs, tensors + num_inputs, num_outputs)` inside the memory guard (below). How
`<func>_user` reaches the user's function depends on the convention, so the code generator asks
`call_source` for it (and for the guard's `<prefix>_custom_violation`), once per file.

A user function declared with `UTVM_CUSTOM_OP_WITH_CONTEXT(symbol)` in its file (`takes_context`) takes one
more argument, `void* resource_handle`: the model's TVMContext. Its model then passes the context to every
operator (codegen.Options.operator_context), and the body passes its own `resource_handle` on to
`<func>_user(..., resource_handle)`; other user functions keep the 6-argument signature.

- unpacked API (and the C interface): a direct call of the user's `symbol` with the node's option bytes;
- packed API: through the function environment, as TVM's generated code calls an extern packed function:
  `TVMBackendGetFuncFromEnv(&<prefix>_custom_module, "NAME", &fn)`, resolved once and cached in a static,
  then `TVMFuncCall` with the tensors as DLTensors plus a last kTVMOpaqueHandle argument, the node's
  `UtvmCustomCall` (quantization and option bytes, which a DLTensor cannot carry). The module it names is
  a small function registry in the same file holding one packed wrapper per user operator (the CRT's
  TVMBackendGetFuncFromEnv looks in the calling module first, then the global registry, so firmware may
  also register its own packed function of that name globally instead: not when the module has it).

The memory guard (docs/custom_ops.md, "The memory guard"), on in every build: the user's function never gets
an output's own buffer but a slot of the operator's scratch area (`output_slots`), between two bands of
GUARD_BYTES bytes the body fills with a known pattern before the call; the body also takes a checksum
(FNV-1a's step over 32-bit words) of every non-constant input. After a call that returned 0 it checks both
bands of every output and every checksum: a difference returns UTVM_CUSTOM_OP_ERROR_GUARD (in the packed
convention with a message naming the operator and what it wrote). Then it copies each slot to its output,
unless the output *is* the slot: lowering (lower._plan) places every output that lives in the workspace inside
its slot, so the model's own run copies nothing; a model output (the application's buffer) and the arrays a
debug or profiling run passes are written through the slot and copied. The decision is a pointer comparison at
run time, so the body is correct whatever memory it is given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from utvm import custom_ops
from utvm.compiler import memory
from utvm.compiler.kernels import DL_TYPES, KernelCode, KernelContext, define_helper, register
from utvm.compiler.kernels.cemit import block, fill
from utvm.errors import CompileError
from utvm.ir.graph import Node
from utvm.support.ctext import c_string

HEADER = "tvm/runtime/crt/utvm_custom_op.h"
define_helper("custom_op_h", f"#include <{HEADER}>", "")

#: bytes of guard before and after every output of a user operator: a multiple of the plan's alignment, so
#: each output keeps a 16-byte aligned address
GUARD_BYTES = 16
assert GUARD_BYTES % memory.ALIGNMENT == 0 and GUARD_BYTES % 4 == 0

# The guard bands: GUARD_BYTES of a pattern whose bytes differ from their neighbours (a constant fill is always
# seen), written and compared a word at a time (memcpy: any alignment, one load or store where the CPU allows).
# The inputs' checksum: FNV-1a's step over 32-bit words, then the bytes left: each step is a bijection of the
# state, so any change within one word (any single byte) always changes the sum.
define_helper("custom_guard", fill("""\
static inline uint32_t tvm_guard_word(uint32_t i) {
  return 0xA5C3F00DU ^ (i * 0x9E3779B1U);
}
static inline void tvm_guard_fill(uint8_t* band) {
  uint32_t i;
  for (i = 0U; i < @WORDS@U; ++i) {
    const uint32_t w = tvm_guard_word(i);
    (void)memcpy(band + (4U * i), &w, 4U);
  }
}
static inline int32_t tvm_guard_intact(const uint8_t* band) {
  uint32_t i;
  uint32_t diff = 0U;
  for (i = 0U; i < @WORDS@U; ++i) {
    uint32_t w;
    (void)memcpy(&w, band + (4U * i), 4U);
    diff |= w ^ tvm_guard_word(i);
  }
  return (diff == 0U) ? 1 : 0;
}""", WORDS=GUARD_BYTES // 4), "tvm_guard_fill", deps=("string",))
define_helper("custom_guard_sum", """\
static inline uint32_t tvm_guard_sum(const void* data, uint32_t n) {
  const uint8_t* p = (const uint8_t*)data;
  uint32_t h = 2166136261U;
  uint32_t i = 0U;
  for (; (i + 4U) <= n; i += 4U) {
    uint32_t w;
    (void)memcpy(&w, p + i, 4U);
    h = (h ^ w) * 16777619U;
  }
  for (; i < n; ++i) {
    h = (h ^ (uint32_t)p[i]) * 16777619U;
  }
  return h;
}""", "tvm_guard_sum", deps=("string",))


def output_slots(nbytes: Sequence[int]) -> tuple[tuple[int, ...], int]:
    """The scratch area of a user operator whose outputs have `nbytes` bytes: (offset of each output's data in
    it, its size). Output k has GUARD_BYTES before and after it; every offset is aligned. The kernel and the
    memory plan (which places workspace outputs in their slot) both read the layout here."""
    offsets: list[int] = []
    pos = 0
    for n in nbytes:
        offsets.append(pos + GUARD_BYTES)
        pos += memory.align(int(n) + 2 * GUARD_BYTES)
    return tuple(offsets), pos


def violation_function(prefix: str) -> str:
    """The C function (call_source defines it) a user operator's body returns through when the guard finds a
    violation."""
    return f"{prefix}_custom_violation"

_SIGNATURE = ("(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs, "
              "int32_t num_outputs, const uint8_t* options, int32_t options_size)")
#: the signature of a user function that takes the context (UTVM_CUSTOM_OP_WITH_CONTEXT)
_SIGNATURE_CONTEXT = _SIGNATURE[:-1] + ", void* resource_handle)"
#: C comments and string or character literals (not code, when looking for a declaration)
_NOT_CODE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def takes_context(binding: custom_ops.CBinding) -> bool:
    """Whether the user's C file declares `binding.symbol` with `UTVM_CUSTOM_OP_WITH_CONTEXT(symbol)` (the
    header's declaration of the 7-argument signature, so the C compiler holds the definition to it)."""
    code = _NOT_CODE.sub(" ", binding.text())
    return re.search(rf"\bUTVM_CUSTOM_OP_WITH_CONTEXT\s*\(\s*{re.escape(binding.symbol)}\s*\)", code) is not None


def graph_takes_context(nodes: Sequence[Node]) -> bool:
    """Whether a user operator among `nodes` takes the context (then every operator of the model gets it)."""
    return any(takes_context(_binding(str(n.attrs["name"]), f"user operator {n.attrs['name']!r}"))
               for n in nodes if n.op == custom_ops.OP)


def _binding(name: str, label: str) -> custom_ops.CBinding:
    b = custom_ops.c_binding(name)
    if b is None:
        raise CompileError(f"{label}: user operator {name!r} has no C implementation (bind one with "
                           f"--custom-op {name}=FILE.c:symbol, or utvm.custom_ops.bind_c)")
    return b


@register(custom_ops.OP)
def custom(ctx: KernelContext) -> KernelCode:
    p = ctx.params()
    with_context = takes_context(_binding(p.name, ctx.label))
    ctx.file.require("custom_op_h")
    n_in, n_out = len(p.inputs), len(p.outputs)
    if n_in + n_out > custom_ops.MAX_TENSORS:
        raise ctx.error(f"user operator {p.name!r} has {n_in + n_out} tensors; at most {custom_ops.MAX_TENSORS} "
                        "(inputs + outputs)")
    g = GUARD_BYTES
    out_bytes = [ctx.out_tensor(k).nbytes for k in range(n_out)]
    slots, scratch_bytes = output_slots(out_bytes)
    # the inputs computed at run time (a constant is a static const array: not checked)
    checked = [i for i in range(n_in) if not ctx.graph.tensor(ctx.node.inputs[i]).is_constant]
    in_bytes = {i: ctx.graph.tensor(ctx.node.inputs[i]).nbytes for i in checked}
    ctx.helper("custom_guard")
    lines = [f"UtvmCustomTensor t[{n_in + n_out}];"]
    if checked:
        sum_fn = ctx.helper("custom_guard_sum")
        lines.append(f"uint32_t sum[{len(checked)}];")
    lines.append("int32_t rc;")
    exprs = [f"(void*){ctx.inputs[i]}" for i in range(n_in)] + [f"(void*)({_at(s)})" for s in slots]
    for k, (spec, expr) in enumerate(zip((*p.inputs, *p.outputs), exprs, strict=True)):
        code, bits = DL_TYPES[spec.dtype]
        shape = ctx.table("int64_t", list(spec.shape) or [1], f"shape{k}")
        lines += [f"t[{k}].data = {expr};", f"t[{k}].dtype_code = {code}U;", f"t[{k}].dtype_bits = {bits}U;",
                  f"t[{k}].ndim = {len(spec.shape)};", f"t[{k}].shape = {shape};",
                  f"t[{k}].scale = {ctx.float_literal(spec.scale)};",
                  f"t[{k}].zero_point = {ctx.literal(spec.zero_point, 'int32')};"]
    lines.append(f"/* the memory guard (docs/custom_ops.md): {g} bytes of pattern before and after each output's "
                 "slot, a checksum of each input computed at run time */")
    for s, n in zip(slots, out_bytes, strict=True):
        lines += [f"tvm_guard_fill({_at(s - g)});", f"tvm_guard_fill({_at(s + n)});"]
    for j, i in enumerate(checked):
        lines.append(f"sum[{j}] = {sum_fn}({ctx.inputs[i]}, {in_bytes[i]}U);")
    handle = ", resource_handle" if with_context else ""  # the operator's own last parameter (codegen)
    lines += [f"rc = {ctx.func_name}_user(t, {n_in}, t + {n_in}, {n_out}{handle});",
              block("if (rc != 0)", "return rc;")]
    name = f'"{c_string(p.name)}"'
    report = violation_function(ctx.file.prefix)
    for k, (s, n) in enumerate(zip(slots, out_bytes, strict=True)):
        lines += [block(f"if (tvm_guard_intact({_at(s - g)}) == 0)", f"return {report}({name}, {k}, -1);"),
                  block(f"if (tvm_guard_intact({_at(s + n)}) == 0)", f"return {report}({name}, {k}, 1);")]
    for j, i in enumerate(checked):
        lines.append(block(f"if ({sum_fn}({ctx.inputs[i]}, {in_bytes[i]}U) != sum[{j}])",
                           f"return {report}({name}, {i}, 0);"))
    for k, (s, n) in enumerate(zip(slots, out_bytes, strict=True)):
        if n > 0:  # an output the plan placed in its slot is the slot: nothing to copy
            lines.append(block(f"if ((const void*){ctx.outputs[k]} != (const void*)({_at(s)}))",
                               f"(void)memcpy({ctx.outputs[k]}, {_at(s)}, {n}U);"))
    lines.append("return 0;")
    return KernelCode("\n".join(lines), scratch_bytes=scratch_bytes)


def _at(offset: int) -> str:
    """The C address `offset` bytes into the operator's scratch area."""
    return f"scratch + {offset}" if offset else "scratch"


def _bytes_init(data: bytes) -> str:
    return ", ".join(f"0x{b:02x}U" for b in data)


# A user operator `@NAME@` (C function @SYMBOL@) as the packed function @FUNC@ of the file's registry.
_PACKED_WRAPPER = """\
/* '@NAME@' as a packed function: (DLTensor inputs..., DLTensor outputs..., const UtvmCustomCall*) -> @SYMBOL@. */
static int @FUNC@(@PARAMS@) {
  UtvmCustomTensor t[UTVM_CUSTOM_OP_MAX_TENSORS];
  const UtvmCustomCall* call;
  int32_t i;
  (void)out_ret_value;
  (void)resource_handle;
  if (num_args < 1 || type_codes[num_args - 1] != (int)kTVMOpaqueHandle) {
    TVMAPISetLastErrorf("@NAME@: the last argument must be the call's UtvmCustomCall (an opaque handle)");
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  call = (const UtvmCustomCall*)args[num_args - 1].v_handle;
  if (call == NULL || call->num_inputs + call->num_outputs != num_args - 1 ||
      num_args - 1 > UTVM_CUSTOM_OP_MAX_TENSORS) {
    TVMAPISetLastErrorf("@NAME@: %d arguments do not match the call's tensors", num_args);
    return (int)kTvmErrorFunctionCallNumArguments;
  }
  for (i = 0; i < num_args - 1; ++i) {
    const DLTensor* d = (const DLTensor*)args[i].v_handle;
    if ((type_codes[i] != (int)kTVMDLTensorHandle && type_codes[i] != (int)kTVMNDArrayHandle) || d == NULL) {
      TVMAPISetLastErrorf("@NAME@: argument %d is not a DLTensor", (int)i);
      return (int)kTvmErrorFunctionCallWrongArgType;
    }
    t[i] = call->tensors[i];
    t[i].data = (void*)((uint8_t*)d->data + d->byte_offset);
  }
  *out_ret_tcode = (int)kTVMNullptr;
  return (int)@SYMBOL@(t, call->num_inputs, t + call->num_inputs, call->num_outputs, call->options,
                 call->options_size@HANDLE@);
}
"""

# `@FUNC@_user`, packed convention: user operator `@NAME@` through the function environment.
_ENV_CALL = """\
/* '@NAME@' through the function environment: looked up once, then called with DLTensors. The tensor
 * descriptions are contiguous (outputs follow inputs). */
static int32_t @FUNC@_user@SIGNATURE@ {
  static TVMFunctionHandle fn = NULL;
  DLTensor d[UTVM_CUSTOM_OP_MAX_TENSORS];
  TVMValue v[UTVM_CUSTOM_OP_MAX_TENSORS + 1];
  int c[UTVM_CUSTOM_OP_MAX_TENSORS + 1];
  TVMValue rv;
  int rc;
  int32_t i;
  UtvmCustomCall call;
  if (fn == NULL) {
    int err = TVMBackendGetFuncFromEnv((void*)&@PREFIX@_custom_module, "@NAME@", &fn);
    if (err != 0) {
      return (int32_t)err;
    }
  }
  (void)outputs;
  for (i = 0; i < num_inputs + num_outputs; ++i) {
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
  }
  call.num_inputs = num_inputs;
  call.num_outputs = num_outputs;
  call.tensors = inputs;
  call.options = @OPTIONS@;
  call.options_size = @OPTIONS_SIZE@;@HANDLE@
  v[i].v_handle = (void*)&call;
  c[i] = (int)kTVMOpaqueHandle;
  return (int32_t)TVMFuncCall(fn, v, c, (int)(i + 1), &rv, &rc);
}
"""

# the guard's report (violation_function): packed convention, with a message
_VIOLATION_PACKED = """\
@DOC@
static int32_t @FUNC@(const char* name, int32_t index, int32_t where) {
  if (where == 0) {
    TVMAPISetLastErrorf("'%s' wrote into its input %d", name, (int)index);
  } else {
    TVMAPISetLastErrorf("'%s' wrote outside its output %d (the %d bytes %s it)", name, (int)index, @GUARD@,
                        (where < 0) ? "before" : "after");
  }
  return (int32_t)UTVM_CUSTOM_OP_ERROR_GUARD;
}
"""

# ... and in the unpacked conventions (no error text)
_VIOLATION = """\
@DOC@
static int32_t @FUNC@(const char* name, int32_t index, int32_t where) {
  (void)name;
  (void)index;
  (void)where;
  return (int32_t)UTVM_CUSTOM_OP_ERROR_GUARD;
}
"""


def call_source(funcs: Sequence[tuple[str, Node]], prefix: str, packed: bool) -> str:
    """The file-scope C that defines `<func>_user` for every user-operator function of a file: `funcs` lists
    (operator function name, node) of the nodes whose op is `custom`; "" when there are none."""
    if not funcs:
        return ""
    from utvm.compiler.codegen import PACKED_PARAMS, registry_names_literal

    out = ["/* User operators (docs/custom_ops.md): the functions the application provides. */"]
    symbols: dict[str, str] = {}  # name -> symbol
    context: dict[str, bool] = {}  # name -> whether its function takes the context
    for _fname, node in funcs:
        name = str(node.attrs["name"])
        if name not in symbols:
            b = _binding(name, f"user operator {name!r}")
            symbols[name], context[name] = b.symbol, takes_context(b)
    sym_context = {sym: context[name] for name, sym in reversed(list(symbols.items()))}
    for sym in dict.fromkeys(symbols.values()):
        out.append(f"int32_t {sym}{_SIGNATURE_CONTEXT if sym_context[sym] else _SIGNATURE};")
    out.append("")
    user_sig = ("(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs, "
                "int32_t num_outputs)")
    user_sig_context = user_sig[:-1] + ", void* resource_handle)"
    wrappers: dict[str, str] = {}
    if packed:
        out += ["#include <tvm/runtime/c_backend_api.h>", "#include <tvm/runtime/crt/module.h>", ""]
        for k, (name, sym) in enumerate(symbols.items()):
            w = f"{prefix}_custom_packed{k}"
            wrappers[name] = w
            out.append(fill(_PACKED_WRAPPER, NAME=name, SYMBOL=sym, FUNC=w, PARAMS=PACKED_PARAMS,
                            HANDLE=",\n                 call->resource_handle" if context[name] else ""))
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
        handle = ", resource_handle" if context[name] else ""
        sig = user_sig_context if context[name] else user_sig
        if not packed:
            call = f"return {symbols[name]}(inputs, num_inputs, outputs, num_outputs, {opt}, {len(options)}{handle});"
            out.append(block(f"static int32_t {fname}_user{sig}", call) + "\n")
            continue
        out.append(fill(_ENV_CALL, NAME=name, FUNC=fname, SIGNATURE=sig, PREFIX=prefix, OPTIONS=opt,
                        OPTIONS_SIZE=len(options),
                        HANDLE="\n  call.resource_handle = resource_handle;" if context[name] else ""))
    report = violation_function(prefix)
    doc = ("/* A user operator that returned 0 broke the memory contract (docs/custom_ops.md, \"The memory\n"
           f" * guard\"): it wrote into the {GUARD_BYTES} guard bytes before (where < 0) or after (where > 0) its\n"
           " * output `index`, or into its input `index` (where == 0). */")
    if packed:
        out.append(fill(_VIOLATION_PACKED, DOC=doc, FUNC=report, GUARD=GUARD_BYTES))
    else:
        out.append(fill(_VIOLATION, DOC=doc, FUNC=report))
    return "\n".join(out).rstrip() + "\n"
