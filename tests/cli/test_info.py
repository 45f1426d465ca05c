"""`utvm info MODEL`: inputs, outputs, op counts, parameter count and MACs per layer, as tables (or JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from utvm.cli import EXIT_MODEL, main
from utvm.support.models import models_dir

MODELS = models_dir()


def test_info_tflite_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(MODELS / "mlperf_tiny/kws_ref_model.tflite")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model kws_ref_model (tflite): 13 ops, ")
    for section in ("inputs:", "outputs:", "ops:", "layers:"):
        assert section in out
    assert "input_1  [1, 49, 10, 1]  int8   scale 0.584703, zero point 83" in out
    assert "Identity  [1, 12]  int8   scale 0.00390625, zero point -128" in out
    # the first conv: 1x25x5x64 outputs, 10x4x1 kernel -> 320,000 MACs; 64*10*4*1 weights + 64 biases
    first = next(line for line in out.splitlines() if line.strip().startswith("0  conv2d"))
    assert first.split()[-2:] == ["2,624", "320,000"]
    assert "depthwise_conv2d      4" in out


def test_info_json_totals(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json", str(MODELS / "mlperf_tiny/ad01_int8.tflite")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["ops"] == {"dense": 10}
    assert [i["shape"] for i in s["inputs"]] == [[1, 640]] and s["outputs"][0]["name"] == "Identity"
    assert s["macs"] == sum(r["macs"] for r in s["layers"])
    # every dense: macs = in * out; params = in * out + out
    for r in s["layers"]:
        assert r["params"] == r["macs"] + r["output_shape"][-1]
    assert s["parameters"] == sum(r["params"] for r in s["layers"])


def test_info_onnx(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(MODELS / "onnx/mnist-8/model.onnx")]) == 0
    out = capsys.readouterr().out
    assert "(onnx)" in out and "Input3" in out and "Plus214_Output_0" in out


def test_info_bad_model_reports_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "broken.tflite"
    bad.write_bytes((MODELS / "tflm/hello_world_int8.tflite").read_bytes()[:300])
    assert main(["info", str(bad)]) == EXIT_MODEL
    assert "utvm info: error: truncated or corrupt TFLite flatbuffer" in capsys.readouterr().err
    assert main(["info", str(MODELS / "mlperf_tiny/kws_ref_model_float32.tflite")]) == EXIT_MODEL
    assert "hybrid model" in capsys.readouterr().err
    odd = tmp_path / "model.bin"
    odd.write_bytes(b"12345678")
    assert main(["info", str(odd)]) == EXIT_MODEL
    assert "cannot tell the format" in capsys.readouterr().err
