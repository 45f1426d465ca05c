"""tests/oracle.py, the shared TFLite oracle helper: batching, inputs by name or position, and a failing job
reported in its own slot without taking the others down."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from utvm.support.models import models_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle import OracleError, tflite_reference, tflite_reference_batch, tflite_reference_many  # noqa: E402

MODELS = models_dir()
ADD = MODELS / "tflm" / "simple_add_model.tflite"
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"


def test_inputs_by_name_and_by_position_agree() -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-128, 128, (1, 128, 128, 1), dtype=np.int8) for _ in range(2))
    by_pos = tflite_reference(ADD, [a, b])
    by_name = tflite_reference(ADD.read_bytes(), {"serving_default_input_2:0": b, "serving_default_input_1:0": a})
    assert len(by_pos) == 1 and by_pos[0].shape == (1, 128, 128, 1) and by_pos[0].dtype == np.int8
    np.testing.assert_array_equal(by_pos[0], by_name[0])


def test_batch_runs_every_input_set() -> None:
    sets = [[np.array([[v]], dtype=np.int8)] for v in (-128, 0, 5, 127)]
    outs = tflite_reference_batch(HELLO, sets)
    assert len(outs) == 4 and all(o[0].shape == (1, 1) for o in outs)
    assert outs[0][0][0, 0] != outs[3][0][0, 0]


def test_a_failing_job_does_not_take_the_others_down() -> None:
    good = [[np.array([[7]], dtype=np.int8)]]
    res = tflite_reference_many([(HELLO, good), (b"definitely not a model", good), (HELLO, good)])
    assert isinstance(res[1], OracleError)
    assert not isinstance(res[0], OracleError) and not isinstance(res[2], OracleError)
    np.testing.assert_array_equal(res[0][0][0], res[2][0][0])


def test_wrong_input_dtype_is_an_error_naming_the_input() -> None:
    with pytest.raises(OracleError, match="serving_default_dense_input:0.*float32.*int8"):
        tflite_reference(HELLO, [np.zeros((1, 1), np.float32)])
