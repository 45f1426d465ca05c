"""The context reaches the operators (docs/custom_ops.md, "The context"; kernels/custom.py).

A user operator declared with UTVM_CUSTOM_OP_WITH_CONTEXT takes the model's TVMContext as its last argument,
and then every operator of the model receives it (`void* resource_handle`, last). The model here is
x -> Gain (user, takes the context) -> y -> RELU -> r -> Copy (user, the old 6-argument signature) -> z. Gain
adds the offset of the application's device, a struct the application puts in the context (TVMSetDevice), and
counts its calls there: in the C interface the context is the application's, given to tvmgen_<m>_run; with
the packed interface (packed and unpacked operators) it is the model's own, `tvmgen_<m>_context()`. The
outputs are checked bit-exact against the reference interpreter with the operators' numpy twins.
"""

from __future__ import annotations

import ctypes
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from utvm import custom_ops
from utvm.compiler import compile
from utvm.compiler.kernels import custom as custom_kernel
from utvm.compiler.local import LocalModel
from utvm.errors import CRTError
from utvm.frontend import load
from utvm.ir import run_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402

GAIN_C = """\
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/tvm_micro_backend.h>
#include <tvm/runtime/crt/utvm_custom_op.h>

/* The application's device: what it puts in the TVMContext (TVMSetDevice). */
typedef struct {
  int32_t offset;
  uint32_t calls;
} GainDevice;

/* Declares gain as an operator that takes the context (utvm reads this line). */
UTVM_CUSTOM_OP_WITH_CONTEXT(gain);

int32_t gain(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs, int32_t num_outputs,
             const uint8_t* options, int32_t options_size, void* resource_handle) {
  const TVMContext* context = (const TVMContext*)resource_handle;
  GainDevice* device;
  const int8_t* in = (const int8_t*)inputs[0].data;
  int8_t* out = (int8_t*)outputs[0].data;
  int32_t i;
  (void)num_inputs;
  (void)num_outputs;
  (void)options;
  (void)options_size;
  if (context == NULL || context->device == NULL) {
    return 0x7001; /* no device in the context */
  }
  device = (GainDevice*)context->device;
  for (i = 0; i < 32; ++i) {
    const int32_t v = (int32_t)in[i] + device->offset;
    out[i] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
  }
  device->calls += 1U;
  return 0;
}
"""

COPY_C = """\
#include <stdint.h>
#include <tvm/runtime/crt/utvm_custom_op.h>

/* A user operator of the first interface: no context (UTVM_CUSTOM_OP_WITH_CONTEXT(copy) is not declared). */
int32_t copy(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs, int32_t num_outputs,
             const uint8_t* options, int32_t options_size);

int32_t copy(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs, int32_t num_outputs,
             const uint8_t* options, int32_t options_size) {
  int32_t i;
  (void)num_inputs;
  (void)num_outputs;
  (void)options;
  (void)options_size;
  for (i = 0; i < 32; ++i) {
    ((int8_t*)outputs[0].data)[i] = ((const int8_t*)inputs[0].data)[i];
  }
  return 0;
}
"""
OFFSET = 9


class GainDevice(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_int32), ("calls", ctypes.c_uint32)]


class Context(ctypes.Structure):
    """TVMContext (tvm/runtime/crt/tvm_micro_backend.h)."""

    _fields_ = [("workspace", ctypes.c_void_p), ("params", ctypes.c_void_p), ("device", ctypes.c_void_p)]


def _gain_twin(inputs: list, outputs: list, options: bytes) -> None:
    outputs[0].data[...] = np.clip(inputs[0].data.astype(np.int32) + OFFSET, -128, 127)


def _copy_twin(inputs: list, outputs: list, options: bytes) -> None:
    outputs[0].data[...] = inputs[0].data


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ctxops")
    (root / "gain.c").write_text(GAIN_C)
    (root / "copy.c").write_text(COPY_C)
    b = TFLiteBuilder()
    x, y, r, z = (b.tensor(n, [1, 32], "int8", scale=0.5, zero_point=3) for n in ("x", "y", "r", "z"))
    b.custom_op("Gain", [x], [y])
    b.op("RELU", [y], [r])
    b.custom_op("Copy", [r], [z])
    path = root / "ctx.tflite"
    path.write_bytes(b.build([x], [z]))
    return path


@pytest.fixture
def bound(model_path: Path) -> Iterator[Path]:
    root = model_path.parent
    with custom_ops.bindings(c={"Gain": (root / "gain.c", "gain"), "Copy": (root / "copy.c", "copy")},
                             py={"Gain": _gain_twin, "Copy": _copy_twin}):
        yield model_path


X = np.arange(-128, 128, 8, dtype=np.int8).reshape(1, 32)


def test_declaration_is_read_from_the_code(bound: Path) -> None:
    gain, copy = custom_ops.c_binding("Gain"), custom_ops.c_binding("Copy")
    assert custom_kernel.takes_context(gain) and not custom_kernel.takes_context(copy)
    commented = bound.parent / "commented.c"
    commented.write_text(COPY_C.replace("(UTVM_CUSTOM_OP_WITH_CONTEXT(copy) is not declared)",
                                        "UTVM_CUSTOM_OP_WITH_CONTEXT(copy) in a comment"))
    assert not custom_kernel.takes_context(custom_ops.CBinding("Copy", commented, "copy"))


@pytest.mark.parametrize("conv", ["c", "unpacked", "packed"])
def test_a_user_operator_uses_the_applications_handle(bound: Path, conv: str) -> None:
    kw = {"c": {"unpacked_api": True, "interface_api": "c"}, "unpacked": {"unpacked_api": True}, "packed": {}}[conv]
    graph = load(bound)
    compiled = compile(graph, model_name="ctx", **kw)
    ops = compiled.sources["tvmgen_ctx_ops.c"]
    assert compiled.metadata["modules"]["ctx"]["utvm"]["operator_context"] is True
    if conv != "packed":  # every operator function takes the context, last
        protos = re.findall(r"^int32_t (tvmgen_ctx_\w+)\((.*)\);$", ops, re.M)
        assert len(protos) == len(compiled.operators) == 3
        assert all(p.endswith("void* resource_handle") for _name, p in protos), protos
    assert "int32_t gain(" in ops and "void* resource_handle);" in ops  # the 7-argument prototype
    assert re.search(r"int32_t copy\([^)]*int32_t options_size\);", ops)  # the old one, unchanged
    (want,) = run_reference(graph, {"x": X}).values()
    model = LocalModel(compiled)
    device = GainDevice(OFFSET, 0)
    if conv == "c":
        run = model.lib.tvmgen_ctx_run
        run.restype = ctypes.c_int32
        ins, outs = [X.copy()], [np.zeros((1, 32), np.int8)]
        s_in, s_out = model._structs(ins, outs)
        assert run(ctypes.byref(s_in), ctypes.byref(s_out), None) == 0x0701  # TVM_MICRO_ERROR_BAD_CONTEXT
        assert run(ctypes.byref(s_in), ctypes.byref(s_out), ctypes.byref(Context())) == 0x7001  # no device
        context = Context(None, None, ctypes.addressof(device))
        for _ in range(2):
            outs[0][...] = 0
            assert run(ctypes.byref(s_in), ctypes.byref(s_out), ctypes.byref(context)) == 0
            np.testing.assert_array_equal(outs[0], want)
    else:  # the packed interface runs with the model's own context
        accessor = model.lib.tvmgen_ctx_context
        accessor.restype = ctypes.c_void_p
        own = Context.from_address(accessor())
        with pytest.raises(CRTError):
            model.run([X])  # no device yet: Gain's 0x7001
        own.device = ctypes.addressof(device)
        for _ in range(2):
            np.testing.assert_array_equal(model.run([X])[0], want)
    assert device.calls == 2


def test_embedded_models_without_such_operators_keep_their_signatures(tmp_path: Path) -> None:
    from utvm.support.models import models_dir

    compiled = compile(load(models_dir() / "tflm" / "hello_world_int8.tflite"), unpacked_api=True,
                       interface_api="c")
    assert "resource_handle" not in compiled.sources["tvmgen_default_ops.c"]
    assert "operator_context" not in compiled.metadata["modules"]["default"]["utvm"]
    assert "TVMContext* context" not in compiled.includes["tvmgen_default.h"]
