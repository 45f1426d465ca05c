"""C kernels of the signal op family (utvm.ops.signal): TFLite Micro's signal library, bit-exact.

Integer arithmetic follows TFLM's signal/src code: stores into int16/int32 wrap (computed in a wider type
and converted, which every compiler we target defines as wrapping), uint32/uint64 arithmetic is modular.
The FFTs are KISS FFT's fixed-point (int16, int32) or float real transforms (radices 2, 3, 4, 5):
the leaf permutation of its decimation-in-time recursion, the twiddles (computed at compile time exactly
as KISS FFT computes them at init, in double) and the stage list are tables; the butterflies are shared
helpers, one set per element type.

The C that does not depend on the node (TFLM's integer helpers, KISS FFT) is real C in the runtime tree,
src/utvm/crt/src/kernels/signal (its README.md): `RUNTIME_HELPERS` says which files make up each helper
(and which helpers it needs first). A kernel asks for one with `ctx.helper(key)` and the code generator
copies the files, once per generated source, into that source, so generated code stays standalone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from utvm.compiler.kernels import KernelCode, KernelContext, define_helper, register
from utvm.ops.signal import (
    DelayParams,
    EnergyParams,
    FftParams,
    FilterBankLogParams,
    FilterBankParams,
    FramerParams,
    OverlapAddParams,
    PcanParams,
    SpectralSubtractionParams,
    StackerParams,
    VectorParams,
    WindowParams,
    fft_leaf_order,
    fft_stages,
    fft_super_twiddles,
    fft_twiddles,
)
from utvm.support import cc

#: the family's fixed C, relative to the runtime tree (utvm.support.cc.crt_dir())
RUNTIME_DIR = Path("src", "kernels", "signal")
#: the files of RUNTIME_DIR that are templates over the FFT's element type (its README.md)
FFT_TEMPLATES = ("cfft.h", "rfft.h", "irfft.h")

# KISS FFT per element type: the function suffix, the element type T and the product / sum type W.
_FFT_TYPES = {
    "int16": dict(s="i16", T="int16_t", W="int32_t"),
    "int32": dict(s="i32", T="int32_t", W="int64_t"),
    "float32": dict(s="f32", T="float", W="float"),
}


@dataclass(frozen=True)
class RuntimeHelper:
    """A helper made of runtime files: what `ctx.helper(key)` emits (once per generated source)."""

    files: tuple[str, ...]  # files of RUNTIME_DIR, copied verbatim in this order
    name: str  # the function a kernel calls
    deps: tuple[str, ...] = ()  # helper keys emitted before it
    fft_dtype: str = ""  # the element type FFT_TEMPLATES among `files` are instantiated for


RUNTIME_HELPERS: dict[str, RuntimeHelper] = {
    "signal_msb32": RuntimeHelper(("msb32.h",), "signal_msb32"),
    "signal_sqrt64": RuntimeHelper(("sqrt.h",), "signal_sqrt64", ("signal_msb32",)),
    "signal_log32": RuntimeHelper(("log32.h",), "signal_log32", ("signal_msb32",)),
    "signal_pcan": RuntimeHelper(("pcan.h",), "signal_wdf", ("signal_msb32",)),
}
for _dt, _d in _FFT_TYPES.items():
    _cfft = f"signal_cfft_{_d['s']}"
    RUNTIME_HELPERS[_cfft] = RuntimeHelper((f"fft_{_d['s']}.h", "cfft.h"), _cfft, fft_dtype=_dt)
    RUNTIME_HELPERS[f"signal_rfft_{_d['s']}"] = RuntimeHelper(("rfft.h",), f"signal_rfft_{_d['s']}", (_cfft,), _dt)
    RUNTIME_HELPERS[f"signal_irfft_{_d['s']}"] = RuntimeHelper(("irfft.h",), f"signal_irfft_{_d['s']}", (_cfft,), _dt)


def runtime_helper_source(key: str) -> str:
    """The C helper `key` emits: its runtime files verbatim, each FFT template after the definitions of its
    parameters (the template #undefs them)."""
    helper = RUNTIME_HELPERS[key]
    root = cc.crt_dir() / RUNTIME_DIR
    parts = []
    for f in helper.files:
        if f in FFT_TEMPLATES:
            d = _FFT_TYPES[helper.fft_dtype]
            parts.append(f"#define SIGNAL_T {d['T']}\n#define SIGNAL_W {d['W']}\n"
                         f"#define SIGNAL_FN(name) signal_##name##_{d['s']}\n")
        parts.append((root / f).read_text())
    return "".join(parts)


for _key, _helper in RUNTIME_HELPERS.items():
    define_helper(_key, runtime_helper_source(_key), _helper.name, deps=_helper.deps)


@register("signal_window")
def _window(ctx: KernelContext) -> KernelCode:
    p: WindowParams = ctx.params()
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    k, rows = p.length, p.rows
    body = f"""\
int32_t r;
int32_t i;
for (r = 0; r < {rows}; ++r) {{
  for (i = 0; i < {k}; ++i) {{
    const int32_t raw = ((int32_t){x}[r * {k} + i] * (int32_t){w}[i]) >> {p.shift};
    {y}[r * {k} + i] = (int16_t)(raw < -32768 ? -32768 : (raw > 32767 ? 32767 : raw));
  }}
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_fft_auto_scale")
def _fft_auto_scale(ctx: KernelContext) -> KernelCode:
    p: VectorParams = ctx.params()
    msb = ctx.helper("signal_msb32")
    x, y, sc = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    n = p.n
    body = f"""\
int16_t mx = 0;
int32_t s;
int32_t i;
for (i = 0; i < {n}; ++i) {{
  const int16_t v = {x}[i];
  if (v > mx) {{
    mx = v;
  }} else if (-(int32_t)v > mx) {{
    mx = (int16_t)(-(int32_t)v);
  }}
}}
s = 16 - (int32_t){msb}((uint32_t)(int32_t)mx) - 1;
if (s <= 0) {{
  s = 0;
}}
for (i = 0; i < {n}; ++i) {{
  {y}[i] = (int16_t)((int32_t){x}[i] * ((int32_t)1 << s));
}}
{sc}[0] = s;
return 0;"""
    return KernelCode(body=body)


def _fft_tables(ctx: KernelContext, p: FftParams, inverse: bool) -> tuple[str, str, int, str, str, str, str]:
    d = _FFT_TYPES[p.dtype]
    ncfft = p.fft_length // 2
    ctype = d["T"]
    stages = fft_stages(ncfft)
    order = ctx.table("int32_t", fft_leaf_order(ncfft), "order")
    st = ctx.table("int32_t", [v for stage in stages for v in stage], "stages")
    tw = ctx.table(ctype, [v for pair in fft_twiddles(ncfft, inverse, p.dtype) for v in pair], "tw")
    stw = ctx.table(ctype, [v for pair in fft_super_twiddles(p.fft_length, inverse, p.dtype) for v in pair], "stw")
    fn = ctx.helper(f"signal_{'irfft' if inverse else 'rfft'}_{d['s']}")
    return fn, ctype, len(stages), order, st, tw, stw


@register("signal_rfft")
def _rfft(ctx: KernelContext) -> KernelCode:
    p: FftParams = ctx.params()
    fn, ctype, nst, order, st, tw, stw = _fft_tables(ctx, p, False)
    n = p.fft_length
    x, y = ctx.inputs[0], ctx.outputs[0]
    length, rows = p.length, p.rows
    size = 4 if p.dtype != "int16" else 2
    body = f"""\
{ctype}* const work = ({ctype}*)(void*)scratch;
{ctype}* const tmp = work + {n};
int32_t r;
int32_t i;
for (r = 0; r < {rows}; ++r) {{
  for (i = 0; i < {length}; ++i) {{
    work[i] = {x}[r * {length} + i];
  }}
  for (i = {length}; i < {n}; ++i) {{
    work[i] = 0;
  }}
  {fn}(work, {y} + r * {n + 2}, tmp, {n // 2}, {order}, {st}, {nst}, {tw}, {stw});
}}
return 0;"""
    return KernelCode(body=body, scratch_bytes=2 * n * size)


@register("signal_irfft")
def _irfft(ctx: KernelContext) -> KernelCode:
    p: FftParams = ctx.params()
    fn, ctype, nst, order, st, tw, stw = _fft_tables(ctx, p, True)
    n = p.fft_length
    x, y = ctx.inputs[0], ctx.outputs[0]
    rows = p.rows
    size = 4 if p.dtype != "int16" else 2
    scale = ""
    if p.dtype == "float32":  # TFLM divides KISS FFT's (unnormalised) result by fft_length
        scale = f"""
  for (i = 0; i < {n}; ++i) {{
    {y}[r * {n} + i] /= (float){n};
  }}"""
    body = f"""\
{ctype}* const tmp = ({ctype}*)(void*)scratch;
int32_t r;
{"int32_t i;" if scale else ""}
for (r = 0; r < {rows}; ++r) {{
  {fn}({x} + r * {n + 2}, {y} + r * {n}, tmp, {n // 2}, {order}, {st}, {nst}, {tw}, {stw});{scale}
}}
return 0;"""
    return KernelCode(body=body, scratch_bytes=n * size)


@register("signal_energy")
def _energy(ctx: KernelContext) -> KernelCode:
    p: EnergyParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    m = p.bins
    body = f"""\
int32_t i;
for (i = 0; i < {m}; ++i) {{
  if (i >= {p.start} && i < {p.end}) {{
    const int32_t re = {x}[2 * i];
    const int32_t im = {x}[2 * i + 1];
    {y}[i] = (uint32_t)(re * re) + (uint32_t)(im * im);
  }} else {{
    {y}[i] = 0u;
  }}
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_filter_bank")
def _filter_bank(ctx: KernelContext) -> KernelCode:
    p: FilterBankParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    w, uw = ctx.const(1), ctx.const(2)
    fs = ctx.table("int32_t", p.freq_starts, "fs")
    ws = ctx.table("int32_t", p.weight_starts, "ws")
    wd = ctx.table("int32_t", p.widths, "wd")
    body = f"""\
uint64_t wacc = 0u;
uint64_t uacc = 0u;
int32_t ch;
int32_t j;
for (ch = 0; ch <= {p.num_channels}; ++ch) {{
  const uint32_t* in = {x} + {fs}[ch];
  const int16_t* wt = {w} + {ws}[ch];
  const int16_t* ut = {uw} + {ws}[ch];
  for (j = 0; j < {wd}[ch]; ++j) {{
    wacc += (uint64_t)(int64_t)wt[j] * (uint64_t)in[j];
    uacc += (uint64_t)(int64_t)ut[j] * (uint64_t)in[j];
  }}
  if (ch > 0) {{
    {y}[ch - 1] = wacc;
  }}
  wacc = uacc;
  uacc = 0u;
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_filter_bank_square_root")
def _filter_bank_sqrt(ctx: KernelContext) -> KernelCode:
    p: VectorParams = ctx.params()
    sq = ctx.helper("signal_sqrt64")
    x, s, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    n = p.n
    body = f"""\
const int32_t s = {s}[0];
int32_t i;
for (i = 0; i < {n}; ++i) {{
  {y}[i] = (s >= 0 && s < 32) ? ({sq}({x}[i]) >> s) : 0u;
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_filter_bank_log")
def _filter_bank_log(ctx: KernelContext) -> KernelCode:
    p: FilterBankLogParams = ctx.params()
    lg = ctx.helper("signal_log32")
    x, y = ctx.inputs[0], ctx.outputs[0]
    n = p.n
    body = f"""\
int32_t i;
for (i = 0; i < {n}; ++i) {{
  const uint32_t scaled = {x}[i] << {p.correction_bits};
  if (scaled > 1u) {{
    const uint32_t v = {lg}(scaled, {p.output_scale & 0xFFFFFFFF}u);
    {y}[i] = (int16_t)(v < 32767u ? v : 32767u);
  }} else {{
    {y}[i] = 0;
  }}
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_pcan")
def _pcan(ctx: KernelContext) -> KernelCode:
    p: PcanParams = ctx.params()
    wdf = ctx.helper("signal_pcan")
    x, ne, lut, y = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]
    n = p.n
    body = f"""\
int32_t i;
for (i = 0; i < {n}; ++i) {{
  const uint32_t gain = (uint32_t)(int32_t){wdf}({ne}[i], {lut});
  const uint32_t snr = (uint32_t)(((uint64_t){x}[i] * gain) >> {p.snr_shift});
  {y}[i] = signal_pcan_shrink(snr);
}}
return 0;"""
    return KernelCode(body=body)


# --- stateful ops: their state lives in `state` (KernelCode.persistent_bytes), laid out as utvm.ops.signal's
# state_spec lists it, each part 16-byte aligned; all-zero bytes are the initial state. ---------------------
def _layout(sizes: list[int]) -> tuple[list[int], int]:
    offsets, pos = [], 0
    for n in sizes:
        offsets.append(pos)
        pos += (n + 15) // 16 * 16
    return offsets, max(pos, 16)


@register("signal_framer")
def _framer(ctx: KernelContext) -> KernelCode:
    p: FramerParams = ctx.params()
    x, y, v = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    size, step, cap = p.frame_size, p.frame_step, p.frame_size + p.frame_step
    (o_cnt, o_buf), total = _layout([4 * p.outer, 2 * p.outer * cap])
    base = size - step if p.prefill else 0
    body = f"""\
int32_t* const cnt = (int32_t*)(void*)({ctx.state} + {o_cnt});
int16_t* const bufs = (int16_t*)(void*)({ctx.state} + {o_buf});
uint8_t valid = 1u;
int32_t r;
int32_t f;
int32_t i;
for (r = 0; r < {p.outer}; ++r) {{
  int16_t* const buf = bufs + r * {cap};
  int32_t n = {base} + cnt[r];
  for (f = 0; f < {p.n_frames}; ++f) {{
    const int16_t* const in = {x} + (r * {p.n_frames} + f) * {step};
    int16_t* const out = {y} + (r * {p.n_frames} + f) * {size};
    for (i = 0; i < {step}; ++i) {{
      buf[n + i] = in[i];
    }}
    n += {step};
    if (n >= {size}) {{
      for (i = 0; i < {size}; ++i) {{
        out[i] = buf[i];
      }}
      for (i = 0; i < n - {step}; ++i) {{
        buf[i] = buf[i + {step}];
      }}
      n -= {step};
    }} else {{
      /* TFLM leaves a frame it cannot fill unwritten (never written before either: zeros here) */
      for (i = 0; i < {size}; ++i) {{
        out[i] = 0;
      }}
      valid = 0u;
    }}
  }}
  cnt[r] = n - {base};
}}
{v}[0] = valid;
return 0;"""
    return KernelCode(body=body, persistent_bytes=total)


@register("signal_stacker")
def _stacker(ctx: KernelContext) -> KernelCode:
    p: StackerParams = ctx.params()
    x, y, v = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    nc, size, step = p.num_channels, p.frame_size, p.frame_step
    (o_info, o_buf, o_last), total = _layout([8, 2 * size, 2 * size])
    body = f"""\
int32_t* const info = (int32_t*)(void*)({ctx.state} + {o_info});
int16_t* const buf = (int16_t*)(void*)({ctx.state} + {o_buf});
int16_t* const last = (int16_t*)(void*)({ctx.state} + {o_last});
int32_t n = info[0];
int32_t i;
int32_t k;
for (i = 0; i < {nc}; ++i) {{
  buf[n + i] = {x}[i];
}}
n += {nc};
if (info[1] == 0) {{
  for (k = 0; k < {p.left}; ++k) {{
    for (i = 0; i < {nc}; ++i) {{
      buf[n + i] = {x}[i];
    }}
    n += {nc};
  }}
  info[1] = 1;
}}
if (n >= {size}) {{
  for (i = 0; i < {size}; ++i) {{
    last[i] = buf[i];
  }}
  for (i = 0; i < n - {step}; ++i) {{
    buf[i] = buf[i + {step}];
  }}
  n -= {step};
  {v}[0] = 1u;
}} else {{
  {v}[0] = 0u; /* TFLM leaves the output unwritten: it keeps the last output */
}}
for (i = 0; i < {size}; ++i) {{
  {y}[i] = last[i];
}}
info[0] = n;
return 0;"""
    return KernelCode(body=body, persistent_bytes=total)


@register("signal_delay")
def _delay(ctx: KernelContext) -> KernelCode:
    p: DelayParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    n, d = p.length, p.delay_length
    total_n = p.outer * n
    if d == 0:
        return KernelCode(body=f"int32_t i;\nfor (i = 0; i < {total_n}; ++i) {{\n  {y}[i] = {x}[i];\n}}\nreturn 0;")
    # out = (line ++ x)[:n], line = (line ++ x)[n:], walking the concatenation by index
    body = f"""\
int16_t* const lines = (int16_t*)(void*){ctx.state};
int32_t r;
int32_t i;
for (r = 0; r < {p.outer}; ++r) {{
  int16_t* const line = lines + r * {d};
  const int16_t* const in = {x} + r * {n};
  int16_t* const out = {y} + r * {n};
  for (i = 0; i < {n}; ++i) {{
    out[i] = i < {d} ? line[i] : in[i - {d}];
  }}
  for (i = 0; i < {d}; ++i) {{
    line[i] = i + {n} < {d} ? line[i + {n}] : in[i + {n} - {d}];
  }}
}}
return 0;"""
    return KernelCode(body=body, persistent_bytes=(2 * p.outer * d + 15) // 16 * 16)


@register("signal_overlap_add")
def _overlap_add(ctx: KernelContext) -> KernelCode:
    p: OverlapAddParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    size, step = p.frame_size, p.frame_step
    t = "int16_t" if p.dtype == "int16" else "float"
    if p.dtype == "int16":
        acc = """{
      const int32_t s = (int32_t)buf[i] + (int32_t)in[i];
      buf[i] = (int16_t)(s < -32768 ? -32768 : (s > 32767 ? 32767 : s));
    }"""
    else:
        acc = "buf[i] += in[i];"
    body = f"""\
{t}* const bufs = ({t}*)(void*){ctx.state};
int32_t r;
int32_t f;
int32_t i;
for (r = 0; r < {p.outer}; ++r) {{
  {t}* const buf = bufs + r * {size};
  for (f = 0; f < {p.n_frames}; ++f) {{
    const {t}* const in = {x} + (r * {p.n_frames} + f) * {size};
    {t}* const out = {y} + (r * {p.n_frames} + f) * {step};
    for (i = 0; i < {size}; ++i) {acc}
    for (i = 0; i < {step}; ++i) {{
      out[i] = buf[i];
    }}
    for (i = 0; i < {size - step}; ++i) {{
      buf[i] = buf[i + {step}];
    }}
    for (i = {size - step}; i < {size}; ++i) {{
      buf[i] = 0;
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body, persistent_bytes=(4 * p.outer * size + 15) // 16 * 16)


@register("signal_filter_bank_spectral_subtraction")
def _spectral_subtraction(ctx: KernelContext) -> KernelCode:
    p: SpectralSubtractionParams = ctx.params()
    x, y, ne = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    sm, oms, asm, aoms = p.smoothing
    body = f"""\
uint32_t* const noise = (uint32_t*)(void*){ctx.state};
int32_t i;
for (i = 0; i < {p.num_channels}; ++i) {{
  const uint32_t smoothing = (i & 1) == 0 ? {sm}u : {asm}u;
  const uint32_t one_minus = (i & 1) == 0 ? {oms}u : {aoms}u;
  const uint32_t sig = {x}[i] << {p.smoothing_bits};
  uint32_t est;
  uint32_t floor_v;
  uint32_t sub;
  noise[i] = (uint32_t)(((uint64_t)sig * smoothing + (uint64_t)noise[i] * one_minus) >> {p.spectral_subtraction_bits});
  est = noise[i];
  if (est > sig) {{
    est = sig;{" noise[i] = est;" if p.clamping else ""}
  }}
  floor_v = (uint32_t)(((uint64_t){x}[i] * {p.min_signal_remaining}u) >> {p.spectral_subtraction_bits});
  sub = (sig - est) >> {p.smoothing_bits};
  {y}[i] = sub > floor_v ? sub : floor_v;
  {ne}[i] = noise[i];
}}
return 0;"""
    return KernelCode(body=body, persistent_bytes=(4 * p.num_channels + 15) // 16 * 16)
