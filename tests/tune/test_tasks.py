"""Task extraction: stable keys, one task per distinct workload, counts, and the same keys compile uses."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from utvm.compiler import compile
from utvm.frontend import load
from utvm.ir import run_reference
from utvm.tune.tasks import extract_tasks

from .conftest import SHARED_MODELS


@pytest.mark.parametrize("name", sorted(SHARED_MODELS))
def test_tasks_of_a_shared_model_are_the_keys_compile_uses(name: str) -> None:
    path = SHARED_MODELS[name]
    tasks = extract_tasks(path, "cortex-m4", rounding="double")
    assert tasks, "every corpus model has a kernel with a schedule space"
    keys = [t.key for t in tasks]
    assert len(set(keys)) == len(keys)
    # Stable: a second extraction (a new import of the file) gives the same keys, in the same order.
    assert [t.key for t in extract_tasks(path, "cortex-m4", rounding="double")] == keys
    compiled = compile(load(path), rounding="double", target="cortex-m4")
    per_task = Counter(op.task for op in compiled.operators if op.task)
    assert per_task == {t.key: t.count for t in tasks}
    for t in tasks:
        assert t.key.startswith(f"{t.op}:") and t.description.startswith(t.op)
        assert t.space.check(t.space.default) is None
        assert t.target == "cortex-m4" and t.rounding == "double"


def test_a_shared_workload_is_one_task_with_its_count() -> None:
    tasks = extract_tasks(SHARED_MODELS["kws_ref_model"], "cortex-m4", rounding="double")
    by_desc = {t.description: t for t in tasks}
    pointwise = [t for d, t in by_desc.items() if d.startswith("conv2d 1x25x5x64/int8 64x1x1x64")]
    assert len(pointwise) == 1 and pointwise[0].count == 4  # KWS's four 1x1 convolutions


def test_keys_depend_on_target_and_rounding(small_model: Path) -> None:
    host = {t.key for t in extract_tasks(small_model, "host")}
    m4 = {t.key for t in extract_tasks(small_model, "cortex-m4")}
    double = {t.key for t in extract_tasks(small_model, "host", rounding="double")}
    assert len(host) == len(m4) == len(double) == 3
    assert not host & m4
    # The rounding is part of a workload as the op module resolves it (per-channel conv2d has one rounding
    # whatever the compile option says; dense follows it).
    assert host != double


def test_the_task_graph_is_the_node_alone(small_model: Path) -> None:
    tasks = extract_tasks(small_model, "host")
    assert [t.count for t in tasks] == [1, 2, 1]
    conv = tasks[0]
    g = conv.graph
    assert len(g.nodes) == 1 and g.nodes[0].op == "conv2d"
    assert len(g.inputs) == 1 and not g.tensor(g.inputs[0]).is_constant
    assert list(g.outputs) == list(g.nodes[0].outputs)
    consts = [x for x in g.nodes[0].inputs if x and g.tensor(x).is_constant]
    assert len(consts) == 2  # weights and bias, with their data
    x = np.random.default_rng(0).integers(-128, 128, g.tensor(g.inputs[0]).shape).astype(np.int8)
    out = run_reference(g, {g.inputs[0]: x})
    assert out[g.outputs[0]].shape == (1, 6, 6, 8)
    # The single-node graph compiles to the same task key (no passes: it is already past them).
    assert compile(g, target="host", passes=False).operators[0].task == conv.key


def test_a_graph_is_accepted_as_well_as_a_path(small_model: Path) -> None:
    assert [t.key for t in extract_tasks(load(small_model), "host")] == [t.key for t in extract_tasks(small_model)]


def test_a_missing_model_is_a_usage_error(tmp_path: Path) -> None:
    from utvm.errors import UsageError

    with pytest.raises(UsageError, match="no such model file"):
        extract_tasks(tmp_path / "nope.tflite")
