"""User operators (`--custom-op NAME=FILE.c:symbol`, `--custom-op-py NAME=FILE.py:func`): the C function on
the device and its numpy twin in the reference interpreter give the same bits in every convention."""

from __future__ import annotations

import json
import re
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from utvm import custom_ops
from utvm.cli import EXIT_BUILD, EXIT_COMPILE, EXIT_DEVICE, EXIT_IO, EXIT_MODEL, EXIT_ORACLE, EXIT_USAGE, main
from utvm.compiler import compile
from utvm.frontend import load
from utvm.ir import run_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
C_FILE = DATA / "clamp_scale.c"
PY_FILE = DATA / "clamp_scale.py"
C_OP = f"ClampScale={C_FILE}:clamp_scale"
PY_OP = f"ClampScale={PY_FILE}:clamp_scale"
CONVENTIONS = {"packed": [], "unpacked": ["--unpacked-api"], "c": ["--unpacked-api", "--interface-api", "c"]}
# lo, hi (int8), mul, shift: y = clamp(floor((x - 3) * 3 / 2) - 2, -112, 100)
OPTIONS = bytes([0x90, 100, 3, 1])
X = np.arange(-128, 128, 8, dtype=np.int8).reshape(1, 32)


@pytest.fixture(autouse=True)
def _no_bindings_left() -> Iterator[None]:
    with custom_ops.bindings():  # restores the bindings (none) the test found, whatever it binds
        yield


def _model(tmp_path: Path, options: bytes = OPTIONS, code: str = "ClampScale") -> Path:
    """x int8[1, 32] (scale 0.5, zp 3) -> the user op -> y int8[1, 32] (scale 0.25, zp -2) -> RELU -> z."""
    b = TFLiteBuilder()
    x = b.tensor("x", [1, 32], "int8", scale=0.5, zero_point=3)
    y = b.tensor("y", [1, 32], "int8", scale=0.25, zero_point=-2)
    z = b.tensor("z", [1, 32], "int8", scale=0.25, zero_point=-2)
    if code == "SIGN":
        b.op("SIGN", [x], [y])
    else:
        b.custom_op(code, [x], [y], options)
    b.op("RELU", [y], [z])
    path = tmp_path / f"{code.lower()}.tflite"
    path.write_bytes(b.build([x], [z]))
    return path


def _want(x: np.ndarray, options: bytes = OPTIONS) -> np.ndarray:
    """The op computed here, independently of both implementations, then RELU (clamp at the zero point)."""
    lo, hi = (int(v) for v in np.frombuffer(options[:2], np.int8))
    mul, shift = options[2], options[3]
    y = np.clip(np.floor((x.astype(np.int64) - 3) * mul / 2**shift) - 2, lo, hi)
    return np.maximum(y, -2).astype(np.int8)


def _run_json(model: Path, tmp_path: Path, *extra: str, capsys: pytest.CaptureFixture) -> dict:
    np.save(tmp_path / "x.npy", X)
    argv = ["run", str(model), "--input", f"x={tmp_path / 'x.npy'}", "--check", "--json", "--repeat", "2",
            "-q", "--custom-op", C_OP, "--custom-op-py", PY_OP, *extra]
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_c_and_python_agree_bit_exactly(convention: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = _run_json(_model(tmp_path), tmp_path, *CONVENTIONS[convention], capsys=capsys)
    assert res["bit_exact"] is True and res["max_abs_err"] == 0.0
    assert res["outputs"]["z"] == _want(X).tolist()


def test_packed_convention_looks_the_function_up_once(tmp_path: Path) -> None:
    with custom_ops.bindings(c={"ClampScale": (C_FILE, "clamp_scale")}):
        cm = compile(load(_model(tmp_path)), model_name="cs")
    ops_c = cm.sources["tvmgen_cs_ops.c"]
    # resolved through the environment (the module of the packed wrappers), once, into a static cache
    lookups = re.findall(r"TVMBackendGetFuncFromEnv\(\(void\*\)&tvmgen_cs_custom_module, \"ClampScale\", &fn\)",
                         ops_c)
    assert len(lookups) == 1
    body = ops_c[ops_c.index("static TVMFunctionHandle fn = NULL;"):]
    assert body.index("if (fn == NULL) {") < body.index("TVMBackendGetFuncFromEnv") < body.index("TVMFuncCall(fn")
    # the wrapper registered in that module calls the user's direct-signature function
    assert "\"ClampScale\\000\"" in ops_c and "return (int)clamp_scale(t, call->num_inputs" in ops_c
    assert cm.sources["utvm_user_clamp_scale.c"] == C_FILE.read_text()


@pytest.mark.parametrize("convention", ["unpacked", "c"])
def test_unpacked_conventions_call_the_function_directly(convention: str, tmp_path: Path) -> None:
    with custom_ops.bindings(c={"ClampScale": (C_FILE, "clamp_scale")}):
        cm = compile(load(_model(tmp_path)), model_name="cs", unpacked_api=True,
                     interface_api="c" if convention == "c" else "packed")
    ops_c = cm.sources["tvmgen_cs_ops.c"]
    assert "TVMBackendGetFuncFromEnv" not in ops_c and "DLTensor" not in ops_c and "TVMValue" not in ops_c
    assert re.search(r"return clamp_scale\(inputs, num_inputs, outputs, num_outputs, tvmgen_cs_\w+_options, 4\);",
                     ops_c)


def test_the_mlf_carries_the_c_file_and_runs_with_the_python_twin(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    tar = tmp_path / "cs.tar"
    assert main(["compile", str(_model(tmp_path)), "-o", str(tar), "--model-name", "cs", "--custom-op", C_OP]) == 0
    with tarfile.open(tar) as tf:
        (name,) = [n for n in tf.getnames() if n.endswith("codegen/host/src/utvm_user_clamp_scale.c")]
        member = tf.extractfile(name)
        assert member is not None and member.read().decode() == C_FILE.read_text()
        (meta_name,) = [n for n in tf.getnames() if n.endswith("metadata.json")]
        meta = json.loads(tf.extractfile(meta_name).read())  # type: ignore[union-attr]
    (record,) = meta["modules"]["cs"]["utvm"]["custom_ops"]
    assert record["name"] == "ClampScale" and record["symbol"] == "clamp_scale"
    assert record["source"] == "utvm_user_clamp_scale.c" and "TVMBackendGetFuncFromEnv" in record["call"]
    capsys.readouterr()
    # an MLF needs no --custom-op (the C is inside), but --check needs the Python twin
    assert main(["run", str(tar), "--check", "-q"]) == EXIT_ORACLE
    err = capsys.readouterr().err.strip()
    assert "'ClampScale' has no Python implementation" in err and len(err.splitlines()) == 1
    np.save(tmp_path / "x.npy", X)
    assert main(["run", str(tar), "--check", "--json", "-q", "--repeat", "1", "--input", f"x={tmp_path / 'x.npy'}",
                 "--custom-op-py", PY_OP]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True and res["outputs"]["z"] == _want(X).tolist()


def test_check_without_a_python_implementation_exits_9(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", str(_model(tmp_path)), "--check", "-q", "--custom-op", C_OP]) == EXIT_ORACLE
    assert "user operator 'ClampScale' has no Python implementation" in capsys.readouterr().err


def test_the_operator_s_error_stops_the_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = _model(tmp_path, options=bytes([10, 0, 1, 0]))  # lo > hi: clamp_scale returns 42
    assert main(["run", str(model), "-q", "--unpacked-api", "--custom-op", C_OP]) == EXIT_DEVICE
    assert "42" in capsys.readouterr().err
    with custom_ops.bindings(py={"ClampScale": _py_twin()}):
        with pytest.raises(Exception, match="returned 42"):
            run_reference(load(model), {"x": X})


def _py_twin():  # noqa: ANN202
    import importlib.util

    spec = importlib.util.spec_from_file_location("clamp_scale_twin", PY_FILE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.clamp_scale


def test_a_builtin_operator_utvm_lacks_can_be_bound(tmp_path: Path) -> None:
    model = _model(tmp_path, code="SIGN")  # SIGN has no converter
    with pytest.raises(Exception, match="unsupported operator 'SIGN'"):
        load(model)

    def sign(inputs: list, outputs: list, options: bytes) -> None:
        assert options == b""  # a builtin operator's options are not passed
        outputs[0].data[...] = np.sign(inputs[0].data.astype(np.int32) - inputs[0].zero_point) + outputs[0].zero_point

    with custom_ops.bindings(py={"SIGN": sign}):
        g = load(model)
        node = g.nodes[0]
        assert node.op == "custom" and node.attrs["name"] == "SIGN" and node.attrs["options"] == ""
        assert json.loads(json.dumps(node.attrs["outputs"])) == [[[1, 32], "int8"]]
        z = run_reference(g, {"x": X})["z"]
    want = np.maximum(np.sign(X.astype(np.int32) - 3) - 2, -2)
    np.testing.assert_array_equal(z, want.astype(np.int8))


def test_unbound_custom_op_is_unsupported_and_info_lists_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = _model(tmp_path)
    assert main(["compile", str(model), "-o", str(tmp_path / "m.tar")]) == EXIT_MODEL
    assert "unsupported operator 'CUSTOM:ClampScale'" in capsys.readouterr().err
    assert main(["info", str(model)]) == EXIT_MODEL
    assert "CUSTOM:ClampScale" in capsys.readouterr().out
    assert main(["info", str(model), "--custom-op", C_OP]) == 0
    out = capsys.readouterr().out
    assert "not supported" not in out and "custom" in out


@pytest.mark.parametrize(("argv", "status", "text"), [
    (["--custom-op", "ClampScale=clamp_scale.c"], EXIT_USAGE, "expected NAME=FILE.c:symbol"),
    (["--custom-op", "ClampScale=clamp_scale.py:clamp_scale"], EXIT_USAGE, "is not a .c file"),
    (["--custom-op", "ClampScale=x.c:2bad"], EXIT_USAGE, "is not an identifier"),
    (["--custom-op-py", "ClampScale=x.c:f"], EXIT_USAGE, "is not a .py file"),
    (["--custom-op", "ClampScale=no_such_file.c:clamp_scale"], EXIT_IO, "no_such_file.c: no such file"),
    (["--custom-op-py", f"ClampScale={PY_FILE}:no_such_func"], EXIT_USAGE, "defines no function 'no_such_func'"),
])
def test_bad_bindings_fail_in_one_line(argv: list[str], status: int, text: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(_model(tmp_path)), "-o", str(tmp_path / "m.tar"), *argv]) == status
    err = capsys.readouterr().err.strip()
    assert text in err and len(err.splitlines()) == 1, err


def test_python_only_binding_cannot_compile(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", str(_model(tmp_path)), "-o", str(tmp_path / "m.tar"),
                 "--custom-op-py", PY_OP]) == EXIT_COMPILE
    assert "'ClampScale' has no C implementation" in capsys.readouterr().err


def test_a_symbol_the_file_does_not_define_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["run", str(_model(tmp_path)), "-q", "--custom-op", f"ClampScale={C_FILE}:clamp_scale_typo"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert "does not define the function 'clamp_scale_typo'" in err and len(err.splitlines()) == 1


def test_a_symbol_only_declared_is_a_build_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "declared.c"
    src.write_text("#include <stdint.h>\nint32_t declared_only(void);\n")
    argv = ["run", str(_model(tmp_path)), "-q", "--custom-op", f"ClampScale={src}:declared_only"]
    assert main(argv) == EXIT_BUILD
    assert "declared_only" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_c_and_python_agree_on_qemu(convention: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = _run_json(_model(tmp_path), tmp_path, "--platform", "qemu-cortex-m4", *CONVENTIONS[convention],
                    capsys=capsys)
    assert res["bit_exact"] is True and res["outputs"]["z"] == _want(X).tolist()


@pytest.mark.slow
@pytest.mark.parametrize("convention", ["packed", "c"])
def test_deploy_project_builds_and_runs_the_user_operator(convention: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    import subprocess

    from utvm.platform.qemu.deploy import parse_deploy_output

    np.save(tmp_path / "x.npy", X)
    project = tmp_path / "fw"
    assert main(["deploy", str(_model(tmp_path)), "--platform", "qemu-cortex-m3", "-o", str(project), "-q",
                 "--build", "--input", f"x={tmp_path / 'x.npy'}", "--custom-op", C_OP,
                 *CONVENTIONS[convention]]) == 0, capsys.readouterr().err
    assert (project / "codegen" / "host" / "src" / "utvm_user_clamp_scale.c").read_text() == C_FILE.read_text()
    proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout
    np.testing.assert_array_equal(parse_deploy_output(proc.stdout).outputs["z"], _want(X))


def test_build_device_links_a_model_with_a_user_operator(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from utvm.evaluate import run_on_device
    from utvm.platform import get_platform

    out = tmp_path / "device"
    assert main(["build-device", "--platform", "host", "-o", str(out), "--model", f"cs={_model(tmp_path)}",
                 "--custom-op", C_OP]) == 0, capsys.readouterr().err
    with custom_ops.bindings(c={"ClampScale": (C_FILE, "clamp_scale")}):
        cm = compile(load(_model(tmp_path)), model_name="cs")
    with get_platform("host").start(out) as session:
        (z,), _latency = run_on_device(session, cm, [X], repeat=1)
    np.testing.assert_array_equal(z, _want(X))


ONNX_OP = "com.example.ScaleClamp"
F_OPTIONS = np.array([1.5, -2.0, 3.25], "<f4").tobytes()  # a, lo, hi


def _onnx_model(tmp_path: Path, declare_y: bool = True) -> Path:
    """x float32[1, 2, 3, 4] (NCHW) -> com.example.ScaleClamp -> y -> Relu -> z."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 4])
    nodes = [helper.make_node("ScaleClamp", ["x"], ["y"], domain="com.example", options=F_OPTIONS),
             helper.make_node("Relu", ["y"], ["z"])]
    graph = helper.make_graph(nodes, "g", [x], [z], value_info=[y] if declare_y else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example", 1)])
    path = tmp_path / "scale_clamp.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_an_onnx_op_type_bound_in_every_convention(convention: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.save(tmp_path / "x.npy", x)
    argv = ["run", str(_onnx_model(tmp_path)), "--input", f"x={tmp_path / 'x.npy'}", "--check", "--json", "-q",
            "--repeat", "1", "--custom-op", f"{ONNX_OP}={C_FILE}:scale_clamp_f32",
            "--custom-op-py", f"{ONNX_OP}={PY_FILE}:scale_clamp_f32", *CONVENTIONS[convention]]
    assert main(argv) == 0, capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True
    want = np.maximum(np.minimum(np.maximum(x * np.float32(1.5), -2), 3.25), 0)  # the ONNX layout, as given
    assert res["outputs"]["z"] == want.tolist()


def test_onnx_user_operator_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = _onnx_model(tmp_path)
    assert main(["compile", str(model), "-o", str(tmp_path / "m.tar")]) == EXIT_MODEL
    assert f"unsupported operator '{ONNX_OP}'" in capsys.readouterr().err
    bound = ["--custom-op", f"{ONNX_OP}={C_FILE}:scale_clamp_f32"]
    assert main(["compile", str(_onnx_model(tmp_path, declare_y=False)), "-o", str(tmp_path / "m.tar"),
                 *bound]) == EXIT_MODEL
    assert "output 'y' of user operator 'com.example.ScaleClamp' has no declared type and shape" in \
        capsys.readouterr().err


def test_two_packed_models_with_the_same_user_operator_share_one_firmware(tmp_path: Path) -> None:
    # each packed model resolves the operator from a CRT module of its own (a module slot each, besides the
    # models' system libraries), and the one C file they both carry is linked once
    from utvm.evaluate import build_firmware
    from utvm.platform import get_platform

    custom_ops.bind_c("ClampScale", C_FILE, "clamp_scale")
    models = [compile(load(_model(tmp_path)), model_name=name) for name in ("first", "second")]
    firmware = build_firmware(models, "host")
    with get_platform("host").start(firmware) as session:
        for compiled in models:
            run = session.system_lib(compiled.model_name).get_function(compiled.run_function)
            x, z = session.array(X), session.empty(X.shape, "int8")
            run(x, z)
            np.testing.assert_array_equal(z.numpy(), _want(X))


@pytest.mark.parametrize("name", ["RELU", "NoSuchOp"])
def test_a_binding_the_model_does_not_use_is_refused(name: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    # RELU is utvm's own (never replaced), NoSuchOp is not in the model: either binding would be ignored
    argv = ["compile", str(_model(tmp_path)), "-q", "-o", str(tmp_path / "m.tar"), "--custom-op", C_OP,
            "--custom-op", f"{name}={C_FILE}:clamp_scale"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert f"--custom-op {name}: the model has no such operator" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "m.tar").exists()


def test_the_tensor_limit_is_the_c_headers() -> None:
    header = Path(custom_ops.__file__).parent / "crt" / "include" / "tvm" / "runtime" / "crt" / "utvm_custom_op.h"
    (value,) = re.findall(r"#define UTVM_CUSTOM_OP_MAX_TENSORS (\d+)", header.read_text())
    assert int(value) == custom_ops.MAX_TENSORS
