"""int8/float add, sub, mul kernels vs utvm.ir.run_reference (bit-exact int8), and the 32-bit input rescale
of int8 add/sub (utvm.compiler.kernels.requant.rescale_input_stmts) checked exhaustively against the 64-bit
helper.

The cases spread zero points over the whole int8 range (|x - zp| up to 255), scale ratios from 1:1 to
1:1000 (input multipliers from 2^30 down to tiny ones with large right shifts), broadcasting and every
fused activation the ops accept.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import (  # noqa: E402
    UBSAN,
    Batch,
    assert_cross_compiles,
    assert_integer_only,
    ops_source,
    per_tensor,
    run_batch,
)

from utvm.compiler.kernels import helper_source  # noqa: E402
from utvm.compiler.kernels.requant import rescale_input_stmts  # noqa: E402
from utvm.ops import _quant  # noqa: E402
from utvm.support import cc  # noqa: E402

# id, op, a shape, b shape, (s_a, zp_a), (s_b, zp_b), (s_y, zp_y), activation
CASES = [
    ("add_same", "add", (4, 33), (4, 33), (0.04, -2), (0.041, -1), (0.058, -3), "none"),
    ("add_extreme_zp", "add", (2, 5, 7), (2, 5, 7), (0.02, 127), (0.03, -128), (0.05, 0), "relu"),
    ("add_ratio_1000", "add", (3, 40), (3, 40), (0.5, 10), (0.0005, -7), (0.6, 4), "none"),
    ("add_bcast_row", "add", (3, 4, 6), (6,), (0.1, 3), (0.07, -50), (0.12, -9), "relu6"),
    ("add_bcast_col", "add", (5, 1), (1, 9), (0.01, -128), (0.012, 127), (0.02, 1), "relu_n1_to_1"),
    ("sub_same", "sub", (6, 11), (6, 11), (0.03, 5), (0.02, -6), (0.045, 2), "none"),
    ("sub_ratio", "sub", (4, 13), (13,), (0.001, -100), (0.25, 100), (0.2, -20), "relu"),
    ("mul_same", "mul", (5, 17), (5, 17), (0.05, -3), (0.04, 9), (0.06, -1), "none"),
    ("mul_bcast", "mul", (2, 3, 5), (3, 1), (0.02, 127), (0.3, -128), (0.15, 7), "relu6"),
]


def _batch(dtype: str) -> Batch:
    b = Batch()
    for cid, op, ashape, bshape, qa, qb, qy, act in CASES:
        name = f"{cid}_{dtype}"
        quant = (lambda q: per_tensor(*q)) if dtype == "int8" else (lambda q: None)
        a = b.input(f"{name}_a", ashape, dtype, quant(qa))
        bb = b.input(f"{name}_b", bshape, dtype, quant(qb))
        b.apply(op, [a, bb], f"{name}_y", {"activation": act}, quant(qy))
    return b


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_int8_binary_bit_exact(rounding: str) -> None:
    rng = np.random.default_rng(91)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(_batch("int8"), rng, rounding=rounding, builds=builds, n_sets=3)
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")
    src = ops_source(compiled[0])
    # add/sub rescale their inputs in 32 bits; the output requantization has no saturation test
    assert "tvm_requant_double_pm" in src and "tvm_srdhm" not in src


def test_float_binary() -> None:
    compiled = run_batch(_batch("float32"), np.random.default_rng(92))
    assert "tvm_clamp_f32" in ops_source(compiled[0])


def _rescale_cases() -> list[tuple[int, int, int]]:
    """(zero point, multiplier, shift) of QuantizeMultiplier for input/output scale ratios of add/sub."""
    out = []
    for ratio in (0.5, 0.4999, 0.3, 0.25, 0.1234567, 0.01, 1e-3, 1.7e-5, 3e-8):
        m, e = _quant.quantize_multiplier(ratio, "double")
        for zp in (-128, -1, 0, 77, 127):
            out.append((zp, m, e))
    # multipliers whose low bits are all zero / all one (the split m = mh * 2^D + ml at its edges)
    out += [(0, 1 << 30, -1), (5, (1 << 31) - 1, -2), (-3, (1 << 30) | ((1 << 11) - 1), 0), (9, 1 << 30, 0)]
    # exact ties of the first rounding (va * ml = 2^10 mod 2^11), with and without a second rounding
    out += [(zp, (1 << 30) | low, e) for zp in (0, -128) for low in (1024, 512, 1536, 3072) for e in (0, -1, -3)]
    return out


def test_rescale_input_matches_requant_helper_exhaustively(tmp_path: Path) -> None:
    """For every int8 x and each (zp, multiplier, shift), the 32-bit rescale equals tvm_requant_double (and
    tvm_requant_single for the single-rounding form) of (x - zp) << 20, evaluated by C at -O2 with UBSan."""
    funcs, calls = [], []
    for i, (zp, m, e) in enumerate(_rescale_cases()):
        for rounding in ("double", "single"):
            stmts = rescale_input_stmts("s", "va", zp, 20, m, e, rounding)
            if rounding == "single" and stmts is None:
                continue  # large shifts: the single-rounding split would not fit 32 bits (64-bit helper used)
            assert stmts is not None, f"case {i} ({zp}, {m}, {e}, {rounding}) fell back to 64 bits"
            ref = "tvm_requant_double" if rounding == "double" else "tvm_requant_single"
            funcs.append(f"static int check_{i}_{rounding}(void) {{\n  int32_t x;\n  int bad = 0;\n"
                         f"  for (x = -128; x <= 127; ++x) {{\n    const int32_t va = x - ({zp});\n"
                         f"    {stmts.replace(chr(10), chr(10) + '    ')}\n"
                         f"    if (s != {ref}(va * {1 << 20}, {m}, {e})) {{ ++bad; }}\n  }}\n  return bad;\n}}")
            calls.append(f"  if (check_{i}_{rounding}()) {{ printf(\"case {i} {rounding}\\n\"); ++failed; }}")
    assert sum(" single" in c for c in calls) >= 10, "too few single-rounding cases take the 32-bit form"
    src = ("#include <stdint.h>\n#include <stdio.h>\n"
           + "\n".join(helper_source(k) for k in ("gemmlowp", "requant:double", "requant:single"))
           + "\n" + "\n".join(funcs) + "\nint main(void) {\n  int failed = 0;\n" + "\n".join(calls)
           + "\n  return failed != 0;\n}\n")
    path = tmp_path / "rescale.c"
    path.write_text(src)
    exe = tmp_path / "rescale"
    import subprocess

    cmd = ["gcc", *cc.WARNING_FLAGS, "-O2", *UBSAN, str(path), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"32-bit rescale differs from the 64-bit helper: {run.stdout}"


def test_requant_pm_matches_requant_double(tmp_path: Path) -> None:
    """tvm_requant_double_pm == tvm_requant_double for extreme x, every shift and edge multipliers."""
    xs = [-(2**31), -(2**31) + 1, -(2**30), -12345678, -65537, -1025, -1024, -1023, -1, 0, 1, 1023, 1024,
          1025, 65535, 2**30, 2**31 - 1]
    ms = [0, 1, 2**30, 2**30 + 1, 1518500250, 2**31 - 2, 2**31 - 1]
    body = []
    for x in xs:
        xl = "(-2147483647 - 1)" if x == -(2**31) else str(x)
        for m in ms:
            body.append(f"  for (s = -31; s <= 30; ++s) {{ if (tvm_requant_double_pm({xl}, {m}, s) != "
                        f"tvm_requant_double({xl}, {m}, s)) {{ printf(\"x={x} m={m} s=%d\\n\", (int)s); ++bad; }} }}")
    src = ("#include <stdint.h>\n#include <stdio.h>\n"
           + "\n".join(helper_source(k) for k in ("gemmlowp", "requant:double", "requant:double_pm"))
           + "\nint main(void) {\n  int32_t s;\n  int bad = 0;\n" + "\n".join(body) + "\n  return bad != 0;\n}\n")
    path = tmp_path / "pm.c"
    path.write_text(src)
    exe = tmp_path / "pm"
    import subprocess

    for opt in ("-O0", "-O2"):
        build = subprocess.run(["gcc", *cc.WARNING_FLAGS, opt, *UBSAN, str(path), "-o", str(exe)],
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr
        run = subprocess.run([str(exe)], capture_output=True, text=True)
        assert run.returncode == 0, f"tvm_requant_double_pm differs ({opt}): {run.stdout[:2000]}"
