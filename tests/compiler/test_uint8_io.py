"""uint8 model inputs/outputs through the compiler, the generated C and the tools, bit-exact with LiteRT's
reference kernels (BUILTIN_REF).

The uint8-I/O models of tests/frontend/test_tflite_uint8.py (every requantization uint8 <-> int8 <-> uint8
on all 256 input values, float32 <-> uint8, uint8 -> QUANTIZE -> FULLY_CONNECTED / ADD -> QUANTIZE -> uint8)
are merged into one graph, compiled with the full pass pipeline in the packed, unpacked and C conventions
and run on the host (own entry point, system library, TVMModel descriptor). Then: the typed header, the
packed DLDataType checks (kDLUInt = 1, 8 bits), `utvm run --platform host --check`, `utvm deploy`'s
sample-input header, and the passes that must leave an int8 <-> uint8 quantize alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "frontend"))
from test_tflite_uint8 import add_model, cases, fc_model  # noqa: E402

from oracle import OracleError, tflite_reference, tflite_reference_many  # noqa: E402
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.cli import main  # noqa: E402
from utvm.compiler import compile  # noqa: E402
from utvm.compiler.local import LocalModel  # noqa: E402
from utvm.compiler.passes.fuse_requantize import fuse_requantize  # noqa: E402
from utvm.compiler.pipeline import run_pipeline  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import Graph, Node, Quantization, Tensor, run_reference, verify  # noqa: E402
from utvm.platform.qemu.deploy import samples_header  # noqa: E402


def int8_uint8_roundtrip_model() -> bytes:
    """int8 -> QUANTIZE -> uint8 with the same scale and zero point -> DEQUANTIZE -> float32. Not a no-op:
    the uint8 step clamps the negative values to 0 (a pass that dropped it as a QDQ pair would be wrong)."""
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 256), "int8", scale=0.05, zero_point=0)
    u = b.tensor("u", (1, 256), "uint8", scale=0.05, zero_point=0)
    f = b.tensor("f", (1, 256), "float32")
    b.op("QUANTIZE", [x], [u])
    b.op("DEQUANTIZE", [u], [f])
    return b.build([x], [f])


def merge(graphs: list[tuple[str, Graph]]) -> Graph:
    """Independent graphs side by side in one: every tensor and node renamed `<prefix>_<name>`."""
    tensors, nodes, inputs, outputs = {}, [], [], []
    for prefix, g in graphs:
        def rn(name: str, p: str = prefix) -> str:
            return f"{p}_{name}" if name else name

        tensors.update({rn(t.name): t.replace(name=rn(t.name)) for t in g.tensors.values()})
        nodes += [n.replace(inputs=tuple(map(rn, n.inputs)), outputs=tuple(map(rn, n.outputs)),
                            name=rn(n.name or n.op)) for n in g.nodes]
        inputs += [rn(x) for x in g.inputs]
        outputs += [rn(y) for y in g.outputs]
    return Graph(tensors, nodes, tuple(inputs), tuple(outputs), "uint8_io")


@pytest.fixture(scope="module")
def merged() -> tuple[Graph, list[list[np.ndarray]], list[list[np.ndarray]]]:
    """(merged graph, input sets in graph order, LiteRT outputs in graph order per set)."""
    rng = np.random.default_rng(77)
    runs = cases(rng)
    x = np.arange(-128, 128).astype(np.int8).reshape(1, 256)
    runs.append(("roundtrip", int8_uint8_roundtrip_model(), [[x], [x[:, ::-1].copy()]]))
    results = tflite_reference_many([(m, sets) for _cid, m, sets in runs])
    for (cid, _m, _s), r in zip(runs, results, strict=True):
        assert not isinstance(r, OracleError), f"{cid}: LiteRT failed: {r}"
    graph = merge([(f"m{i}", from_tflite(m)) for i, (_cid, m, _s) in enumerate(runs)])
    verify(graph)
    n_sets = len(runs[0][2])
    sets = [[a for _cid, _m, s in runs for a in s[k]] for k in range(n_sets)]
    want = [[a for r in results for a in r[k]] for k in range(n_sets)]  # type: ignore[index]
    return graph, sets, want


def _assert_litert(got: list[np.ndarray], want: list[np.ndarray], graph: Graph, what: str) -> None:
    for name, g, w in zip(graph.outputs, got, want, strict=True):
        assert g.dtype == w.dtype, f"{what}: output {name!r} is {g.dtype}, LiteRT's {w.dtype}"
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * max(1.0, float(np.abs(w).max())),
                                       err_msg=f"{what}: output {name!r}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: output {name!r}")


def test_the_uint8_cases_are_in_the_merged_graph(merged: tuple) -> None:
    graph, _sets, _want = merged
    dtypes = [graph.tensors[n].dtype for n in graph.inputs + graph.outputs]
    assert dtypes.count("uint8") >= 15 and "int8" in dtypes and "float32" in dtypes
    assert run_reference(graph, dict(zip(graph.inputs, merged[1][0], strict=True))) is not None


@pytest.mark.parametrize(("kwargs", "opt"), [({}, "-O2"), ({"unpacked_api": True}, "-O0"),
                                             ({"unpacked_api": True, "interface_api": "c", "workspace": "user"},
                                              "-O2")], ids=["packed", "unpacked", "c"])
def test_generated_c_matches_litert(merged: tuple, kwargs: dict, opt: str) -> None:
    graph, sets, want = merged
    c = compile(graph, model_name="u8io", **kwargs)
    model = LocalModel(c, opt=opt)
    for k, (ins, w) in enumerate(zip(sets, want, strict=True)):
        _assert_litert(model.run(ins), w, graph, f"{kwargs} set {k} run")
        if kwargs.get("interface_api") == "c":
            _assert_litert(model.run_model_descriptor(ins), w, graph, f"{kwargs} set {k} TVMModel")
        else:
            _assert_litert(model.run_system_lib(ins), w, graph, f"{kwargs} set {k} system lib")
    ops_c = c.sources[f"{c.prefix}_ops.c"]
    assert "static const uint8_t" in ops_c  # int8 -> uint8 tables hold uint8_t, not int8_t


def test_header_has_uint8_pointers_and_packed_checks_want_kdluint() -> None:
    graph = from_tflite(fc_model(np.random.default_rng(3)))
    c = compile(graph, model_name="fcu8", unpacked_api=True, interface_api="c")
    header = c.includes["tvmgen_fcu8.h"]
    assert "  uint8_t* input_u8;" in header and "  uint8_t* output_u8;" in header
    assert "/*! Input 'input_u8': uint8[1, 16], " in header
    assert "#define TVMGEN_FCU8_INPUT_U8_DTYPE_CODE 1\n" in header  # kDLUInt
    assert "#define TVMGEN_FCU8_INPUT_U8_C_TYPE uint8_t\n" in header
    packed = compile(graph, model_name="fcu8")
    model = LocalModel(packed)
    x = np.arange(200, 216, dtype=np.uint8).reshape(1, 16)
    y = np.zeros((1, 6), np.uint8)
    assert model.call_packed(packed.run_function, [x, y]) == 0
    np.testing.assert_array_equal(y, tflite_reference(fc_model(np.random.default_rng(3)), [x])[0])
    # int8 data where the model wants uint8 (DLDataType code 0 instead of 1) is refused, naming the argument.
    assert model.call_packed(packed.run_function, [x.view(np.int8), y]) != 0
    assert "argument 0 (input_u8) has dtype (code 0, bits 8, lanes 1), expected uint8" in model.last_error()
    assert model.call_packed(packed.run_function, [x, y.view(np.int8)]) != 0
    assert "argument 1 (output_u8)" in model.last_error() and "expected uint8" in model.last_error()


def test_utvm_run_host_check_is_bit_exact(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "add_u8.tflite"
    path.write_bytes(add_model())
    rng = np.random.default_rng(9)
    a = np.full((1, 4, 4, 3), 250, np.uint8)  # > 127: would wrap if anything read it as int8
    b = rng.integers(0, 256, (1, 4, 4, 3)).astype(np.uint8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    assert main(["run", str(path), "--platform", "host", "--check", "--json", "--input", f"a_u8={tmp_path / 'a.npy'}",
                 "--input", f"b_u8={tmp_path / 'b.npy'}"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] is True and res["max_abs_err"] == 0.0
    assert res["outputs"]["sum_u8"] == tflite_reference(add_model(), [a, b])[0].tolist()
    assert main(["run", str(path), "--platform", "host", "--check", "--unpacked-api", "--interface-api", "c",
                 "--seed", "4"]) == 0
    assert "OK (bit-exact)" in capsys.readouterr().out


def test_deploy_sample_header_keeps_uint8_values() -> None:
    c = compile(from_tflite(fc_model(np.random.default_rng(3))), model_name="fcu8")
    x = np.array([[0, 1, 127, 128, 200, 255] + [7] * 10], np.uint8)
    text = samples_header(c, [x])
    assert "static const uint8_t utvm_sample_input_0[16]" in text
    assert "0, 1, 127, 128, 200, 255, 7," in text


def test_fuse_requantize_leaves_a_quantize_to_uint8_alone() -> None:
    # QDQ dense whose quantize goes to uint8: the int8 dense cannot produce uint8, so nothing is fused.
    rng = np.random.default_rng(8)
    w = rng.integers(-127, 128, (3, 4)).astype(np.int8)
    t = [Tensor("xq", (1, 4), "int8", Quantization((0.05,), (0,))), Tensor("xf", (1, 4), "float32"),
         Tensor("wq", (3, 4), "int8", Quantization((0.02,), (0,)), w), Tensor("wf", (3, 4), "float32"),
         Tensor("yf", (1, 3), "float32"), Tensor("yu", (1, 3), "uint8", Quantization((0.01,), (128,)))]
    nodes = [Node("dequantize", ("xq",), ("xf",), {}, "dqx"), Node("dequantize", ("wq",), ("wf",), {}, "dqw"),
             Node("dense", ("xf", "wf"), ("yf",), {"activation": "none"}, "fc"),
             Node("quantize", ("yf",), ("yu",), {}, "q")]
    g = Graph({x.name: x for x in t}, nodes, ("xq",), ("yu",), "qdq_u8")
    verify(g)
    assert fuse_requantize(g) is g
    h = run_pipeline(g)
    verify(h)
    assert h.tensors[h.outputs[0]].dtype == "uint8"
    x = rng.integers(-128, 128, (1, 4)).astype(np.int8)
    want = run_reference(g, {"xq": x})["yu"]
    (got,) = LocalModel(compile(g, model_name="qdq")).run([x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_deploy_on_qemu_prints_litert_outputs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import subprocess

    from utvm.platform.qemu.deploy import parse_deploy_output

    model = tmp_path / "fc_u8.tflite"
    model.write_bytes(fc_model(np.random.default_rng(3)))
    x = np.random.default_rng(5).integers(0, 256, (1, 16)).astype(np.uint8)
    np.save(tmp_path / "x.npy", x)
    project = tmp_path / "fw"
    assert main(["deploy", str(model), "--platform", "qemu-cortex-m4", "-o", str(project), "-q",
                 "--input", f"input_u8={tmp_path / 'x.npy'}", "--unpacked-api", "--interface-api", "c"]) == 0
    capsys.readouterr()
    proc = subprocess.run(["make", "-s", "-C", str(project), "run"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dep = parse_deploy_output(proc.stdout)
    assert dep.status == 0
    got = dep.outputs["output_u8"]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, tflite_reference(model, [x])[0])
