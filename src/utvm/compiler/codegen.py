"""C code generation for the AOT executor in the RFC's three conventions (docs/architecture.md §6-7).

Files (all under codegen/host/ in the MLF):
- `src/tvmgen_<m>_ops.c`: the operator functions and the constants they bake in.
    packed:   `int tvmgen_<m>_<op>(TVMValue* args, int* type_codes, int num_args, ...)` over DLTensors,
              checking argument count, type codes, dtype and shape, around a static compute function;
    unpacked: `int32_t tvmgen_<m>_<op>(const int8_t* in0, ..., int8_t* out0)`: raw pointers, and no
              DLTensor, TVMValue or runtime header anywhere in the file.
    An operator with a scratch area takes `uint8_t* scratch` after its outputs, one with state kept across
    runs (`KernelCode.persistent_bytes`) then `uint8_t* state` (a packed argument "state" in the packed
    convention); main passes their planned workspace blocks.
- `src/tvmgen_<m>_main.c`: the workspace pool, `tvmgen_<m>___tvm_main__` (calls every operator in
  order on planned buffers) and the entry `tvmgen_<m>_run`:
    interface packed: `tvmgen_<m>_run` is a TVMBackendPackedCFunc over (inputs..., outputs...);
    interface c:      `int32_t tvmgen_<m>_run(struct tvmgen_<m>_inputs*, struct tvmgen_<m>_outputs*
                      [, const TVMContext* context])` plus the `TVMModel tvmgen_<m>_model` descriptor.
- `src/tvmgen_<m>_system_lib.c`: a const TVMFuncRegistry, a TVMModule and TVMSystemLibEntryPoint.
  It always has `tvmgen_<m>_run` as a packed function over DLTensors, and in the packed convention also
  `tvmgen_<m>___tvm_main__` and every operator, so the host can run the model and time single operators
  over RPC. It needs the CRT's common library; a deployment without RPC leaves this file out.
  With interface c it is `rpc_adapter_source`: a packed adapter (with its own workspace) over the C
  interface, the only DLTensor/TVMValue code of that convention. It is firmware-only
  (`CompiledModel.rpc_sources`, never in the MLF's codegen/), and a pure function of the options, the
  interface and the workspace size, so `utvm.mlf.load` regenerates it.
- `include/tvmgen_<m>.h`: the model header (see header.py).

With `--params external` (`Options.params`) ops.c declares no constant array: each is a macro for a pointer
into the parameter blob (utvm.compiler.params), whose first byte every operator function takes from the
context it receives. The context reaches the operators (`Options.operator_context`: --params external, or a
user operator that takes it) as their last argument, TVM's `void* resource_handle` (a `const TVMContext*`);
unpacked main passes it on, the C interface's `_run` takes the application's, and the packed entry points
(and packed operators) use the model's own, `tvmgen_<m>_context()` in main.c, which `tvmgen_<m>_set_parameters`
and the system library's `tvmgen_<m>_set_params` fill.

What the generated C needs at link time besides the CRT: `model_libm_functions` lists the <math.h>
functions it calls (float softmax/logistic: expf, tanh: tanhf, batch_norm with run-time parameters: sqrtf), as
the kernels reported them while they were emitted (`KernelContext.libm`: nothing is read back from the C text);
the driver records them in metadata.json, and every firmware that links generated code must link a libm
(`-lm`). Whether a file includes <math.h> is the same record (`FileScope.includes_math_h`: libm calls, or a
NAN / INFINITY a table or kernel literal spells), and main's workspace bases are the ones its calls addressed.
Everything else it may reference is in libc (memcpy, and the memset/memcpy a compiler may put in for loops) or
the compiler's runtime (soft-float and 64-bit division helpers, libgcc).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from utvm import custom_ops
from utvm.compiler.header import ModelInterface, params_info, reset_state_signature
from utvm.compiler.kernels import C_TYPES, DL_TYPES, MATH_FUNCTIONS, FileScope
from utvm.compiler.kernels import custom as custom_kernel
from utvm.compiler.kernels.cemit import block, c_array_body, fill, indent, lines, table_decl
from utvm.compiler.lower import Lowered, MemoryPlan, OperatorFunc
from utvm.compiler.memory import (
    ALIGNMENT,
    PoolUse,
    locate,
    pool_array_name,
    pool_macro_prefix,
    pool_param_name,
    workspace_sizes_name,
)
from utvm.compiler.params import MEANINGS, ParamArray, ParamsLayout, place_arrays
from utvm.support.ctext import c_comment, c_string


@dataclass(frozen=True, slots=True)
class Options:
    model_name: str
    unpacked_api: bool
    interface_api: str  # "packed" | "c"
    workspace: str  # "static" | "user"
    rounding: str
    version: str
    constants_section: str = ""  # --constants-section: the linker section of the constant arrays
    params: str = "embedded"  # --params: "embedded" (const arrays in the code) | "external" (a blob, params.py)
    #: every operator takes the context as its last argument (`void* resource_handle`): with --params
    #: external, or a user operator declared with UTVM_CUSTOM_OP_WITH_CONTEXT (`operator_context`)
    operator_context: bool = False

    def __post_init__(self) -> None:
        if self.params == "external" and not self.operator_context:
            raise ValueError("codegen.Options: --params external operators read the weights through the context")

    @property
    def external_params(self) -> bool:
        return self.params == "external"


_KTVM_TENSOR = "kTVMDLTensorHandle"


def _banner(fname: str, what: str, opts: Options) -> str:
    conv = "unpacked" if opts.unpacked_api else "packed"
    return (f"/*\n * {fname} -- {what} of model '{opts.model_name}'.\n"
            f" * Generated by utvm {opts.version} (executor aot, {conv} API, interface {opts.interface_api}, "
            f"workspace {opts.workspace}, rounding {opts.rounding}). Do not edit.\n */\n")


def _aligned_attr() -> str:
    return ("#if defined(__GNUC__) || defined(__clang__)\n"
            f"#define TVMGEN_ALIGNED __attribute__((aligned({ALIGNMENT})))\n"
            "#else\n#define TVMGEN_ALIGNED\n#endif\n")


# --- shared C snippets for the packed convention -----------------------------------------------------------

_ARG_CHECKER = """\
/* Check that args[index] is a dense DLTensor of the expected dtype and shape; *data = its first byte. */
static int @PREFIX@_tensor_arg(const char* func, const char* arg, const TVMValue* args,
                               const int* type_codes, int index, const char* dtype_name, uint8_t code,
                               uint8_t bits, int32_t ndim, const int64_t* shape, void** data) {
  const DLTensor* t;
  int32_t d;
  int64_t stride = 1;
  if (type_codes[index] != (int)kTVMDLTensorHandle && type_codes[index] != (int)kTVMNDArrayHandle) {
    TVMAPISetLastErrorf("%s: argument %d (%s) has type code %d, expected a DLTensor (type code %d)", func,
                        index, arg, type_codes[index], (int)kTVMDLTensorHandle);
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  t = (const DLTensor*)args[index].v_handle;
  if (t == NULL || t->data == NULL) {
    TVMAPISetLastErrorf("%s: argument %d (%s) is a NULL tensor", func, index, arg);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1U) {
    TVMAPISetLastErrorf("%s: argument %d (%s) has dtype (code %u, bits %u, lanes %u), expected %s", func,
                        index, arg, (unsigned)t->dtype.code, (unsigned)t->dtype.bits,
                        (unsigned)t->dtype.lanes, dtype_name);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  if (t->ndim != ndim) {
    TVMAPISetLastErrorf("%s: argument %d (%s) has %d dimensions, expected %d", func, index, arg,
                        (int)t->ndim, (int)ndim);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  for (d = ndim - 1; d >= 0; --d) {
    if (t->shape[d] != shape[d]) {
      TVMAPISetLastErrorf("%s: argument %d (%s) has shape[%d] = %lld, expected %lld", func, index, arg,
                          (int)d, (long long)t->shape[d], (long long)shape[d]);
      return (int)kTvmErrorFunctionCallInvalidArg;
    }
    if (t->strides != NULL && shape[d] != 1 && t->strides[d] != stride) {
      TVMAPISetLastErrorf("%s: argument %d (%s) is not compact (strides[%d] = %lld)", func, index, arg,
                          (int)d, (long long)t->strides[d]);
      return (int)kTvmErrorFunctionCallInvalidArg;
    }
    stride *= shape[d];
  }
  *data = (void*)((uint8_t*)t->data + t->byte_offset);
  return 0;
}
"""

_TENSOR_SETTER = """\
/* Describe `data` as a dense CPU tensor for a packed call. */
static void @PREFIX@_tensor(DLTensor* t, void* data, int32_t ndim, const int64_t* shape, uint8_t code,
                            uint8_t bits) {
  t->data = data;
  t->device.device_type = kDLCPU;
  t->device.device_id = 0;
  t->ndim = ndim;
  t->dtype.code = code;
  t->dtype.bits = bits;
  t->dtype.lanes = 1U;
  t->shape = (int64_t*)shape;
  t->strides = NULL;
  t->byte_offset = 0U;
}
"""

#: what a generated function does with a nonzero status of a call: return it
_RETURN_ERR = block("if (err != 0)", "return err;")


def _arg_checker(prefix: str) -> str:
    """A static helper that checks one DLTensor argument and returns its data pointer."""
    return fill(_ARG_CHECKER, PREFIX=prefix)


def _tensor_setter(prefix: str) -> str:
    return fill(_TENSOR_SETTER, PREFIX=prefix)


class _Shapes:
    """File-scope `static const int64_t` shape arrays, deduplicated."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.by_shape: dict[tuple[int, ...], str] = {}

    def get(self, shape: Sequence[int]) -> str:
        key = tuple(int(d) for d in shape)
        if key not in self.by_shape:
            self.by_shape[key] = f"{self.prefix}_shape{len(self.by_shape)}"
        return self.by_shape[key]

    def render(self) -> str:
        return "\n".join(
            f"static const int64_t {name}[{max(len(s), 1)}] = {{{', '.join(f'{d}LL' for d in s) or '1LL'}}};"
            for s, name in self.by_shape.items())


@dataclass(frozen=True, slots=True)
class _Arg:
    """One packed argument: name (for messages), IR dtype and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]


def _unpack_statements(prefix: str, func: str, args: Sequence[_Arg], shapes: _Shapes,
                       func_expr: str | None = None) -> str:
    """C statements checking num_args and every DLTensor argument into void* data[i].

    Error texts name `func` (or the run-time string `func_expr`, a C expression, when given)."""
    n = len(args)
    fname = func_expr or f"\"{func}\""
    stmts = [block(f"if (num_args != {n})",
                   [f"TVMAPISetLastErrorf(\"%s: expected {n} arguments, got %d\", {fname}, num_args);",
                    "return (int)kTvmErrorFunctionCallNumArguments;"])]
    for i, a in enumerate(args):
        code, bits = DL_TYPES[a.dtype]
        stmts += [f"err = {prefix}_tensor_arg({fname}, \"{c_string(a.name)}\", args, type_codes, {i}, \"{a.dtype}\", "
                  f"{code}U, {bits}U, {len(a.shape)}, {shapes.get(a.shape)}, &data[{i}]);", _RETURN_ERR]
    return lines(stmts)


def _packed_function(head: str, prefix: str, name: str, args: Sequence[_Arg], shapes: _Shapes, call: str,
                     checks: Sequence[str] = ()) -> str:
    """A packed function (`head` is its signature) that checks its DLTensor arguments `args` into `data` and
    returns the status of `call` (a C call reading them; error texts name `name`); `checks`: statements
    before the call (`_params_installed`)."""
    return block(head, [f"void* data[{max(len(args), 1)}];", "int err;", "(void)out_ret_value;",
                        "(void)resource_handle;", _unpack_statements(prefix, name, args, shapes), *checks,
                        "*out_ret_tcode = (int)kTVMNullptr;", f"return (int){call};"])


# --- the context and the parameters (--params external, user operators that take the context) ------------------

#: the local name of the parameter blob's first byte in every operator function (--params external)
PARAMS_BASE = "tvmgen_params"


def context_accessor(prefix: str) -> str:
    """The function returning the model's own TVMContext (`<prefix>_context`): what its packed entry points,
    the RPC adapter and single operator calls over RPC run with (Options.operator_context)."""
    return f"{prefix}_context"


def set_params_function(prefix: str) -> str:
    """The packed function of the system library that installs a parameter blob (--params external)."""
    return f"{prefix}_set_params"


def _params_installed(prefix: str, func_expr: str) -> list[str]:
    """Packed code, --params external: refuse to run before the model's own context holds a blob."""
    return [block(f"if ({context_accessor(prefix)}()->params == NULL)",
                  [f"TVMAPISetLastErrorf(\"%s: no parameter blob: install one with {set_params_function(prefix)} "
                   f"or {prefix}_set_parameters\", {func_expr});", "return (int)kTvmErrorParamsMissing;"])]


def _param_macros(arrays: Sequence[ParamArray]) -> str:
    """--params external: each constant array of the operators file as a pointer into the blob (`PARAMS_BASE`,
    which every operator function defines from its context)."""
    out = ["/* --params external: the constant arrays are read from the parameter blob in the context",
           f" * (TVMContext.params, validated by TVMSetParameters): {PARAMS_BASE} is its first byte. */"]
    out += [f"#define {a.name} ((const {a.ctype}*)({PARAMS_BASE} + {a.offset}U))" for a in arrays]
    return "\n".join(out)


def param_arrays(file: FileScope) -> tuple[tuple[ParamArray, ...], int]:
    """Where the operators file's constant arrays go in the parameter blob (params.place_arrays), and its size."""
    return place_arrays([(name, ctype, len(raw)) for name, (ctype, raw, _decl) in file.data_arrays.items()])


def _operator_prologue(opts: Options) -> list[str]:
    """The first statements of every operator function that takes the context."""
    if opts.external_params:
        return [f"const uint8_t* const {PARAMS_BASE} = (const uint8_t*)((const TVMContext*)resource_handle)->params;",
                f"(void){PARAMS_BASE};"]
    return ["(void)resource_handle;"] if opts.operator_context else []


def _func_args(lowered: Lowered, f: OperatorFunc) -> list[_Arg]:
    g = lowered.graph
    args = [_Arg(t, g.tensor(t).dtype, g.tensor(t).shape) for t in (*f.inputs, *f.outputs)]
    if f.code.scratch_bytes:
        args.append(_Arg("scratch", "uint8", (f.code.scratch_bytes,)))
    if f.code.persistent_bytes:
        args.append(_Arg("state", "uint8", (f.code.persistent_bytes,)))
    return args


#: the last parameter of every operator function of a model whose operators receive the context
CONTEXT_PARAM = "void* resource_handle"


def raw_params(ins: Sequence[str], outs: Sequence[str], scratch: bool, state: bool, context: bool = False) -> str:
    """The C parameters of an operator function in the unpacked conventions, from its inputs' and outputs'
    dtypes: `const T* in<k>`, `T* out<k>`, then `uint8_t* scratch` and `uint8_t* state` when it has them,
    then, with `context` (Options.operator_context), `void* resource_handle`: the model's TVMContext."""
    ps = [f"const {C_TYPES[d]}* in{k}" for k, d in enumerate(ins)]
    ps += [f"{C_TYPES[d]}* out{k}" for k, d in enumerate(outs)]
    ps += ["uint8_t* scratch"] * scratch + ["uint8_t* state"] * state + [CONTEXT_PARAM] * context
    return ", ".join(ps) or "void"


def raw_call_args(ins: Sequence[str], outs: Sequence[str], scratch: bool, state: bool, data: str = "data",
                  context: str | None = None) -> str:
    """The arguments of a call of such a function from an array `data` of pointers, in parameter order;
    `context`: the C expression of the resource handle, for functions that take it."""
    types = [f"const {C_TYPES[d]}*" for d in ins] + [f"{C_TYPES[d]}*" for d in outs]
    types += ["uint8_t*"] * (scratch + state)
    return ", ".join([*(f"({ty}){data}[{i}]" for i, ty in enumerate(types)), *([context] if context else [])])


def _io_dtypes(lowered: Lowered, f: OperatorFunc) -> tuple[list[str], list[str], bool, bool]:
    g = lowered.graph
    return ([g.tensor(t).dtype for t in f.inputs], [g.tensor(t).dtype for t in f.outputs],
            bool(f.code.scratch_bytes), bool(f.code.persistent_bytes))


def _unpacked_params(lowered: Lowered, f: OperatorFunc, opts: Options) -> str:
    return raw_params(*_io_dtypes(lowered, f), context=opts.operator_context)


def _unpacked_call_args(lowered: Lowered, f: OperatorFunc, data: str = "data", context: str | None = None) -> str:
    return raw_call_args(*_io_dtypes(lowered, f), data=data, context=context)


PACKED_PARAMS = ("TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value, int* out_ret_tcode, "
                 "void* resource_handle")


def _describe(lowered: Lowered, f: OperatorFunc) -> str:
    g = lowered.graph
    ins = ", ".join(f"{t} {g.tensor(t).dtype}{list(g.tensor(t).shape)}" for t in f.inputs) or "-"
    outs = ", ".join(f"{t} {g.tensor(t).dtype}{list(g.tensor(t).shape)}" for t in f.outputs)
    return c_comment(f"{f.node.label(f.node_index)}: ({ins}) -> ({outs})")


def _prototypes(lowered: Lowered, opts: Options) -> list[str]:
    """The declarations of every operator function in opts' convention (main.c calls them; ops.c defines them)."""
    return [f"int32_t {f.name}({_unpacked_params(lowered, f, opts)});" if opts.unpacked_api
            else f"int {f.name}({PACKED_PARAMS});" for f in lowered.funcs]


# --- the operators file -----------------------------------------------------------------------------------

def ops_source(lowered: Lowered, opts: Options) -> str:
    prefix = f"tvmgen_{opts.model_name}"
    file: FileScope = lowered.ops_file
    fname = f"{prefix}_ops.c"
    out = [_banner(fname, "operators", opts), "#include <stddef.h>", "#include <stdint.h>"]
    if file.includes_math_h:  # what the kernels reported: libm calls, NAN / INFINITY
        out.append("#include <math.h>")
    if not opts.unpacked_api:
        out += ["#include <tvm/runtime/c_runtime_api.h>", "#include <tvm/runtime/crt/error_codes.h>"]
    if opts.operator_context:
        out.append("#include <tvm/runtime/crt/tvm_micro_backend.h>")
    out.append("")
    funcs_c: list[str] = []
    shapes = _Shapes(f"{prefix}_ops")
    prologue = _operator_prologue(opts)
    context = f"(void*){context_accessor(prefix)}()" if opts.operator_context else None
    for f in lowered.funcs:
        params = _unpacked_params(lowered, f, opts)
        body = lines(prologue, f.code.body.strip())
        doc = f"/* {_describe(lowered, f)} */"
        attrs = f"{f.code.attributes} " if f.code.attributes else ""
        if opts.unpacked_api:
            funcs_c.append(f"{doc}\n{block(f'{attrs}int32_t {f.name}({params})', body)}\n")
        else:
            compute = block(f"{attrs}static int32_t {f.name}_compute({params})", body)
            call = f"{f.name}_compute({_unpacked_call_args(lowered, f, context=context)})"
            checks = _params_installed(prefix, f'"{f.name}"') if opts.external_params else ()
            wrapper = _packed_function(f"int {f.name}({PACKED_PARAMS})", prefix, f.name, _func_args(lowered, f),
                                       shapes, call, checks)
            funcs_c.append(f"{doc}\n{compute}\n\n{wrapper}\n")
    # Prototypes first: every operator is an external symbol main.c calls.
    out += [*_prototypes(lowered, opts), ""]
    if opts.operator_context and not opts.unpacked_api:
        out += [f"TVMContext* {context_accessor(prefix)}(void);", ""]
    prelude = file.render_prelude()
    if prelude:
        out += [prelude, ""]
    decls = file.decls
    if opts.external_params:  # the arrays are in the blob: the declarations left are functions
        arrays, _size = param_arrays(file)
        tables = {decl for _ctype, _raw, decl in file.data_arrays.values()}
        decls = [d for d in file.decls if d not in tables]
        if arrays:
            out += [_param_macros(arrays), ""]
    if decls and opts.constants_section and not opts.external_params:
        out += [constants_attr(opts), _in_constants_section("\n".join(decls)), ""]
    elif decls:
        out += ["\n".join(decls), ""]
    user_ops = custom_kernel.call_source([(f.name, f.node) for f in lowered.funcs if f.node.op == custom_ops.OP],
                                         prefix, packed=not opts.unpacked_api)
    if user_ops:  # how the user operators' functions are reached in this convention (kernels/custom.py)
        out += [user_ops, ""]
    if not opts.unpacked_api and lowered.funcs:
        out += [shapes.render(), "", _arg_checker(prefix)]
    out += funcs_c
    return "\n".join(out).rstrip() + "\n"


# --- main, the entry point and the model descriptor ---------------------------------------------------------

class _Workspace:
    """The C addresses of planned workspace offsets in main's body: `(ws + offset)`, with memory pools
    `(ws<k> + offset in pool k)`. It records which of those bases it wrote, so main declares exactly them."""

    def __init__(self, pools: Sequence[PoolUse], var: str = "ws") -> None:
        self.pools = tuple(pools)
        self.var = var
        self.used: set[int] = set()  # the pools addressed (0: the one workspace when there are no pools)

    def at(self, offset: int) -> str:
        if not self.pools:
            self.used.add(0)
            return f"({self.var} + {offset})"
        k, local = locate(self.pools, offset)
        self.used.add(k)
        return f"({self.var}{k} + {local})"

    @property
    def single_used(self) -> bool:
        """Whether the body addresses the one workspace (a plan without memory pools)."""
        return not self.pools and bool(self.used)

    @property
    def pools_used(self) -> list[int]:
        """The memory pools the body addresses, in pool order."""
        return sorted(self.used) if self.pools else []


def _pool_array(prefix: str, use: PoolUse) -> str:
    """The static array of a memory pool (the firmware-owned workspace): aligned, in its section if it has one."""
    attrs = [f"aligned({use.spec.align})"] + ([f"section(\"{use.spec.section}\")"] if use.spec.section else [])
    name = pool_array_name(prefix, use.spec.name)
    return "\n".join(["#if defined(__GNUC__) || defined(__clang__)",
                      f"static uint8_t {name}[{use.used}] __attribute__(({', '.join(attrs)}));", "#else",
                      f"static uint8_t {name}[{use.used}];", "#endif"])


def constants_attr(opts: Options) -> str:
    """With --constants-section: the definition of TVMGEN_CONSTANTS, the attribute every constant array gets."""
    return ("#if defined(__GNUC__) || defined(__clang__)\n"
            f"#define TVMGEN_CONSTANTS __attribute__((section(\"{opts.constants_section}\")))\n"
            "#else\n#define TVMGEN_CONSTANTS\n#endif\n")


def _in_constants_section(decls: str) -> str:
    """`static const T name[n] = {` -> `static const T name[n] TVMGEN_CONSTANTS = {` for every constant array."""
    return re.sub(r"^(static const [A-Za-z0-9_ ]+ [A-Za-z0-9_]+\[\d+\]) =", r"\1 TVMGEN_CONSTANTS =", decls,
                  flags=re.M)


def _pointer_expr(lowered: Lowered, tensor: str, iface: ModelInterface, ws: _Workspace) -> str:
    kind, where = lowered.plan.locations[tensor]
    view = lowered.plan.views.get(tensor, 0)  # rows of a model input/output (a patch stage's view)
    if kind in ("input", "output"):
        base = (iface.inputs if kind == "input" else iface.outputs)[where].param
        return f"((uint8_t*){base} + {view})" if view else base
    return ws.at(where)


def _main_includes(lowered: Lowered, opts: Options, prefix: str) -> list[str]:
    out = ["#include <stddef.h>", "#include <stdint.h>"]
    if lowered.copies or lowered.plan.persistent:
        out.append("#include <string.h>")
    if opts.interface_api == "c":
        out.append(f"#include \"{prefix}.h\"")
    if not opts.unpacked_api or opts.interface_api == "packed":
        out += ["#include <tvm/runtime/c_runtime_api.h>", "#include <tvm/runtime/crt/error_codes.h>"]
    if opts.operator_context:  # the model's own context; TVMSetParameters (header-only)
        out.append("#include <tvm/runtime/crt/tvm_micro_runtime.h>")
    return [*out, ""]


# The packed function that installs a parameter blob in the model's own context (--params external), and
# the words of each refusal (utvm.compiler.params.MEANINGS).
_SET_PARAMS = """\
/* Validate a parameter blob (a 1-D uint8 tensor of its bytes, in memory that stays allocated and unchanged while
 * the model uses it) and make it the parameters of the model's own context; a refused blob changes nothing. */
@STATIC@int @NAME@(@PARAMS@) {
  const DLTensor* t;
  int32_t err;
  (void)out_ret_value;
  (void)resource_handle;
  if (num_args != 1 || (type_codes[0] != (int)kTVMDLTensorHandle && type_codes[0] != (int)kTVMNDArrayHandle)) {
    TVMAPISetLastErrorf("@NAME@: expected one argument, the parameter blob as a uint8 tensor");
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  t = (const DLTensor*)args[0].v_handle;
  if (t == NULL || t->data == NULL || t->ndim != 1 || t->dtype.code != 1U || t->dtype.bits != 8U ||
      t->dtype.lanes != 1U || t->shape[0] < 0) {
    TVMAPISetLastErrorf("@NAME@: the parameter blob must be a 1-D uint8 tensor");
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  err = @SET@((const void*)((const uint8_t*)t->data + t->byte_offset), (size_t)t->shape[0]);
  if (err != 0) {
    TVMAPISetLastErrorf("@NAME@: %s (error 0x%x)", @PREFIX@_params_refusal(err), (unsigned)err);
    return (int)err;
  }
  *out_ret_tcode = (int)kTVMNullptr;
  return 0;
}
"""


def set_params_source(prefix: str, static: bool) -> str:
    """The packed `<prefix>_set_params` (system library, RPC) over `<prefix>_set_parameters`, and its messages."""
    cases = [f"case (int32_t){name}:\n  return \"{c_string(text)}\";" for name, text in MEANINGS.items()]
    refusal = block(f"static const char* {prefix}_params_refusal(int32_t err)",
                    [block("switch (err)", [*cases, "default:\n  return \"refused\";"])])
    return refusal + "\n\n" + fill(_SET_PARAMS, STATIC="static " if static else "", NAME=set_params_function(prefix),
                                     PARAMS=PACKED_PARAMS, SET=f"{prefix}_set_parameters", PREFIX=prefix)


def _own_context_source(opts: Options, prefix: str, layout: ParamsLayout | None) -> list[str]:
    """main.c, operators that take the context: the model's own TVMContext and its accessor; with --params
    external also the TVMParamsInfo of the blob and `<prefix>_set_parameters` (and, interface packed, the packed
    `<prefix>_set_params` its system library registers)."""
    own = f"{prefix}_own_context"
    out = ["/* The model's own context: what its packed entry points, its RPC adapter and single operator calls over",
           " * RPC run with (the C interface's tvmgen_<m>_run takes the application's). */",
           f"static TVMContext {own};", "",
           block(f"TVMContext* {context_accessor(prefix)}(void)", f"return &{own};"), ""]
    if layout is None:
        return out
    words = [w for a in layout.arrays for w in (a.offset, a.size)]
    hash_body = ",\n  ".join(", ".join(f"0x{b:02x}U" for b in layout.model_hash[i:i + 16])
                              for i in range(0, len(layout.model_hash), 16))
    info = params_info(prefix)
    out += ["/* --params external: the parameter blob this code reads (utvm.compiler.params): the SHA-256 of the",
            " * operators file, the blob's size and each array's offset and size. */",
            f"static const uint8_t {prefix}_params_hash[{len(layout.model_hash)}] = {{\n  {hash_body}\n}};",
            table_decl("uint32_t", f"{prefix}_params_layout", c_array_body(words, "uint32", 8) if words else "0U",
                       len(words)),
            f"const TVMParamsInfo {info} = {{{prefix}_params_hash, {layout.total_size}U, {len(layout.arrays)}U, "
            f"{prefix}_params_layout}};", "",
            "/* Validate `blob` and make it the parameters of the model's own context (TVMSetParameters). */",
            block(f"int32_t {prefix}_set_parameters(const void* blob, size_t size)",
                  f"return TVMSetParameters(&{own}, &{info}, blob, size);"), ""]
    if opts.interface_api == "packed":
        out += [set_params_source(prefix, static=False), ""]
    return out


def _main_workspace_arrays(plan: MemoryPlan, prefix: str, user_ws: bool) -> list[str]:
    """The firmware-owned workspace: one array per memory pool that received buffers, or the one pool."""
    if user_ws:
        return []
    if plan.pools:
        return [*(_pool_array(prefix, u) for u in plan.pools if u.used), ""]
    if plan.workspace_bytes:
        return [_aligned_attr(), f"static uint8_t {prefix}_workspace[{plan.workspace_bytes}] TVMGEN_ALIGNED;", ""]
    return []


def _main_constants(lowered: Lowered, opts: Options, prefix: str) -> tuple[FileScope, list[str]]:
    """The constants main copies into model outputs (an output that is a constant), and their C."""
    consts = FileScope(f"{prefix}_main")
    for name in lowered.output_consts.values():
        consts.constant(lowered.graph.tensor(name))
    if not consts.decls:
        return consts, []
    out = ["#include <math.h>"] if consts.includes_math_h else []  # a constant holding NaN or an infinity
    decls = "\n".join(consts.decls)
    if opts.constants_section:
        out.append(constants_attr(opts))
        decls = _in_constants_section(decls)
    return consts, [*out, decls, ""]


def _operator_step(lowered: Lowered, opts: Options, iface: ModelInterface, f: OperatorFunc, prefix: str,
                   shapes: _Shapes, ws: _Workspace) -> list[str]:
    """main's call of operator `f` on its planned buffers (scratch and state blocks last), then its status check."""
    plan = lowered.plan
    ptrs = [_pointer_expr(lowered, t, iface, ws) for t in (*f.inputs, *f.outputs)]
    if f.code.scratch_bytes:
        ptrs.append(ws.at(plan.scratch[f.name]))
    if f.code.persistent_bytes:
        ptrs.append(ws.at(plan.persistent[f.name]))
    args = _func_args(lowered, f)
    if opts.unpacked_api:
        types = [C_TYPES[a.dtype] for a in args]
        call_args = [f"({ty}*){p}" for ty, p in zip(types, ptrs, strict=True)]
        call = f"err = {f.name}({', '.join([*call_args, *(['resource_handle'] * opts.operator_context)])});"
    else:
        n = len(args)
        describe = []
        for i, (a, p) in enumerate(zip(args, ptrs, strict=True)):
            code, bits = DL_TYPES[a.dtype]
            describe += [f"{prefix}_tensor(&t[{i}], (void*){p}, {len(a.shape)}, {shapes.get(a.shape)}, "
                         f"{code}U, {bits}U);", f"v[{i}].v_handle = &t[{i}];", f"c[{i}] = (int){_KTVM_TENSOR};"]
        call = block("", [f"DLTensor t[{n}];", f"TVMValue v[{n}];", f"int c[{n}];", "TVMValue rv;", "int rc;",
                          *describe, f"err = {f.name}(v, c, {n}, &rv, &rc, resource_handle);"])
    return [call, _RETURN_ERR]


def _main_steps(lowered: Lowered, opts: Options, iface: ModelInterface, prefix: str, consts: FileScope,
                shapes: _Shapes, ws: _Workspace) -> list[str]:
    """The body of main after its prologue: every operator in order, then the copies into model outputs."""
    steps: list[str] = []
    for s, f in enumerate(lowered.funcs):
        steps += [f"/* step {s}: {_describe(lowered, f)} */",
                  *_operator_step(lowered, opts, iface, f, prefix, shapes, ws)]
    for cp in lowered.copies:
        dst = iface.outputs[cp.dst_output].param
        src = (consts.constants[cp.src] if cp.src in lowered.output_consts.values()
               else _pointer_expr(lowered, cp.src, iface, ws))
        steps.append(f"memcpy((void*){dst}, (const void*){src}, {cp.nbytes}U);")
    return steps


def _workspace_locals(plan: MemoryPlan, prefix: str, user_ws: bool, ws: _Workspace) -> list[str]:
    """main's names for the workspace bases its body addresses (`ws`, or `ws<k>` per memory pool)."""
    out = []
    if ws.single_used:
        out.append(f"uint8_t* const {ws.var} = {'workspace' if user_ws else prefix + '_workspace'};")
    for k in ws.pools_used:
        name = plan.pools[k].spec.name
        base = pool_param_name(name) if user_ws else pool_array_name(prefix, name)
        out.append(f"uint8_t* const {ws.var}{k} = {base};")
    return out


def _packed_main(prefix: str, main_name: str, iface: ModelInterface, steps: list[str], ws_locals: list[str],
                 shapes: _Shapes, opts: Options) -> list[str]:
    """Packed main: one body for __tvm_main__ and _run (`<prefix>_main_impl`), each naming itself in error texts."""
    io = (*iface.inputs, *iface.outputs)
    io_args = [_Arg(x.name, x.dtype, x.shape) for x in io]
    body = [f"void* data[{max(len(io_args), 1)}];", *(f"{C_TYPES[x.dtype]}* {x.param};" for x in io), *ws_locals,
            "int err;", "(void)out_ret_value;", "(void)resource_handle;",
            _unpack_statements(prefix, main_name, io_args, shapes, func_expr="func"),
            *(_params_installed(prefix, "func") if opts.external_params else ())]
    for i, x in enumerate(io):
        body += [f"{x.param} = ({C_TYPES[x.dtype]}*)data[{i}];", f"(void){x.param};"]
    impl = f"{prefix}_main_impl"
    return [block(f"static int {impl}(const char* func, {PACKED_PARAMS})",
                  [*body, *steps, "*out_ret_tcode = (int)kTVMNullptr;", "return 0;"]), "",
            block(f"int {main_name}({PACKED_PARAMS})",
                  f"return {impl}(\"{main_name}\", args, type_codes, num_args, out_ret_value, out_ret_tcode, "
                  "resource_handle);"), ""]


def _unpacked_main(lowered: Lowered, main_name: str, iface: ModelInterface, user_ws: bool, steps: list[str],
                   ws_locals: list[str], ws: _Workspace, context: bool = False) -> list[str]:
    """Unpacked main: the model's inputs and outputs, then the application's workspace (or one per pool), then
    with `context` (Options.operator_context) the resource handle every operator gets."""
    pools = lowered.plan.pools
    io = (*iface.inputs, *iface.outputs)
    params = [f"{C_TYPES[x.dtype]}* {x.param}" for x in io]
    if user_ws and pools:
        params += [f"uint8_t* {pool_param_name(u.spec.name)}" for u in pools]
    elif user_ws:
        params.append("uint8_t* workspace")
    params += [CONTEXT_PARAM] * context
    body = [*ws_locals, "int32_t err;" if lowered.funcs else "", *(f"(void){x.param};" for x in io),
            *(["(void)resource_handle;"] if context and not lowered.funcs else [])]
    if user_ws and not pools and not ws.single_used:
        body.append("(void)workspace;")
    if user_ws:
        body += [f"(void){pool_param_name(u.spec.name)};" for k, u in enumerate(pools) if k not in ws.pools_used]
    return [block(f"int32_t {main_name}({', '.join(params) or 'void'})", [*body, *steps, "return 0;"]), ""]


def main_source(lowered: Lowered, opts: Options, iface: ModelInterface, layout: ParamsLayout | None = None) -> str:
    """`tvmgen_<m>_main.c`: the workspace, `__tvm_main__` calling every operator in order on its planned buffers,
    the state reset of stateful models and the entry point (`_entry_source`); with operators that take the
    context, the model's own context (and with --params external, `layout`'s TVMParamsInfo)."""
    prefix = f"tvmgen_{opts.model_name}"
    user_ws = opts.workspace == "user"
    packed_main = not opts.unpacked_api
    main_name = f"{prefix}___tvm_main__"
    consts, const_decls = _main_constants(lowered, opts, prefix)
    shapes = _Shapes(f"{prefix}_main")
    ws = _Workspace(lowered.plan.pools)
    steps = _main_steps(lowered, opts, iface, prefix, consts, shapes, ws)
    ws_locals = _workspace_locals(lowered.plan, prefix, user_ws, ws)
    func = (_packed_main(prefix, main_name, iface, steps, ws_locals, shapes, opts) if packed_main
            else _unpacked_main(lowered, main_name, iface, user_ws, steps, ws_locals, ws, opts.operator_context))
    if opts.external_params and layout is None:
        raise ValueError("main_source: --params external needs the blob's layout")
    out = [_banner(f"{prefix}_main.c", "AOT executor (main, entry point)", opts),
           *_main_includes(lowered, opts, prefix), *_main_workspace_arrays(lowered.plan, prefix, user_ws),
           *_prototypes(lowered, opts), "", *const_decls]
    if opts.operator_context:
        out += _own_context_source(opts, prefix, layout if opts.external_params else None)
    if packed_main or opts.interface_api == "packed":
        out.append(_arg_checker(prefix))
    if packed_main and lowered.funcs:  # only operator calls use it (unused-function under -Werror otherwise)
        out.append(_tensor_setter(prefix))
    if shapes.by_shape:
        out += [shapes.render(), ""]
    out += func
    if lowered.plan.persistent:
        out.append(_reset_state_source(lowered, prefix, user_ws, bool(lowered.plan.pools)))
    out.append(_entry_source(lowered, opts, iface, main_name))
    return "\n".join(out).rstrip() + "\n"


def _reset_state_source(lowered: Lowered, prefix: str, user_ws: bool, pooled: bool = False) -> str:
    """`tvmgen_<m>_reset_state`: zero every persistent block (the state of stateful operators), i.e. start a
    new stream as after boot. A user workspace is passed in (it must also be zeroed before the first run)."""
    base = "(uint8_t*)workspace" if user_ws else f"{prefix}_workspace"
    sizes = {f.name: f.code.persistent_bytes for f in lowered.funcs if f.code.persistent_bytes}
    sig = reset_state_signature(prefix, user_ws, pooled)
    pools = lowered.plan.pools
    body = []
    for name, off in sorted(lowered.plan.persistent.items(), key=lambda kv: kv[1]):
        where = base
        if pools:
            k, off = locate(pools, off)
            where = f"(uint8_t*)workspaces[{k}]" if user_ws else pool_array_name(prefix, pools[k].spec.name)
        body.append(f"memset((void*)({where} + {off}), 0, {sizes[name]}U);  /* {name} */")
    return "\n".join(["/* Zero the state of the stateful operators (their persistent workspace blocks): a new stream, "
                      "as\n * after boot. */", f"{sig};", block(sig, body), ""])


def _context_workspaces(lowered: Lowered, iface: ModelInterface, user_ws: bool) -> list[str]:
    """Interface c: the prologue of `_run` that takes the workspace(s) from the application's TVMContext,
    refusing a missing or misaligned one (and the `(void)` of unused parameters)."""
    pools = lowered.plan.pools
    unused = [*(["(void)inputs;"] if not iface.inputs else []), *(["(void)outputs;"] if not iface.outputs else [])]
    bad_context = "return (int32_t)TVM_MICRO_ERROR_BAD_CONTEXT;"
    if user_ws and lowered.plan.workspace_bytes > 0 and not pools:
        return ["uint8_t* workspace;", *unused,
                block("if (context == NULL || context->workspace == NULL || context->workspace[0] == NULL)",
                      bad_context),
                "workspace = (uint8_t*)context->workspace[0];",
                block(f"if (((size_t)workspace % {ALIGNMENT}U) != 0U)", bad_context)]
    if user_ws and pools:
        # One workspace per pool from the application, in pool order. A pool that received no buffer needs no
        # memory: its slot is not read and it stays NULL (nothing is ever addressed from it), as
        # TVMAotExecutor_CheckContext skips a workspace of size 0.
        checks = [block("if (context == NULL || context->workspace == NULL)", bad_context)]
        if not any(u.used for u in pools):
            checks = ["(void)context;  /* nothing to place: no pool received a buffer */"]
        for k, u in enumerate(pools):
            if u.used:
                v = pool_param_name(u.spec.name)
                checks += [f"{v} = (uint8_t*)context->workspace[{k}];",
                           block(f"if ({v} == NULL || ((size_t){v} % {u.spec.align}U) != 0U)", bad_context)]
        return [*(f"uint8_t* {pool_param_name(u.spec.name)} = NULL;" for u in pools), *unused, *checks]
    if user_ws:
        return [*unused, "(void)context;  /* nothing to place: the model needs no workspace */"]
    return unused


def _model_descriptor(opts: Options, iface: ModelInterface, prefix: str, pools: Sequence[PoolUse]) -> str:
    """Interface c: the `TVMModel` of the model (its entry point, io counts and workspace sizes)."""
    user_ws = opts.workspace == "user"
    fields = lines("TVM_MICRO_MODEL_VERSION,", f"\"{opts.model_name}\",", f"{len(iface.inputs)}U,  /* inputs */",
                   f"{len(iface.outputs)}U,  /* outputs */", f"{max(len(pools), 1)}U,  /* workspace pools */",
                   f"{workspace_sizes_name(prefix)},", f"{1 if user_ws else 0}U,  /* workspace from the TVMContext */",
                   f"{prefix}_entrypoint")
    return f"const TVMModel {prefix}_model = {{\n{indent(fields)}\n}};"


def run_takes_context(opts: Options) -> bool:
    """Interface c: whether `tvmgen_<m>_run` takes the application's `const TVMContext*` (its workspaces, its
    parameter blob, or a handle for user operators)."""
    return opts.workspace == "user" or opts.operator_context


def _context_checks(opts: Options) -> list[str]:
    """Interface c, operators that take the context: refuse a missing context, and with --params external a
    context without a parameter blob (TVMSetParameters validates the blob it puts there)."""
    if not opts.operator_context:
        return []
    out = [block("if (context == NULL)", "return (int32_t)TVM_MICRO_ERROR_BAD_CONTEXT;")]
    if opts.external_params:
        out.append(block("if (context->params == NULL)", "return (int32_t)kTvmErrorParamsMissing;"))
    return out


def _entry_source(lowered: Lowered, opts: Options, iface: ModelInterface, main_name: str) -> str:
    prefix = f"tvmgen_{opts.model_name}"
    if opts.interface_api == "packed":
        if not opts.unpacked_api:
            run = block(f"int {prefix}_run({PACKED_PARAMS})",
                        f"return {prefix}_main_impl(\"{prefix}_run\", args, type_codes, num_args, out_ret_value, "
                        "out_ret_tcode, resource_handle);")
            return f"/* The model's entry point: main over (inputs..., outputs...) as DLTensors. */\n{run}\n"
        checks = _params_installed(prefix, f'"{prefix}_run"') if opts.external_params else ()
        context = f"(void*){context_accessor(prefix)}()" if opts.operator_context else None
        return _packed_adapter(prefix, f"{prefix}_run", main_name, iface, static=False, context=context,
                               checks=checks)

    # Interface c: tvmgen_<m>_run over the structs, the TVMModel entry point and the descriptor.
    user_ws = opts.workspace == "user"
    with_context = run_takes_context(opts)
    pools = lowered.plan.pools
    args = [*(f"inputs->{x.field}" for x in iface.inputs), *(f"outputs->{x.field}" for x in iface.outputs)]
    if user_ws and pools:
        args += [pool_param_name(u.spec.name) for u in pools]
    elif user_ws:
        args.append("workspace" if lowered.plan.workspace_bytes > 0 else "NULL")
    if opts.operator_context:
        args.append("(void*)context")  # the operators only read it (they take TVM's `void* resource_handle`)
    run_params = f"struct {prefix}_inputs* inputs, struct {prefix}_outputs* outputs"
    run_sig = f"int32_t {prefix}_run({run_params}{', const TVMContext* context' if with_context else ''})"
    casts = f"(struct {prefix}_inputs*)inputs, (struct {prefix}_outputs*)outputs"
    entry = [f"return {prefix}_run({casts}, context);"] if with_context else ["(void)context;",
                                                                              f"return {prefix}_run({casts});"]
    prologue = [*_context_workspaces(lowered, iface, user_ws), *_context_checks(opts)]
    return "\n".join([
        block(run_sig, [*prologue, f"return {main_name}({', '.join(args)});"]), "",
        block(f"static int32_t {prefix}_entrypoint(void* inputs, void* outputs, const TVMContext* context)", entry),
        "", _workspace_sizes(prefix, pools), "", _model_descriptor(opts, iface, prefix, pools), ""])


def _workspace_sizes(prefix: str, pools: Sequence[PoolUse]) -> str:
    """The TVMModel's workspace sizes: the one pool's, or each memory pool's in pool order (header macros)."""
    table = workspace_sizes_name(prefix)
    if not pools:
        return f"static const size_t {table}[1] = {{{prefix.upper()}_WORKSPACE_SIZE}};"
    model_upper = prefix.upper().removeprefix("TVMGEN_")
    sizes = ", ".join(f"{pool_macro_prefix(model_upper, u.spec.name)}_WORKSPACE_SIZE" for u in pools)
    return f"static const size_t {table}[{len(pools)}] = {{{sizes}}};"


def _packed_adapter(prefix: str, name: str, target: str, iface: ModelInterface, static: bool,
                    context: str | None = None, checks: Sequence[str] = ()) -> str:
    """A TVMBackendPackedCFunc `name` over (inputs..., outputs...) calling the unpacked `target` (with the C
    expression `context` as its last argument, when given; `checks` before the call)."""
    io = (*iface.inputs, *iface.outputs)
    shapes = _Shapes(f"{name}")
    call = ", ".join([*(f"({C_TYPES[x.dtype]}*)data[{i}]" for i, x in enumerate(io)), *([context] if context else [])])
    func = _packed_function(f"{'static ' if static else ''}int {name}({PACKED_PARAMS})", prefix, name,
                            [_Arg(x.name, x.dtype, x.shape) for x in io], shapes, f"{target}({call})", checks)
    return f"{shapes.render()}\n\n/* Packed entry: (inputs..., outputs...) as DLTensors -> {target}. */\n{func}\n"


# --- the system library -----------------------------------------------------------------------------------

# C99 (5.2.4.1) lets a compiler refuse a string literal longer than 4095 characters after concatenation,
# and -pedantic does: a registry past that is written as a brace-enclosed list of bytes instead.
_C99_STRING_LIMIT = 4095


def registry_names_literal(names: Sequence[str]) -> str:
    """The TVMFuncRegistry names blob as a C initializer: u16 LE count, names, extra NUL (implicit in the
    string form; explicit in the byte-list form used past C99's string-literal length limit)."""
    n = len(names)
    if 2 + sum(len(x.encode("utf-8")) + 1 for x in names) < _C99_STRING_LIMIT:
        parts = [f'"\\{n & 0xFF:03o}\\{(n >> 8) & 0xFF:03o}"'] + [f'"{c_string(x)}\\000"' for x in names]
        return "\n    ".join(parts)
    blob = bytes([n & 0xFF, (n >> 8) & 0xFF]) + b"".join(x.encode("utf-8") + b"\0" for x in names) + b"\0"
    def byte(b: int) -> str:  # plain char may be signed: an explicit conversion, not an overflow warning
        return f"0x{b:02x}" if b < 0x80 else f"(char)0x{b:02x}"

    rows = [", ".join(byte(b) for b in blob[i:i + 16]) for i in range(0, len(blob), 16)]
    return "{\n    " + ",\n    ".join(rows) + "\n}"


def system_lib_entries(lowered: Lowered, opts: Options) -> list[tuple[str, str]]:
    """(registered name, C function) of every function in the system library, in registry order."""
    prefix = f"tvmgen_{opts.model_name}"
    if opts.interface_api == "c":
        return system_lib_entries_c(opts)
    set_params = [(set_params_function(prefix), set_params_function(prefix))] if opts.external_params else []
    entries = [(f"{prefix}_run", f"{prefix}_run"), *set_params]
    if not opts.unpacked_api:
        entries.append((f"{prefix}___tvm_main__", f"{prefix}___tvm_main__"))
        entries += [(f.name, f.name) for f in lowered.funcs]
    return entries


def system_lib_source(lowered: Lowered, opts: Options, iface: ModelInterface) -> str:
    """The system library of the packed interface (interface c has `rpc_adapter_source`, firmware only)."""
    return _system_lib(opts, iface, system_lib_entries(lowered, opts), 0)


def rpc_adapter_source(opts: Options, iface: ModelInterface, workspace_bytes: int,
                       pool_bytes: Sequence[tuple[int, int]] = ()) -> str:
    """Interface c only: the RPC firmware's system library, a packed `tvmgen_<m>_run` over DLTensors that
    calls the C interface (with a workspace of its own for `--workspace user`). Firmware-only: it is
    `CompiledModel.rpc_sources`, never part of the MLF's codegen/ (which holds no DLTensor/TVMValue code
    with interface c); it depends on nothing but its arguments, so a loaded MLF regenerates it. With memory
    pools (`pool_bytes`: each pool's (size, alignment), in pool order) it has one workspace per pool."""
    return _system_lib(opts, iface, system_lib_entries_c(opts), workspace_bytes, pool_bytes)


def system_lib_entries_c(opts: Options) -> list[tuple[str, str]]:
    """Interface c: (registered name, C function) of the RPC adapter's registry."""
    prefix = f"tvmgen_{opts.model_name}"
    set_params = [(set_params_function(prefix), set_params_function(prefix))] if opts.external_params else []
    return [(f"{prefix}_run", f"{prefix}_run_packed"), *set_params]


def _system_lib(opts: Options, iface: ModelInterface, entries: list[tuple[str, str]], ws_size: int,
                pool_bytes: Sequence[tuple[int, int]] = ()) -> str:
    prefix = f"tvmgen_{opts.model_name}"
    fname = f"{prefix}_system_lib.c"
    out = [_banner(fname, "system library (function registry for runtime.SystemLib)", opts),
           "#include <stddef.h>", "#include <stdint.h>", "#include <tvm/runtime/c_runtime_api.h>",
           "#include <tvm/runtime/crt/error_codes.h>", "#include <tvm/runtime/crt/module.h>"]
    if opts.interface_api == "c":
        out.append(f"#include \"{prefix}.h\"")
    out.append("")
    if opts.interface_api == "c":
        # A packed adapter over the C interface so the model can be run over RPC. With operators that take the
        # context it runs with the model's own context (its parameter blob: set_params), its workspaces put in.
        user_ws = opts.workspace == "user"
        own = opts.operator_context
        run_call_target = f"{prefix}_run_unpacked"
        out.append(_arg_checker(prefix))
        workspaces = ""
        if user_ws and pool_bytes:
            # One array per pool that received buffers; a pool of 0 bytes gets NULL (it is never read).
            arrays = [f"{prefix}_rpc_workspace{k}" if n else "NULL" for k, (n, _al) in enumerate(pool_bytes)]
            sized = [(a, n, al) for a, (n, al) in zip(arrays, pool_bytes, strict=True) if n]
            if sized:
                out += ["#if defined(__GNUC__) || defined(__clang__)",
                        *(f"static uint8_t {a}[{n}] __attribute__((aligned({al})));" for a, n, al in sized), "#else",
                        *(f"static uint8_t {a}[{n}];" for a, n, _al in sized), "#endif"]
            workspaces = f"static void* const {prefix}_rpc_workspaces[{len(arrays)}] = {{{', '.join(arrays)}}};"
        elif user_ws:
            if ws_size:
                out += [_aligned_attr(), f"static uint8_t {prefix}_rpc_workspace[{ws_size}] TVMGEN_ALIGNED;"]
            else:
                out += [f"static uint8_t {prefix}_rpc_workspace[{ALIGNMENT}];"]
            workspaces = f"static void* const {prefix}_rpc_workspaces[1] = {{{prefix}_rpc_workspace}};"
        if workspaces:
            out.append(workspaces)
        if user_ws and not own:
            out.append(f"static const TVMContext {prefix}_rpc_context = {{.workspace = {prefix}_rpc_workspaces}};")
        io = (*iface.inputs, *iface.outputs)
        params = ", ".join(f"{C_TYPES[x.dtype]}* {x.param}" for x in io) or "void"
        context = f", &{prefix}_rpc_context" if user_ws else ""
        locals_ = [f"struct {prefix}_inputs inputs;", f"struct {prefix}_outputs outputs;"]
        if own:
            context = ", &context"
            locals_ += [f"TVMContext context = *{context_accessor(prefix)}();",
                        *([f"context.workspace = {prefix}_rpc_workspaces;"] if user_ws else [])]
        out.append(block(f"static int32_t {run_call_target}({params})", [
            *locals_,
            *(f"inputs.{x.field} = {x.param};" for x in iface.inputs),
            *(f"outputs.{x.field} = {x.param};" for x in iface.outputs),
            f"return {prefix}_run(&inputs, &outputs{context});"]) + "\n")
        checks = _params_installed(prefix, f'"{prefix}_run"') if opts.external_params else ()
        out.append(_packed_adapter(prefix, f"{prefix}_run_packed", run_call_target, iface, static=True,
                                   checks=checks))
        if opts.external_params:
            out += [set_params_source(prefix, static=True), ""]
    else:
        for _reg, cname in entries:
            out.append(f"int {cname}({PACKED_PARAMS});")
        out.append("")
    out.append(f"static const TVMBackendPackedCFunc {prefix}_funcs[{len(entries)}] = {{")
    out.append(",\n".join(f"  {cname}" for _r, cname in entries))
    out.append("};\n")
    out.append(f"static const char {prefix}_func_names[] =\n    {registry_names_literal([r for r, _c in entries])};\n")
    out.append(f"static const TVMFuncRegistry {prefix}_registry = {{{prefix}_func_names, {prefix}_funcs}};\n")
    out.append(f"static const TVMModule {prefix}_module = {{&{prefix}_registry}};\n")
    out.append("/* Overrides the CRT's weak default: runtime.SystemLib returns this module. */\n"
               f"{block('const TVMModule* TVMSystemLibEntryPoint(void)', f'return &{prefix}_module;')}\n")
    return "\n".join(out).rstrip() + "\n"


def model_system_lib_name(model_name: str) -> str:
    """The own entry point of model `model_name`'s system library in firmware that links several models
    (its TVMSystemLibEntryPoint, renamed there: utvm.evaluate.build_firmware)."""
    return f"tvmgen_{model_name}_system_lib"


def system_lib_table_source(model_names: Sequence[str], renamed: bool) -> str:
    """`utvm_system_libs.c` of evaluation firmware: TVMSystemLibTable, the models it links by name, which
    runtime.SystemLib(name) searches (TVMSystemLibLookup). With `renamed` (several models), every model's
    entry point is model_system_lib_name and this file defines TVMSystemLibEntryPoint, the default model: the
    first. Else the one model keeps its TVMSystemLibEntryPoint and the table points at it."""
    entries = [model_system_lib_name(n) if renamed else "TVMSystemLibEntryPoint" for n in model_names]
    out = ["/*\n * utvm_system_libs.c -- the models of this firmware, by name (runtime.SystemLib(name)).\n"
           " * Generated by utvm.evaluate.build_firmware.\n */",
           "#include <stddef.h>", "#include <tvm/runtime/crt/module.h>", ""]
    if renamed:
        out += [f"const TVMModule* {e}(void);" for e in entries] + [""]
    rows = ",\n".join(f'  {{"{n}", &{e}}}' for n, e in zip(model_names, entries, strict=True))
    out += [f"static const TVMSystemLibTableEntry utvm_system_libs[{len(entries)}] = {{\n{rows}\n}};\n",
            block("const TVMSystemLibTableEntry* TVMSystemLibTable(size_t* num_entries)",
                  [block("if (num_entries != NULL)", f"*num_entries = {len(entries)}U;"),
                   "return utvm_system_libs;"]) + "\n"]
    if renamed:
        out.append("/* runtime.SystemLib without a name: the first model. */\n"
                   f"{block('const TVMModule* TVMSystemLibEntryPoint(void)', f'return {entries[0]}();')}\n")
    return "\n".join(out).rstrip() + "\n"


# --- link-time needs ----------------------------------------------------------------------------------------

def model_libm_functions(lowered: Lowered, user_sources: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The <math.h> functions a model's C calls, sorted: what must come from a libm at link time (none: the
    code links without one). The generated C's are what its kernels and helpers reported as they were emitted
    (`FileScope.libm` of the operators file; main.c calls none); the C files of user operators
    (`user_sources`, file name -> text: not generated, so their text is all there is to know) are read."""
    return tuple(sorted(set(lowered.ops_file.libm) | set(libm_functions(user_sources or {}))))


_C_COMMENT_OR_LITERAL = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def libm_functions(sources: Mapping[str, str]) -> tuple[str, ...]:
    """The <math.h> functions (`MATH_FUNCTIONS`) the C `sources` (file name -> text) call, sorted, read from the
    text (comments and string literals are not code). Generated C never needs it: its kernels report their
    calls (`model_libm_functions`). It is for C utvm did not write (user operators' files) and for an MLF
    written before metadata.json recorded `libm_functions`."""
    found: set[str] = set()
    for text in sources.values():
        code = _C_COMMENT_OR_LITERAL.sub(" ", text)
        found.update(name for name in _CALL.findall(code) if name in MATH_FUNCTIONS)
    return tuple(sorted(found))
