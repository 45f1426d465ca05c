"""Binary, comparison and logical ops against TFLite Micro: MAXIMUM, MINIMUM, DIV, FLOOR_DIV, FLOOR_MOD,
SQUARED_DIFFERENCE, EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL, LOGICAL_AND, LOGICAL_OR,
SELECT_V2, ADD_N, and the int16 / int32 ADD, SUB, MUL.

Each case is a single-op model run by TFLM's interpreter, utvm's reference interpreter and the generated C
(bit-exact for integer and bool outputs), over every dtype TFLM's kernel accepts, broadcasting up to rank 6,
scalars and constant operands (TFLM fails to allocate empty tensors, so none are tested); dtypes TFLM
refuses are refused at import.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tflite_builder import TFLiteBuilder  # noqa: E402
from tflm_harness import Case, check_cases  # noqa: E402
from utvm.errors import CRTError, GraphError, UnsupportedModelError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ir.interp import prepare_graph  # noqa: E402

OPTIONS = {
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions", "DIV": "DivOptions",
    "FLOOR_DIV": "FloorDivOptions", "FLOOR_MOD": "FloorModOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "EQUAL": "EqualOptions", "NOT_EQUAL": "NotEqualOptions",
    "GREATER": "GreaterOptions", "GREATER_EQUAL": "GreaterEqualOptions", "LESS": "LessOptions",
    "LESS_EQUAL": "LessEqualOptions", "LOGICAL_AND": "LogicalAndOptions", "LOGICAL_OR": "LogicalOrOptions",
    "SELECT_V2": "SelectV2Options", "ADD_N": "AddNOptions", "ADD": "AddOptions", "SUB": "SubOptions",
    "MUL": "MulOptions",
}
COMPARISONS = ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")
# default (scale, zero point) per quantized dtype, per operand position
QUANT = {"int8": [(0.05, 3), (0.07, -5), (0.09, -2), (0.05, 3)], "int16": [(0.001, 0), (0.0015, 0), (0.002, 0)]}


def model(code: str, shapes: Sequence[Sequence[int]], dtypes: Sequence[str] | str, out_dtype: str | None = None,
          out_shape: Sequence[int] | None = None, quant: Sequence[tuple[float, int] | None] | None = None,
          out_quant: tuple[float, int] | None = None, const: dict[int, np.ndarray] | None = None,
          **fields: int) -> bytes:
    """A single-op model; input k is a constant when `const` has k. Quantized dtypes get QUANT's parameters
    unless `quant` / `out_quant` say otherwise."""
    dts = [dtypes] * len(shapes) if isinstance(dtypes, str) else list(dtypes)
    b = TFLiteBuilder()
    ins, graph_ins = [], []
    for k, (shape, dt) in enumerate(zip(shapes, dts, strict=True)):
        q = quant[k] if quant is not None else (QUANT[dt][k] if dt in QUANT else None)
        data = (const or {}).get(k)
        t = b.tensor(f"x{k}", shape, dt, data=data, scale=q[0] if q else None, zero_point=q[1] if q else None)
        ins.append(t)
        if data is None:
            graph_ins.append(t)
    od = out_dtype or dts[-1]
    oq = out_quant if out_quant is not None else (QUANT[od][-1] if od in QUANT else None)
    oshape = out_shape if out_shape is not None else np.broadcast_shapes(*(tuple(s) for s in shapes))
    y = b.tensor("y", oshape, od, scale=oq[0] if oq else None, zero_point=oq[1] if oq else None)
    b.op(code, ins, [y], OPTIONS[code], **fields)
    return b.build(inputs=graph_ins, outputs=[y])


def draw(fns: Sequence[Callable[[np.random.Generator], np.ndarray]]) -> Callable[[np.random.Generator], list]:
    return lambda rng: [f(rng) for f in fns]


def nonzero(shape: Sequence[int], dtype: str, lo: int, hi: int, avoid: int = 0) -> Callable:
    """Integers in [lo, hi] without `avoid` (a divisor's zero)."""
    def f(rng: np.random.Generator) -> np.ndarray:
        v = rng.integers(lo, hi + 1, size=tuple(shape))
        v = np.where(v == avoid, avoid + 1, v)
        return v.astype(dtype)
    return f


def uniform(shape: Sequence[int], lo: float, hi: float, *, away: float = 0.0) -> Callable:
    """float32 in [lo, hi], |x| >= away (a float divisor)."""
    def f(rng: np.random.Generator) -> np.ndarray:
        v = rng.uniform(lo, hi, size=tuple(shape))
        if away:
            v = np.where(np.abs(v) < away, np.copysign(away, v), v)
        return v.astype(np.float32)
    return f


def steps(shape: Sequence[int], dtype: str, lo: int, hi: int) -> Callable:
    """Small integers (as float32 too): comparisons and max/min see ties."""
    return lambda rng: rng.integers(lo, hi + 1, size=tuple(shape)).astype(dtype)


# broadcast patterns: (a, b) shapes
PATTERNS = {
    "same": ((2, 3, 4), (2, 3, 4)),
    "bcast": ((2, 1, 4), (3, 1)),
    "scalar": ((1,), (2, 3)),  # rank-0 graph inputs: see the const cases (the oracle feeds 0-d arrays as [1])
    "r5": ((2, 1, 3, 1, 2), (1, 2, 1, 2, 1)),
    "r6": ((2, 1, 3, 1, 2, 1), (1, 2, 1, 2, 1, 2)),  # TFLM's broadcast loops go to rank 6
}


def max_min_cases() -> list[Case]:
    cases = []
    for code in ("MAXIMUM", "MINIMUM"):
        for dt in ("float32", "int8", "int16", "int32", "int64"):
            for pat in ("same", "bcast", "scalar") if dt in ("float32", "int8") else ("bcast",):
                sa, sb = PATTERNS[pat]
                rng_fn = steps if dt != "float32" else (lambda s, d, lo, hi: steps(s, "float32", lo, hi))
                cases.append(Case(f"{code.lower()}-{dt}-{pat}", model(code, [sa, sb], dt),
                                  inputs=draw([rng_fn(sa, dt, -4, 4), rng_fn(sb, dt, -4, 4)])))
        cases.append(Case(f"{code.lower()}-float32-r5", model(code, PATTERNS["r5"], "float32")))
        cases.append(Case(f"{code.lower()}-int16-r6", model(code, PATTERNS["r6"], "int16")))
    const = np.array([[0.5, -1.0, 2.0]], np.float32)
    cases.append(Case("maximum-float32-const", model("MAXIMUM", [(4, 3), (1, 3)], "float32", const={1: const})))
    cases.append(Case("minimum-int32-rank0-const", model("MINIMUM", [(2, 3), ()], "int32",
                                                         const={1: np.array(1, np.int32)}),
                      inputs=draw([steps((2, 3), "int32", -3, 3)])))
    return cases


def div_cases() -> list[Case]:
    cases = []
    for act, name in ((0, "none"), (1, "relu"), (3, "relu6"), (2, "relu_n1_to_1")):
        for pat in ("same", "bcast") if act in (0, 3) else ("same",):
            sa, sb = PATTERNS[pat]
            cases.append(Case(f"div-float32-{name}-{pat}", model("DIV", [sa, sb], "float32",
                                                                 FusedActivationFunction=act),
                              inputs=draw([uniform(sa, -8, 8), uniform(sb, -3, 3, away=0.25)])))
    sa, sb = PATTERNS["r5"]
    cases.append(Case("div-float32-r5", model("DIV", [sa, sb], "float32"),
                      inputs=draw([uniform(sa, -8, 8), uniform(sb, -3, 3, away=0.25)])))
    sa, sb = PATTERNS["r6"]
    cases.append(Case("div-int8-r6", model("DIV", [sa, sb], "int8"),
                      inputs=draw([steps(sa, "int8", -128, 127), nonzero(sb, "int8", -128, 127, avoid=-5)])))
    cases.append(Case("div-float32-by-zero", model("DIV", [(2, 3), (2, 3)], "float32"),
                      inputs=lambda rng: [rng.uniform(-2, 2, (2, 3)).astype(np.float32),
                                          np.array([[0, 1, -2], [0, 0.5, 3]], np.float32)]))
    for act, name in ((0, "none"), (1, "relu"), (3, "relu6")):
        sa, sb = PATTERNS["bcast"]
        cases.append(Case(f"div-int32-{name}", model("DIV", [sa, sb], "int32", FusedActivationFunction=act),
                          inputs=draw([nonzero(sa, "int32", -1000, 1000), nonzero(sb, "int32", -9, 9)])))
    for act, name in ((0, "none"), (1, "relu")):
        for pat in ("same", "bcast"):
            sa, sb = PATTERNS[pat]
            cases.append(Case(f"div-int8-{name}-{pat}", model("DIV", [sa, sb], "int8", FusedActivationFunction=act),
                              inputs=draw([steps(sa, "int8", -128, 127), nonzero(sb, "int8", -128, 127, avoid=-5)])))
    # a = zp_a: TFLM's total shift passes -31 and its RoundingDivideByPOT turns 0 into 1
    cases.append(Case("div-int8-zero-numerator", model("DIV", [(2, 4), (2, 4)], "int8"),
                      inputs=lambda rng: [np.array([[3, 3, 3, 3], [4, 2, 3, -128]], np.int8),
                                          np.array([[-5, -4, 100, -128], [1, -6, 127, 7]], np.int8)]))
    # a large scale ratio: output multiplier with a left shift
    cases.append(Case("div-int8-wide", model("DIV", [(3, 5), (3, 5)], "int8", quant=[(0.5, 0), (0.01, 2)],
                                             out_quant=(0.7, -1)),
                      inputs=draw([steps((3, 5), "int8", -128, 127), nonzero((3, 5), "int8", -128, 127, avoid=2)])))
    return cases


def floor_cases() -> list[Case]:
    cases = []
    for code in ("FLOOR_DIV", "FLOOR_MOD"):
        for pat in ("same", "bcast", "r5"):
            sa, sb = PATTERNS[pat]
            cases.append(Case(f"{code.lower()}-float32-{pat}", model(code, [sa, sb], "float32"),
                              inputs=draw([uniform(sa, -10, 10), uniform(sb, -4, 4, away=0.3)])))
    cases.append(Case("floor_mod-float32-exact", model("FLOOR_MOD", [(2, 4), (2, 4)], "float32"),
                      inputs=lambda rng: [np.array([[6, -6, 6, -6], [7.5, -7.5, 0, -0.0]], np.float32),
                                          np.array([[3, 3, -3, -3], [2, 2, -2, 2]], np.float32)]))
    return cases


def sqdiff_cases() -> list[Case]:
    cases = []
    for dt in ("float32", "int32", "int8", "int16"):
        for pat in ("same", "bcast"):
            sa, sb = PATTERNS[pat]
            if dt == "int32":
                fns = [steps(sa, dt, -3000, 3000), steps(sb, dt, -3000, 3000)]
                cases.append(Case(f"squared_difference-{dt}-{pat}", model("SQUARED_DIFFERENCE", [sa, sb], dt),
                                  inputs=draw(fns)))
            else:
                cases.append(Case(f"squared_difference-{dt}-{pat}", model("SQUARED_DIFFERENCE", [sa, sb], dt)))
    cases.append(Case("squared_difference-int8-r5", model("SQUARED_DIFFERENCE", PATTERNS["r5"], "int8")))
    cases.append(Case("squared_difference-float32-r6", model("SQUARED_DIFFERENCE", PATTERNS["r6"], "float32")))
    cases.append(Case("squared_difference-int8-scales", model("SQUARED_DIFFERENCE", [(4, 4), (4, 4)], "int8",
                                                              quant=[(0.02, -10), (0.08, 7)], out_quant=(0.3, -128))))
    return cases


def comparison_cases() -> list[Case]:
    dtypes = {"EQUAL": ("float32", "int8", "int32", "int64", "bool"),
              "NOT_EQUAL": ("float32", "int8", "int32", "int64", "bool"),
              }
    cases = []
    for code in COMPARISONS:
        for dt in dtypes.get(code, ("float32", "int8", "int32", "int64")):
            for pat in ("same", "bcast") if dt in ("float32", "int8") else ("bcast",):
                sa, sb = PATTERNS[pat]
                quant = None
                if dt == "int8":  # one scale ratio where values coincide after rescaling: 0.05 vs 0.1
                    quant = [(0.05, 3), (0.1, -1)]
                if dt == "bool":
                    fns = None
                elif dt == "float32":
                    fns = draw([steps(sa, dt, -3, 3), steps(sb, dt, -3, 3)])
                elif dt == "int8":
                    fns = draw([steps(sa, dt, -20, 30), steps(sb, dt, -12, 12)])
                else:
                    fns = draw([steps(sa, dt, -3, 3), steps(sb, dt, -3, 3)])
                cases.append(Case(f"{code.lower()}-{dt}-{pat}", model(code, [sa, sb], dt, out_dtype="bool",
                                                                      quant=quant), inputs=fns))
    cases.append(Case("less-int8-r5", model("LESS", PATTERNS["r5"], "int8", out_dtype="bool")))
    sa, sb = PATTERNS["r6"]
    cases.append(Case("not_equal-int8-r6", model("NOT_EQUAL", [sa, sb], "int8", out_dtype="bool",
                                                 quant=[(0.05, 3), (0.1, -1)]),
                      inputs=draw([steps(sa, "int8", -20, 30), steps(sb, "int8", -12, 12)])))
    cases.append(Case("greater_equal-float32-r5", model("GREATER_EQUAL", PATTERNS["r5"], "float32", out_dtype="bool")))
    cases.append(Case("equal-int32-const", model("EQUAL", [(3, 4), (4,)], "int32", out_dtype="bool",
                                                 const={1: np.array([-1, 0, 1, 2], np.int32)}),
                      inputs=draw([steps((3, 4), "int32", -2, 2)])))
    return cases


def logical_select_cases() -> list[Case]:
    cases = []
    for code in ("LOGICAL_AND", "LOGICAL_OR"):
        for pat in ("same", "bcast", "scalar", "r5", "r6"):
            cases.append(Case(f"{code.lower()}-{pat}", model(code, PATTERNS[pat], "bool")))
    shapes3 = {"same": ((2, 3, 4),) * 3, "bcast": ((2, 1, 4), (3, 1), (1, 3, 4)), "scalar-cond": ((1,), (2, 3), (2, 3)),
               "r5": ((2, 1, 3, 1, 2), (1, 2, 1, 2, 1), (2, 2, 3, 2, 2)),
               "r6": ((2, 1, 3, 1, 2, 1), (1, 2, 1, 2, 1, 2), (1, 1, 1, 1, 1, 1))}
    for dt in ("float32", "int8", "int16"):
        for pat in ("same", "bcast", "scalar-cond", "r5", "r6") if dt == "float32" else ("same", "bcast"):
            cases.append(Case(f"select_v2-{dt}-{pat}", model("SELECT_V2", shapes3[pat], ("bool", dt, dt))))
    return cases


def add_n_cases() -> list[Case]:
    cases = []
    for n in (2, 4):
        cases.append(Case(f"add_n-float32-{n}", model("ADD_N", [(2, 3, 4)] * n, "float32")))
        q = (0.05, 3)
        cases.append(Case(f"add_n-int8-{n}", model("ADD_N", [(2, 3, 4)] * n, "int8", quant=[q] * n,
                                                   out_quant=(0.12, -7))))
    cases.append(Case("add_n-int8-r5", model("ADD_N", [(1, 2, 1, 3, 2)] * 3, "int8", quant=[(0.02, -30)] * 3,
                                              out_quant=(0.03, 10))))
    return cases


def int16_int32_arith_cases() -> list[Case]:
    cases = []
    for code in ("ADD", "SUB", "MUL"):
        for pat in ("same", "bcast"):
            sa, sb = PATTERNS[pat]
            # sub-int16-*: these scales give other multipliers from float32 ratios than from double ones;
            # TFLM's package matches double
            q16 = [(0.001, 0), (0.0015, 0)] if code == "MUL" else [(0.001, 5), (0.0015, -7)]
            o16 = (0.002, 0) if code == "MUL" else (0.002, 3)
            cases.append(Case(f"{code.lower()}-int16-{pat}", model(code, [sa, sb], "int16", quant=q16, out_quant=o16)))
            cases.append(Case(f"{code.lower()}-int32-{pat}", model(code, [sa, sb], "int32")))
        cases.append(Case(f"{code.lower()}-int16-relu6", model(code, [(3, 4), (3, 4)], "int16", quant=[(0.0005, 0)] * 2,
                                                               out_quant=(0.00025, 0), FusedActivationFunction=3)))
        cases.append(Case(f"{code.lower()}-int32-relu", model(code, [(3, 4), (4,)], "int32", FusedActivationFunction=1),
                          inputs=draw([steps((3, 4), "int32", -40000, 40000), steps((4,), "int32", -40000, 40000)])))
        cases.append(Case(f"{code.lower()}-int16-r5", model(code, PATTERNS["r5"], "int16",
                                                            quant=[(0.001, 0)] * 2, out_quant=(0.003, 0))))
        cases.append(Case(f"{code.lower()}-int32-r6", model(code, PATTERNS["r6"], "int32")))
    return cases


def all_cases() -> list[Case]:
    return (max_min_cases() + div_cases() + floor_cases() + sqdiff_cases() + comparison_cases()
            + logical_select_cases() + add_n_cases() + int16_int32_arith_cases())


def test_binary_family_matches_tflm() -> None:
    # three merged builds: one graph of every case overflows C99's 4095-character string limit in the
    # generated system library
    check_cases(max_min_cases() + div_cases() + floor_cases() + add_n_cases(), platform="host")
    check_cases(sqdiff_cases() + comparison_cases())
    check_cases(logical_select_cases() + int16_int32_arith_cases())


@pytest.mark.slow
def test_binary_family_on_cortex_m4() -> None:
    wanted = {"maximum-int8-bcast", "div-float32-relu6-bcast", "div-int8-none-bcast", "div-int32-relu",
              "floor_mod-float32-bcast", "squared_difference-int8-bcast", "squared_difference-int16-same",
              "greater-int8-bcast", "less-int8-r5", "equal-bool-bcast", "logical_or-r5", "select_v2-int8-bcast",
              "add_n-int8-4", "add-int16-bcast", "sub-int32-relu", "mul-int16-relu6"}
    sample = [c for c in all_cases() if c.id in wanted]
    assert len(sample) == len(wanted)
    check_cases(sample, platform="qemu-cortex-m4", builds=())


def test_floor_div_by_zero_fails_like_tflm() -> None:
    from tflm_harness import prepare as run_tflm
    from utvm.compiler import compile
    from utvm.compiler.local import LocalModel

    m = model("FLOOR_DIV", [(2, 3), (3,)], "float32", const={1: np.array([1.0, 0.0, 2.0], np.float32)})
    with pytest.raises(AssertionError, match="TFLM failed"):
        run_tflm([Case("floor_div-zero", m)])
    g = from_tflite(m)
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ZeroDivisionError):
        run_reference(g, {g.inputs[0]: x}, rounding="double")
    with pytest.raises(CRTError, match="returned 0x1"):  # the kernel's error code
        LocalModel(compile(g), opt="-O0").run([x])
    # a divisor without zeros runs
    ok = model("FLOOR_DIV", [(2, 3), (3,)], "float32", const={1: np.array([1.0, -0.5, 2.0], np.float32)})
    LocalModel(compile(from_tflite(ok)), opt="-O0").run([x])


@pytest.mark.parametrize("code,dtype", [("DIV", "int16"), ("FLOOR_DIV", "int32"), ("FLOOR_MOD", "int8"),
                                        ("SQUARED_DIFFERENCE", "int64"), ("MAXIMUM", "bool"), ("LESS", "int16"),
                                        ("GREATER", "int16"),
                                        ("EQUAL", "int16"), ("LOGICAL_AND", "int8"), ("ADD_N", "int32"),
                                        ("MUL", "int64"), ("ADD", "int64")])
def test_dtypes_tflm_refuses_are_refused(code: str, dtype: str) -> None:
    shapes = [(2, 3)] * 2
    out = "bool" if code in COMPARISONS else None
    with pytest.raises((GraphError, UnsupportedModelError), match=dtype):
        from_tflite(model(code, shapes, dtype, out_dtype=out))


def test_select_needs_bool_condition() -> None:
    with pytest.raises((GraphError, UnsupportedModelError), match="must be bool"):
        from_tflite(model("SELECT_V2", [(2, 3)] * 3, ("int8", "float32", "float32")))


def test_quantization_constraints() -> None:
    # comparisons: TFLM's QuantizeMultiplierSmallerThanOneExp needs each input scale below 1
    with pytest.raises((GraphError, UnsupportedModelError), match=r"\(0, 1\)"):
        from_tflite(model("LESS", [(2, 3)] * 2, "int8", out_dtype="bool", quant=[(1.5, 0), (0.1, 0)]))
    # ADD_N int8: every input shares scale and zero point
    with pytest.raises((GraphError, UnsupportedModelError), match="share quantization"):
        from_tflite(model("ADD_N", [(2, 3)] * 2, "int8", quant=[(0.05, 3), (0.05, 4)], out_quant=(0.1, 0)))
    # int16 squared_difference and mul: zero points 0
    with pytest.raises((GraphError, UnsupportedModelError), match="zero point"):
        from_tflite(model("SQUARED_DIFFERENCE", [(2, 3)] * 2, "int16", quant=[(0.001, 1), (0.001, 0)]))
    with pytest.raises(GraphError, match="zero point"):  # elementwise ops check quantization at compile
        prepare_graph(from_tflite(model("MUL", [(2, 3)] * 2, "int16", quant=[(0.001, 0), (0.001, 0)],
                                        out_quant=(0.01, 2))), "double")
    with pytest.raises(UnsupportedModelError, match="unquantized"):
        from_tflite(model("SUB", [(2, 3)] * 2, "int32", quant=[(0.5, 0), (0.5, 0)], out_quant=(0.5, 0)))
    # ADD_N: one shape for every input (no broadcasting)
    with pytest.raises((GraphError, UnsupportedModelError), match="one shape"):
        from_tflite(model("ADD_N", [(2, 3), (1, 3)], "float32", out_shape=(2, 3)))
