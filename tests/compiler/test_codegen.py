"""Generated C: the three calling conventions, argument checks, the system library, the model header."""

from __future__ import annotations

import ast
import ctypes
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from utvm.compiler import codegen, compile
from utvm.compiler.header import header_macros
from utvm.compiler.local import LocalModel, aligned_empty
from utvm.errors import CRTError
from utvm.frontend import load
from utvm.ir.graph import Graph, Node, Quantization, Tensor
from utvm.runtime.typecodes import TypeCode
from utvm.support import cc
from utvm.support.models import models_dir

MODELS = models_dir()
CONVENTIONS = {
    "packed": {},
    "unpacked": {"unpacked_api": True},
    "c": {"unpacked_api": True, "interface_api": "c"},
    "c-user": {"unpacked_api": True, "interface_api": "c", "workspace": "user"},
}


def int8_graph() -> Graph:
    """x int8[2, 8] -> dense(relu) -> h[2, 4] -> add(h, k) -> s[2, 4] -> dense -> y int8[2, 2].

    h and s share one workspace buffer (the add runs in place); y is the model output."""
    rng = np.random.default_rng(1)
    ts = [
        Tensor("x", (2, 8), "int8", Quantization((0.05,), (3,))),
        Tensor("w", (4, 8), "int8", Quantization((0.01, 0.02, 0.03, 0.04), (0, 0, 0, 0), 0),
               rng.integers(-127, 128, (4, 8)).astype(np.int8)),
        Tensor("b", (4,), "int32", None, rng.integers(-500, 500, 4).astype(np.int32)),
        Tensor("h", (2, 4), "int8", Quantization((0.07,), (-10,))),
        Tensor("k", (2, 4), "int8", Quantization((0.02,), (5,)), rng.integers(-128, 128, (2, 4)).astype(np.int8)),
        Tensor("s", (2, 4), "int8", Quantization((0.09,), (1,))),
        Tensor("w2", (2, 4), "int8", Quantization((0.015,), (0,)), rng.integers(-127, 128, (2, 4)).astype(np.int8)),
        Tensor("y", (2, 2), "int8", Quantization((0.03,), (-4,))),
    ]
    nodes = [Node("dense", ("x", "w", "b"), ("h",), {"activation": "relu"}, "fc"),
             Node("add", ("h", "k"), ("s",), {"activation": "none"}, "plus"),
             Node("dense", ("s", "w2", ""), ("y",), {"activation": "none"}, "fc2")]
    return Graph({t.name: t for t in ts}, nodes, ("x",), ("y",), "int8_graph")


@pytest.fixture(scope="module")
def int8_models() -> dict[str, object]:
    return {name: compile(int8_graph(), **kw) for name, kw in CONVENTIONS.items()}


def _strict_compile(compiled, tmp_path: Path, compiler: str, extra: tuple[str, ...] = ()) -> list[Path]:  # noqa: ANN001
    srcs, inc = compiled.write_sources(tmp_path)
    objs = []
    for s in srcs:
        obj = tmp_path / (s.stem + ".o")
        cc.run([compiler, *cc.WARNING_FLAGS, *extra, "-c", str(s), "-I", str(inc), "-I",
                str(cc.crt_dir() / "include"), "-o", str(obj)], what=f"{compiler} {s.name}")
        objs.append(obj)
    return objs


@pytest.mark.parametrize("conv", CONVENTIONS)
@pytest.mark.parametrize("compiler, flags", [
    ("gcc", ("-O2",)), ("gcc", ("-O0",)), ("clang", ("-O2",)),
    ("arm-none-eabi-gcc", ("-O2", "-mcpu=cortex-m0", "-mthumb")),
])
def test_generated_c_is_warning_free(int8_models, conv: str, compiler: str, flags: tuple, tmp_path: Path) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    _strict_compile(int8_models[conv], tmp_path, compiler, flags)


@pytest.mark.parametrize("conv", ["unpacked", "c", "c-user"])
def test_unpacked_operators_use_no_dltensor_or_tvmvalue(int8_models, conv: str) -> None:
    c = int8_models[conv]
    ops = c.sources["tvmgen_default_ops.c"]
    for word in ("DLTensor", "TVMValue", "type_codes", "c_runtime_api", "dlpack"):
        assert word not in ops, word
    assert re.search(r"int32_t tvmgen_default_fused_dense_relu\(const int8_t\* in0, int8_t\* out0\)", ops)
    if conv != "unpacked":  # with the C interface, main and the entry point are free of them too
        assert "DLTensor" not in c.sources["tvmgen_default_main.c"]
        assert "TVMValue" not in c.includes["tvmgen_default.h"]


def test_int8_code_needs_no_libm_and_no_floating_point(int8_models, tmp_path: Path) -> None:
    c = int8_models["c"]
    for name in ("tvmgen_default_ops.c", "tvmgen_default_main.c"):
        text = c.sources[name]
        assert "math.h" not in text and not re.search(r"\b(float|double)\b", text), name
    for obj in _strict_compile(c, tmp_path, "gcc", ("-O2",))[:2]:
        undefined = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout
        assert not re.search(r"\b(exp|expf|log|logf|tanh|tanhf|floor|round|lrint)f?\b", undefined), undefined


def _reference(x: np.ndarray) -> np.ndarray:
    from utvm.ir import run_reference

    return run_reference(int8_graph(), {"x": x})["y"]


@pytest.mark.parametrize("conv", CONVENTIONS)
def test_every_convention_computes_the_reference(int8_models, conv: str) -> None:
    m = LocalModel(int8_models[conv], opt="-O0")
    rng = np.random.default_rng(7)
    for _ in range(5):
        x = rng.integers(-128, 128, (2, 8)).astype(np.int8)
        ref = _reference(x)
        np.testing.assert_array_equal(m.run([x])[0], ref)
        np.testing.assert_array_equal(m.run_system_lib([x])[0], ref)
        if conv.startswith("c"):
            np.testing.assert_array_equal(m.run_model_descriptor([x])[0], ref)


def test_packed_functions_check_their_arguments(int8_models) -> None:
    m = LocalModel(int8_models["packed"], opt="-O0")
    x = np.zeros((2, 8), np.int8)
    y = np.zeros((2, 2), np.int8)
    for fn in ("tvmgen_default_run", "tvmgen_default___tvm_main__"):
        assert m.call_packed(fn, [x, y]) == 0
        assert m.call_packed(fn, [x]) == 0x800
        assert "expected 2 arguments, got 1" in m.last_error() and fn in m.last_error()
        assert m.call_packed(fn, [x.astype(np.float32), y]) == 0x803
        assert re.search(rf"{fn}: argument 0 \(x\) has dtype \(code 2, bits 32, lanes 1\), expected int8",
                         m.last_error())
        assert m.call_packed(fn, [x, np.zeros((2, 5), np.int8)]) == 0x803
        assert f"{fn}: argument 1 (y) has shape[1] = 5, expected 2" in m.last_error()
        assert m.call_packed(fn, [x, np.zeros((8,), np.int8)]) == 0x803
        assert "has 1 dimensions, expected 2" in m.last_error()
        assert m.call_packed(fn, [x, y], type_codes=[TypeCode.INT, TypeCode.DLTENSOR_HANDLE]) == 0x801
        assert "argument 0 (x) has type code 0, expected a DLTensor" in m.last_error()
    # an operator alone, as the host's per-operator timing calls it
    op = "tvmgen_default_fused_dense_relu"
    assert m.call_packed(op, [x, np.zeros((2, 4), np.int8)]) == 0
    assert m.call_packed(op, [x, np.zeros((2, 3), np.int8)]) == 0x803
    assert f"{op}: argument 1 (h) has shape[1] = 3, expected 4" in m.last_error()


def test_system_library_registers_run_main_and_every_operator_in_the_packed_convention(int8_models) -> None:
    c = int8_models["packed"]
    assert c.system_lib_functions == ("tvmgen_default_run", "tvmgen_default___tvm_main__",
                                      "tvmgen_default_fused_dense_relu", "tvmgen_default_fused_add",
                                      "tvmgen_default_fused_dense")
    m = LocalModel(c, opt="-O0")
    for name in c.system_lib_functions:
        assert m.system_lib_function(name).value
    with pytest.raises(CRTError, match="tvmgen_default_nope"):
        m.system_lib_function("tvmgen_default_nope")
    # each operator through the registry on its own: dense then add equals the whole model
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (2, 8)).astype(np.int8)
    h, s, y = np.zeros((2, 4), np.int8), np.zeros((2, 4), np.int8), np.zeros((2, 2), np.int8)
    m.call_system_lib("tvmgen_default_fused_dense_relu", [x, h])
    m.call_system_lib("tvmgen_default_fused_add", [h, s])
    m.call_system_lib("tvmgen_default_fused_dense", [s, y])
    np.testing.assert_array_equal(y, _reference(x))


@pytest.mark.parametrize("conv", ["unpacked", "c"])
def test_system_library_of_unpacked_models_has_the_packed_run(int8_models, conv: str) -> None:
    assert int8_models[conv].system_lib_functions == ("tvmgen_default_run",)


def test_registry_names_blob_layout() -> None:
    names = [f"f{i}" for i in range(300)]
    literal = codegen.registry_names_literal(names)
    blob = ast.literal_eval(literal.replace("\n", " ")).encode("latin-1") + b"\0"  # C adds the final NUL
    assert blob[:2] == (300).to_bytes(2, "little")
    assert blob[2:] == b"".join(n.encode() + b"\0" for n in names) + b"\0"


def test_user_workspace_comes_from_the_context(int8_models) -> None:
    c = int8_models["c-user"]
    assert c.plan.workspace_bytes > 0
    m = LocalModel(c, opt="-O0")
    desc = m.model_descriptor()
    assert (desc.version, desc.num_input_tensors, desc.num_output_tensors, desc.num_workspaces,
            desc.workspace_from_context) == (1, 1, 1, 1, 1)
    assert desc.workspace_size[0] == c.plan.workspace_bytes
    x = np.ones((2, 8), np.int8)
    with pytest.raises(CRTError) as exc:
        m.run_model_descriptor([x], context=False)  # TVMExecute(&model, &in, &out, NULL)
    assert exc.value.code == 0x701  # kTvmErrorExecutorModuleBadContext
    # a misaligned workspace is refused too
    run = m.lib.tvmgen_default_run
    run.restype = ctypes.c_int32
    ws = aligned_empty(c.plan.workspace_bytes + 16)
    y = np.zeros((2, 2), np.int8)
    for offset, expected in ((8, 0x701), (16, 0)):
        ptrs = (ctypes.c_void_p * 1)(ws.ctypes.data + offset)
        ctx = (ctypes.c_void_p * 1)(ctypes.cast(ptrs, ctypes.c_void_p).value)
        ins, outs = (ctypes.c_void_p * 1)(x.ctypes.data), (ctypes.c_void_p * 1)(y.ctypes.data)
        assert run(ins, outs, ctx) == expected
    np.testing.assert_array_equal(y, _reference(x))


def test_static_workspace_model_descriptor(int8_models) -> None:
    c = int8_models["c"]
    desc = LocalModel(c, opt="-O0").model_descriptor()
    assert desc.workspace_from_context == 0 and desc.name == b"default"
    assert desc.workspace_size[0] == c.plan.workspace_bytes


@pytest.mark.parametrize("conv", CONVENTIONS)
def test_header_macros_are_the_metadata_mapping(int8_models, conv: str, tmp_path: Path) -> None:
    c = int8_models[conv]
    header = c.includes["tvmgen_default.h"]
    defined = dict(re.findall(r"^#define (TVMGEN_DEFAULT_\w+) (.+)$", header, re.M))
    assert defined == {k: str(v) for k, v in header_macros(c.metadata).items()}
    assert defined["TVMGEN_DEFAULT_X_SIZE"] == "16" and defined["TVMGEN_DEFAULT_Y_SIZE"] == "4"
    assert defined["TVMGEN_DEFAULT_WORKSPACE_SIZE"] == str(c.plan.workspace_bytes)
    # the header stands alone
    (tmp_path / "tvmgen_default.h").write_text(header)
    (tmp_path / "use.c").write_text('#include "tvmgen_default.h"\nint use(void) { return TVMGEN_DEFAULT_X_SIZE; }\n')
    cc.run(["gcc", *cc.WARNING_FLAGS, "-c", str(tmp_path / "use.c"), "-I", str(tmp_path), "-I",
            str(cc.crt_dir() / "include"), "-o", str(tmp_path / "use.o")])


def test_c_interface_header_declares_structs_run_and_model(int8_models) -> None:
    h = int8_models["c"].includes["tvmgen_default.h"]
    assert "struct tvmgen_default_inputs {\n  int8_t* x;\n};" in h
    assert "struct tvmgen_default_outputs {\n  int8_t* y;\n};" in h
    assert ("int32_t tvmgen_default_run(struct tvmgen_default_inputs* inputs, "
            "struct tvmgen_default_outputs* outputs);") in h
    assert "extern const TVMModel tvmgen_default_model;" in h
    hu = int8_models["c-user"].includes["tvmgen_default.h"]
    assert "struct tvmgen_default_outputs* outputs, const TVMContext* context);" in hu


def test_io_names_are_sanitized_into_macros_and_fields() -> None:
    g = load(MODELS / "tflm" / "simple_add_model.tflite")
    c = compile(g, model_name="add", unpacked_api=True, interface_api="c")
    h = c.includes["tvmgen_add.h"]
    assert "#define TVMGEN_ADD_SERVING_DEFAULT_INPUT_1_0_SIZE 16384" in h
    assert "#define TVMGEN_ADD_PARTITIONEDCALL_0_SIZE 16384" in h
    assert "  int8_t* serving_default_input_2_0;" in h
    assert all(s.startswith("tvmgen_add_") for s in c.sources)


@pytest.mark.parametrize("conv", ["packed", "c"])
@pytest.mark.parametrize("model", ["mlperf_tiny/kws_ref_model.tflite", "mlperf_tiny/pretrainedResnet_quant.tflite"])
def test_real_models_cross_compile_for_cortex_m(model: str, conv: str, tmp_path: Path) -> None:
    """On arm-none-eabi int32_t is `long`: packed functions must still be exactly TVMBackendPackedCFunc."""
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    compiled = compile(load(MODELS / model), **CONVENTIONS[conv])
    _strict_compile(compiled, tmp_path, "arm-none-eabi-gcc", ("-O2", "-mcpu=cortex-m4", "-mthumb"))


ODD_NAMES = {"x": 'x"in\\??/\n', "h": "h*/ /*h??", "y": "é€??="}


def odd_names_graph() -> Graph:
    """int8_graph with tensor names that are hostile to C: quotes, backslashes, trigraphs, a newline, comment
    delimiters and non-ASCII (all legal in TFLite/ONNX)."""
    import dataclasses

    g = int8_graph()
    rn = lambda n: ODD_NAMES.get(n, n)  # noqa: E731
    tensors = {rn(t.name): dataclasses.replace(t, name=rn(t.name)) for t in g.tensors.values()}
    nodes = [dataclasses.replace(n, inputs=tuple(map(rn, n.inputs)), outputs=tuple(map(rn, n.outputs)))
             for n in g.nodes]
    return Graph(tensors, nodes, tuple(map(rn, g.inputs)), tuple(map(rn, g.outputs)), g.name)


@pytest.mark.parametrize("conv", CONVENTIONS)
def test_tensor_names_hostile_to_c_compile_and_are_reported_verbatim(conv: str, tmp_path: Path) -> None:
    c = compile(odd_names_graph(), **CONVENTIONS[conv])
    _strict_compile(c, tmp_path, "gcc", ("-O0",))  # -Werror: no broken literal, comment or trigraph
    m = LocalModel(c, opt="-O0")
    x = np.random.default_rng(3).integers(-128, 128, (2, 8)).astype(np.int8)
    np.testing.assert_array_equal(m.run([x])[0], _reference(x))
    if conv == "packed":  # the argument check names the tensor byte for byte
        assert m.call_packed("tvmgen_default_run", [x, np.zeros((2, 5), np.int8)]) == 0x803
        assert f"argument 1 ({ODD_NAMES['y']}) has shape[1] = 5, expected 2" in m.last_error()
        assert m.call_packed("tvmgen_default_run", [x.astype(np.float32), np.zeros((2, 2), np.int8)]) == 0x803
        assert f"argument 0 ({ODD_NAMES['x']}) has dtype" in m.last_error()


@pytest.mark.parametrize("conv", ["packed", "unpacked", "c"])
def test_a_constant_output_holding_nan_and_infinity_compiles(conv: str) -> None:
    """A model output that is a constant with NaN / +-inf: main.c spells them NAN / INFINITY, which need
    <math.h> (the operators file is not the only one that can)."""
    from tests.tflite_builder import TFLiteBuilder

    from utvm.compiler.local import LocalModel
    from utvm.frontend import from_tflite

    special = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    b = TFLiteBuilder()
    x = b.tensor("x", (4,), "float32")
    y = b.tensor("y", (4,), "float32")
    k = b.tensor("k", (4,), "float32", data=special)
    b.op("RELU", [x], [y])
    flags = {"packed": {}, "unpacked": {"unpacked_api": True},
             "c": {"unpacked_api": True, "interface_api": "c"}}[conv]
    compiled = compile(from_tflite(b.build(inputs=[x], outputs=[y, k])), **flags)
    assert "NAN" in compiled.sources["tvmgen_default_main.c"]
    got_y, got_k = LocalModel(compiled).run([np.array([-1, 2, -3, 4], np.float32)])
    assert got_y.tolist() == [0, 2, 0, 4]
    np.testing.assert_array_equal(got_k, special)


# --- what the kernels report equals what their C holds ------------------------------------------------------

TESTS = Path(__file__).resolve().parents[1]
# the kernel_harness batches of tests/compiler: (module, builder, arguments; "rng" is a generator)
_BATCHES = (
    ("test_kernels_activation", "_int8_batch", ()), ("test_kernels_quantize", "_batch", ()),
    ("test_kernels_softmax", "_batch", ("int8",)), ("test_kernels_softmax", "_batch", ("float32",)),
    ("test_kernels_elementwise", "_batch", ("int8",)), ("test_kernels_elementwise", "_batch", ("float32",)),
    ("test_kernels_dense", "_batch", ("rng",)), ("test_kernels_layout", "_batch", ("int8", "rng")),
    ("test_kernels_layout", "_batch", ("float32", "rng")), ("test_kernels_matmul", "_matmul_batch", ("int8", "rng")),
    ("test_kernels_matmul", "_matmul_batch", ("float32", "rng")), ("test_kernels_pool", "_pool_batch", ("int8", "rng")),
    ("test_kernels_pool", "_pool_batch", ("float32", "rng")), ("test_kernels_depthwise_dsp", "make_batch", ("rng", 8)),
    ("test_kernels_elementwise_tables", "make_batch", ("rng", 10)),
    ("test_kernels_pool_simd", "make_batch", ("rng", 8)), ("test_schedules_gemm", "make_batch", ("rng", 6, 4)))


# the modules of tests/tflm whose case lists are single-op models of every op family
_TFLM_FAMILIES = ("unary", "binary", "gather", "movement", "reduce", "recurrent", "signal", "conv")


def _case_lists(mod: object) -> list[str]:
    """The TFLM case lists of a tests/tflm module: its functions `*cases()` of no argument (not `all_cases`,
    the union of the others)."""
    return [name for name, fn in sorted(vars(mod).items())
            if name.endswith("cases") and name != "all_cases" and callable(fn) and hasattr(fn, "__code__")
            and fn.__module__ == getattr(mod, "__name__", "") and fn.__code__.co_argcount == 0]


def _repo_graphs() -> list[tuple[str, Graph, bool]]:
    """(name, graph, whether to run the passes) of every model in the repo (that imports), of the float models of
    tests/platform/test_qemu_libm.py, of every TFLM case list of tests/tflm (merged per list) and of the
    kernel_harness batches of tests/compiler."""
    import importlib
    import sys

    from utvm.frontend import from_onnx, from_tflite

    for d in (TESTS, TESTS / "compiler", TESTS / "tflm", TESTS / "platform"):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    out: list[tuple[str, Graph, bool]] = []
    for p in sorted(MODELS.rglob("*")):
        if p.suffix in (".tflite", ".onnx") and "subset" not in p.parts:
            try:
                out.append((str(p.relative_to(MODELS)), load(p), True))
            except Exception:  # noqa: BLE001 - a model utvm refuses (hybrid) has no C to check
                continue
    libm = importlib.import_module("test_qemu_libm")
    out += [("libm-onnx", from_onnx(libm.libm_model()), True),
            ("libm-tflite", from_tflite(libm.libm_model_tflite()), True)]
    harness = importlib.import_module("tflm_harness")
    for family in _TFLM_FAMILIES:
        mod = importlib.import_module(f"test_tflm_{family}")
        for name in _case_lists(mod):
            cases = getattr(mod, name)()
            graph = harness.merge([(f"c{i}", from_tflite(c.model)) for i, c in enumerate(cases)])
            out.append((f"test_tflm_{family}.{name}", graph, False))
    for modname, fn, args in _BATCHES:
        rng = np.random.default_rng(5)
        batch = getattr(importlib.import_module(modname), fn)(*(rng if a == "rng" else a for a in args))
        out.append((f"{modname}.{fn}{args}", batch.graph(), False))
    return out


_SPECIALS = re.compile(r"\b(NAN|INFINITY)\b")


def test_what_the_kernels_report_is_what_their_c_calls() -> None:
    """On every model and kernel test batch of the repo, the <math.h> functions the kernels reported
    (`ctx.libm`, helpers' `libm`: the metadata's `libm_functions`) are exactly the ones the text of the C
    calls, and a file includes <math.h> exactly when it calls one or spells NAN / INFINITY: a kernel that
    forgets to report a call (or a literal) fails here."""
    wrong: list[str] = []
    every_call: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import quirks of the TFLM cases (tests/tflm checks them)
        graphs = _repo_graphs()
    assert len(graphs) > 40
    for name, graph, passes in graphs:
        compiled = compile(graph, passes=passes)
        recorded = compiled.libm_functions
        assert recorded == tuple(compiled.metadata["modules"]["default"]["utvm"]["libm_functions"])
        scanned = codegen.libm_functions(compiled.sources)
        if recorded != scanned:
            wrong.append(f"{name}: recorded {recorded}, the C calls {scanned}")
        every_call.update(recorded)
        for fname in ("tvmgen_default_ops.c", "tvmgen_default_main.c"):
            text = compiled.sources[fname]
            code = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
            needs = bool(codegen.libm_functions({fname: text})) or bool(_SPECIALS.search(code))
            if ("#include <math.h>" in text) != needs:
                wrong.append(f"{name}: {fname} {'lacks' if needs else 'needlessly has'} #include <math.h>")
    assert not wrong, "\n".join(wrong)
    # the graphs reach every kind of report: kernel calls, helper calls, double and float functions
    assert {"expf", "tanhf", "sqrtf", "logf", "floorf", "fmodf", "exp", "expm1f"} <= every_call, every_call


def test_a_kernel_reports_libm_calls_and_float_specials() -> None:
    """`ctx.libm` refuses a name <math.h> does not declare; `ctx.float_literal` of an infinity is recorded."""
    from utvm.compiler.kernels import FileScope, KernelContext
    from utvm.errors import CompileError

    g = int8_graph()
    ctx = KernelContext(g.nodes[0], 0, g, "single", "f", FileScope("p"), {0: "in0"}, ["out0"])
    assert ctx.libm("expf") == "expf" and ctx.file.libm == {"expf"}
    with pytest.raises(CompileError, match="not a C99 <math.h> function"):
        ctx.libm("my_expf")
    assert not ctx.file.float_specials
    assert ctx.float_literal(1.5) == "1.5f" and not ctx.file.float_specials
    assert ctx.literal(-2**31, "int32") == "(-2147483647 - 1)" and not ctx.file.float_specials
    assert ctx.literal(float("inf"), "float32") == "INFINITY" and ctx.file.float_specials
    assert FileScope("q").includes_math_h is False and ctx.file.includes_math_h
