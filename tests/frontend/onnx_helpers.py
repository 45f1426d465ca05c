"""Shared helpers of the ONNX frontend tests: model locations, test-data loading, onnxruntime oracle."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from utvm.ir import Graph, run_reference, verify
from utvm.support.models import models_dir

MODELS = models_dir()
ONNX_MODELS = MODELS / "onnx"
NODE_TESTS = ONNX_MODELS / "onnx_node_subset"
MNIST = ONNX_MODELS / "mnist-8"

RTOL, ATOL = 1e-5, 1e-4  # the tolerance for float ONNX


def load_data_set(d: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, outputs) of one `test_data_set_*` directory, in index order."""
    def tensors(prefix: str) -> list[np.ndarray]:
        files = sorted(d.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]
    return tensors("input"), tensors("output")


def ort_run(model: onnx.ModelProto | Path, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    sess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    return list(sess.run(None, dict(feeds)))


def run_graph(graph: Graph, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """verify() the graph, then run it on the feeds that are graph inputs (frozen ones are constants)."""
    verify(graph)
    res = run_reference(graph, {k: v for k, v in feeds.items() if k in graph.inputs})
    return [np.asarray(res[name]) for name in graph.outputs]


def assert_close(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"{what}: output {i} has shape {g.shape}, expected {w.shape}"
        assert g.dtype == w.dtype, f"{what}: output {i} has dtype {g.dtype}, expected {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{what}: output {i}")
