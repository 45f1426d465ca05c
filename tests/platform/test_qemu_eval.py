"""Evaluation on the QEMU boards through `utvm run`: MLPerf Tiny KWS and ResNet-8 int8 bit-exact on
qemu-cortex-m3/-m4, and the repository's four shared int8 models (KWS, anomaly detection, ResNet-8, micro
speech) on qemu-cortex-m0 (Armv6-M code), qemu-cortex-m7, qemu-cortex-m33 (the AN505) and qemu-cortex-m55
(the AN547, the MVE target); deterministic cycles, per-operator profile (table, JSON, PNG)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from utvm.cli import main
from utvm.support.models import models_dir

MODELS = models_dir()
KWS = MODELS / "mlperf_tiny" / "kws_ref_model.tflite"
RESNET = MODELS / "mlperf_tiny" / "pretrainedResnet_quant.tflite"
AD01 = MODELS / "mlperf_tiny" / "ad01_int8.tflite"
MICRO_SPEECH = MODELS / "tflm" / "micro_speech_quantized.tflite"
#: The shared int8 models of models/MANIFEST.md, all run on the boards that prove the target seam.
SHARED_MODELS = {"kws": KWS, "ad01": AD01, "resnet8": RESNET, "micro_speech": MICRO_SPEECH}
#: fewer instructions than this per inference means the model did not run (AD01 and micro speech are small)
MIN_INSTRUCTIONS = {"kws": 1_000_000, "resnet8": 1_000_000, "ad01": 250_000, "micro_speech": 250_000}
#: on Helium one VMLADAV does 16 int8 MACs: the floor there is the model's MACs (`utvm info`) / 16
MIN_INSTRUCTIONS_MVE = {"kws": 2_656_768 // 16, "resnet8": 12_501_632 // 16, "ad01": 264_192 // 16,
                        "micro_speech": 336_000 // 16}
MVE_BOARDS = ("qemu-cortex-m55",)
#: (model, board): one firmware and one run each.
BIT_EXACT_RUNS = [
    *((m, b) for b in ("qemu-cortex-m3", "qemu-cortex-m4") for m in ("kws", "resnet8")),
    *((m, b) for b in ("qemu-cortex-m0", "qemu-cortex-m7", "qemu-cortex-m33", "qemu-cortex-m55")
      for m in SHARED_MODELS),
]
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"
FC_FUNCTIONS = ("tvmgen_default_fused_dense_relu", "tvmgen_default_fused_dense_relu_1", "tvmgen_default_fused_dense")


def run_json(capsys: pytest.CaptureFixture, *argv: str) -> dict:
    assert main(["run", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.parametrize("model, board", BIT_EXACT_RUNS, ids=[f"{m}-{b}" for m, b in BIT_EXACT_RUNS])
def test_mlperf_tiny_bit_exact(model: str, board: str, capsys: pytest.CaptureFixture) -> None:
    res = run_json(capsys, str(SHARED_MODELS[model]), "--platform", board, "--check", "--seed", "11",
                   "--repeat", "1")
    assert res["bit_exact"] is True and res["max_abs_err"] == 0.0
    # cycles = instructions per run under -icount shift=0 (1 ns per instruction)
    assert res["cycles"] == round(res["latency_s"] * 1e9)
    assert res["cycles"] > (MIN_INSTRUCTIONS_MVE if board in MVE_BOARDS else MIN_INSTRUCTIONS)[model]


@pytest.mark.slow
def test_two_runs_report_identical_cycles(capsys: pytest.CaptureFixture) -> None:
    argv = [str(KWS), "--platform", "qemu-cortex-m4", "--repeat", "2"]
    # Two boots of QEMU: the host's timing differs (when bytes arrive), the device's instruction count not.
    first = run_json(capsys, *argv, "--seed", "1")
    second = run_json(capsys, *argv, "--seed", "1")
    assert first["cycles"] == second["cycles"]
    assert first["latency_s"] == second["latency_s"]
    assert first["outputs"] == second["outputs"]


@pytest.mark.slow
def test_profile_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    png = tmp_path / "profile.png"
    argv = ["run", str(HELLO), "--platform", "qemu-cortex-m3", "--seed", "4", "--repeat", "1", "--profile",
            "--profile-plot", str(png)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    table = out[out.index("  #  function") :].splitlines()
    rows = [line.split() for line in table[2:5]]
    assert [r[0] for r in rows] == ["1", "2", "3"]
    times = [float(r[3]) for r in rows]
    assert times == sorted(times, reverse=True) and times[-1] > 0
    assert {r[1] for r in rows} == {"tvmgen_default_fused_dense_relu", "tvmgen_default_fused_dense_relu_1",
                                    "tvmgen_default_fused_dense"}
    assert "sum of 3 operators" in table[-1] and "whole model" in table[-1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = run_json(capsys, str(HELLO), "--platform", "qemu-cortex-m3", "--seed", "4", "--repeat", "1", "--profile")
    prof = res["profile"]
    assert [p["function"] for p in prof] == [r[1] for r in rows]
    assert all(p["cycles"] == round(p["seconds"] * 1e9) for p in prof)
    # The operators' instructions are deterministic: the JSON run reads what the table run read.
    assert [round(p["seconds"] * 1e6, 2) for p in prof] == times
    # Each operator alone costs less than the whole model, which also pays for the calls between them.
    assert sum(p["cycles"] for p in prof) < res["cycles"]


@pytest.mark.parametrize("flags", [[], ["--unpacked-api"], ["--unpacked-api", "--interface-api", "c"],
                                   ["--unpacked-api", "--interface-api", "c", "--workspace", "user"]],
                         ids=["packed", "unpacked", "c", "c-user-workspace"])
def test_profile_in_every_convention(flags: list[str], capsys: pytest.CaptureFixture) -> None:
    # Unpacked and C-interface operators take raw pointers: the firmware wraps each in a packed function.
    argv = ["run", str(HELLO), "--platform", "host", "--seed", "4", "--repeat", "1", "--profile", *flags]
    res = run_json(capsys, *argv[1:])
    assert sorted(p["function"] for p in res["profile"]) == sorted(FC_FUNCTIONS)
    assert all(p["seconds"] > 0 and p["cycles"] is None for p in res["profile"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    table = out[out.index("  #  function"):].splitlines()
    assert {row.split()[1] for row in table[2:5]} == set(FC_FUNCTIONS) and "sum of 3 operators" in table[-1]
