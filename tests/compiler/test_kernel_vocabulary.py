"""The kernel layer's foundations: one C emission module (cemit), instruction vocabularies per ISA level
(isa), requantization forms behind one legality function (requant), and the rule that no kernel file reads a
target flag."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from utvm.compiler.kernels import FileScope, KernelContext, cemit, helper_source, isa, requant
from utvm.compiler.schedule import REQUANT_FORMS
from utvm.errors import CompileError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.target import TARGETS, get_target

KERNELS = Path(__file__).resolve().parents[2] / "src" / "utvm" / "compiler" / "kernels"


# --- cemit ------------------------------------------------------------------------------------------------

def test_indent_keeps_empty_lines_empty() -> None:
    assert cemit.indent("a;\n\n  b;", 2) == "    a;\n\n      b;"


def test_block_and_loop_shapes() -> None:
    assert cemit.block("if (x)", ["a;", "", "b;"]) == "if (x) {\n  a;\n  b;\n}"
    assert cemit.block("", "") == "{\n}"
    assert cemit.for_loop("i", 0, 4, "s += i;") == "for (int32_t i = 0; i < 4; ++i) {\n  s += i;\n}"
    assert cemit.for_loop("i", 0, "n", "x;", step=2).startswith("for (int32_t i = 0; i < n; i += 2) {")
    assert cemit.lines("a;", None, ["", "b;"], "") == "a;\nb;"


def test_fill_refuses_open_holes_and_unused_values() -> None:
    assert cemit.fill("x = @A@ + @B@; y = @A@;", A=1, B="z") == "x = 1 + z; y = 1;"
    with pytest.raises(KeyError, match="B"):
        cemit.fill("@A@ @B@", A=1)
    with pytest.raises(ValueError, match="C"):
        cemit.fill("@A@", A=1, C=2)


def test_literals_round_trip_and_name_specials() -> None:
    assert cemit.c_literal(1.0, "float32") == "1.0f"
    assert cemit.c_literal(float("inf"), "float32") == "INFINITY"
    assert cemit.c_literal(-(2**31), "int32") == "(-2147483647 - 1)"
    assert cemit.has_float_specials(np.array([1.0, np.nan], np.float32), "float32")
    assert not cemit.has_float_specials(np.array([1.0], np.float32), "float32")
    # a float64 beyond float32's range is written INFINITY, so it is a special too
    assert cemit.c_literal(1e39, "float32") == "INFINITY" and cemit.has_float_specials([1e39], "float32")
    assert cemit.table_decl("int8_t", "t", "0", 0) == "static const int8_t t[1] = {\n  0\n};"
    assert cemit.hex_words_body([1, 2], per_line=1) == "0x00000001u,\n  0x00000002u"


# --- vocabularies ---------------------------------------------------------------------------------------------

def _ctx(target: str) -> KernelContext:
    g = Graph({"x": Tensor("x", (1,), "int8"), "y": Tensor("y", (1,), "int8")},
              (Node("relu", ("x",), ("y",)),), ("x",), ("y",))
    return KernelContext(g.nodes[0], 0, g, "single", "f", FileScope("p"), {0: "in0"}, ["out0"], target)


@pytest.mark.parametrize("target, cls", [("host", isa.PortableC), ("cortex-m0", isa.PortableC),
                                         ("cortex-m3", isa.Thumb2), ("cortex-m33-nodsp", isa.Thumb2),
                                         ("cortex-m4", isa.ArmV7EMDsp), ("cortex-m7", isa.ArmV7EMDsp),
                                         ("cortex-m33", isa.ArmV7EMDsp), ("cortex-m55", isa.ArmV81MMve)])
def test_each_target_speaks_its_isa_level(target: str, cls: type) -> None:
    assert type(_ctx(target).isa) is cls
    assert isa.vocabulary_class(get_target(target)) is cls


def test_every_known_target_has_a_vocabulary() -> None:
    for t in TARGETS.values():
        assert issubclass(isa.vocabulary_class(t), isa.PortableC)


def test_an_absent_operation_is_an_error_naming_the_target() -> None:
    v = _ctx("cortex-m3").isa
    assert v.thumb2 and not v.simd16
    with pytest.raises(CompileError, match="SMLAD was asked of cortex-m3"):
        v.smlad("a", "b", "c")
    with pytest.raises(CompileError, match="SSAT was asked of host"):
        _ctx("host").isa.ssat("x", 8)


def test_operations_request_what_their_spelling_needs() -> None:
    ctx = _ctx("cortex-m4")
    v = ctx.isa
    v.use_simd()
    assert v.smlad("a", "b", "acc") == "__smlad(a, b, acc)"
    assert v.sxtab16_odd("a", "x") == "tvm_sxtab16_ror8(a, x)"
    assert v.pkhtb16("a", "b") == "tvm_pkhtb16(a, b)"
    assert ctx.file.helpers == ["acle", "dsp_ror8"]
    assert any("tvm_pkhbt16" in d for d in ctx.file.decls)
    m3 = _ctx("cortex-m3")
    m3.isa.use_sat()
    assert m3.file.helpers == ["acle_sat"] and m3.isa.ssat("v", 8) == "__ssat(v, 8)"


def test_mve_operations_request_arm_mve_h_and_hide_predicate_constants() -> None:
    ctx = _ctx("cortex-m55")
    v = ctx.isa
    assert v.mve and v.simd16  # the M55 keeps the DSP operations
    assert v.lanes4("a", "b", "c", "d") == "tvm_mve_lanes4(a, b, c, d)"
    assert ctx.file.helpers == ["mve"] and any("vsetq_lane_s32" in d for d in ctx.file.decls)
    # GCC 12 folds constant predicates of wide lanes to all-true: every predicate is opaque
    assert v.pred8(5) == "tvm_mve_pred(0x001fu)" and v.pred32((0, 2)) == "tvm_mve_pred(0x0f0fu)"
    assert v.copy_bytes("d", "s", 37).splitlines() == [
        "vstrbq_s8(d + 0, vldrbq_s8(s + 0));", "vstrbq_s8(d + 16, vldrbq_s8(s + 16));",
        "vstrbq_p_s8(d + 32, vldrbq_z_s8(s + 32, tvm_mve_pred(0x001fu)), tvm_mve_pred(0x001fu));"]
    assert v.copy_bytes("d", "s", 4) == "memcpy(d + 0, s + 0, 4);" and "string" in ctx.file.helpers
    assert v.fill_bytes("d", "z", 16) == "vstrbq_s8(d + 0, z);"
    with pytest.raises(ValueError, match="lane 4"):
        v.pred32((4,))
    prelude = helper_source("mve")  # the feature check comes before <arm_mve.h>, with utvm's message
    assert prelude.index("#error") < prelude.index("#include <arm_mve.h>") and "-mfloat-abi=hard" in prelude


def test_mve_is_absent_below_armv8_1_m() -> None:
    for target in ("cortex-m4", "cortex-m33", "host"):
        v = _ctx(target).isa
        assert not v.mve
        with pytest.raises(CompileError, match=f"Helium \\(MVE\\) was asked of {target}"):
            v.use_mve()
        with pytest.raises(CompileError, match="MVE predicates"):
            v.pred8(3)


def test_no_kernel_file_reads_a_target_flag() -> None:
    """The vocabulary module is the only place a kernel learns its target's instruction set."""
    flag = re.compile(r"\.dsp\b|target\.dsp|if dsp|target\.mve|target\.isa\b|THUMB2_ISAS")
    found = [f"{p.name}:{i}: {ln.strip()}" for p in sorted(KERNELS.glob("*.py")) if p.name != "isa.py"
             for i, ln in enumerate(p.read_text().splitlines(), 1) if flag.search(ln)]
    assert not found, "\n".join(found)


def test_one_indentation_helper() -> None:
    copies = [p.name for p in sorted(KERNELS.parent.rglob("*.py"))
              if re.search(r"^def _indent\(", p.read_text(), re.M)]
    assert not copies, copies


# --- requantization forms ---------------------------------------------------------------------------------

M4, M3, HOST = get_target("cortex-m4"), get_target("cortex-m3"), get_target("host")


def test_every_form_has_one_legality() -> None:
    for form in REQUANT_FORMS:
        assert requant.form_reason(form, "double", [1 << 30], [-3], M4, bound=1000) is None
    assert "unknown requantization form" in (requant.form_reason("x", "double", [1], [-1], M4) or "")


@pytest.mark.parametrize("form, rounding, mult, shift, target, bound, why", [
    ("fast", "single", [1 << 30], [-1], HOST, None, "shift above -2"),
    ("fast", "double", [1 << 30], [-3], HOST, None, "lacks Thumb-2"),
    ("fast", "double", [1 << 30], [0], M3, None, "right shift of at least 1"),
    ("fast", "double", [-5], [-3], M3, None, "negative multiplier"),
    ("dbl", "double", [1 << 30], [-3], M3, 10, "no SMMULR"),
    ("dbl", "single", [1 << 30], [-3], M4, 10, "double rounding only"),
    ("dbl", "double", [1 << 30], [-3], M4, None, "no accumulator bound"),
    ("dbl", "double", [1 << 30], [-3], M4, 1 << 30, "does not fit int32"),
])
def test_each_refusal_says_why(form: str, rounding: str, mult: list[int], shift: list[int], target: object,
                               bound: int | None, why: str) -> None:
    reason = requant.form_reason(form, rounding, mult, shift, target, bound=bound)  # type: ignore[arg-type]
    assert why in (reason or "")
