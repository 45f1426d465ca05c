"""A microTVM-style crt_config.h with all its upstream settings builds and passes the CRT's C tests (issue 24).

tests/crt/configs/upstream/crt_config.h sets every name of src/utvm/crt/upstream_config.json at upstream
microTVM's default (provenance in the file). The CRT is built with it, as a release build and as a debug build
(the same file at TVM_CRT_DEBUG 1), and every C test of the CRT runs against each: the core's, the link's, the
PackedFunc helpers' and test_upstream_config.c, which checks what each honoured setting does. Out-of-range and
disagreeing values are refused by name. The CRT libraries are built once per configuration (cached) and shared
by the tests' executables.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import cbuild
import pytest
import test_rpc_c
from test_crt_core import C_TESTS

from utvm import crt_config
from utvm.support import cc

CRT = cc.crt_dir()
UPSTREAM = cbuild.HERE / "configs" / "upstream" / "crt_config.h"
NAMES = {n.name: n for n in crt_config.upstream_names()}
ALL_LIBS = ("common", "memory", "rpc_common", "rpc_server", "aot_executor", "host")
_FLAGS = (*cc.WARNING_FLAGS, "-O1", "-g")

# C test -> extra include directories; every test links every CRT library (the host port's pool needs libmemory).
_RPC_INCLUDES = ("vectors",)
C_SUITE: dict[str, tuple[str, ...]] = {
    **{name: () for name in C_TESTS},
    "test_rpc_framing": _RPC_INCLUDES,
    "test_rpc_session": _RPC_INCLUDES,
    "test_rpc_server": (*_RPC_INCLUDES, "rpc_server_src"),
    "test_packed_func": (),
    "test_upstream_config": (),
}


def _config_dir(debug: bool) -> Path:
    """The upstream file's directory; for the debug build, a copy at TVM_CRT_DEBUG 1 (a stable path per text)."""
    if not debug:
        return UPSTREAM.parent
    text = UPSTREAM.read_text()
    assert "#define TVM_CRT_DEBUG 0\n" in text
    text = text.replace("#define TVM_CRT_DEBUG 0\n", "#define TVM_CRT_DEBUG 1\n")
    directory = cc.cache_dir() / "generated" / f"upstream-debug-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if not (directory / "crt_config.h").exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / ".crt_config.h.tmp"
        tmp.write_text(text)
        tmp.replace(directory / "crt_config.h")
    return directory


def _build(name: str, config: Path, libs: dict[str, Path]) -> Path:
    include_dirs = [config, CRT / "include"]
    for extra in C_SUITE[name]:
        include_dirs.append(test_rpc_c.vectors_header() if extra == "vectors" else CRT / "src" / "rpc_server")
    source = cbuild.HERE / f"{name}.c"

    def builder(tmp: Path) -> Path:
        return cc.compile_link([source], tmp / name, include_dirs=include_dirs, cflags=_FLAGS,
                               ldflags=["-lcmocka", "-lm"], libs=list(libs.values()))

    return cc.cached_build([source, *include_dirs, *libs.values()], [name, *_FLAGS, cc.compiler_version("gcc")],
                           name, builder)


def _preprocess(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "crt_config.h").write_text(text)
    return subprocess.run(["gcc", "-x", "c", *cc.WARNING_FLAGS, "-fsyntax-only", f"-I{tmp_path}",
                           f"-I{CRT / 'include'}", "-"], input="#include <tvm/runtime/crt/config.h>\nint utvm_probe;\n",
                          capture_output=True, text=True, timeout=60)


def _with(text: str, name: str, value: str) -> str:
    """`text` with `#define name ...` set to `value`."""
    out, n = re.subn(rf"^#define {name} .*$", f"#define {name} {value}", text, flags=re.M)
    assert n == 1, name
    return out


# ---- the file ------------------------------------------------------------------------------------------
def test_upstream_file_sets_every_listed_name() -> None:
    """Every name of the list is set (or, for a switch upstream leaves off, commented out as upstream has it)."""
    text = UPSTREAM.read_text()
    defined = set(crt_config.defined_names(text))
    commented = set(re.findall(r"^// #define (TVM_\w+)", text, flags=re.M))
    for n in NAMES.values():
        if n.kind == "level_name":
            continue  # values of TVM_CRT_LOG_LEVEL, defined by the CRT
        if n.kind in ("always_on", "refused"):
            assert n.name in commented and n.name not in defined, f"{n.name}: upstream leaves it off"
        else:
            assert n.name in defined, f"{n.name} (kind {n.kind}) is missing from {UPSTREAM.name}"
    assert "TVM_RUNTIME_CRT_CRT_CONFIG_H_" in defined  # an upstream guard


def test_upstream_template_value_of_function_name_length_is_refused(tmp_path: Path) -> None:
    """Upstream's TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES 30 is the one default utvm refuses, by name."""
    proc = _preprocess(tmp_path, _with(UPSTREAM.read_text(), "TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES", "30"))
    assert proc.returncode != 0
    errors = re.findall(r"error: #error (.*)", proc.stderr)
    assert len(errors) == 1 and "TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES must be >= 35" in errors[0], proc.stderr
    assert _preprocess(tmp_path, UPSTREAM.read_text()).returncode == 0


# ---- the CRT's C tests with it ---------------------------------------------------------------------------
@pytest.mark.parametrize("debug", [False, True], ids=["release", "debug"])
def test_crt_c_tests_pass_with_the_upstream_file(debug: bool) -> None:
    config = _config_dir(debug)
    libs = cc.cached_crt_libs(config, cflags=["-g"], libs=ALL_LIBS)
    outputs = {}
    for name in C_SUITE:
        out = cbuild.run_test(_build(name, config, libs), timeout=240)
        runs = out.count("[ RUN      ]")
        assert runs > 0 and out.count("[       OK ]") == runs and "FAILED" not in out, f"{name}:\n{out}"
        outputs[name] = out
    # What the file set reached the CRT (test_upstream_config.c prints it).
    line = re.search(r"^config (.*)$", outputs["test_upstream_config"], flags=re.M)
    assert line, outputs["test_upstream_config"]
    got = dict(item.split("=") for item in line.group(1).split())
    assert got == {
        "upstream": "1", "debug": str(int(debug)),
        "log_level": "0",  # upstream's TVM_CRT_LOG_LEVEL_DEBUG (3) in utvm's numbering
        "page_bytes": "4096", "pool_bytes": str(1 << 24),  # TVM_CRT_PAGE_BYTES ...; TVM_CRT_LOG_VIRT_MEM_SIZE 24
        "module_function_name": "120", "model_name": "80",  # ..._STRLEN_FUNCTION_NAME, _STRLEN_PARAM_NAME
        "max_args": "10", "function_name": "40", "align": "16",
    }


# ---- values refused by name ------------------------------------------------------------------------------
REFUSED = [
    ("TVM_CRT_PAGE_BYTES", "3000", "TVM_CRT_PAGE_BYTES (microTVM) must be a power of two from 16 to 16777216"),
    ("TVM_CRT_PAGE_BYTES", "8", "TVM_CRT_PAGE_BYTES (microTVM) must be a power of two"),
    ("TVM_CRT_PAGE_BYTES", "", "TVM_CRT_PAGE_BYTES (microTVM) is defined without a value"),
    ("TVM_CRT_LOG_VIRT_MEM_SIZE", "40", "TVM_CRT_LOG_VIRT_MEM_SIZE (microTVM) must be 4 .. 31"),
    ("TVM_CRT_MAX_PAGES", "0", "TVM_CRT_MAX_PAGES (microTVM) must be >= 1"),
    ("TVM_CRT_VIRT_MEM_SIZE", "5000", "TVM_CRT_VIRT_MEM_SIZE (microTVM) and TVM_CRT_MEMORY_POOL_BYTES (utvm) are"),
    ("TVM_CRT_MAX_STRLEN_DLTYPE", "4", "TVM_CRT_MAX_STRLEN_DLTYPE (microTVM) must be 8 .. 64"),
    ("TVM_CRT_STRLEN_DLTYPE", "100", "TVM_CRT_STRLEN_DLTYPE (microTVM) must be 8 .. 64"),
    ("TVM_CRT_MAX_STRLEN_PARAM_NAME", "1",
     "TVM_CRT_MAX_MODEL_NAME_BYTES (microTVM: TVM_CRT_MAX_STRLEN_PARAM_NAME) must be 0 (no limit) or 2 .. 65535"),
    ("TVM_CRT_DEBUG", "2", "TVM_CRT_DEBUG must be 0 (release build) or 1 (debug build)"),
    ("TVM_CRT_DEBUG", "", "TVM_CRT_DEBUG must be 0 (release build) or 1 (debug build)"),
]


@pytest.mark.parametrize("name, value, message", REFUSED, ids=[f"{n}={v or 'empty'}" for n, v, _ in REFUSED])
def test_out_of_range_values_are_refused_by_name(tmp_path: Path, name: str, value: str, message: str) -> None:
    proc = _preprocess(tmp_path, _with(UPSTREAM.read_text(), name, value))
    assert proc.returncode != 0 and f"crt_config.h: {message}" in proc.stderr, proc.stderr


DISAGREE = [  # two names of one quantity, as different upstream versions set them
    ("TVM_CRT_PAGE_BITS", "10", "TVM_CRT_PAGE_BYTES_LOG (microTVM) and TVM_CRT_PAGE_BITS (utvm)"),
    ("TVM_CRT_PAGE_BYTES", "1024", "TVM_CRT_PAGE_BYTES (microTVM) and TVM_CRT_PAGE_BITS (utvm)"),
    ("TVM_CRT_MAX_PAGES", "300", "TVM_CRT_MAX_PAGES (microTVM) pages of 1 << TVM_CRT_PAGE_BITS bytes disagree"),
    ("TVM_CRT_STRLEN_NAME", "80",
     "TVM_CRT_STRLEN_NAME (microTVM) and TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES (utvm)"),
]


@pytest.mark.parametrize("name, value, message", DISAGREE, ids=[n for n, _, _ in DISAGREE])
def test_two_names_of_one_setting_must_agree(tmp_path: Path, name: str, value: str, message: str) -> None:
    proc = _preprocess(tmp_path, _with(UPSTREAM.read_text(), name, value))
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_each_pool_name_alone_sizes_the_pool(tmp_path: Path) -> None:
    """LOG_VIRT_MEM_SIZE (log2 bytes), VIRT_MEM_SIZE (bytes) and MAX_PAGES (pages) each give the same pool."""
    base = "#define TVM_CRT_PAGE_BYTES 4096\n"
    src = tmp_path / "pool.c"
    src.write_text("#include <tvm/runtime/crt/config.h>\n"
                   "typedef char pool_is_64k[(TVM_CRT_MEMORY_POOL_BYTES == 65536UL) ? 1 : -1];\n"
                   "typedef char pages_4k[(TVM_CRT_PAGE_BITS == 12) ? 1 : -1];\n")
    for line in ("TVM_CRT_LOG_VIRT_MEM_SIZE 16", "TVM_CRT_VIRT_MEM_SIZE 65536", "TVM_CRT_MAX_PAGES 16"):
        (tmp_path / "crt_config.h").write_text(f"{base}#define {line}\n")
        proc = subprocess.run(["gcc", *cc.WARNING_FLAGS, "-fsyntax-only", f"-I{tmp_path}", f"-I{CRT / 'include'}",
                               str(src)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{line}: {proc.stderr}"
    (tmp_path / "crt_config.h").write_text(f"{base}#define TVM_CRT_VIRT_MEM_SIZE 5000\n")  # not whole pages
    proc = subprocess.run(["gcc", *cc.WARNING_FLAGS, "-fsyntax-only", f"-I{tmp_path}", f"-I{CRT / 'include'}",
                           str(src)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "TVM_CRT_MEMORY_POOL_BYTES (microTVM: 1 << TVM_CRT_LOG_VIRT_MEM_SIZE, " \
        "TVM_CRT_VIRT_MEM_SIZE) must be 0 or a multiple of the page size" in proc.stderr, proc.stderr


def test_platform_values_yield_to_the_files_upstream_names(tmp_path: Path) -> None:
    """A platform fills what a user's file leaves out (--crt-config-file); a limit the file sets through an
    upstream name of it is not left out (the host's TVM_CRT_PAGE_BITS 10 would contradict TVM_CRT_PAGE_BYTES)."""
    from utvm.platform.host import render_crt_config
    from utvm.platform.qemu.platform import QemuCortexM3Platform
    from utvm.platform.qemu.project import spec_crt_config_text

    user = tmp_path / "user" / "crt_config.h"
    user.parent.mkdir()
    user.write_text("#define TVM_CRT_PAGE_BYTES 4096\n#define TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES 64\n"
                    "#define TVM_CRT_LOG_VIRT_MEM_SIZE 16\n#define TVM_CRT_STRLEN_NAME 64\n")
    src = tmp_path / "values.c"
    src.write_text("#include <tvm/runtime/crt/config.h>\n"
                   "typedef char page[(TVM_CRT_PAGE_BITS == 12) ? 1 : -1];\n"
                   "typedef char align[(TVM_CRT_ALLOC_ALIGNMENT_BYTES == 64) ? 1 : -1];\n"
                   "typedef char pool[(TVM_CRT_MEMORY_POOL_BYTES == 65536UL) ? 1 : -1];\n"
                   "typedef char names[(TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES == 64) ? 1 : -1];\n")
    texts = {"host": render_crt_config(user_file=user),
             "qemu": spec_crt_config_text(QemuCortexM3Platform().firmware_spec(crt_config_file=user))}
    for platform, text in texts.items():
        (tmp_path / "crt_config.h").write_text(text)
        proc = subprocess.run(["gcc", *cc.WARNING_FLAGS, "-fsyntax-only", f"-I{tmp_path}", f"-I{CRT / 'include'}",
                               str(src)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{platform}: {proc.stderr}"
