"""Deployment metadata (issue 13 item 1): the macros of tvmgen_<m>.h equal metadata.json, which equals the
model's tensors; the version macros are utvm.__version__; the model hash is stable and follows the
weights; a `static const TVMContext` (a context in flash) compiles warning-free and runs the model.

The checks of the macros are compiled: the test writes a C file of `_Static_assert`s (integers) and
run-time comparisons (strings, float bits) from metadata.json by the documented mapping
(utvm.compiler.header), so the compiler -- not the header text -- decides whether they hold."""

from __future__ import annotations

import hashlib
import json
import re
import struct
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest

import utvm
from utvm import mlf
from utvm.compiler import compile
from utvm.compiler.kernels import C_TYPES, DL_TYPES
from utvm.compiler.local import LocalModel, random_inputs
from utvm.frontend import load
from utvm.support import cc
from utvm.support.models import models_dir

MODELS = models_dir()
HELLO_INT8 = MODELS / "tflm" / "hello_world_int8.tflite"
HELLO_FLOAT = MODELS / "tflm" / "hello_world_float.tflite"
KWS = MODELS / "mlperf_tiny" / "kws_ref_model.tflite"
C_IFACE = {"unpacked_api": True, "interface_api": "c"}
C11_FLAGS = tuple("-std=c11" if f == "-std=c99" else f for f in cc.WARNING_FLAGS)


def _upper(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _float_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _checks_c(meta: dict, model: str) -> str:
    """A C11 file checking every macro of tvmgen_<model>.h against metadata.json (the documented mapping)."""
    mod = meta["modules"][model]
    main = mod["memory"]["functions"]["main"][0]
    m = _upper(model)
    static: list[tuple[str, int]] = []
    strings: list[tuple[str, str]] = []
    floats: list[tuple[str, int]] = []
    lines = ["#include <stdint.h>", "#include <stdio.h>", "#include <string.h>", f'#include "tvmgen_{model}.h"', ""]
    for name, t in (*main["inputs"].items(), *main["outputs"].items()):
        base = f"TVMGEN_{m}_{_upper(name)}"
        static += [(f"{base}_SIZE", t["size"]), (f"{base}_RANK", len(t["shape"])),
                   (f"{base}_NUM_ELEMENTS", int(np.prod(t["shape"], dtype=np.int64))),
                   (f"{base}_DTYPE_CODE", t["dtype_code"]), (f"{base}_DTYPE_BITS", t["dtype_bits"]),
                   (f"sizeof({base}_C_TYPE) * 8", t["dtype_bits"]),
                   (f"{base}_QUANTIZED", int(t["quantization"] is not None))]
        static += [(f"{base}_DIM_{i}", d) for i, d in enumerate(t["shape"])]
        strings.append((f"{base}_DTYPE", t["dtype"]))
        q = t["quantization"]
        if q is not None and q["axis"] is None:
            static.append((f"{base}_ZERO_POINT", q["zero_point"][0]))
            floats.append((f"{base}_SCALE", _float_bits(q["scale"][0])))
        lines.append(f"#if defined({base}_DIM_{len(t['shape'])})")
        lines.append(f'#error "{base} has more dimensions than its rank"')
        lines.append("#endif")
        if q is None:
            lines += [f"#if defined({base}_SCALE) || defined({base}_ZERO_POINT)",
                      f'#error "{base} is not quantized but has a scale"', "#endif"]
    static += [(f"TVMGEN_{m}_WORKSPACE_SIZE", main["workspace_size_bytes"]),
               (f"TVMGEN_{m}_NUM_INPUTS", len(mod["utvm"]["inputs"])),
               (f"TVMGEN_{m}_NUM_OUTPUTS", len(mod["utvm"]["outputs"]))]
    v = mod["utvm"]["utvm_version"]
    static += [(f"TVMGEN_{m}_UTVM_VERSION_{k.upper()}", v[k]) for k in ("major", "minor", "patch")]
    strings += [(f"TVMGEN_{m}_UTVM_VERSION", v["string"]), (f"TVMGEN_{m}_MODEL_HASH", mod["utvm"]["model_hash"])]
    lines += [f'_Static_assert({expr} == {val}, "{expr} == {val}");' for expr, val in static]
    lines += ["", "int main(void) {", "  int bad = 0;"]
    for macro, text in strings:
        lines.append(f'  if (strcmp({macro}, "{text}") != 0) {{ printf("%s\\n", "{macro}"); ++bad; }}')
    for macro, b in floats:
        lines += [f"  {{ float f = {macro}; uint32_t u; memcpy(&u, &f, sizeof(u));",
                  f'    if (u != {b}UL) {{ printf("%s\\n", "{macro}"); ++bad; }} }}']
    lines += ['  printf("checked %d macros\\n", ' + str(len(static) + len(strings) + len(floats)) + ");",
              "  return bad;", "}", ""]
    return "\n".join(lines)


@pytest.fixture(scope="module", params=["int8", "float", "kws-user"])
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    path, extra = {"int8": (HELLO_INT8, {}), "float": (HELLO_FLOAT, {}),
                   "kws-user": (KWS, {"workspace": "user"})}[request.param]
    c = compile(load(path), model_name="meta_m", **C_IFACE, **extra)
    tar = mlf.export_model_library_format(c, tmp_path_factory.mktemp("meta") / "m.tar")
    return c, tar


def _read(tar: Path, name: str) -> bytes:
    with tarfile.open(tar) as t:
        f = t.extractfile(name)
        assert f is not None
        return f.read()


def test_metadata_equals_the_model_tensors(exported: tuple) -> None:
    c, tar = exported
    meta = json.loads(_read(tar, "metadata.json"))
    main = meta["modules"]["meta_m"]["memory"]["functions"]["main"][0]
    graph = c.graph
    assert list(main["inputs"]) == list(graph.inputs) and list(main["outputs"]) == list(graph.outputs)
    for name, t in (*main["inputs"].items(), *main["outputs"].items()):
        x = graph.tensor(name)
        assert t["shape"] == list(x.shape) and t["rank"] == len(x.shape) and t["dtype"] == x.dtype
        assert t["size"] == x.nbytes and t["num_elements"] == x.size
        assert (t["dtype_code"], t["dtype_bits"]) == DL_TYPES[x.dtype] and t["c_type"] == C_TYPES[x.dtype]
        if x.quant is None:
            assert t["quantization"] is None
        else:
            assert t["quantization"] == {"scale": list(x.quant.scale), "zero_point": list(x.quant.zero_point),
                                         "axis": x.quant.axis}
    mod = meta["modules"]["meta_m"]
    assert mod["utvm"]["model_hash"] == hashlib.sha256(_read(tar, "src/meta_m.json")).hexdigest()


def test_header_macros_compile_against_metadata(exported: tuple, tmp_path: Path) -> None:
    c, tar = exported
    meta = json.loads(_read(tar, "metadata.json"))
    quantized = any(t["quantization"] for t in meta["modules"]["meta_m"]["memory"]["functions"]["main"][0]
                    ["inputs"].values())
    assert quantized == (c.graph.tensor(c.graph.inputs[0]).quant is not None)
    (tmp_path / "tvmgen_meta_m.h").write_bytes(_read(tar, "codegen/host/include/tvmgen_meta_m.h"))
    (tmp_path / "checks.c").write_text(_checks_c(meta, "meta_m"))
    exe = tmp_path / "checks"
    cc.run(["gcc", *C11_FLAGS, "-I", str(tmp_path), "-I", str(cc.crt_dir() / "include"), str(tmp_path / "checks.c"),
            "-o", str(exe)], what="compiling the macro checks")
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.fullmatch(r"checked \d+ macros\n", out.stdout)


def test_a_wrong_macro_value_fails_to_compile(exported: tuple, tmp_path: Path) -> None:
    """The static checks do check: one metadata value off by one and the build fails on that macro."""
    c, tar = exported
    meta = json.loads(_read(tar, "metadata.json"))
    entry = next(iter(meta["modules"]["meta_m"]["memory"]["functions"]["main"][0]["outputs"].values()))
    entry["size"] += 1
    (tmp_path / "tvmgen_meta_m.h").write_text(c.includes["tvmgen_meta_m.h"])
    (tmp_path / "checks.c").write_text(_checks_c(meta, "meta_m"))
    proc = subprocess.run(["gcc", *C11_FLAGS, "-I", str(tmp_path), "-I", str(cc.crt_dir() / "include"), "-c",
                           str(tmp_path / "checks.c"), "-o", str(tmp_path / "checks.o")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "_SIZE ==" in proc.stderr


def test_version_macros_are_the_package_version() -> None:
    c = compile(load(HELLO_INT8), model_name="ver", **C_IFACE)
    h = c.includes["tvmgen_ver.h"]
    got = tuple(int(re.search(rf"^#define TVMGEN_VER_UTVM_VERSION_{k} (\d+)$", h, re.M)[1])
                for k in ("MAJOR", "MINOR", "PATCH"))
    assert ".".join(map(str, got)) == re.match(r"\d+\.\d+\.\d+", utvm.__version__)[0]
    assert f'#define TVMGEN_VER_UTVM_VERSION "{utvm.__version__}"' in h


def test_model_hash_is_stable_and_follows_the_weights() -> None:
    g = load(HELLO_INT8)

    def hash_of(graph: object) -> str:
        c = compile(graph, model_name="hh", **C_IFACE)
        value = c.metadata["modules"]["hh"]["utvm"]["model_hash"]
        assert f'#define TVMGEN_HH_MODEL_HASH "{value}"' in c.includes["tvmgen_hh.h"]
        return value

    first = hash_of(g)
    assert re.fullmatch(r"[0-9a-f]{64}", first) and hash_of(load(HELLO_INT8)) == first
    name, w = next((n, t) for n, t in g.constants.items() if t.dtype == "int8" and t.size > 1)
    data = w.data.copy()
    data.flat[0] = np.int8(-data.flat[0] if data.flat[0] not in (0, -128) else 1)
    changed = g.replace(tensors={**g.tensors, name: w.replace(data=data)})
    assert hash_of(changed) != first


def test_static_const_context_runs_the_model(tmp_path: Path) -> None:
    """RFC 002: a context fixed at build time is `static const` (it can live in flash); TVMExecute takes
    `const TVMContext*` all the way down, with -Wall -Wextra -Werror -pedantic."""
    c = compile(load(HELLO_INT8), model_name="cx", workspace="user", **C_IFACE)
    assert c.plan.workspace_bytes > 0
    srcs, inc = c.write_sources(tmp_path / "model", rpc=False)
    x = random_inputs(c, np.random.default_rng(3))[0]
    expected = LocalModel(c, opt="-O0").run([x])[0]
    (tmp_path / "app.c").write_text(f"""\
#include <stdint.h>
#include <stdio.h>
#include <tvm/runtime/crt/tvm_micro_runtime.h>
#include "tvmgen_cx.h"

static uint8_t workspace[TVMGEN_CX_WORKSPACE_SIZE] __attribute__((aligned(16)));
static void* const workspaces[1] = {{workspace}};
static const TVMContext context = {{.workspace = workspaces}};

int main(void) {{
  int8_t in[TVMGEN_CX_SERVING_DEFAULT_DENSE_INPUT_0_SIZE] = {{{int(x.reshape(-1)[0])}}};
  int8_t out[TVMGEN_CX_STATEFULPARTITIONEDCALL_0_SIZE];
  struct tvmgen_cx_inputs inputs = {{in}};
  struct tvmgen_cx_outputs outputs = {{out}};
  const TVMContext* ctx = &context;
  int32_t rc = TVMExecute(&tvmgen_cx_model, &inputs, &outputs, ctx);
  if (rc != 0) return 1;
  rc = tvmgen_cx_run(&inputs, &outputs, &context);
  printf("%d %d\\n", (int)rc, (int)out[0]);
  return rc == 0 ? 0 : 2;
}}
""")
    exe = tmp_path / "app"
    cc.run(["gcc", *cc.WARNING_FLAGS, "-O1", "-I", str(inc), "-I", str(cc.crt_dir() / "include"),
            str(tmp_path / "app.c"), *map(str, srcs), "-o", str(exe)], what="building the const-context app")
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split() == ["0", str(int(expected.reshape(-1)[0]))]


def test_per_channel_io_gives_axis_and_count_not_a_scale() -> None:
    from utvm.compiler.header import header_macros

    c = compile(load(HELLO_INT8), model_name="pc", **C_IFACE)
    meta = json.loads(json.dumps(c.metadata))
    entry = next(iter(meta["modules"]["pc"]["memory"]["functions"]["main"][0]["inputs"].values()))
    entry["quantization"] = {"scale": [0.5, 0.25], "zero_point": [0, 0], "axis": 1}
    macros = header_macros(meta)
    base = "TVMGEN_PC_SERVING_DEFAULT_DENSE_INPUT_0"
    assert macros[f"{base}_QUANTIZED"] == 1
    assert (macros[f"{base}_QUANT_AXIS"], macros[f"{base}_QUANT_CHANNELS"]) == (1, 2)
    assert f"{base}_SCALE" not in macros and f"{base}_ZERO_POINT" not in macros


@pytest.mark.parametrize("x", [0.024480115622282028, 1.0, 3.0, 1e-30, 0.0, 2.0 ** -149, 0.1, 65504.0])
def test_scale_literal_is_the_exact_float32(x: float, tmp_path: Path) -> None:
    from utvm.compiler.header import float32_literal

    lit = float32_literal(x)
    assert float.fromhex(lit[:-1]) == float(np.float32(x)) and lit.endswith("f")
    (tmp_path / "f.c").write_text(f"float f(void) {{ return {lit}; }}\n")
    cc.run(["gcc", *cc.WARNING_FLAGS, "-c", str(tmp_path / "f.c"), "-o", str(tmp_path / "f.o")], what="literal")
