"""The TFLite oracle of the tests: `utvm.compiler.oracle` (the project's one oracle) with the model kind
fixed to TFLite. Reference kernels (BUILTIN_REF) in a worker subprocess; a crash fails one job, not pytest.

    from oracle import tflite_reference, tflite_reference_batch, tflite_reference_many

    outs = tflite_reference("model.tflite", {"input_1": x})          # one input set -> [out0, out1, ...]
    outs = tflite_reference(model_bytes, [x0, x1])                   # inputs by position, model as bytes
    sets = tflite_reference_batch(path, [inputs0, inputs1, ...])      # many input sets, one subprocess
    res = tflite_reference_many([(model_a, [in0, in1]), (model_b, [in0])])  # many models, one subprocess

Outputs come back in the model's output order; inputs must already have the model's dtypes. A failure or
crash raises `OracleError`; in `tflite_reference_many` a failing job yields an `OracleError` in its slot.
"""

from __future__ import annotations

from functools import partial

from utvm.compiler.oracle import OracleError, reference, reference_many, reference_outputs

__all__ = ["OracleError", "tflite_reference", "tflite_reference_batch", "tflite_reference_many"]

tflite_reference = partial(reference, kind="tflite")
tflite_reference_batch = partial(reference_outputs, kind="tflite")
tflite_reference_many = partial(reference_many, kind="tflite")
