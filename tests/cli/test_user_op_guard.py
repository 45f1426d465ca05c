"""The memory guard around user operators (docs/custom_ops.md, "The memory guard"): a user C operator that
writes just past or just before one of its outputs, or into one of its inputs, never gives a run that reports
OK. The run fails with one line on stderr naming the cause and the device status (7), in the packed
convention (the message names the operator and what it wrote) and in the unpacked / C one (the CRT names
UTVM_CUSTOM_OP_ERROR_GUARD); a well-behaved operator still runs bit-exactly, its workspace outputs placed in
their guarded slot (no copy)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from utvm import custom_ops
from utvm.cli import EXIT_DEVICE, main
from utvm.compiler import compile
from utvm.compiler.kernels import custom as custom_kernel
from utvm.frontend import load
from utvm.support.cc import crt_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402

HEADER = crt_dir() / "include" / "tvm" / "runtime" / "crt" / "utvm_custom_op.h"
ERROR_CODES = crt_dir() / "include" / "tvm" / "runtime" / "crt" / "error_codes.h"
CONVENTIONS = {"packed": [], "c": ["--unpacked-api", "--interface-api", "c"]}
G = custom_kernel.GUARD_BYTES
X = np.arange(-128, 128, 8, dtype=np.int8).reshape(1, 32)

#: a user operator copying input k (or input 0) to output k, then doing `{extra}`
C_TEMPLATE = """\
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/utvm_custom_op.h>

int32_t {symbol}(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
                 int32_t num_outputs, const uint8_t* options, int32_t options_size);

int32_t {symbol}(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
                 int32_t num_outputs, const uint8_t* options, int32_t options_size) {{
  int32_t k;
  int32_t i;
  (void)options;
  (void)options_size;
  for (k = 0; k < num_outputs; ++k) {{
    const int8_t* in = (const int8_t*)inputs[(k < num_inputs) ? k : 0].data;
    int8_t* out = (int8_t*)outputs[k].data;
    for (i = 0; i < 32; ++i) {{
      out[i] = in[i];
    }}
  }}
  {extra}
  return 0;
}}
"""
#: what a hostile operator does after computing its outputs
HOSTILE = {
    "good": "",
    "after": "((int8_t*)outputs[0].data)[32 + 5] = 0x55;",  # a short overrun: inside the band after
    "before": "((int8_t*)outputs[0].data)[-1] = 0x55; ((int8_t*)outputs[0].data)[-2] = 0x55;",
    "input": "((int8_t*)(uintptr_t)inputs[0].data)[3] ^= 1;",
    "after_1": "((int8_t*)outputs[1].data)[32] = 0x55;",
    "input_1": "((int8_t*)(uintptr_t)inputs[1].data)[31] ^= 0x40;",
    # the hostile test's oob.c
    "oob": "for (i = 32; i < 4096; ++i) { ((int8_t*)outputs[0].data)[i] = 0x55; }",
}
TWIN = """\
def copy(inputs, outputs, options):
    for k, o in enumerate(outputs):
        o.data[...] = inputs[k if k < len(inputs) else 0].data
"""


@pytest.fixture(autouse=True)
def _no_bindings_left() -> Iterator[None]:
    with custom_ops.bindings():
        yield


def _c_file(tmp_path: Path, what: str, symbol: str = "op") -> Path:
    path = tmp_path / f"{symbol}_{what}.c"
    path.write_text(C_TEMPLATE.format(symbol=symbol, extra=HOSTILE[what]))
    return path


def _twin(tmp_path: Path) -> Path:
    path = tmp_path / "twin.py"
    path.write_text(TWIN)
    return path


def _int8(b: TFLiteBuilder, name: str) -> int:
    return b.tensor(name, [1, 32], "int8", scale=0.5, zero_point=3)


def _chain_model(tmp_path: Path, name: str, second: str) -> Path:
    """x -> Guarded -> y -> `second` -> z, with `second` a builtin (RELU) or the user operator Copy."""
    b = TFLiteBuilder()
    x, y, z = _int8(b, "x"), _int8(b, "y"), _int8(b, "z")
    b.custom_op("Guarded", [x], [y])
    if second == "Copy":
        b.custom_op("Copy", [y], [z])
    else:
        b.op(second, [y], [z])
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(b.build([x], [z]))
    return path


def _into_output_model(tmp_path: Path) -> Path:
    """x -> Guarded -> y -> RELU -> z: RELU runs in place, so y lives in the model's output z (the repro of
    the hostile test: the user operator writes through its slot, which is copied out)."""
    return _chain_model(tmp_path, "into_output", "RELU")


def _workspace_model(tmp_path: Path) -> Path:
    """x -> Guarded -> y -> Copy -> z: y lives in the workspace, in Guarded's guarded slot."""
    return _chain_model(tmp_path, "workspace", "Copy")


def _two_model(tmp_path: Path) -> Path:
    """(x0, x1) -> Guarded -> (y0, y1) -> Copy each -> (z0, z1): two inputs, two workspace outputs."""
    b = TFLiteBuilder()
    x0, x1, y0, y1, z0, z1 = (_int8(b, n) for n in ("x0", "x1", "y0", "y1", "z0", "z1"))
    b.custom_op("Guarded", [x0, x1], [y0, y1])
    b.custom_op("Copy", [y0], [z0])
    b.custom_op("Copy", [y1], [z1])
    path = tmp_path / "two.tflite"
    path.write_bytes(b.build([x0, x1], [z0, z1]))
    return path


MODELS = {"into_output": _into_output_model, "workspace": _workspace_model, "two": _two_model}


def _run(tmp_path: Path, model: str, what: str, *extra: str, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    path = MODELS[model](tmp_path)
    twin = _twin(tmp_path)
    argv = ["run", str(path), "-q", "--check", "--seed", "1", "--repeat", "1",
            "--custom-op", f"Guarded={_c_file(tmp_path, what)}:op", "--custom-op-py", f"Guarded={twin}:copy"]
    if model != "into_output":
        argv += ["--custom-op", f"Copy={_c_file(tmp_path, 'good', 'copy')}:copy", "--custom-op-py", f"Copy={twin}:copy"]
    status = main([*argv, *extra])
    cap = capsys.readouterr()
    return status, cap.out, cap.err.strip()


def _guard_code() -> int:
    (value,) = re.findall(r"#define UTVM_CUSTOM_OP_ERROR_GUARD (0x[0-9A-Fa-f]+|\d+)\b", HEADER.read_text())
    return int(value, 0)


def _expect(status: int, err: str, convention: str, packed_message: str) -> None:
    assert status == EXIT_DEVICE, err
    assert len(err.splitlines()) == 1, err
    if convention == "packed":
        assert packed_message in err, err
    else:  # the unpacked generated code sets no message: the CRT names the cause from the status
        assert "a user operator wrote outside an output or into an input" in err, err
        assert f"code {_guard_code()}, UTVM_CUSTOM_OP_ERROR_GUARD" in err, err
    assert "OK" not in err and "bit-exact" not in err


# --- violations ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["into_output", "workspace"])
@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize(("what", "message"), [
    ("after", f"'Guarded' wrote outside its output 0 (the {G} bytes after it)"),
    ("before", f"'Guarded' wrote outside its output 0 (the {G} bytes before it)"),
    ("input", "'Guarded' wrote into its input 0"),
])
def test_a_violation_fails_the_run_in_one_line(model: str, convention: str, what: str, message: str,
                                               tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, out, err = _run(tmp_path, model, what, *CONVENTIONS[convention], capsys=capsys)
    _expect(status, err, convention, message)
    assert "bit-exact" not in out


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize(("what", "message"), [
    ("after_1", f"'Guarded' wrote outside its output 1 (the {G} bytes after it)"),
    ("input_1", "'Guarded' wrote into its input 1"),
])
def test_the_message_names_which_output_or_input(convention: str, what: str, message: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    status, _out, err = _run(tmp_path, "two", what, *CONVENTIONS[convention], capsys=capsys)
    _expect(status, err, convention, message)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_the_hostile_4k_overrun_never_reports_ok(convention: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    """`for (i = 32; i < 4096; ++i) out[i] = 0x55;` (the hostile test's oob.c): past the band it may also
    crash the device, which is a device error too; never "OK"."""
    status, out, err = _run(tmp_path, "into_output", "oob", *CONVENTIONS[convention], capsys=capsys)
    assert status == EXIT_DEVICE and len(err.splitlines()) == 1, err
    assert "bit-exact" not in out


# --- a well-behaved operator -----------------------------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("convention", [*CONVENTIONS, "unpacked"])
def test_a_well_behaved_operator_runs_bit_exactly(model: str, convention: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    extra = CONVENTIONS.get(convention, ["--unpacked-api"])
    status, out, err = _run(tmp_path, model, "good", *extra, "--json", capsys=capsys)
    assert status == 0, err
    res = json.loads(out)
    assert res["bit_exact"] is True and res["max_abs_err"] == 0.0


@pytest.mark.parametrize("flag", ["--debug-layers", "--profile"])
def test_single_operator_runs_write_through_the_slot(flag: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    """--debug-layers and --profile call the operator with arrays of their own (not the plan's): the guard
    bands are the operator's scratch, never memory around those arrays."""
    status, _out, err = _run(tmp_path, "workspace", "good", flag, capsys=capsys)
    assert status == 0, err
    status, _out, err = _run(tmp_path, "workspace", "after", "--debug-layers", capsys=capsys)
    assert status == EXIT_DEVICE and len(err.splitlines()) == 1, err
    assert f"'Guarded' wrote outside its output 0 (the {G} bytes after it)" in err


# --- the plan and the C ----------------------------------------------------------------------------------------

def _compiled(tmp_path: Path, model: str, **kwargs: object):  # noqa: ANN202
    with custom_ops.bindings(c={"Guarded": (_c_file(tmp_path, "good"), "op"),
                                "Copy": (_c_file(tmp_path, "good", "copy"), "copy")}):
        return compile(load(MODELS[model](tmp_path)), model_name="g", **kwargs)


def test_a_workspace_output_lives_in_its_guarded_slot(tmp_path: Path) -> None:
    cm = _compiled(tmp_path, "two")
    plan = cm.plan
    guarded = next(op.name for op in cm.operators if "y0" in [t.name for t in op.outputs])
    slots, size = custom_kernel.output_slots([32, 32])
    assert slots == (G, 32 + 3 * G) and size == 2 * (32 + 2 * G)
    base = plan.scratch[guarded]
    assert plan.locations["y0"] == ("workspace", base + slots[0])
    assert plan.locations["y1"] == ("workspace", base + slots[1])
    (buf,) = [b for b in plan.buffers if b.tensors[0] == f"scratch:{guarded}"]
    assert buf.size == size and set(buf.tensors[1:]) == {"y0", "y1"}
    # the area lives until its outputs' last use, and nothing else overlaps it meanwhile
    for other in plan.buffers:
        if other is not buf and other.start <= buf.end and buf.start <= other.end:
            assert other.offset >= buf.offset + buf.size or buf.offset >= other.offset + other.size
    # every output in the slot: the model's run copies nothing (the copy is only for other memory)
    ops_c = cm.sources["tvmgen_g_ops.c"]
    assert f"if ((const void*)out0 != (const void*)(scratch + {slots[0]}))" in ops_c


def test_the_repro_model_costs_its_output_and_two_bands(tmp_path: Path) -> None:
    """The hostile test's model: y is merged into the model output z (RELU in place), so the operator writes
    a slot of its scratch (32 + 2 * 16 bytes, live for its step only) and it is copied into z."""
    plan = _compiled(tmp_path, "into_output").plan
    assert plan.locations["y"] == ("output", 0)
    assert plan.workspace_bytes == 32 + 2 * G
    assert plan.inplace == 1


@pytest.mark.parametrize("convention", ["packed", "unpacked"])
def test_the_guard_is_in_every_convention(convention: str, tmp_path: Path) -> None:
    cm = _compiled(tmp_path, "two", unpacked_api=convention == "unpacked")
    ops_c = cm.sources["tvmgen_g_ops.c"]
    assert "tvm_guard_fill(scratch)" in ops_c and "tvm_guard_intact(scratch)" in ops_c and "tvm_guard_sum(in1" in ops_c
    assert ("TVMAPISetLastErrorf(\"'%s' wrote outside its output" in ops_c) == (convention == "packed")
    assert "return (int32_t)UTVM_CUSTOM_OP_ERROR_GUARD;" in ops_c


def test_a_constant_input_is_not_checksummed(tmp_path: Path) -> None:
    b = TFLiteBuilder()
    x, y, z = _int8(b, "x"), _int8(b, "y"), _int8(b, "z")
    w = b.tensor("w", [1, 32], "int8", data=np.ones((1, 32), np.int8), scale=0.5, zero_point=3)
    b.custom_op("Guarded", [x, w], [y])
    b.op("RELU", [y], [z])
    path = tmp_path / "const.tflite"
    path.write_bytes(b.build([x], [z]))
    with custom_ops.bindings(c={"Guarded": (_c_file(tmp_path, "good"), "op")}):
        ops_c = compile(load(path), model_name="g").sources["tvmgen_g_ops.c"]
    assert len(re.findall(r"sum\[\d+\] = tvm_guard_sum\(", ops_c)) == 1 and "uint32_t sum[1];" in ops_c


def test_the_guard_status_is_one_constant_apart_from_the_crt_errors() -> None:
    """UTVM_CUSTOM_OP_ERROR_GUARD is defined once, in utvm_custom_op.h, and is no tvm_crt_error_t."""
    value = _guard_code()
    crt_codes = {int(v, 0) for v in re.findall(r"kTvmError\w+ = (0x[0-9A-Fa-f]+)", ERROR_CODES.read_text())}
    assert crt_codes and value not in crt_codes and value != 0
    assert value >> 8 == 0x06  # the generated code's category
    defined = [p for p in crt_dir().rglob("*.[ch]") if "define UTVM_CUSTOM_OP_ERROR_GUARD" in p.read_text()]
    assert defined == [HEADER]


# --- QEMU ---------------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_an_overrun_is_found_on_qemu(convention: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, _out, err = _run(tmp_path, "workspace", "after", "--platform", "qemu-cortex-m4",
                             *CONVENTIONS[convention], capsys=capsys)
    _expect(status, err, convention, f"'Guarded' wrote outside its output 0 (the {G} bytes after it)")
    status, out, err = _run(tmp_path, "into_output", "good", "--platform", "qemu-cortex-m4", "--json",
                            *CONVENTIONS[convention], capsys=capsys)
    assert status == 0 and json.loads(out)["bit_exact"] is True, err
