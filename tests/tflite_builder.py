"""Write small .tflite files with the flatbuffers builders of the PyPI `tflite` package (for tests).

    b = TFLiteBuilder()
    x = b.tensor("x", (1, 8, 8, 3), "int8", scale=0.05, zero_point=-3)
    w = b.tensor("w", (4, 3, 3, 3), "int8", data=weights, scale=[0.01, 0.02, 0.03, 0.04], zero_point=0, axis=0)
    bias = b.tensor("b", (4,), "int32", data=bias_values, scale=..., zero_point=0)
    y = b.tensor("y", (1, 8, 8, 4), "int8", scale=0.1, zero_point=5)
    b.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", Padding=0, StrideW=1, StrideH=1,
         FusedActivationFunction=1, DilationWFactor=1, DilationHFactor=1)
    model_bytes = b.build(inputs=[x], outputs=[y])

Option fields are the generated `<Options>Add<Field>` names of the `tflite` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flatbuffers
import numpy as np
import tflite

_TYPES = {"float32": 0, "float16": 1, "int32": 2, "uint8": 3, "int64": 4, "bool": 6, "int16": 7, "int8": 9,
          "float64": 10, "uint64": 12, "uint32": 15}


class TFLiteBuilder:
    def __init__(self) -> None:
        self._tensors: list[dict[str, Any]] = []
        self._buffers: list[bytes] = [b""]
        self._opcodes: list[tuple[int, str | None]] = []
        self._ops: list[dict[str, Any]] = []

    def tensor(self, name: str, shape: Sequence[int], dtype: str, *, data: np.ndarray | None = None,
               scale: float | Sequence[float] | None = None, zero_point: int | Sequence[int] | None = None,
               axis: int = 0, shape_signature: Sequence[int] | None = None, type_code: int | None = None,
               is_variable: bool = False) -> int:
        """Add a tensor; returns its index. `data` makes it a constant. Per-channel when `scale` is a list.
        `is_variable` marks a variable tensor (the state of SVDF / LSTM)."""
        buf = 0
        if data is not None:
            arr = np.ascontiguousarray(np.asarray(data, dtype=np.dtype(dtype).newbyteorder("<")))
            assert arr.size == int(np.prod(shape, dtype=np.int64)), (name, arr.shape, shape)
            self._buffers.append(arr.tobytes())
            buf = len(self._buffers) - 1
        q = None
        if scale is not None:
            scales = [float(scale)] if np.isscalar(scale) else [float(s) for s in scale]
            zp = zero_point if zero_point is not None else 0
            zps = [int(zp)] * len(scales) if np.isscalar(zp) else [int(z) for z in zp]
            q = (scales, zps, axis)
        self._tensors.append({"name": name, "shape": [int(d) for d in shape],
                              "type": _TYPES[dtype] if type_code is None else type_code,
                              "buffer": buf, "quant": q, "sig": shape_signature, "var": bool(is_variable)})
        return len(self._tensors) - 1

    def op(self, code: str, inputs: Sequence[int], outputs: Sequence[int], options: str | None = None,
           **fields: Any) -> None:
        """Add an operator by builtin name (e.g. "CONV_2D"), with its options table name and fields."""
        builtin = getattr(tflite.BuiltinOperator, code)
        key = (builtin, None)
        if key not in self._opcodes:
            self._opcodes.append(key)
        self._ops.append({"opcode": self._opcodes.index(key), "inputs": list(inputs), "outputs": list(outputs),
                          "options": options, "fields": fields})

    def custom_op(self, custom_code: str, inputs: Sequence[int], outputs: Sequence[int],
                  custom_options: bytes = b"") -> None:
        """Add a CUSTOM operator; `custom_options` (e.g. `flexbuffers.Dumps({...})`) become its CustomOptions
        (format FLEXBUFFERS)."""
        key = (tflite.BuiltinOperator.CUSTOM, custom_code)
        if key not in self._opcodes:
            self._opcodes.append(key)
        self._ops.append({"opcode": self._opcodes.index(key), "inputs": list(inputs), "outputs": list(outputs),
                          "options": None, "fields": {}, "custom_options": bytes(custom_options)})

    # --- serialisation ----------------------------------------------------------------------------------------
    def build(self, inputs: Sequence[int], outputs: Sequence[int]) -> bytes:
        b = flatbuffers.Builder(1024)

        def ivec(start: Any, values: Sequence[int]) -> int:
            start(b, len(values))
            for v in reversed(values):
                b.PrependInt32(int(v))
            return b.EndVector()

        buffers = []
        for data in self._buffers:
            vec = b.CreateNumpyVector(np.frombuffer(data, dtype=np.uint8)) if data else None
            tflite.BufferStart(b)
            if vec is not None:
                tflite.BufferAddData(b, vec)
            buffers.append(tflite.BufferEnd(b))

        tensors = []
        for t in self._tensors:
            name = b.CreateString(t["name"])
            shape = ivec(tflite.TensorStartShapeVector, t["shape"])
            sig = ivec(tflite.TensorStartShapeSignatureVector, t["sig"]) if t["sig"] is not None else None
            quant = None
            if t["quant"] is not None:
                scales, zps, axis = t["quant"]
                sv = b.CreateNumpyVector(np.asarray(scales, dtype=np.float32))
                zv = b.CreateNumpyVector(np.asarray(zps, dtype=np.int64))
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, sv)
                tflite.QuantizationParametersAddZeroPoint(b, zv)
                tflite.QuantizationParametersAddQuantizedDimension(b, axis)
                quant = tflite.QuantizationParametersEnd(b)
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            tflite.TensorAddType(b, t["type"])
            tflite.TensorAddBuffer(b, t["buffer"])
            tflite.TensorAddName(b, name)
            if quant is not None:
                tflite.TensorAddQuantization(b, quant)
            if sig is not None:
                tflite.TensorAddShapeSignature(b, sig)
            if t.get("var"):
                tflite.TensorAddIsVariable(b, True)
            tensors.append(tflite.TensorEnd(b))

        ops = []
        for op in self._ops:
            opts = None
            if op["options"] is not None:
                cls = op["options"]
                getattr(tflite, f"{cls}Start")(b)
                for field, value in op["fields"].items():
                    getattr(tflite, f"{cls}Add{field}")(b, value)
                opts = getattr(tflite, f"{cls}End")(b)
            ins = ivec(tflite.OperatorStartInputsVector, op["inputs"])
            outs = ivec(tflite.OperatorStartOutputsVector, op["outputs"])
            copts = op.get("custom_options", b"")
            cvec = b.CreateNumpyVector(np.frombuffer(copts, dtype=np.uint8)) if copts else None
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, op["opcode"])
            tflite.OperatorAddInputs(b, ins)
            tflite.OperatorAddOutputs(b, outs)
            if opts is not None:
                tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, op["options"]))
                tflite.OperatorAddBuiltinOptions(b, opts)
            if cvec is not None:
                tflite.OperatorAddCustomOptions(b, cvec)
                tflite.OperatorAddCustomOptionsFormat(b, tflite.CustomOptionsFormat.FLEXBUFFERS)
            ops.append(tflite.OperatorEnd(b))

        def tvec(start: Any, items: list[int]) -> int:
            start(b, len(items))
            for it in reversed(items):
                b.PrependUOffsetTRelative(it)
            return b.EndVector()

        tv = tvec(tflite.SubGraphStartTensorsVector, tensors)
        iv = ivec(tflite.SubGraphStartInputsVector, list(inputs))
        ov = ivec(tflite.SubGraphStartOutputsVector, list(outputs))
        opv = tvec(tflite.SubGraphStartOperatorsVector, ops)
        sgname = b.CreateString("main")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tv)
        tflite.SubGraphAddInputs(b, iv)
        tflite.SubGraphAddOutputs(b, ov)
        tflite.SubGraphAddOperators(b, opv)
        tflite.SubGraphAddName(b, sgname)
        sg = tflite.SubGraphEnd(b)

        codes = []
        for builtin, custom in self._opcodes:
            cc = b.CreateString(custom) if custom is not None else None
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(builtin, 127))
            tflite.OperatorCodeAddBuiltinCode(b, builtin)
            tflite.OperatorCodeAddVersion(b, 1)
            if cc is not None:
                tflite.OperatorCodeAddCustomCode(b, cc)
            codes.append(tflite.OperatorCodeEnd(b))
        cv = tvec(tflite.ModelStartOperatorCodesVector, codes)
        sgv = tvec(tflite.ModelStartSubgraphsVector, [sg])
        bv = tvec(tflite.ModelStartBuffersVector, buffers)
        desc = b.CreateString("utvm test model")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, cv)
        tflite.ModelAddSubgraphs(b, sgv)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, bv)
        root = tflite.ModelEnd(b)
        b.Finish(root, file_identifier=b"TFL3")
        return bytes(b.Output())


def random_int8(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    return rng.integers(-128, 128, size=tuple(shape), dtype=np.int8)


def one_op_model(in_name: str = "x", out_name: str = "y", *, op: str = "RELU", custom_code: str | None = None,
                 shape: Sequence[int] = (1, 4), dtype: str = "float32") -> bytes:
    """A model of one float operator from `in_name` to `out_name` (a builtin `op`, or a custom operator
    `custom_code`): for tests about names and files rather than arithmetic."""
    b = TFLiteBuilder()
    x = b.tensor(in_name, shape, dtype)
    y = b.tensor(out_name, shape, dtype)
    if custom_code is None:
        b.op(op, [x], [y])
    else:
        b.custom_op(custom_code, [x], [y])
    return b.build([x], [y])
