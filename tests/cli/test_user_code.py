"""The user's C in the evaluation firmware (`--extra-source`, `-I`, `utvm_user_init`) and several models in one
RPC firmware (`build-device --model A --model B`, `evaluate.build_firmware([a, b])`, `session.system_lib(name)`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from utvm import evaluate
from utvm.cli import EXIT_BUILD, EXIT_USAGE, main
from utvm.compiler import compile
from utvm.errors import BuildError, RemoteError, UsageError
from utvm.frontend import load
from utvm.platform import get_platform
from utvm.support.models import models_dir

MODELS = models_dir()
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"
SPEECH = MODELS / "tflm" / "micro_speech_quantized.tflite"

#: A user "sensor" library: sensor.read(out int32[n], seed) writes out[i] = seed * SENSOR_SCALE + i*i and returns
#: n; sensor.accumulate(x) adds x to a running total kept between calls and returns it. SENSOR_SCALE comes from
#: a header in an -I directory.
SENSOR_C = r"""
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/error_codes.h>

#include "sensor_config.h"

static int64_t g_total = 0;

static int sensor_read(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                       void* resource_handle) {
  DLTensor* t;
  int32_t* data;
  int64_t n = 1;
  int64_t i;
  int d;
  (void)resource_handle;
  if ((num_args != 2) ||
      ((type_codes[0] != (int)kTVMDLTensorHandle) && (type_codes[0] != (int)kTVMNDArrayHandle)) ||
      (type_codes[1] != (int)kTVMArgInt)) {
    TVMAPISetLastError("sensor.read: expects (int32 tensor, int seed)");
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  t = (DLTensor*)args[0].v_handle;
  if ((t->dtype.code != (uint8_t)kDLInt) || (t->dtype.bits != 32U)) {
    TVMAPISetLastError("sensor.read: the tensor must be int32");
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  for (d = 0; d < t->ndim; d++) {
    n *= t->shape[d];
  }
  data = (int32_t*)((uint8_t*)t->data + t->byte_offset);
  for (i = 0; i < n; i++) {
    data[i] = (int32_t)(args[1].v_int64 * SENSOR_SCALE + i * i);
  }
  ret_value->v_int64 = n;
  *ret_type_code = (int)kTVMArgInt;
  return 0;
}

static int sensor_accumulate(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value,
                             int* ret_type_code, void* resource_handle) {
  (void)resource_handle;
  if ((num_args != 1) || (type_codes[0] != (int)kTVMArgInt)) {
    TVMAPISetLastError("sensor.accumulate: expects one int");
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  g_total += args[0].v_int64;
  ret_value->v_int64 = g_total;
  *ret_type_code = (int)kTVMArgInt;
  return 0;
}

static int register_one(const char* name, TVMBackendPackedCFunc func) {
  TVMFunctionHandle handle = NULL;
  (void)memcpy((void*)&handle, (const void*)&func, sizeof(handle));
  return TVMFuncRegisterGlobal(name, handle, 0);
}

void utvm_user_init(void);

void utvm_user_init(void) {
  if (register_one("sensor.read", &sensor_read) == 0) {
    (void)register_one("sensor.accumulate", &sensor_accumulate);
  }
}
"""

#: Fills the global registry until TVMFuncRegisterGlobal fails: the firmware must stop with its message.
FLOOD_C = r"""
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

static int noop(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                void* resource_handle) {
  (void)args; (void)type_codes; (void)num_args; (void)ret_value; (void)ret_type_code; (void)resource_handle;
  return 0;
}

void utvm_user_init(void);

void utvm_user_init(void) {
  static char names[400][24];
  TVMBackendPackedCFunc func = &noop;
  TVMFunctionHandle handle = NULL;
  int i;
  (void)memcpy((void*)&handle, (const void*)&func, sizeof(handle));
  for (i = 0; i < 400; i++) {
    (void)sprintf(names[i], "flood.function_%d", i);
    if (TVMFuncRegisterGlobal(names[i], handle, 0) != 0) {
      return;
    }
  }
}
"""


@pytest.fixture
def sensor(tmp_path: Path) -> tuple[Path, Path]:
    """(sensor.c, the -I directory holding sensor_config.h)."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "sensor_config.h").write_text("#define SENSOR_SCALE 3\n")
    src = tmp_path / "user" / "sensor.c"
    src.parent.mkdir()
    src.write_text(SENSOR_C)
    return src, inc


def check_sensor(session) -> None:  # noqa: ANN001
    out = session.empty((2, 5), "int32")
    try:
        assert session.get_function("sensor.read")(out, 7) == 10
        np.testing.assert_array_equal(out.numpy().ravel(), 7 * 3 + np.arange(10) ** 2)
        assert session.get_function("sensor.read")(out, -2) == 10
        np.testing.assert_array_equal(out.numpy().ravel(), -2 * 3 + np.arange(10) ** 2)
    finally:
        out.free()
    acc = session.get_function("sensor.accumulate")
    assert [acc(5), acc(-2), acc(40)] == [5, 3, 43]  # state kept between calls
    with pytest.raises(RemoteError, match="sensor.accumulate: expects one int"):
        acc(1, 2)


def test_user_functions_over_rpc_via_cli_build_device(tmp_path: Path, sensor: tuple[Path, Path]) -> None:
    src, inc = sensor
    fw = tmp_path / "fw"
    assert main(["build-device", "--platform", "host", "--extra-source", str(src), "-I", str(inc),
                 "-o", str(fw)]) == 0
    with get_platform("host").start(fw) as session:
        check_sensor(session)


def test_user_functions_beside_a_model_via_python(sensor: tuple[Path, Path]) -> None:
    src, inc = sensor
    compiled = compile(load(HELLO), model_name="hello")
    fw = evaluate.build_firmware(compiled, "host", extra_sources=[src], include_dirs=[inc])
    x = [np.array([[9]], np.int8)]
    with get_platform("host").start(fw) as session:
        check_sensor(session)
        outs, _ = evaluate.run_on_device(session, compiled, x)
        assert session.system_lib("hello").get_function("tvmgen_hello_run") is not None  # named, one model
        with pytest.raises(RemoteError, match=r"no model named 'kws'; linked: hello"):
            session.system_lib("kws")
    refs, _ = evaluate.reference(HELLO, compiled, x)
    assert evaluate.compare(outs, refs).bit_exact


def test_run_cli_takes_extra_sources(sensor: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    src, inc = sensor
    assert main(["run", str(HELLO), "--extra-source", str(src), "-I", str(inc), "--check", "--seed", "1",
                 "-q"]) == 0
    assert "OK (bit-exact)" in capsys.readouterr().out


def test_firmware_without_user_code_has_no_user_functions() -> None:
    with get_platform("host").start(get_platform("host").build(with_test_functions=False)) as session:
        assert session.get_function("sensor.read", allow_missing=True) is None


def test_a_full_registry_stops_the_device_with_a_clear_error(tmp_path: Path) -> None:
    src = tmp_path / "flood.c"
    src.write_text(FLOOD_C)
    fw = get_platform("host").build(with_test_functions=False, extra_sources=[src],
                                    crt_config={"TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES": 1024})
    import subprocess

    proc = subprocess.run([str(fw)], input=b"", capture_output=True, timeout=60)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "utvm_user_init failed" in err and "TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES=1024" in err


# --- errors in what the user gives ---------------------------------------------------------------------------

def test_user_code_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "fw")
    assert main(["build-device", "--extra-source", str(tmp_path / "missing.c"), "-o", out]) == EXIT_USAGE
    assert "no such file" in capsys.readouterr().err
    header = tmp_path / "sensor.h"
    header.write_text("int x;\n")
    assert main(["build-device", "--extra-source", str(header), "-o", out]) == EXIT_USAGE
    assert "must end in .c" in capsys.readouterr().err
    assert main(["run", str(HELLO), "-I", str(tmp_path / "nodir"), "-q"]) == EXIT_USAGE
    assert "no such directory" in capsys.readouterr().err
    broken = tmp_path / "broken_sensor.c"
    broken.write_text("int broken_sensor(void) { return 1 }\n")
    assert main(["build-device", "--extra-source", str(broken), "-o", out]) == EXIT_BUILD
    assert "broken_sensor.c" in capsys.readouterr().err
    warns = tmp_path / "warns.c"  # held to the firmware's warning flags: an unused variable fails the build
    warns.write_text("int warns(void);\nint warns(void) { int unused; return 1; }\n")
    with pytest.raises(BuildError, match="warns.c"):
        get_platform("host").build(with_test_functions=False, extra_sources=[warns])


# --- several models in one firmware --------------------------------------------------------------------------

def _two_models() -> tuple:
    return compile(load(HELLO), model_name="hello"), compile(load(SPEECH), model_name="speech")


def _check_models(session, models, inputs) -> None:  # noqa: ANN001
    for (path, compiled), x in zip(models, inputs, strict=True):
        mod = session.system_lib(compiled.model_name)
        run = mod.get_function(compiled.run_function)
        ins = [session.array(a) for a in x]
        outs = [session.empty(o.shape, o.dtype) for o in compiled.interface.outputs]
        run(*ins, *outs)
        got = [o.numpy() for o in outs]
        for a in (*ins, *outs):
            a.free()
        refs, _ = evaluate.reference(path, compiled, x)
        assert evaluate.compare(got, refs).bit_exact, compiled.model_name
    # no name: the first model
    assert session.system_lib().get_function(models[0][1].run_function) is not None
    with pytest.raises(RemoteError, match=r"no model named 'kws'; linked: hello, speech"):
        session.system_lib("kws")


def _inputs(models) -> list:  # noqa: ANN001
    return [evaluate.read_inputs(c, {}, seed=k + 11) for k, (_p, c) in enumerate(models)]


def test_two_models_in_one_firmware_via_python(sensor: tuple[Path, Path]) -> None:
    hello, speech = _two_models()
    src, inc = sensor
    fw = evaluate.build_firmware([hello, speech], "host", extra_sources=[src], include_dirs=[inc])
    models = [(HELLO, hello), (SPEECH, speech)]
    with get_platform("host").start(fw) as session:
        _check_models(session, models, _inputs(models))
        check_sensor(session)


def test_two_models_in_one_firmware_via_cli(tmp_path: Path) -> None:
    fw = tmp_path / "fw"
    assert main(["build-device", "--model", f"hello={HELLO}", "--model", f"speech={SPEECH}", "-o", str(fw)]) == 0
    hello, speech = _two_models()  # what build-device compiled: the default flags for the host
    models = [(HELLO, hello), (SPEECH, speech)]
    with get_platform("host").start(fw) as session:
        _check_models(session, models, _inputs(models))


def test_two_models_in_debug_firmware_expose_their_operators() -> None:
    # debug firmware (--profile / --debug-layers): every operator of an unpacked model is a packed function of
    # its own model's system library, also with two models linked.
    hello = compile(load(HELLO), model_name="hello", unpacked_api=True, interface_api="c")
    speech = compile(load(SPEECH), model_name="speech", unpacked_api=True)
    fw = evaluate.build_firmware([hello, speech], "host", debug=True)
    with get_platform("host").start(fw) as session:
        for compiled in (hello, speech):
            mod = session.system_lib(compiled.model_name)
            for op in compiled.operators:
                assert mod.get_function(op.name) is not None
        # one model's operators are not in the other's library
        assert session.system_lib("hello").get_function(speech.operators[0].name, allow_missing=True) is None


def test_several_models_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = compile(load(HELLO), model_name="same")
    with pytest.raises(UsageError, match="two models are named 'same'"):
        evaluate.build_firmware([a, a], "host")
    out = str(tmp_path / "fw")
    assert main(["build-device", "--model", str(HELLO), "--model", str(HELLO), "-o", out]) == EXIT_USAGE
    assert "two models are named 'hello_world_int8'" in capsys.readouterr().err
    assert main(["build-device", "--model", str(tmp_path / "nope.tflite"), "-o", out]) == EXIT_USAGE
    assert "no such model" in capsys.readouterr().err


def test_a_single_model_firmware_without_a_table_still_serves_the_default() -> None:
    # platform.build with a model's own sources (no table): runtime.SystemLib() works as it always did,
    # a name finds nothing and says so.
    compiled = compile(load(HELLO), model_name="hello")
    fw = get_platform("host").build(with_test_functions=False,
                                    system_lib_sources=evaluate.firmware_sources(compiled))
    with get_platform("host").start(fw) as session:
        assert session.system_lib().get_function("tvmgen_hello_run") is not None
        with pytest.raises(RemoteError, match="links no named models"):
            session.system_lib("hello")


# --- QEMU ----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_user_code_and_two_models_on_qemu(tmp_path: Path, sensor: tuple[Path, Path]) -> None:
    src, inc = sensor
    fw = tmp_path / "fw.elf"
    assert main(["build-device", "--platform", "qemu-cortex-m4", "--extra-source", str(src), "-I", str(inc),
                 "-o", str(fw)]) == 0
    plat = get_platform("qemu-cortex-m4")
    with plat.start(fw) as session:
        check_sensor(session)
    hello = compile(load(HELLO), model_name="hello", target="cortex-m4")
    speech = compile(load(SPEECH), model_name="speech", target="cortex-m4")
    elf = evaluate.build_firmware([hello, speech], "qemu-cortex-m4", extra_sources=[src], include_dirs=[inc])
    models = [(HELLO, hello), (SPEECH, speech)]
    with plat.start(elf) as session:
        _check_models(session, models, _inputs(models))
        check_sensor(session)
