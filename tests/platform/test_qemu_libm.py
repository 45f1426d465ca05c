"""Float models whose kernels call <math.h> run on every board, as they do on the host (which links -lm).

The class: every kernel that calls libm (found by grepping src/utvm/compiler/kernels/ for <math.h> calls;
today softmax and logistic call expf, tanh tanhf, batch_norm with run-time parameters sqrtf). One ONNX model
holds one of each, so one firmware per board covers them all:

- the compiler records what its C calls (`CompiledModel.libm_functions`, metadata.json's
  `utvm.libm_functions` and a `libm` entry of `external_dependencies`), and an MLF loaded back carries it;
- the RPC evaluation firmware links and computes what onnxruntime computes, on qemu-cortex-m3 (soft float),
  -m4 and -m7;
- the standalone deploy project (`utvm deploy`) builds with make alone and `make -C DIR run` prints the
  same; the `utvm size` firmware (firmware_report) builds, and libm's code is attributed to the runtime;
- linking libm costs nothing when nothing calls it (the same firmware image with and without -lm).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm import evaluate, mlf  # noqa: E402
from utvm.compiler import compile  # noqa: E402
from utvm.compiler.codegen import MATH_FUNCTIONS, libm_functions  # noqa: E402
from utvm.compiler.oracle import reference  # noqa: E402
from utvm.frontend import from_onnx, from_tflite  # noqa: E402
from utvm.platform import get_platform  # noqa: E402
from utvm.platform.qemu.boards import BOARDS, get_board  # noqa: E402
from utvm.platform.qemu.deploy import generate_deploy_project, parse_deploy_output  # noqa: E402
from utvm.platform.qemu.footprint import firmware_report  # noqa: E402
from utvm.platform.qemu.project import APPS_DIR, FirmwareSpec, generate_project  # noqa: E402

KERNELS = Path(__file__).resolve().parents[2] / "src" / "utvm" / "compiler" / "kernels"
SESSION_KWARGS = {"handshake_retry_s": 0.5, "handshake_timeout_s": 20.0, "reply_timeout_s": 60.0}
RTOL = 1e-5  # docs/architecture.md §6: float within 1e-5 relative (of the output's magnitude)
C = 8  # channels
OUTPUTS = ("y_logistic", "y_tanh", "y_softmax", "y_batch_norm")


# --- the model ------------------------------------------------------------------------------------------------

def libm_model() -> bytes:
    """x[4, C] -> Sigmoid, Tanh, Softmax(axis -1), BatchNormalization whose variance is a model input (so it
    cannot be folded: the kernel computes 1/sqrtf(var + eps) on the device)."""
    rng = np.random.default_rng(7)
    consts = {"scale": rng.uniform(0.5, 2.0, C), "bias": rng.standard_normal(C), "mean": rng.standard_normal(C)}
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y_logistic"]),
         helper.make_node("Tanh", ["x"], ["y_tanh"]),
         helper.make_node("Softmax", ["x"], ["y_softmax"], axis=-1),
         helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y_batch_norm"],
                          epsilon=1e-3)],
        "libm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, C]),
         helper.make_tensor_value_info("var", TensorProto.FLOAT, [C])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, C]) for name in OUTPUTS],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


# The TFLite float ops whose kernels call the rest of <math.h> (the ONNX importer has no Ceil, Cos, ...):
# op -> (input range, the function its kernel calls). Checked against TFLM's kernels.
TFLITE_LIBM_OPS: dict[str, tuple[tuple[float, float], str]] = {
    "CEIL": ((-6.0, 6.0), "ceilf"), "FLOOR": ((-6.0, 6.0), "floorf"), "ABS": ((-6.0, 6.0), "fabsf"),
    "COS": ((-6.0, 6.0), "cosf"), "SIN": ((-6.0, 6.0), "sinf"), "EXP": ((-6.0, 6.0), "expf"),
    "LOG": ((0.01, 50.0), "logf"), "SQRT": ((0.0, 50.0), "sqrtf"), "ELU": ((-6.0, 6.0), "expm1f"),
}


def libm_model_tflite() -> bytes:
    """x[4, C] -> one unary op per entry of TFLITE_LIBM_OPS (each reading its own input), and FLOOR_MOD
    (fmodf) of two inputs."""
    b = TFLiteBuilder()
    ins, outs = [], []
    for op in TFLITE_LIBM_OPS:
        x = b.tensor(f"x_{op.lower()}", (4, C), "float32")
        y = b.tensor(f"y_{op.lower()}", (4, C), "float32")
        b.op(op, [x], [y])
        ins.append(x)
        outs.append(y)
    a, d, m = (b.tensor(n, (4, C), "float32") for n in ("x_mod_a", "x_mod_b", "y_floor_mod"))
    b.op("FLOOR_MOD", [a, d], [m])
    return b.build(ins + [a, d], outs + [m])


def libm_tflite_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(13)
    xs = [rng.uniform(lo, hi, (4, C)).astype(np.float32) for (lo, hi), _ in TFLITE_LIBM_OPS.values()]
    divisor = rng.uniform(0.5, 3.0, (4, C)).astype(np.float32) * rng.choice([-1, 1], (4, C)).astype(np.float32)
    return xs + [rng.uniform(-10, 10, (4, C)).astype(np.float32), divisor]


def libm_inputs() -> list[np.ndarray]:
    """x spans the saturating ends (|x| up to 100: expf overflows to inf, which newlib reports through errno)
    and the steep middle; var > 0."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-6.0, 6.0, (4, C)).astype(np.float32)
    x[0, :4] = [-100.0, -30.0, 30.0, 100.0]
    x[1, :3] = [0.0, -0.0, 1e-7]
    var = rng.uniform(0.05, 4.0, C).astype(np.float32)
    return [x, var]


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    return libm_model()


@pytest.fixture(scope="module")
def want(model_bytes: bytes) -> list[np.ndarray]:
    """onnxruntime's outputs on libm_inputs(), in model order."""
    x, var = libm_inputs()
    return reference(model_bytes, {"x": x, "var": var}, kind="onnx")


def assert_close(got: list[np.ndarray], want: list[np.ndarray], where: str) -> None:
    assert len(got) == len(want) == len(OUTPUTS)
    for name, g, w in zip(OUTPUTS, got, want, strict=True):
        assert g.dtype == np.float32 and g.shape == w.shape, (where, name, g.dtype, g.shape)
        scale = float(np.max(np.abs(w)))
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * max(scale, 1e-30),
                                   err_msg=f"{name} on {where} differs from onnxruntime")


# --- what the compiler records (no QEMU) ----------------------------------------------------------------------

def kernel_libm_calls() -> set[str]:
    """The <math.h> functions the kernels' C calls: every float-form <math.h> function the kernel modules
    name as a string (what they report: `ctx.libm("expf")`, `define_helper(..., libm=("floorf",))`, tables of
    names) or call in C text as `name(` (outside Python attribute calls: math.exp(, np.floor( ...)."""
    found = set()
    for path in sorted(KERNELS.glob("*.py")):
        text = path.read_text()
        names = re.findall(r"(?<![.\w])([a-z][a-z0-9]*)\(", text) + re.findall(r"[\"']([a-z][a-z0-9]*)[\"']", text)
        found.update(n for n in names if n in MATH_FUNCTIONS and n.endswith("f"))
    return found


def test_the_model_covers_every_kernel_that_calls_libm(model_bytes: bytes) -> None:
    compiled = compile(from_onnx(model_bytes))
    compiled_tflite = compile(from_tflite(libm_model_tflite()))
    calls = kernel_libm_calls()
    assert {"expf", "tanhf", "sqrtf", "cosf", "fmodf"} <= calls  # the grep still finds what it is meant to find
    assert set(compiled.libm_functions) | set(compiled_tflite.libm_functions) == calls, (
        "a kernel calls a <math.h> function these tests' models do not reach: add its op to libm_model() or "
        "TFLITE_LIBM_OPS")
    ops = {op.op for op in compiled.operators}
    assert {"logistic", "tanh", "softmax", "batch_norm"} <= ops


def test_metadata_records_libm_and_an_mlf_carries_it(model_bytes: bytes, tmp_path: Path) -> None:
    compiled = compile(from_onnx(model_bytes), model_name="libm")
    assert compiled.uses_libm and compiled.libm_functions == ("expf", "sqrtf", "tanhf")
    mod = compiled.metadata["modules"]["libm"]
    assert mod["utvm"]["libm_functions"] == ["expf", "sqrtf", "tanhf"]
    deps = mod["external_dependencies"]
    assert deps[0]["short_name"] == "tvm_standalone_crt"  # the runtime stays first
    (libm,) = [d for d in deps if d["short_name"] == "libm"]
    assert libm["url"] == "-lm" and libm["functions"] == ["expf", "sqrtf", "tanhf"]
    # What the C calls is what it declares: the operators file includes <math.h>.
    assert "#include <math.h>" in compiled.sources["tvmgen_libm_ops.c"]

    tar = mlf.export_model_library_format(compiled, tmp_path / "libm.tar")
    for source in (tar, _extract(tar, tmp_path / "extracted")):
        loaded = mlf.load(source)
        assert loaded.libm_functions == compiled.libm_functions and loaded.uses_libm
    meta = json.loads((tmp_path / "extracted" / "metadata.json").read_text())
    assert meta["modules"]["libm"]["utvm"]["libm_functions"] == ["expf", "sqrtf", "tanhf"]


def _extract(tar: Path, out: Path) -> Path:
    import tarfile

    out.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return out


def test_tflite_float_activations_record_libm_and_int8_code_none() -> None:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 16), "float32")
    ys = [b.tensor(f"y{i}", (1, 16), "float32") for i in range(3)]
    b.op("LOGISTIC", [x], [ys[0]])
    b.op("TANH", [x], [ys[1]])
    b.op("SOFTMAX", [x], [ys[2]], "SoftmaxOptions", Beta=1.0)
    compiled = compile(from_tflite(b.build(inputs=[x], outputs=ys)))
    assert compiled.libm_functions == ("expf", "tanhf")

    q = TFLiteBuilder()
    xq = q.tensor("x", (1, 16), "int8", scale=0.1, zero_point=0)
    yq = q.tensor("y", (1, 16), "int8", scale=1 / 256, zero_point=-128)
    zq = q.tensor("z", (1, 16), "int8", scale=1 / 256, zero_point=-128)
    q.op("LOGISTIC", [xq], [yq])
    q.op("SOFTMAX", [xq], [zq], "SoftmaxOptions", Beta=1.0)
    int8 = compile(from_tflite(q.build(inputs=[xq], outputs=[yq, zq])), model_name="q")
    assert int8.libm_functions == () and not int8.uses_libm  # int8 kernels are tables and integer code
    mod = int8.metadata["modules"]["q"]
    assert mod["utvm"]["libm_functions"] == []
    assert [d["short_name"] for d in mod["external_dependencies"]] == ["tvm_standalone_crt"]


def test_an_mlf_that_predates_the_record_gets_it_from_its_sources(model_bytes: bytes) -> None:
    compiled = compile(from_onnx(model_bytes))
    del compiled.metadata["modules"]["default"]["utvm"]["libm_functions"]
    assert compiled.libm_functions == ("expf", "sqrtf", "tanhf")


def test_libm_functions_reads_calls_not_comments_strings_or_longer_names() -> None:
    src = {"a.c": '/* expf(x) */ // logf(x)\nconst char* s = "sqrtf(";\nint my_tanhf(int);\n'
                  "float f(float x) { return my_tanhf(1) + fused_exp (x) + powf (x, 2.0f) + fabsf(x); }\n",
           "b.c": "float g(float x) { float round = x; return round + floorf(x) + INFINITY; }\n"}
    assert libm_functions(src) == ("fabsf", "floorf", "powf")


def test_board_projects_link_libm_in_the_library_group(tmp_path: Path) -> None:
    project = generate_project(FirmwareSpec(get_board("qemu-cortex-m3"),
                                            {"main.c": (APPS_DIR / "main_hello.c").read_text()}), tmp_path / "p")
    out = subprocess.run(["make", "-n", "-C", str(project), "build/firmware.elf"], capture_output=True, text=True,
                         check=True).stdout
    (link,) = [line for line in out.splitlines() if "-o build/firmware.elf" in line]
    group = link[link.index("-Wl,--start-group"):link.index("-Wl,--end-group")]
    assert "-lm" in group.split() and "-lc_nano" in group.split()


def test_unused_libm_costs_nothing(tmp_path: Path) -> None:
    """The hello firmware calls nothing of libm: its image is the same byte for byte without -lm."""
    project = generate_project(FirmwareSpec(get_board("qemu-cortex-m4"),
                                            {"main.c": (APPS_DIR / "main_hello.c").read_text()}), tmp_path / "p")
    images = {}
    for libs in ("", "-lc_nano -lgcc"):  # the Makefile's LDLIBS, then the same without -lm
        subprocess.run(["make", "-s", "-C", str(project), "clean"], check=True, capture_output=True)
        subprocess.run(["make", "-s", "-C", str(project), *([f"LDLIBS={libs}"] if libs else [])], check=True,
                       capture_output=True)
        images[libs] = (project / "build" / "firmware.bin").read_bytes()
        if not libs:
            assert "libm.a(" not in (project / "build" / "firmware.map").read_text()
    assert images[""] == images["-lc_nano -lgcc"]


# --- on the boards ------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("board", sorted(BOARDS))
def test_rpc_evaluation_firmware(board: str, model_bytes: bytes, want: list[np.ndarray], tmp_path: Path) -> None:
    compiled = compile(from_onnx(model_bytes))
    assert compiled.uses_libm
    sources, include = compiled.write_sources(tmp_path / "model")
    plat = get_platform(board)
    elf = plat.build(with_test_functions=False, system_lib_sources=sources, include_dirs=[include])
    with plat.start(elf, **SESSION_KWARGS) as sess:
        run = sess.system_lib().get_function(compiled.run_function)
        ins = [sess.array(a) for a in libm_inputs()]
        outs = [sess.empty(o.shape, o.dtype) for o in compiled.interface.outputs]
        run(*ins, *outs)
        got = [o.numpy() for o in outs]
    assert [o.name for o in compiled.interface.outputs] == list(OUTPUTS)
    assert_close(got, want, f"{board} over RPC")
    assert got[0][0, 0] == 0.0 and got[1][0, 3] == 1.0  # logistic(-100) (expf overflowed), tanh(100)


@pytest.mark.slow
@pytest.mark.parametrize("board", sorted(BOARDS))
def test_rpc_evaluation_firmware_rest_of_libm(board: str, tmp_path: Path) -> None:
    """The other <math.h> functions the float kernels call, on every board, against TFLM's kernels."""
    model = libm_model_tflite()
    compiled = compile(from_tflite(model))
    assert set(compiled.libm_functions) >= {f for _, f in TFLITE_LIBM_OPS.values()} | {"fmodf"}
    inputs = libm_tflite_inputs()
    want_t = reference(model, inputs, kind="tflm")
    firmware = evaluate.build_firmware(compiled, board)  # CRT limits sized for 21 arrays
    with get_platform(board).start(firmware, **SESSION_KWARGS) as sess:
        got, _ = evaluate.run_on_device(sess, compiled, inputs)
    for o, g, w in zip(compiled.interface.outputs, got, want_t, strict=True):
        scale = float(np.max(np.abs(w)))
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * max(scale, 1e-30),
                                   err_msg=f"{o.name} on {board} differs from TFLM")


@pytest.mark.slow
def test_deploy_project_builds_with_make_and_runs(model_bytes: bytes, want: list[np.ndarray],
                                                  tmp_path: Path) -> None:
    """The C interface on the soft-float M3: TVMExecute, no CRT library; libm still resolves."""
    compiled = compile(from_onnx(model_bytes), unpacked_api=True, interface_api="c")
    project = generate_deploy_project(compiled, "qemu-cortex-m3", tmp_path / "fw", libm_inputs())
    readme = (project / "README.md").read_text()
    assert "`expf`, `sqrtf`, `tanhf`" in readme and "-lm" in readme
    build = subprocess.run(["make", "-C", str(project)], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "libm.a(" in (project / "build" / "firmware.map").read_text()
    proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = parse_deploy_output(proc.stdout)
    assert out.status == 0 and out.board == "qemu-cortex-m3"
    assert_close([out.outputs[name] for name in OUTPUTS], want, "qemu-cortex-m3 (deploy project)")


@pytest.mark.slow
def test_size_firmware_links_and_attributes_libm_to_the_runtime(model_bytes: bytes) -> None:
    compiled = compile(from_onnx(model_bytes))
    report = firmware_report(compiled, "qemu-cortex-m7", inputs=libm_inputs(), measure=True)
    libm_objects = [name for name in report.footprint.objects if name.startswith("libm.a(")]
    assert libm_objects, "no libm member in the map: the model's expf/tanhf/sqrtf came from elsewhere?"
    report.footprint.check_against_elf()
    assert report.footprint.categories["runtime"]["text"] >= sum(report.footprint.objects[n]["text"]
                                                                  for n in libm_objects)
    assert report.stack_consistent is True
