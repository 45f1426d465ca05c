"""Every supported corpus model, compiled in the three conventions, built with gcc -O2 and -O0 and run on
the host (ctypes): bit-exact with TFLite's reference kernels for int8, within 1e-5 for float.

The oracle runs once per model on a batch of random inputs (a subprocess: utvm.compiler.oracle).
`UNSUPPORTED` lists the corpus models the kernels cannot compile yet; their error must name the op.
"""

from __future__ import annotations

import numpy as np
import pytest

from utvm.compiler import compile
from utvm.compiler.local import LocalModel, random_inputs
from utvm.compiler.oracle import reference_outputs
from utvm.errors import UnsupportedModelError, UnsupportedOperatorError
from utvm.frontend import load
from utvm.support.models import models_dir

MODELS = models_dir()
ALL_MODELS = [
    "tflm/hello_world_int8.tflite",
    "tflm/hello_world_float.tflite",
    "tflm/simple_add_model.tflite",
    "tflm/micro_speech_quantized.tflite",
    "mlperf_tiny/ad01_int8.tflite",
    "mlperf_tiny/kws_ref_model.tflite",
    "mlperf_tiny/pretrainedResnet_quant.tflite",
    "onnx/mnist-8/model.onnx",
]
# Models that must work whatever kernels exist (the framework's own kernels cover them).
ALWAYS = {"tflm/hello_world_int8.tflite", "tflm/hello_world_float.tflite", "tflm/simple_add_model.tflite",
          "mlperf_tiny/ad01_int8.tflite"}


def _missing_kernels(model: str) -> list[str]:
    """Ops of the passed graph that have no kernel (empty: the model is supported)."""
    from utvm.compiler import run_passes
    from utvm.compiler.kernels import supported_ops

    graph, _log = run_passes(load(MODELS / model))
    return sorted({n.op for n in graph.nodes} - set(supported_ops()))


_MISSING = {m: _missing_kernels(m) for m in ALL_MODELS}
SUPPORTED = [m for m in ALL_MODELS if not _MISSING[m]]
UNSUPPORTED = {m: ops[0] for m, ops in _MISSING.items() if ops}


def test_framework_models_are_supported() -> None:
    assert ALWAYS <= set(SUPPORTED), {m: _MISSING[m] for m in ALWAYS}


CONVENTIONS = {
    "packed": {},
    "unpacked": {"unpacked_api": True},
    "c": {"unpacked_api": True, "interface_api": "c"},
}
N_INPUTS = 6


@pytest.fixture(scope="module", params=SUPPORTED)
def case(request: pytest.FixtureRequest) -> tuple:
    path = MODELS / request.param
    graph = load(path)
    probe = compile(graph)
    rng = np.random.default_rng(2024)
    sets = [random_inputs(probe, rng) for _ in range(N_INPUTS)]
    return request.param, path, graph, sets, reference_outputs(path, sets)


def _assert_matches(model: str, got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{model} output {k} ({what})"
        if g.dtype == np.float32:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{model} output {k} ({what})")
        else:
            mismatch = np.flatnonzero(g.astype(np.int64) != w.astype(np.int64))
            assert mismatch.size == 0, (f"{model} output {k} ({what}): {mismatch.size} of {g.size} values differ, "
                                        f"first at flat index {mismatch[0]}: {g.flat[mismatch[0]]} vs "
                                        f"{w.flat[mismatch[0]]}")


@pytest.mark.parametrize("opt", ["-O2", "-O0"])
@pytest.mark.parametrize("conv", CONVENTIONS)
def test_model_matches_the_reference_interpreter(case: tuple, conv: str, opt: str) -> None:
    model, _path, graph, sets, refs = case
    compiled = compile(graph, **CONVENTIONS[conv])
    local = LocalModel(compiled, opt=opt)
    for i, (inputs, ref) in enumerate(zip(sets, refs, strict=True)):
        _assert_matches(model, local.run(inputs), ref, f"{conv} {opt} input set {i}")
    # the path RPC takes: runtime.SystemLib -> TVMModGetFunction(tvmgen_default_run) -> TVMFuncCall
    _assert_matches(model, local.run_system_lib(sets[0]), refs[0], f"{conv} {opt} via the system library")


def test_double_rounding_matches_the_reference_semantics(case: tuple) -> None:
    """`--rounding double` (gemmlowp, TFLM) is bit-exact with utvm.ops' reference in that mode."""
    from utvm.ir import run_reference

    model, _path, graph, sets, _refs = case
    compiled = compile(graph, rounding="double", unpacked_api=True, interface_api="c")
    local = LocalModel(compiled)
    for inputs in sets:
        want = run_reference(graph, dict(zip(graph.inputs, inputs, strict=True)), rounding="double")
        _assert_matches(model, local.run(inputs), list(want.values()), "rounding double")


def test_models_beyond_the_kernels_fail_naming_the_operator() -> None:
    for model, op in sorted(UNSUPPORTED.items()):
        with pytest.raises(UnsupportedOperatorError, match=rf"unsupported operator '{op}' at node \d+"):
            compile(load(MODELS / model))


def test_hybrid_float_model_is_refused_with_a_reason() -> None:
    with pytest.raises(UnsupportedModelError, match="hybrid"):
        compile(load(MODELS / "mlperf_tiny" / "kws_ref_model_float32.tflite"))


# --- over RPC on the host device ----------------------------------------------------------------------------

def _per_operator_reference(graph, compiled, inputs) -> dict[str, np.ndarray]:  # noqa: ANN001
    from utvm.ir import run_reference

    return run_reference(compiled.graph, dict(zip(graph.inputs, inputs, strict=True)), intermediates=True)


@pytest.mark.parametrize("conv", CONVENTIONS)
def test_model_over_rpc_on_the_host_device(case: tuple, conv: str) -> None:
    from utvm.evaluate import build_firmware, run_on_device
    from utvm.platform import get_platform

    model, _path, graph, sets, refs = case
    compiled = compile(graph, **CONVENTIONS[conv])
    firmware = build_firmware(compiled, "host")
    with get_platform("host").start(firmware) as session:
        for i, (inputs, ref) in enumerate(zip(sets, refs, strict=True)):
            outputs, latency = run_on_device(session, compiled, inputs, repeat=1 if i == 0 else 0)
            _assert_matches(model, outputs, ref, f"{conv} over RPC, input set {i}")
            if i == 0:
                assert latency is not None and latency > 0
        if conv != "packed":
            return
        # Packed convention: every operator is callable on its own with DLTensors (per-operator timing).
        values = _per_operator_reference(graph, compiled, sets[0])
        lib = session.system_lib()
        for op in compiled.operators:
            args = [session.array(values[t.name]) for t in op.inputs]
            outs = [session.empty(t.shape, t.dtype) for t in op.outputs]
            scratch = [session.empty(t.shape, t.dtype) for t in op.args[len(op.inputs) + len(op.outputs):]]
            assert len(scratch) == (1 if op.scratch_bytes else 0)
            lib.get_function(op.name)(*args, *outs, *scratch)
            for t, o in zip(op.outputs, outs, strict=True):
                got = o.numpy()
                if got.dtype == np.float32:
                    np.testing.assert_allclose(got, values[t.name], rtol=1e-5, atol=1e-6, err_msg=op.name)
                else:
                    np.testing.assert_array_equal(got, values[t.name], err_msg=op.name)
            # Every operator is timed: the client frees each evaluator's handle, so the device's
            # TVM_CRT_MAX_TIME_EVALUATORS slots never run out.
            seconds = session.time_evaluator(op.name, module=lib, number=2, repeat=2)(*args, *outs, *scratch)
            assert len(seconds) == 2 and all(s > 0 for s in seconds), (op.name, seconds)
            for a in (*args, *outs, *scratch):
                a.free()
