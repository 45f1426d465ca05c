"""quant_app.c: float features -> quantized with the header's _SCALE/_ZERO_POINT/dtype macros -> TVMExecute
-> dequantized with the output's macros, on the host (gcc) and on qemu-cortex-m4. The test quantizes the
same features in numpy (TFLite's rule: round half away from zero, then clamp), runs TFLite's reference
interpreter (utvm.compiler.oracle) on them and requires the app's quantized outputs bit-exact, and its
dequantized floats equal to numpy's float32 arithmetic bit for bit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from tests.capi.apps import run_host_app

from utvm.compiler import compile
from utvm.compiler.oracle import reference_outputs
from utvm.frontend import load
from utvm.support.models import models_dir

HERE = Path(__file__).resolve().parent
MODELS = models_dir()
KWS = MODELS / "mlperf_tiny" / "kws_ref_model.tflite"


@pytest.fixture(scope="module")
def compiled():
    c = compile(load(KWS), model_name="qapp", unpacked_api=True, interface_api="c")
    assert [c.graph.tensor(n).dtype for n in (*c.graph.inputs, *c.graph.outputs)] == ["int8", "int8"]
    return c


def _features(n: int) -> np.ndarray:
    i = np.arange(n, dtype=np.int64)
    return ((i * 37) % 101 - 50).astype(np.float32) * np.float32(0.75)


def _quantize(x: np.ndarray, scale: float, zero_point: int, dtype: np.dtype) -> np.ndarray:
    """TFLite's AffineQuantize in float32: round(x / scale) (halves away from zero) + zero_point, clamped."""
    t = x.astype(np.float32) / np.float32(scale)
    r = np.trunc(t)
    frac = t - r
    r = r + (frac >= 0.5) - (frac <= -0.5)
    info = np.iinfo(dtype)
    return np.clip(r.astype(np.int64) + zero_point, info.min, info.max).astype(dtype)


def _expected(c) -> tuple[np.ndarray, np.ndarray, list[str]]:
    g = c.graph
    tin, tout = g.tensor(g.inputs[0]), g.tensor(g.outputs[0])
    q_in = _quantize(_features(tin.size), tin.quant.scale[0], tin.quant.zero_point[0], np.dtype(tin.dtype))
    (q_out,) = reference_outputs(KWS, [[q_in.reshape(tin.shape)]])[0]
    q_out = q_out.reshape(-1)
    y = np.float32(tout.quant.scale[0]) * (q_out.astype(np.int32) - tout.quant.zero_point[0]).astype(np.float32)
    lines = [f"out {int(q)} {int(b):08x}" for q, b in zip(q_out, y.astype(np.float32).view(np.uint32), strict=True)]
    return q_in, q_out, lines


def _check(text: str, c) -> None:
    q_in, q_out, out_lines = _expected(c)
    lines = text.strip().splitlines()
    assert lines[0].split()[0] == "in", text[:200]
    got_in = np.array([int(v) for v in lines[0].split()[1:]])
    np.testing.assert_array_equal(got_in, q_in.astype(np.int64), err_msg="quantized inputs")
    assert (q_in == np.iinfo(np.int8).max).any() and (q_in > -128).all()  # features reach the clamp
    assert lines[1:-1] == out_lines
    assert lines[-1] == "status 0"
    assert len(set(q_out.tolist())) > 1  # not a constant output


def test_quant_app_on_the_host(compiled, tmp_path: Path) -> None:
    srcs, inc = compiled.write_sources(tmp_path / "model", rpc=False)
    _check(run_host_app(HERE / "quant_app.c", srcs, inc, tmp_path), compiled)


@pytest.mark.slow
def test_quant_app_on_qemu_cortex_m4(compiled) -> None:
    from utvm.platform.qemu.boards import get_board
    from utvm.platform.qemu.project import FirmwareSpec, build_firmware
    from utvm.platform.qemu.runner import qemu_command

    board = get_board("qemu-cortex-m4")
    files = {f"src/{n}": t for n, t in compiled.sources.items()}
    files.update({f"include/{n}": t for n, t in compiled.includes.items()})
    spec = FirmwareSpec(board, {"main.c": (HERE / "quant_app.c").read_text()}, codegen_files=files,
                        defines=("QUANT_APP_BOARD",))
    elf = build_firmware(spec, "quant_app") / "build" / "firmware.elf"
    proc = subprocess.run(qemu_command(board, elf), stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    text = proc.stdout.decode("utf-8", errors="replace")
    assert proc.returncode == 0, text[-500:] + proc.stderr.decode(errors="replace")[-500:]
    _check(text, compiled)
