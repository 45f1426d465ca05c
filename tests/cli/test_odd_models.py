"""Odd but valid models, and `utvm info` on models that are neither (issue 19).

Classes: a rank-0 (scalar) input or output keeps its shape () through compile, run --check, the RPC upload,
the Python API, an MLF and deploy; a model with no operators (its outputs are its inputs or constants) builds
warning-free under the boards' -Werror and runs; `utvm info` refuses, with compile's one line and status 4,
every graph compile refuses (a cycle, an operator writing a model input or a constant, two writers of one
tensor), and prints every string from the model escaped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from utvm.cli import EXIT_MODEL, EXIT_USAGE, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402


def _one_line(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return out, err


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _q(b: TFLiteBuilder, name: str, shape: tuple[int, ...] = (1, 4), data: np.ndarray | None = None) -> int:
    return b.tensor(name, shape, "int8", scale=0.1, zero_point=0, data=data)


# --- models ---------------------------------------------------------------------------------------------------

def scalar_relu(dtype: str) -> bytes:
    b = TFLiteBuilder()
    x = _q(b, "x", ()) if dtype == "int8" else b.tensor("x", (), "float32")
    y = _q(b, "y", ()) if dtype == "int8" else b.tensor("y", (), "float32")
    b.op("RELU", [x], [y])
    return b.build([x], [y])


def scalar_onnx() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def no_operators(kind: str) -> bytes:
    """Models whose outputs are inputs or constants."""
    b = TFLiteBuilder()
    if kind == "input":
        x = _q(b, "x")
        return b.build([x], [x])
    if kind == "constant":
        x = _q(b, "x")
        c = _q(b, "c", data=np.arange(4))
        return b.build([x], [c])
    if kind == "twice":
        x = _q(b, "x")
        return b.build([x], [x, x])
    if kind == "no inputs":
        c = b.tensor("c", (3,), "float32", data=np.array([1, np.nan, -np.inf], np.float32))
        return b.build([], [c])
    assert kind == "mixed"  # float inputs passed through, out of order, and a scalar constant
    x = b.tensor("x", (2,), "float32")
    y = b.tensor("y", (2,), "float32")
    c = b.tensor("c", (), "float32", data=np.array(2.0, np.float32))
    return b.build([x, y], [y, c, x])


NO_OPERATORS = ["input", "constant", "twice", "no inputs", "mixed"]


# --- rank-0 inputs and outputs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["int8", "float32", "onnx"])
def test_a_scalar_model_runs_and_checks_with_shape_0d(kind: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    model = (_write(tmp_path / "s.onnx", scalar_onnx()) if kind == "onnx"
             else _write(tmp_path / "s.tflite", scalar_relu(kind)))
    dtype = "int8" if kind == "int8" else "float32"
    given = tmp_path / "x.npy"
    np.save(given, np.array(7 if kind == "int8" else 1.5, dtype=dtype))
    assert main(["run", str(model), "--check", "--json", "-q", "--input", f"x={given}"]) == 0, capsys.readouterr()
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True and res["outputs"]["y"] == (7 if kind == "int8" else 1.5)  # a number, not [n]
    # random inputs too (the seed's draw is 0-d as well)
    assert main(["run", str(model), "--check", "-q", "--seed", "3"]) == 0, capsys.readouterr()
    assert f"output 'y' {dtype}[]:" in capsys.readouterr().out


def test_a_scalar_input_file_must_be_0d(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write(tmp_path / "s.tflite", scalar_relu("float32"))
    one = tmp_path / "one.npy"
    np.save(one, np.array([1.5], np.float32))
    assert main(["run", str(model), "-q", "--input", f"x={one}"]) == EXIT_USAGE
    _, err = _one_line(capsys)
    assert "--input x: the model takes float32[]" in err and "float32[1]" in err, err


def test_a_scalar_through_the_mlf_the_python_api_and_rpc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from utvm import evaluate
    from utvm.compiler import compile
    from utvm.compiler.local import LocalModel
    from utvm.frontend import load
    from utvm.platform import get_platform

    model = _write(tmp_path / "s.tflite", scalar_relu("int8"))
    tar = tmp_path / "s.tar"
    assert main(["compile", str(model), "-o", str(tar), "-q"]) == 0
    capsys.readouterr()
    given = tmp_path / "x.npy"
    np.save(given, np.int8(-5))
    assert main(["run", str(tar), "--check", "--json", "-q", "--input", f"x={given}"]) == 0, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["outputs"]["y"] == 0

    compiled = compile(load(model))
    assert compiled.interface.inputs[0].shape == () and compiled.interface.outputs[0].shape == ()
    (out,) = LocalModel(compiled).run([np.array(9, np.int8)])
    assert out.shape == () and int(out) == 9

    inputs = evaluate.read_inputs(compiled, {"x": str(given)}, seed=0)
    assert inputs[0].shape == ()
    plat = get_platform("host")
    elf = evaluate.build_firmware(compiled, "host")
    with plat.start(elf) as sess:
        a = sess.array(np.array(42, np.int8))  # the RPC upload keeps rank 0
        assert a.shape == () and a.numpy().shape == () and int(a.numpy()) == 42
        outs, _ = evaluate.run_on_device(sess, compiled, [np.array(3, np.int8)])
    assert outs[0].shape == () and int(outs[0]) == 3


def test_a_scalar_with_profile_and_debug_layers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write(tmp_path / "s.tflite", scalar_relu("float32"))
    assert main(["run", str(model), "-q", "--profile", "--debug-layers", "--seed", "1"]) == 0, capsys.readouterr()
    assert "all 1 operators match the reference" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("platform, flags", [("qemu-cortex-m3", []),
                                             ("qemu-cortex-m4", ["--unpacked-api", "--interface-api", "c"])])
def test_a_scalar_model_on_the_boards(platform: str, flags: list[str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    model = _write(tmp_path / "s.tflite", scalar_relu("float32"))
    assert main(["run", str(model), "--platform", platform, "--check", "--json", "-q", "--seed", "5",
                 *flags]) == 0, capsys.readouterr()
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True and isinstance(res["outputs"]["y"], float)


# --- no operators ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", NO_OPERATORS)
def test_a_model_without_operators_runs_on_the_host(kind: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    model = _write(tmp_path / "m.tflite", no_operators(kind))
    assert main(["run", str(model), "--check", "--json", "-q", "--seed", "2"]) == 0, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["bit_exact"] is True
    assert main(["info", str(model)]) == 0
    assert ": 0 ops, " in capsys.readouterr().out


CONVENTIONS = {"packed": [], "unpacked": ["--unpacked-api"],
               "c": ["--unpacked-api", "--interface-api", "c"],
               "c-user": ["--unpacked-api", "--interface-api", "c", "--workspace", "user"]}


@pytest.mark.slow
@pytest.mark.parametrize("platform, convention", [("qemu-cortex-m3", "packed"), ("qemu-cortex-m4", "unpacked"),
                                                  ("qemu-cortex-m4", "c-user")])
def test_a_model_without_operators_builds_warning_free_and_runs_on_the_boards(
        platform: str, convention: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the boards build the generated C with -Wall -Wextra -Werror -pedantic: an unused static helper or a
    # zero-size array would fail them
    for kind in ("mixed", "constant"):
        model = _write(tmp_path / f"{kind}.tflite", no_operators(kind))
        assert main(["run", str(model), "--platform", platform, "--check", "--json", "-q", "--seed", "4",
                     *CONVENTIONS[convention]]) == 0, capsys.readouterr()
        assert json.loads(capsys.readouterr().out)["bit_exact"] is True


@pytest.mark.slow
@pytest.mark.parametrize("convention", ["packed", "c-user"])
def test_a_model_without_operators_deploys_and_prints_its_scalar(convention: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from utvm.platform.qemu.deploy import parse_deploy_output

    model = _write(tmp_path / "m.tflite", no_operators("mixed"))
    project = tmp_path / "fw"
    assert main(["deploy", str(model), "--platform", "qemu-cortex-m4", "-o", str(project), "-q", "--build",
                 "--seed", "6", *CONVENTIONS[convention]]) == 0, capsys.readouterr()
    capsys.readouterr()
    proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dep = parse_deploy_output(proc.stdout)
    assert dep.status == 0 and dep.outputs["c"].shape == () and float(dep.outputs["c"]) == 2.0
    assert main(["run", str(model), "--seed", "6", "--json", "-q"]) == 0
    res = json.loads(capsys.readouterr().out)
    np.testing.assert_array_equal(dep.outputs["x"], np.array(res["outputs"]["x"], np.float32))


# --- info on graphs compile refuses ------------------------------------------------------------------------------

def ill_formed(kind: str) -> bytes:
    b = TFLiteBuilder()
    x, a, y = _q(b, "x"), _q(b, "a"), _q(b, "y")
    if kind == "self cycle":
        b.op("RELU", [x], [a])
        b.op("RELU", [y], [y])
    elif kind == "cycle":
        b.op("ADD", [x, y], [a], "AddOptions", FusedActivationFunction=0)
        b.op("RELU", [a], [y])
    elif kind == "writes an input":
        b.op("RELU", [x], [y])
        b.op("RELU", [y], [x])
    elif kind == "writes a constant":
        k = _q(b, "k", data=np.arange(4))
        b.op("RELU", [x], [k])
        b.op("ADD", [x, k], [y], "AddOptions", FusedActivationFunction=0)
    else:
        assert kind == "two writers"
        b.op("RELU", [x], [y])
        b.op("RELU6", [x], [y])
    return b.build([x], [y])


@pytest.mark.parametrize("kind, says", [("self cycle", "is used before it is computed"),
                                        ("cycle", "is used before it is computed"),
                                        ("writes an input", "is a graph input or constant"),
                                        ("writes a constant", "output 'k' is a graph input or constant"),
                                        ("two writers", "output 'y' is already produced by node 0")])
def test_info_refuses_what_compile_refuses_with_the_same_line(kind: str, says: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    model = _write(tmp_path / "bad.tflite", ill_formed(kind))
    assert main(["compile", str(model), "-o", str(tmp_path / "bad.tar"), "-q"]) == EXIT_MODEL
    _, compile_err = _one_line(capsys)
    assert main(["info", str(model)]) == EXIT_MODEL
    out, info_err = _one_line(capsys)
    assert says in info_err and out == ""
    assert info_err == compile_err.replace("utvm compile:", "utvm info:")
    assert main(["info", "--json", str(model)]) == EXIT_MODEL
    assert _one_line(capsys)[1] == info_err


# --- info prints a model's strings escaped -------------------------------------------------------------------------

EVIL_IN = "in\x1b[2J\nput\u202e"
EVIL_MID = "mid\r\x1b[31mred\x07"
EVIL_OUT = "z\n1  forged  row"
EVIL_OP = "Evil\x1b]0;title\x07\nop"
EVIL_DESCRIPTION = b"\x1b[2J\x1b[31m\nevil!"  # as long as the builder's "utvm test model"


def evil_model(custom: bool) -> bytes:
    b = TFLiteBuilder()
    x = _q(b, EVIL_IN)
    y = _q(b, EVIL_MID)
    b.op("RELU", [x], [y])
    if not custom:
        data = b.build([x], [y])
    else:
        z = _q(b, EVIL_OUT)
        b.custom_op(EVIL_OP, [y], [z])
        data = b.build([x], [z])
    assert data.count(b"utvm test model") == 1 and len(EVIL_DESCRIPTION) == len(b"utvm test model")
    return data.replace(b"utvm test model", EVIL_DESCRIPTION)


def _printable(text: str) -> bool:
    return all(ch == "\n" or (ch.isprintable() and ch.isascii()) for ch in text)


@pytest.mark.parametrize("custom", [False, True], ids=["ops", "custom-op"])
def test_info_escapes_every_string_from_the_model(custom: bool, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    model = _write(tmp_path / "evil.tflite", evil_model(custom))
    status = main(["info", str(model)])
    out, err = capsys.readouterr()
    assert _printable(out) and _printable(err), (out, err)
    assert "in\\x1b[2J\\nput\\u202e" in out and "mid\\r\\x1b[31mred\\x07" in out
    assert "description: \\x1b[2J\\x1b[31m\\nevil!" in out
    # every table row is one line: the rows of the inputs table are its header, its rule and one row
    inputs = out.split("inputs:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(inputs) == 3, inputs
    if custom:
        assert status == EXIT_MODEL and err.count("\n") == 1
        assert "CUSTOM:Evil\\x1b]0;title\\x07\\nop" in out and "CUSTOM:Evil\\x1b]0;title\\x07\\nop" in err
    else:
        assert status == 0 and err == ""
    # --json: the names exactly, as JSON escapes
    assert main(["info", "--json", str(model)]) == status
    out = capsys.readouterr().out
    assert out.isascii() and _printable(out)
    s = json.loads(out)
    assert s["inputs"][0]["name"] == EVIL_IN and s["description"] == EVIL_DESCRIPTION.decode()
    if custom:
        assert s["unsupported"][0]["op"] == "CUSTOM:" + EVIL_OP


# --- deploy's printed outputs keep their shapes (a scalar, a tensor with a zero dimension) ------------------------

def test_deploy_output_parsing_keeps_rank_0_and_empty_shapes() -> None:
    from utvm.errors import PlatformError
    from utvm.platform.qemu.deploy import parse_deploy_output

    text = ("utvm-deploy m qemu-cortex-m3\noutput 0 c float32 () 1\n0x40000000\noutput 1 e int8 0x4 0\n"
            "output 2 v int8 2 2\n-1 7\nstatus 0\nstack 64\nend\n")
    dep = parse_deploy_output(text)
    assert dep.outputs["c"].shape == () and float(dep.outputs["c"]) == 2.0
    assert dep.outputs["e"].shape == (0, 4) and dep.outputs["v"].tolist() == [-1, 7]
    for bad in ("output 0 v int8 2x2 3\n1 2 3\n", "output 0 v int8 axb 1\n1\n"):
        with pytest.raises(PlatformError, match="output 'v'"):
            parse_deploy_output("utvm-deploy m b\n" + bad + "status 0\nstack 1\nend\n")


def zero_size() -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (0, 4), "float32")
    y = b.tensor("y", (0, 4), "float32")
    b.op("RELU", [x], [y])
    return b.build([x], [y])


def test_a_tensor_with_a_zero_dimension_runs_on_the_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write(tmp_path / "z.tflite", zero_size())
    assert main(["run", str(model), "--check", "--json", "-q"]) == 0, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["outputs"]["y"] == []


@pytest.mark.slow
@pytest.mark.parametrize("convention", ["packed", "c-user"])
def test_a_tensor_with_a_zero_dimension_deploys(convention: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from utvm.platform.qemu.deploy import parse_deploy_output

    model = _write(tmp_path / "z.tflite", zero_size())
    project = tmp_path / "fw"
    assert main(["deploy", str(model), "--platform", "qemu-cortex-m3", "-o", str(project), "-q", "--build",
                 *CONVENTIONS[convention]]) == 0, capsys.readouterr()
    proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dep = parse_deploy_output(proc.stdout)
    assert dep.status == 0 and dep.outputs["y"].shape == (0, 4)
