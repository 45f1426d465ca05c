"""Generated C against LiteRT's reference kernels (BUILTIN_REF), the oracle itself, for every op family.

The single-op TFLite models of tests/ops/test_ops_tflite.py (E1's cases: conv/depthwise/fc/pool/elementwise/
softmax/logistic/tanh/relu*/pad/mean/concat/reshape+transpose/batch matmul/quantize/dequantize, int8 and
float32) are imported with the TFLite frontend, merged into one graph per dtype (tensor names prefixed by
the case), compiled with the full pass pipeline, built once and run on the host. int8 must equal LiteRT bit
for bit, float32 within 1e-5 of the output's magnitude.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "ops"))
from test_ops_tflite import CASES  # noqa: E402

from oracle import OracleError, tflite_reference_many  # noqa: E402
from tflm_harness import merge  # noqa: E402
from utvm.compiler import compile  # noqa: E402
from utvm.compiler.local import LocalModel  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir.graph import Graph  # noqa: E402

N_SETS = 2


def _inputs(rng: np.random.Generator, graph: Graph) -> list[np.ndarray]:
    out = []
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.dtype == "int8":
            out.append(rng.integers(-128, 128, t.shape, dtype=np.int8))
        else:
            out.append((rng.standard_normal(t.shape) * 3).astype(np.float32))
    return out


@pytest.fixture(scope="module")
def oracle_runs() -> list[tuple[str, Graph, list, list]]:
    rng = np.random.default_rng(20240607)
    models, graphs, sets = [], [], []
    for case in CASES:
        m = case.build(rng)
        g = from_tflite(m)
        models.append(m)
        graphs.append(g)
        sets.append([_inputs(rng, g) for _ in range(N_SETS)])
    results = tflite_reference_many(list(zip(models, sets, strict=True)))
    return [(c.id, g, s, r) for c, g, s, r in zip(CASES, graphs, sets, results, strict=True)]


@pytest.mark.parametrize("kind", ["int8", "float32"])
def test_generated_c_matches_litert(oracle_runs: list, kind: str) -> None:
    runs = [r for r in oracle_runs if (r[0].startswith("float32-") or r[0] == "quantize-float") == (kind == "float32")]
    assert len(runs) > 40, "the oracle cases of tests/ops/test_ops_tflite.py are missing"
    for cid, _g, _s, expected in runs:
        assert not isinstance(expected, OracleError), f"{cid}: the oracle failed: {expected}"
    prefixes = [f"c{i}" for i in range(len(runs))]
    graph = merge([(p, g) for p, (_cid, g, _s, _e) in zip(prefixes, runs, strict=True)])
    compiled = compile(graph, unpacked_api=True, interface_api="c")
    model = LocalModel(compiled, opt="-O2")
    for k in range(N_SETS):
        feed = [x for _cid, _g, s, _e in runs for x in s[k]]
        got = model.run(feed)
        pos = 0
        for cid, _g, _s, expected in runs:
            for want in expected[k]:
                out = got[pos]
                pos += 1
                assert out.dtype == want.dtype and out.shape == want.shape, f"{cid}: {out.dtype}{out.shape}"
                if out.dtype == np.float32:
                    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.max(np.abs(want)))),
                                               err_msg=f"{cid} (input set {k}) differs from LiteRT")
                else:
                    diff = np.flatnonzero(out != want)
                    assert diff.size == 0, (f"{cid} (input set {k}): {diff.size} of {out.size} values differ from "
                                            f"LiteRT; first at {diff[:5]}: C {out.ravel()[diff[:5]]}, "
                                            f"LiteRT {want.ravel()[diff[:5]]}")
        assert pos == len(got)
