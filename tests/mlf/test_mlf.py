"""Model Library Format: the archive layout of docs/architecture.md §8, metadata.json, the round trip through
utvm.mlf.load, and that an extracted archive builds on its own (runtime/ + templates/ + codegen/)."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest

from utvm import mlf
from utvm.compiler import compile, export_model_library_format
from utvm.compiler.header import header_macros
from utvm.compiler.local import LocalModel, random_inputs
from utvm.errors import ModelFormatError
from utvm.frontend import load
from utvm.support import cc
from utvm.support.models import models_dir

MODELS = models_dir()
AD01 = MODELS / "mlperf_tiny" / "ad01_int8.tflite"


@pytest.fixture(scope="module", params=[{}, {"unpacked_api": True, "interface_api": "c", "workspace": "user"}],
                ids=["packed", "c-user"])
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    compiled = compile(load(AD01), model_name="ad01", **request.param)
    path = export_model_library_format(compiled, tmp_path_factory.mktemp("mlf") / "ad01.tar")
    return compiled, path


def test_archive_layout(exported: tuple) -> None:
    c, path = exported
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
    top = {n for n in names if not n.startswith("runtime/")}
    # with interface c the system library (the packed RPC adapter) is firmware-only: not in codegen/
    system_lib = set() if c.options.interface_api == "c" else {"codegen/host/src/tvmgen_ad01_system_lib.c"}
    assert top == {
        "metadata.json",
        "codegen/host/src/tvmgen_ad01_ops.c", "codegen/host/src/tvmgen_ad01_main.c",
        "codegen/host/include/tvmgen_ad01.h",
        "parameters/ad01.npz", "src/ad01.json",
        "templates/crt_config.h.template", "templates/platform.c.template",
    } | system_lib
    for must in ("runtime/Makefile", "runtime/include/tvm/runtime/crt/tvm_micro_runtime.h",
                 "runtime/include/tvm/runtime/crt/tvm_micro_backend.h", "runtime/include/dlpack/dlpack.h",
                 "runtime/src/aot_executor/aot_executor.c", "runtime/src/common/func_registry.c",
                 "runtime/host/platform.c", "runtime/templates/crt_config.h.template"):
        assert must in names, must
    assert not any(n.endswith((".o", ".a", ".pyc")) for n in names)


def test_metadata_json(exported: tuple) -> None:
    c, path = exported
    with tarfile.open(path) as tar:
        meta = json.load(tar.extractfile("metadata.json"))
    assert meta["version"] == 7
    mod = meta["modules"]["ad01"]
    assert mod["model_name"] == "ad01" and mod["executors"] == ["aot"] and mod["style"] == "full-model"
    assert mod["target"] and mod["export_datetime"].endswith("Z")
    (main,) = mod["memory"]["functions"]["main"]
    for which, name in (("inputs", "input_1"), ("outputs", "Identity")):
        (entry,) = main[which].values()
        assert list(main[which]) == [name]
        assert {k: entry[k] for k in ("size", "dtype", "shape", "rank", "num_elements")} == {
            "size": 640, "dtype": "int8", "shape": [1, 640], "rank": 2, "num_elements": 640}
        q = c.graph.tensor(name).quant
        assert entry["quantization"] == {"scale": [q.scale[0]], "zero_point": [q.zero_point[0]], "axis": None}
    assert main["io_size_bytes"] == 1280
    assert main["workspace_size_bytes"] == c.plan.workspace_bytes == 256
    assert main["constants_size_bytes"] == c.constant_bytes > 260_000
    plan = mod["memory"]["plan"]
    assert plan["workspace_bytes"] == 256 and plan["lower_bound_bytes"] == 256 and plan["alignment"] == 16
    ops = mod["memory"]["functions"]["operator_functions"]
    assert [o["function_name"] for o in ops] == [op.name for op in c.operators] and len(ops) == 10
    assert mod["external_dependencies"][0]["url"] == "./runtime"
    # every macro of the header is in metadata.json through the documented mapping
    with tarfile.open(path) as tar:
        header = tar.extractfile("codegen/host/include/tvmgen_ad01.h").read().decode()
    for macro, value in header_macros(meta).items():
        assert f"#define {macro} {value}\n" in header


def test_parameters_and_ir(exported: tuple) -> None:
    c, path = exported
    with tarfile.open(path) as tar:
        params = np.load(io.BytesIO(tar.extractfile("parameters/ad01.npz").read()))
        ir = tar.extractfile("src/ad01.json").read()
    consts = c.graph.constants
    assert set(params.files) == set(consts)
    for name, t in consts.items():
        np.testing.assert_array_equal(params[name], t.data)
    assert ir.decode() == c.graph.to_json()


def test_round_trip(exported: tuple, tmp_path: Path) -> None:
    c, path = exported
    for source in (path, _extract(path, tmp_path / "x")):
        back = mlf.load(source)
        assert back.options == c.options and back.sources == c.sources and back.includes == c.includes
        assert back.metadata == c.metadata and back.plan == c.plan and back.operators == c.operators
        assert back.graph == c.graph and back.interface == c.interface
        assert back.system_lib_functions == c.system_lib_functions and back.constant_bytes == c.constant_bytes
    x = random_inputs(c, np.random.default_rng(0))
    np.testing.assert_array_equal(LocalModel(mlf.load(path)).run(x)[0], LocalModel(c).run(x)[0])


def test_source_model_round_trips(exported: tuple, tmp_path: Path) -> None:
    """The model file a compile came from travels under src/ and is named in metadata.json."""
    c, _ = exported
    src = tmp_path / "tiny.tflite"
    src.write_bytes(b"\x1c\x00\x00\x00TFL3 not really a model")
    with_source = dataclasses.replace(c, source_model_name=src.name, source_model_bytes=src.read_bytes())
    path = mlf.export_model_library_format(with_source, tmp_path / "m.tar")
    with tarfile.open(path) as tar:
        assert tar.extractfile("src/tiny.tflite").read() == src.read_bytes()
        meta = json.load(tar.extractfile("metadata.json"))
    assert meta["modules"][c.model_name]["utvm"]["source_model"] == "tiny.tflite"
    assert "source_model" not in c.metadata["modules"][c.model_name]["utvm"]  # export does not mutate
    back = mlf.load(path)
    assert back.source_model_name == "tiny.tflite" and back.source_model_bytes == src.read_bytes()
    assert mlf.load(mlf.export_model_library_format(c, tmp_path / "plain.tar")).source_model_bytes is None


def _extract(path: Path, where: Path) -> Path:
    with tarfile.open(path) as tar:
        tar.extractall(where, filter="data")
    return where


def test_extracted_archive_builds_standalone(exported: tuple, tmp_path: Path) -> None:
    """runtime/ builds with its own Makefile and the template config; the generated code, the platform
    template and the runtime link into a program that finds the model through runtime.SystemLib."""
    c, path = exported
    root = _extract(path, tmp_path / "mlf")
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    shutil.copy(root / "templates" / "crt_config.h.template", cfg / "crt_config.h")
    cc.run(["make", "-s", "-C", str(root / "runtime"), f"CRT_CONFIG={cfg}", f"BUILD_DIR={tmp_path / 'build'}",
            "common", "memory", "aot_executor"], what="make runtime")
    (tmp_path / "main.c").write_text("""\
#include <stdio.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/platform.h>
int main(void) {
  TVMFunctionHandle sys_lib, run;
  TVMValue ret;
  int tcode = 0;
  if (TVMPlatformInitialize() != 0 || TVMInitializeRuntime() != 0) return 1;
  if (TVMFuncGetGlobal("runtime.SystemLib", &sys_lib) != 0) return 2;
  if (TVMFuncCall(sys_lib, NULL, NULL, 0, &ret, &tcode) != 0 || tcode != kTVMModuleHandle) return 3;
  if (TVMModGetFunction(ret.v_handle, "tvmgen_ad01_run", 0, &run) != 0) return 4;
  puts("found tvmgen_ad01_run");
  return 0;
}
""")
    shutil.copy(root / "templates" / "platform.c.template", tmp_path / "platform.c")
    srcs = sorted((root / "codegen" / "host" / "src").glob("*.c"))
    # interface c: codegen/ has no packed code; the RPC firmware's adapter is regenerated by mlf.load
    for name, text in mlf.load(path).rpc_sources.items():
        (tmp_path / name).write_text(text)
        srcs.append(tmp_path / name)
    assert bool(c.rpc_sources) == (c.options.interface_api == "c")
    exe = tmp_path / "app"
    b = tmp_path / "build"
    cc.run(["gcc", *cc.WARNING_FLAGS, "-O1", f"-I{cfg}", f"-I{root / 'runtime' / 'include'}",
            f"-I{root / 'codegen' / 'host' / 'include'}", str(tmp_path / "main.c"), str(tmp_path / "platform.c"),
            *map(str, srcs), "-Wl,--start-group", str(b / "libcommon.a"), str(b / "libmemory.a"),
            str(b / "libaot_executor.a"), "-Wl,--end-group", "-o", str(exe)], what="linking the MLF app")
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "found tvmgen_ad01_run" in out.stdout, out.stdout + out.stderr


def test_load_errors_name_the_problem(exported: tuple, tmp_path: Path) -> None:
    _c, path = exported
    with pytest.raises(ModelFormatError, match="no such Model Library Format archive"):
        mlf.load(tmp_path / "missing.tar")
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ModelFormatError, match="not a Model Library Format tar"):
        mlf.load(junk)

    def rewrite(name: str, drop: str | None = None, patch: dict | None = None) -> Path:
        out = tmp_path / name
        with tarfile.open(path) as src, tarfile.open(out, "w") as dst:
            for m in src.getmembers():
                if m.name == drop:
                    continue
                data = src.extractfile(m).read()
                if patch and m.name == "metadata.json":
                    meta = json.loads(data)
                    meta.update(patch)
                    data = json.dumps(meta).encode()
                m.size = len(data)
                dst.addfile(m, io.BytesIO(data))
        return out

    with pytest.raises(ModelFormatError, match="metadata.json is missing"):
        mlf.load(rewrite("nometa.tar", drop="metadata.json"))
    with pytest.raises(ModelFormatError, match="version 5 is not 7"):
        mlf.load(rewrite("v5.tar", patch={"version": 5}))
    with pytest.raises(ModelFormatError, match="codegen/host/src/tvmgen_ad01_ops.c is listed in metadata.json"):
        mlf.load(rewrite("nosrc.tar", drop="codegen/host/src/tvmgen_ad01_ops.c"))
    with pytest.raises(ModelFormatError, match=r"src/ad01.json \(the model's IR\) is missing"):
        mlf.load(rewrite("noir.tar", drop="src/ad01.json"))


def test_load_errors_from_other_tools_are_one_line(exported: tuple, tmp_path: Path) -> None:
    """A tar another tool wrote: a non-tar, a metadata.json that is not an object, a source that is not UTF-8 —
    each a one-line ModelFormatError naming the file, never a traceback of another exception type."""
    _c, path = exported
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ModelFormatError) as info:
        mlf.load(junk)
    assert "\n" not in str(info.value) and "junk.tar" in str(info.value)

    listy = tmp_path / "listy.tar"
    with tarfile.open(listy, "w") as dst:
        data = b"[7]"
        m = tarfile.TarInfo("metadata.json")
        m.size = len(data)
        dst.addfile(m, io.BytesIO(data))
    with pytest.raises(ModelFormatError, match="metadata.json is a JSON list, not an object"):
        mlf.load(listy)

    binary = tmp_path / "binary.tar"
    with tarfile.open(path) as src, tarfile.open(binary, "w") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else b""
            if m.name.endswith("_ops.c"):
                data = b"\xff\xfe" + data
            m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if m.isfile() else None)
    with pytest.raises(ModelFormatError, match=r"codegen/host/src/tvmgen_ad01_ops.c is not UTF-8 text"):
        mlf.load(binary)
