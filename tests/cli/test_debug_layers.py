"""`utvm run --debug-layers` and utvm.debug_layers: every operator run alone on the device, each intermediate
compared with the reference interpreter, in every calling convention; `--profile` in every convention on
QEMU (on the host: tests/platform/test_qemu_eval.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import utvm
from utvm.cli import EXIT_MISMATCH, main
from utvm.cli import run as run_cli
from utvm.compiler import compile
from utvm.compiler.kernels import C_TYPES
from utvm.errors import UsageError
from utvm.evaluate import build_firmware, read_inputs
from utvm.frontend import load
from utvm.ir import run_reference
from utvm.ir.graph import Graph, Node, Tensor
from utvm.layer_debug import compare_tensor
from utvm.platform import get_platform
from utvm.support.models import models_dir

MODELS = models_dir()
# Reshape (an alias: no code) -> depthwise conv2d + relu -> dense -> softmax: three operator functions.
SPEECH = MODELS / "tflm" / "micro_speech_quantized.tflite"

CONVENTIONS = {
    "packed": [],
    "unpacked": ["--unpacked-api"],
    "c": ["--unpacked-api", "--interface-api", "c"],
    "c-user-workspace": ["--unpacked-api", "--interface-api", "c", "--workspace", "user"],
}
COMPILE_KW = {
    "packed": {},
    "unpacked": {"unpacked_api": True},
    "c": {"unpacked_api": True, "interface_api": "c"},
    "c-user-workspace": {"unpacked_api": True, "interface_api": "c", "workspace": "user"},
}


def perturb(compiled: utvm.compiler.driver.CompiledModel, index: int, element: int) -> None:
    """Make operator `index`'s generated C add 1 to flat element `element` of its first output (wrapping),
    after computing it: the code on the device is wrong, the reference is not."""
    op = compiled.operators[index]
    name = f"{compiled.prefix}_ops.c"
    text = compiled.sources[name]
    fn = op.name if compiled.options.unpacked_api else f"{op.name}_compute"
    m = re.search(rf"(static )?int32_t {re.escape(fn)}\(([^)]*)\) \{{", text)
    assert m is not None, f"no definition of {fn} in {name}"
    params = m.group(2)
    names = [p.split("*")[-1].strip() for p in params.split(",")]
    ctype = C_TYPES[op.outputs[0].dtype]
    wrapper = (f"static int32_t {fn}_orig({params});\n{m.group(1) or ''}int32_t {fn}({params}) {{\n"
               f"  int32_t r = {fn}_orig({', '.join(names)});\n"
               f"  out0[{element}] = ({ctype})(out0[{element}] + 1);\n  return r;\n}}\n"
               f"static int32_t {fn}_orig({params}) {{")
    compiled.sources[name] = text[:m.start()] + wrapper + text[m.end():]


@pytest.mark.parametrize("conv", list(CONVENTIONS))
def test_all_operators_match_in_every_convention(conv: str, capsys: pytest.CaptureFixture) -> None:
    argv = ["run", str(SPEECH), "--platform", "host", "--seed", "5", "--repeat", "1", "--debug-layers",
            *CONVENTIONS[conv]]
    assert main([*argv, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)["debug_layers"]
    assert res["ok"] is True and res["first_mismatch"] is None and res["operators"] == 3
    assert [r["op"] for r in res["layers"]] == ["depthwise_conv2d", "dense", "softmax"]
    assert [r["index"] for r in res["layers"]] == [0, 1, 2]
    assert all(r["n_diff"] == 0 and r["max_abs_diff"] == 0 and r["first_diff"] is None for r in res["layers"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "all 3 operators match the reference" in out
    table = out[out.index("#  function"):].splitlines()
    assert table[2].split()[:4] == ["0", "tvmgen_default_fused_depthwise_conv2d_relu", "depthwise_conv2d", "Relu"]


@pytest.mark.parametrize("conv", ["packed", "unpacked", "c-user-workspace"])
def test_an_altered_operator_is_named_first(conv: str, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture) -> None:
    compiled = compile(load(SPEECH), **COMPILE_KW[conv])
    before = dict(compiled.sources)
    perturb(compiled, 1, 2)  # the dense layer's third output element
    assert compiled.sources != before
    monkeypatch.setattr(run_cli, "load_model_or_mlf", lambda _args, _say: compiled)
    argv = ["run", str(SPEECH), "--platform", "host", "--seed", "8", "--repeat", "1", "--debug-layers"]
    assert main([*argv, "--json"]) == EXIT_MISMATCH
    res = json.loads(capsys.readouterr().out)["debug_layers"]

    inputs = read_inputs(compiled, [], 8)
    ref = run_reference(compiled.graph, dict(zip(compiled.graph.inputs, inputs, strict=True)),
                        intermediates=True)
    dense = compiled.operators[1]
    want = ref[dense.outputs[0].name].reshape(-1)[2]
    wrong = (want.astype(np.int8) + np.int8(1)) if want != 127 else np.int8(-128)
    assert res["ok"] is False
    first = res["first_mismatch"]
    assert first["index"] == 1 and first["function"] == dense.name and first["tensor"] == dense.outputs[0].name
    assert first["n_diff"] == 1
    assert first["max_abs_diff"] == abs(int(wrong) - int(want))
    assert first["first_diff"] == [int(i) for i in np.unravel_index(2, dense.outputs[0].shape)]
    assert res["layers"][0]["n_diff"] == 0  # the operator before it is right

    assert main(argv) == EXIT_MISMATCH
    out = capsys.readouterr().out
    assert (f"first difference: operator 1 {dense.name} (dense, {dense.node}), output "
            f"{dense.outputs[0].name!r} int8[1, 4]: 1 of 4 element(s) differ, max abs difference "
            f"{abs(int(wrong) - int(want))}, first at index [0, 2]") in out


def test_python_api_returns_every_intermediate() -> None:
    compiled = compile(load(SPEECH), unpacked_api=True, interface_api="c")
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, compiled.interface.inputs[0].shape, endpoint=False).astype(np.int8)
    res = utvm.debug_layers(compiled, {compiled.interface.inputs[0].name: x}, platform="host")
    g = compiled.graph
    computed = [n for node in g.nodes for n in node.outputs]  # execution order, the alias included
    assert list(res.tensors) == computed
    assert set(res.tensors) == {n for n, t in g.tensors.items() if t.data is None} - set(g.inputs)
    assert "Relu/flatten" in res.tensors  # the reshape alias: its input's bytes
    np.testing.assert_array_equal(res.tensors["Relu/flatten"], res.tensors["Relu"].reshape(-1, 4000))
    for name, value in res.tensors.items():
        np.testing.assert_array_equal(value, res.reference[name])
    assert res.ok and res.first_mismatch is None and len(res.layers) == 3
    # The wrappers live in the firmware only: the model's C and system library are what compile made.
    assert not any("_debug" in name for name in compiled.sources)
    assert not any(op.name in compiled.system_lib_functions for op in compiled.operators)


def test_a_stateful_float_model_starts_from_the_zero_state() -> None:
    # x -> svdf (float32, with a state block: the `state` argument, zeroed as after boot) -> relu -> y
    rng = np.random.default_rng(1)

    def const(name: str, shape: tuple[int, ...]) -> Tensor:
        return Tensor(name, shape, "float32", None, rng.uniform(-0.5, 0.5, shape).astype(np.float32))

    ts = [Tensor("x", (2, 5), "float32"), Tensor("h", (2, 3), "float32"), Tensor("y", (2, 3), "float32"),
          const("wf", (6, 5)), const("wt", (6, 3)), const("b", (3,))]
    attrs = {"activation": "none", "state_dtype": "float32", "state_scale": 0.0, "state_zero_point": 0, "rank": 2}
    nodes = (Node("svdf", ("x", "wf", "wt", "b"), ("h",), attrs, "s1"), Node("tanh", ("h",), ("y",), {}, "t"))
    graph = Graph({t.name: t for t in ts}, nodes, ("x",), ("y",), "stateful")
    compiled = compile(graph, unpacked_api=True, interface_api="c")
    assert compiled.operators[0].persistent_bytes > 0
    x = rng.standard_normal((2, 5)).astype(np.float32)
    res = utvm.debug_layers(compiled, [x])
    assert res.ok and list(res.tensors) == ["h", "y"]
    np.testing.assert_allclose(res.tensors["y"], res.reference["y"], rtol=0, atol=1e-5)
    assert np.abs(res.tensors["h"]).max() > 0


@pytest.mark.slow
def test_debug_layers_on_qemu(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    base = ["run", str(SPEECH), "--platform", "qemu-cortex-m4", "--seed", "2", "--repeat", "1", "--debug-layers",
            "--json"]
    assert main([*base, "--unpacked-api", "--interface-api", "c"]) == 0
    res = json.loads(capsys.readouterr().out)["debug_layers"]
    assert res["ok"] is True and res["operators"] == 3
    compiled = compile(load(SPEECH), unpacked_api=True, target="cortex-m4")
    perturb(compiled, 0, 5)
    monkeypatch.setattr(run_cli, "load_model_or_mlf", lambda _args, _say: compiled)
    assert main(base) == EXIT_MISMATCH
    first = json.loads(capsys.readouterr().out)["debug_layers"]["first_mismatch"]
    assert first["index"] == 0 and first["n_diff"] == 1 and first["op"] == "depthwise_conv2d"


@pytest.mark.slow
def test_profile_on_qemu_in_the_c_convention(capsys: pytest.CaptureFixture) -> None:
    argv = ["run", str(SPEECH), "--platform", "qemu-cortex-m4", "--seed", "4", "--repeat", "1", "--profile",
            "--json", "--unpacked-api", "--interface-api", "c"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    prof = res["profile"]
    assert {p["function"] for p in prof} == {"tvmgen_default_fused_depthwise_conv2d_relu",
                                             "tvmgen_default_fused_dense", "tvmgen_default_fused_softmax"}
    assert all(p["cycles"] > 0 and p["cycles"] == round(p["seconds"] * 1e9) for p in prof)
    # Each operator alone costs less than the whole model (the sum need not: each packed wrapper checks its
    # arguments, which the C-interface run does not).
    assert all(p["cycles"] < res["cycles"] for p in prof)


def test_compare_tensor_counts_and_locates_differences() -> None:
    want = np.array([[0.0, 1.0, np.nan], [2.0, np.inf, -3.0]], np.float32)
    assert compare_tensor(want.copy(), want) == (0.0, 0, None)
    got = want.copy()
    got[1, 2] += 1e-6  # within the tolerance (1e-5 x the magnitude 3)
    got[1, 0] = 2.5
    assert compare_tensor(got, want) == (0.5, 1, (1, 0))
    got[0, 2] = 0.0  # a number where the reference has NaN
    assert compare_tensor(got, want) == (np.inf, 2, (0, 2))
    ints = np.arange(6, dtype=np.int8).reshape(2, 3)
    off = ints.copy()
    off[0, 1] = -128
    assert compare_tensor(off, ints) == (129.0, 1, (0, 1))


def test_a_session_on_firmware_without_the_wrappers_is_refused() -> None:
    compiled = compile(load(SPEECH), unpacked_api=True)
    firmware = build_firmware(compiled, "host")  # not debug=True: the raw-pointer operators are not callable
    with get_platform("host").start(firmware) as session, pytest.raises(UsageError) as exc:
        utvm.debug_layers(compiled, session=session)
    assert "tvmgen_default_fused_depthwise_conv2d_relu" in str(exc.value) and "debug=True" in str(exc.value)
