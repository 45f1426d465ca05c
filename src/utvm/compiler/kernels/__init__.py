"""The C kernel interface: how one IR node becomes the body of one generated operator function.

A kernel is a function registered for an op name:

    @register("dense")
    def dense(ctx: KernelContext) -> KernelCode: ...

It reads the node through `ctx` (tensors, `ctx.params()` = the op module's `prepare(node, graph, rounding)`)
and returns C *statements* that compute the outputs from the inputs. The code generator wraps them into a
function in the chosen calling convention (docs/architecture.md §6), so a kernel never sees DLTensor, TVMValue or
the convention:

    int32_t tvmgen_<model>_<op>(const int8_t* in0, ..., int8_t* out0 [, uint8_t* scratch] [, uint8_t* state])

Rules for kernel bodies (they are checked by the tests of every op):
- Arguments: `ctx.inputs[i]` is the C expression of node input i: a parameter (`in0`, ...) for tensors
  computed at run time, or the name of a file-scope `static const` array for constants (weights land in
  flash; constants are never parameters). `ctx.outputs[i]` is `out0`, ... Element types are the C types
  of `C_TYPES`; all tensors are dense, row-major (NHWC). With `--params external` the same name is a
  macro for a `const T*` into the parameter blob (`FileScope.data_arrays`, utvm.compiler.params), so a
  body uses an array's name only as a pointer (`w[i]`, `w + k`), never in `sizeof`, and only inside the
  operator's own function (helpers take the arrays as arguments).
- Shapes, quantization parameters and constants are baked in: read them from `ctx.params()` and the
  tensors, and emit tables with `ctx.table(...)` (a `static const` array at file scope).
- Portable C99 only. int8 paths use no libm and no floating point. A kernel reports what its C uses as data,
  never left to be found in the text: it calls a <math.h> function through the name `ctx.libm("expf")`
  returns (recorded: the file includes <math.h>, the metadata lists it for the link; a helper that calls one
  names it in `define_helper(..., libm=...)`), and spells a float constant of its body with
  `ctx.literal(v, dtype)` / `ctx.float_literal(v)` (NAN / INFINITY are recorded; tables record them
  themselves).
- Integer helpers (requantization, saturation, gemmlowp primitives) come from `ctx.helper(name)`, which
  emits each helper once per file: the rounding choice lives there only
  (`ctx.helper("requant", params.rounding)`: the op module resolved which rounding that op uses).
- Return 0 on success (the body's last statement is `return 0;`); a nonzero value is an error code.
- `inplace`: indices of inputs whose buffer the output 0 may share (the kernel reads element i of that
  input before it writes element i of the output, and reads no element j < i afterwards). The memory
  planner uses it only when legal (same size, the input dies here, not a model input or output).
- `scratch_bytes`: temporary memory the kernel needs for the duration of the call; the planner places it
  in the workspace and the kernel receives it as `uint8_t* scratch` (16-byte aligned).
- `persistent_bytes`: state the kernel keeps from one run of the model to the next (SVDF's and LSTM's
  variable tensors, delay lines): the planner places it in the workspace for the whole run and across runs
  (never shared), all-zero before the first run; the kernel receives it as `uint8_t* state` (`ctx.state`,
  16-byte aligned, after `scratch`). A kernel with state must be the only writer of it and encode its
  initial value as all-zero bytes.
- `ctx.isa` is the instruction vocabulary of the CPU the code is for (utvm.compiler.kernels.isa): the only
  way a kernel learns what the CPU can do. It asks for operations (`ctx.isa.smlad(...)`) or checks a
  capability (`ctx.isa.simd16`); `ctx.isa.use_simd()` includes <arm_acle.h> and makes the file fail to
  compile, with an #error, on a compiler not told that CPU. (`ctx.target` names the target for workloads
  and messages; kernels never test its flags.)
- C text is written with utvm.compiler.kernels.cemit (indentation, blocks, loops, literals, templates);
  requantization with utvm.compiler.kernels.requant.
- A kernel with choices registers a space function (`register(op, space=fn)`, utvm.compiler.schedule):
  `fn(ctx) -> Space` lists its knobs for this node and target, with a default point; the kernel reads the
  chosen point from `ctx.schedule`. Every point must produce the same output bits.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utvm.compiler.kernels.cemit import FLOAT_SPECIALS, c_array_body, c_literal, has_float_specials, table_decl
from utvm.compiler.kernels.cemit import offset_term as offset_term  # re-exported: kernels import it from here
from utvm.compiler.kernels.isa import PRELUDE_HELPERS, PortableC, vocabulary
from utvm.compiler.schedule import EMPTY_SPACE, Schedule, Space, canonical, task_key
from utvm.errors import CompileError, UnsupportedOperatorError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.support.names import fresh_name
from utvm.target import Target, get_target

# IR dtype -> C element type.
C_TYPES: dict[str, str] = {
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "float32": "float",
    "bool": "uint8_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
}

# IR dtype -> (DLDataTypeCode, bits) for argument checks.
DL_TYPES: dict[str, tuple[int, int]] = {
    "int8": (0, 8),
    "uint8": (1, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "float32": (2, 32),
    "bool": (6, 8),
    "uint32": (1, 32),
    "uint64": (1, 64),
}

# Modules under utvm.compiler.kernels that register kernels; imported on first use.
KERNEL_MODULES: tuple[str, ...] = ("shape", "dense", "conv", "depthwise", "pool", "softmax",
                                   "activation", "pad", "quantize", "layout", "matmul", "batch_norm",
                                   # the families of utvm.ops.FAMILY_MODULES
                                   "unary", "binary", "movement", "gather", "reduction", "transpose_conv",
                                   "recurrent", "signal", "custom")


@dataclass(frozen=True, slots=True)
class KernelCode:
    """What a kernel returns: the statements of the operator's body and how it may use memory."""

    body: str
    scratch_bytes: int = 0
    inplace: tuple[int, ...] = ()
    #: what goes before the function's definition (a macro from a helper, e.g. TVM_NO_SCHED)
    attributes: str = ""
    #: bytes of state kept across runs (`ctx.state`); 0 for stateless kernels
    persistent_bytes: int = 0


# --- helpers: shared C functions a kernel may ask for ---------------------------------------------------
# Each is emitted at most once per file, only when requested. The `requant:<rounding>` variants (defined in
# kernels/requant) are chosen in `KernelContext.helper`; kernels call the name `ctx.helper("requant",
# p.rounding)` returns without knowing its body.

_HELPERS: dict[str, str] = {
    "string": "#include <string.h>",
    # GCC's pre-register-allocation scheduler hoists the loads of unrolled SMLAD code and spills; a kernel
    # may turn it off for its function (other compilers ignore the request).
    "no_sched": """\
#if defined(__GNUC__) && !defined(__clang__)
#define TVM_NO_SCHED __attribute__((optimize("no-schedule-insns")))
#else
#define TVM_NO_SCHED
#endif""",
    "sat_i8": """\
static inline int8_t tvm_sat_i8(int32_t x) {
  return (int8_t)(x < -128 ? -128 : (x > 127 ? 127 : x));
}""",
    "clamp_i32": """\
static inline int32_t tvm_clamp_i32(int32_t x, int32_t lo, int32_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}""",
    "clamp_f32": """\
static inline float tvm_clamp_f32(float x, float lo, float hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}""",
}

_HELPER_NAMES = {"string": "", "no_sched": "TVM_NO_SCHED", "sat_i8": "tvm_sat_i8",
                 "clamp_i32": "tvm_clamp_i32", "clamp_f32": "tvm_clamp_f32"}
_HELPER_DEPS: dict[str, tuple[str, ...]] = {}
#: helper key -> the <math.h> functions its C calls (recorded in a file when the helper enters it)
_HELPER_LIBM: dict[str, frozenset[str]] = {}

#: Every function of C99 <math.h> (7.12), in its double, float and long double forms: what `ctx.libm` accepts.
#: The classification macros (isnan, isinf, fpclassify, signbit, ...) and INFINITY/NAN/HUGE_VAL are left out:
#: C99 makes them macros, resolved at compile time (they need the header, no libm).
_MATH_BASE = (
    "acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp ilogb ldexp log "
    "log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf erfc lgamma tgamma ceil floor "
    "nearbyint rint lrint llrint round lround llround trunc fmod remainder remquo copysign nan nextafter "
    "nexttoward fdim fmax fmin fma").split()
MATH_FUNCTIONS: frozenset[str] = frozenset(f"{b}{s}" for b in _MATH_BASE for s in ("", "f", "l"))


def define_helper(key: str, code: str, name: str, deps: Sequence[str] = (), libm: Sequence[str] = ()) -> None:
    """Add a shared C helper a kernel module provides: `ctx.helper(key)` then emits `code` once per file (after
    the helpers in `deps`) and returns `name`, the function to call. Keys are prefixed by their module's family
    (e.g. "signal_log32"); a key defined twice is a programming error. `libm`: the <math.h> functions `code`
    calls (recorded in every file the helper enters, like `KernelContext.libm`)."""
    if key in _HELPERS:
        raise RuntimeError(f"kernel helper {key!r} is defined twice")
    _HELPERS[key] = code.rstrip()
    _HELPER_NAMES[key] = name
    if deps:
        _HELPER_DEPS[key] = tuple(deps)
    if set(libm) - MATH_FUNCTIONS:
        raise RuntimeError(f"kernel helper {key!r}: not C99 <math.h> functions: {sorted(set(libm) - MATH_FUNCTIONS)}")
    if libm:
        _HELPER_LIBM[key] = frozenset(libm)


def helper_source(key: str) -> str:
    return _HELPERS[key]


for _key, (_code, _name) in PRELUDE_HELPERS.items():
    define_helper(_key, _code, _name)


def dtype_of_ctype(ctype: str) -> str:
    for k, v in C_TYPES.items():
        if v == ctype and k != "bool":
            return k
    raise CompileError(f"no IR dtype for C type {ctype!r}")


# --- the context a kernel is emitted in ------------------------------------------------------------------

class _InputExprs(Sequence[str]):
    """ctx.inputs: parameter names for run-time tensors; constants are emitted on first access."""

    def __init__(self, ctx: KernelContext, params: dict[int, str]) -> None:
        self._ctx = ctx
        self._params = params

    def __len__(self) -> int:
        return len(self._ctx.node.inputs)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        if i in self._params:
            return self._params[i]
        if not self._ctx.has_input(i):
            raise self._ctx.error(f"optional input {i} is absent")
        return self._ctx.const(i)


class KernelContext:
    """Everything a kernel needs about the node it compiles, plus the file-scope emitters."""

    def __init__(self, node: Node, index: int, graph: Graph, rounding: str, func_name: str,
                 file: FileScope, input_params: dict[int, str], output_params: Sequence[str],
                 target: Target | str = "host", schedule: Schedule | None = None) -> None:
        self.node = node
        self.index = index
        self.graph = graph
        self.rounding = rounding
        self.func_name = func_name
        self.file = file
        self.inputs: Sequence[str] = _InputExprs(self, input_params)
        self.outputs = tuple(output_params)
        self.scratch = "scratch"
        #: the C expression of the node's persistent state block (KernelCode.persistent_bytes)
        self.state = "state"
        self.target = get_target(target)
        #: the point of this kernel's space it is emitted with (empty for kernels without a space)
        self.schedule: Schedule = dict(schedule or {})
        #: how many nodes of the model share this node's workload (lowering sets it; a default may share
        #: code between them)
        self.task_count = 1
        self._params: Any = None
        self._isa: PortableC | None = None

    def workload(self) -> dict[str, Any]:
        """What makes this node's kernel one tuning task: op, shapes, dtypes, which inputs are constants,
        quantization class, attributes, rounding and target (utvm.compiler.schedule)."""
        g = self.graph

        def tensor(name: str) -> dict[str, Any] | None:
            if not name:
                return None
            t = g.tensor(name)
            q = t.quant
            qclass = None if q is None else ("per-channel" if q.per_channel and len(q.scale) > 1 else "per-tensor")
            return {"shape": list(t.shape), "dtype": t.dtype, "quant": qclass, "const": t.is_constant}

        try:
            rounding = getattr(self.params(), "rounding", self.rounding)
        except (CompileError, ModuleNotFoundError, AttributeError, ValueError):
            rounding = self.rounding
        return canonical({"op": self.node.op, "inputs": [tensor(x) for x in self.node.inputs],
                          "outputs": [tensor(x) for x in self.node.outputs], "attrs": dict(self.node.attrs),
                          "rounding": rounding, "target": self.target.name})

    def task_key(self) -> str:
        return task_key(self.workload())

    @property
    def isa(self) -> PortableC:
        """The instruction vocabulary of ctx's target (utvm.compiler.kernels.isa): what an emitter may ask of
        the CPU. Kernels read the target through it only."""
        if self._isa is None:
            self._isa = vocabulary(self)
        return self._isa

    # tensors
    def in_tensor(self, i: int) -> Tensor | None:
        name = self.node.inputs[i] if i < len(self.node.inputs) else ""
        return self.graph.tensor(name) if name else None

    def out_tensor(self, i: int = 0) -> Tensor:
        return self.graph.tensor(self.node.outputs[i])

    def has_input(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    @property
    def label(self) -> str:
        return self.node.label(self.index)

    def params(self) -> Any:
        """The op module's prepare(node, graph, rounding): every number the C code bakes in."""
        if self._params is None:
            from utvm import ops

            mod = ops.op_module(self.node.op)
            self._params = mod.prepare(self.node, self.graph, self.rounding)
        return self._params

    # file-scope emitters
    def table(self, ctype: str, values: np.ndarray | Sequence[Any], hint: str = "t") -> str:
        """A `static const` table at file scope holding `values`; returns its C name."""
        return self.file.table(ctype, values, f"{self.func_name}_{hint}")

    def const(self, i: int) -> str:
        """C name of the constant array of node input i (raises if that input is not a constant)."""
        t = self.in_tensor(i)
        if t is None or not t.is_constant:
            raise CompileError(f"{self.label}: input {i} is not a constant")
        return self.file.constant(t)

    def helper(self, name: str, rounding: str | None = None) -> str:
        """Request a shared C helper (see _HELPERS); returns the function name to call.

        "requant" takes the rounding its op uses (`params.rounding`, resolved by the op module's
        prepare); without one, the compile's mode. Both variants can live in one file. "requant_pm" is
        the same function, bit for bit, for multipliers that are never INT32_MIN (check with
        `multipliers_pm`): faster (no saturation test, 32-bit RoundingDivideByPOT)."""
        if name in ("requant", "requant_pm"):
            key = f"requant:{rounding or self.rounding}"
            if name == "requant_pm" and key == "requant:double":
                key = "requant:double_pm"  # single rounding has no saturation case: the helper is the same
        else:
            key = name
        if key not in _HELPERS:
            raise CompileError(f"unknown kernel helper {name!r}")
        for dep in _HELPER_DEPS.get(key, ()):
            self.file.require(dep)
        self.file.require(key)
        return _HELPER_NAMES[key]

    def libm(self, name: str) -> str:
        """Call the C99 <math.h> function `name` (e.g. "expf") in this kernel: returns the name to call and
        records it, so the file includes <math.h> and the model's metadata lists it for the link (-lm)."""
        if name not in MATH_FUNCTIONS:
            raise self.error(f"{name!r} is not a C99 <math.h> function")
        self.file.libm.add(name)
        return name

    def literal(self, value: Any, dtype: str) -> str:
        """`cemit.c_literal(value, dtype)` for the kernel's body, recording a float NAN / INFINITY (macros of
        <math.h>: the file then includes it)."""
        text = c_literal(value, dtype)
        if text.lstrip("-") in FLOAT_SPECIALS:
            self.file.float_specials = True
        return text

    def float_literal(self, value: Any) -> str:
        """`literal(value, "float32")`: a float constant of the body (NAN / INFINITY recorded)."""
        return self.literal(value, "float32")

    def error(self, what: str) -> CompileError:
        return CompileError(f"{self.label}: {what}")


@dataclass
class FileScope:
    """File-scope C of one generated source: helpers, constants and tables, emitted once each."""

    prefix: str
    helpers: list[str] = field(default_factory=list)
    decls: list[str] = field(default_factory=list)
    constants: dict[str, str] = field(default_factory=dict)  # tensor name -> C name
    names: set[str] = field(default_factory=set)
    #: the <math.h> functions the file's C calls (KernelContext.libm, helpers' `libm`)
    libm: set[str] = field(default_factory=set)
    #: whether the file spells NAN or INFINITY (a table or a literal of a kernel body: <math.h> macros)
    float_specials: bool = False
    constant_bytes: int = 0
    #: every file-scope constant array the file declares (`table`, the GEMM's word tables): name -> bytes
    arrays: dict[str, int] = field(default_factory=dict)
    #: the same arrays as data (`declare_array`): name -> (C element type, little-endian bytes, its declaration
    #: in `decls`). With `--params external` the code generator leaves the declarations out and places the
    #: bytes in the parameter blob instead (utvm.compiler.params)
    data_arrays: dict[str, tuple[str, bytes, str]] = field(default_factory=dict)

    @property
    def includes_math_h(self) -> bool:
        """Whether the file needs `#include <math.h>`: it calls a libm function or spells NAN / INFINITY."""
        return bool(self.libm) or self.float_specials

    def unique(self, hint: str) -> str:
        return fresh_name(re.sub(r"[^A-Za-z0-9_]", "_", hint), self.names)

    def require(self, key: str) -> None:
        if key not in self.helpers:
            self.helpers.append(key)
            self.libm.update(_HELPER_LIBM.get(key, ()))

    def table(self, ctype: str, values: np.ndarray | Sequence[Any], hint: str) -> str:
        arr = np.asarray(values)
        name = self.unique(hint)
        dtype = dtype_of_ctype(ctype)
        if has_float_specials(arr, dtype):
            self.float_specials = True  # INFINITY / NAN come from <math.h> (macros only, no libm call)
        self.declare_array(name, ctype, arr, c_array_body(arr, dtype))
        return name

    def declare_array(self, name: str, ctype: str, values: np.ndarray | Sequence[Any], body: str) -> None:
        """Declare the file-scope constant array `name` (a name from `unique`) of `ctype` elements holding
        `values`, whose C initialiser list is `body`: its declaration goes into `decls`, its size into `arrays`
        and its bytes into `data_arrays` (what the parameter blob holds with --params external)."""
        dtype = dtype_of_ctype(ctype)
        flat = np.asarray(values).reshape(-1)
        target = np.dtype(dtype).newbyteorder("<")
        if dtype == "float32":
            raw = flat.astype(target).tobytes()
        else:  # C's conversion of each initialiser to the element type: modulo 2^bits
            raw = (flat if flat.dtype.kind in "iub" else flat.astype(np.int64)).astype(target).tobytes()
        decl = table_decl(ctype, name, body, int(flat.size))
        self.decls.append(decl)
        self.arrays[name] = int(flat.size) * np.dtype(dtype).itemsize
        self.data_arrays[name] = (ctype, raw, decl)

    def constant(self, t: Tensor) -> str:
        if t.name in self.constants:
            return self.constants[t.name]
        assert t.data is not None
        name = self.table(C_TYPES[t.dtype], t.data, f"{self.prefix}_const_{t.name}")
        self.constants[t.name] = name
        self.constant_bytes += t.nbytes
        return name

    def render_prelude(self) -> str:
        return "\n".join(_HELPERS[k] for k in self.helpers)


# --- registry ----------------------------------------------------------------------------------------------

KernelFn = Callable[[KernelContext], KernelCode]
SpaceFn = Callable[[KernelContext], Space]
_KERNELS: dict[str, KernelFn] = {}
_SPACES: dict[str, SpaceFn] = {}
_ALIAS_OPS: set[str] = set()
_loaded = False


def register(*ops: str, alias: bool = False, space: SpaceFn | None = None) -> Callable[[KernelFn], KernelFn]:
    """Decorator registering a kernel for one or more op names.

    alias=True marks ops whose output is the input's bytes unchanged (reshape): the memory planner
    gives both tensors one buffer and no function is generated, unless both are model inputs/outputs,
    in which case the kernel (a copy) is used. `space`: the kernel's schedule space for a node (see the
    module docstring); without one the kernel has no choices.
    """

    def deco(fn: KernelFn) -> KernelFn:
        for op in ops:
            _KERNELS[op] = fn
            if space is not None:
                _SPACES[op] = space
            if alias:
                _ALIAS_OPS.add(op)
        return fn

    return deco


def get_space(ctx: KernelContext) -> Space:
    """The schedule space of ctx's node on ctx's target (EMPTY_SPACE for kernels without choices)."""
    _load()
    fn = _SPACES.get(ctx.node.op)
    if fn is None:
        return EMPTY_SPACE
    space = fn(ctx)
    if not isinstance(space, Space):
        raise ctx.error(f"the space function of {ctx.node.op} returned {type(space).__name__}, not a Space")
    return space


def has_space(op: str) -> bool:
    _load()
    return op in _SPACES


def is_alias_op(op: str) -> bool:
    _load()
    return op in _ALIAS_OPS


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in KERNEL_MODULES:
        try:
            importlib.import_module(f"utvm.compiler.kernels.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"utvm.compiler.kernels.{mod}":
                raise


def supported_ops() -> tuple[str, ...]:
    _load()
    return tuple(sorted(_KERNELS))


def get_kernel(node: Node, index: int) -> KernelFn:
    _load()
    try:
        return _KERNELS[node.op]
    except KeyError:
        raise UnsupportedOperatorError(node.op, f"{index} ({node.name!r})" if node.name else index,
                                       supported_ops()) from None


# --- small utilities kernels share -------------------------------------------------------------------------

_F32_ACTIVATIONS: dict[str, tuple[float, float] | None] = {
    "none": None, "relu": (0.0, math.inf), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}


def activation_range_f32(activation: str) -> tuple[float, float] | None:
    """The clamp of a fused float activation; None for "none"."""
    if activation not in _F32_ACTIVATIONS:
        raise CompileError(f"fused activation {activation!r} is not supported in float kernels")
    return _F32_ACTIVATIONS[activation]


def multipliers_pm(multipliers: Sequence[int]) -> bool:
    """True when every multiplier is a valid int32 other than INT32_MIN: the precondition of "requant_pm"."""
    return all(-(2**31) < int(m) < 2**31 for m in multipliers)


def float_clamp_stmt(var: str, activation: str) -> str:
    """C statement clamping float `var` in place for a fused activation ("" when none)."""
    rng = activation_range_f32(activation)
    if rng is None:
        return ""
    lo, hi = rng
    parts = []
    if lo != -math.inf:
        parts.append(f"if ({var} < {c_literal(lo, 'float32')}) {{ {var} = {c_literal(lo, 'float32')}; }}")
    if hi != math.inf:
        parts.append(f"if ({var} > {c_literal(hi, 'float32')}) {{ {var} = {c_literal(hi, 'float32')}; }}")
    return " ".join(parts)


def strides_of(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(list(shape)):
        out.append(acc)
        acc *= d
    return list(reversed(out))


def broadcast_loops(out_shape: Sequence[int], in_shapes: Sequence[Sequence[int]], body: str,
                    index_names: Sequence[str], out_index: str = "io") -> str:
    """Nested loops over `out_shape` that keep a flat index per input (numpy broadcasting) and the output.

    `body` is C using `index_names[k]` (the flat index into input k) and `out_index`. Adjacent dimensions
    that broadcast the same way are merged, so equal shapes give a single flat loop.
    """
    rank = len(out_shape)
    padded = [[1] * (rank - len(s)) + list(s) for s in in_shapes]
    # Merge adjacent dims with identical broadcast patterns.
    dims: list[tuple[int, tuple[bool, ...]]] = []
    for d in range(rank):
        pattern = tuple(p[d] == out_shape[d] for p in padded)
        if out_shape[d] == 1:
            continue
        if dims and dims[-1][1] == pattern:
            dims[-1] = (dims[-1][0] * out_shape[d], pattern)
        else:
            dims.append((int(out_shape[d]), pattern))
    if not dims:
        dims = [(1, tuple(True for _ in padded))]
    # Strides per input along the merged dims (0 where broadcast).
    strides: list[list[int]] = []
    for k in range(len(padded)):
        acc, st = 1, []
        for extent, pattern in reversed(dims):
            st.append(acc if pattern[k] else 0)
            acc *= extent if pattern[k] else 1
        strides.append(list(reversed(st)))
    lines = [f"int32_t {out_index} = 0;"]
    for name in index_names:
        lines.append(f"int32_t {name}_base0 = 0;")
    depth = len(dims)
    for d, (extent, _pattern) in enumerate(dims):
        ind = "  " * d
        lines.append(f"{ind}for (int32_t d{d} = 0; d{d} < {extent}; ++d{d}) {{")
        for k, name in enumerate(index_names):
            st = strides[k][d]
            base = f"{name}_base{d}"
            nxt = f"{name}_base{d + 1}" if d + 1 < depth else name
            expr = f"{base} + d{d} * {st}" if st else base
            lines.append(f"{ind}  const int32_t {nxt} = {expr};")
    inner = "  " * depth
    lines += [inner + ln for ln in body.strip().splitlines()]
    lines.append(f"{inner}++{out_index};")
    for d in reversed(range(depth)):
        lines.append("  " * d + "}")
    return "\n".join(lines)


# The requantization forms and their helpers (they use the names above).
from utvm.compiler.kernels import requant as _requant  # noqa: E402, F401
