"""An upstream microTVM crt_config.h in a utvm CRT build (docs/crt.md, "Coming from microTVM").

Every name of the one list (src/utvm/crt/upstream_config.json) is exercised: names utvm honours build and
take effect (probed by a program linked against the CRT built with -Wall -Wextra -Werror -pedantic), names
it refuses stop the build with an #error naming them, out-of-range values are rejected by name, and utvm's
own configurations are untouched. The host firmware takes a user's file through build-device
--crt-config-file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from utvm import crt_config
from utvm.errors import UtvmError
from utvm.support import cc
from utvm.support.models import models_dir

CRT = cc.crt_dir()
NAMES = {n.name: n for n in crt_config.upstream_names()}
REFUSED = [n.name for n in NAMES.values() if n.kind == "refused"]

# The values of upstream's crt_config.h.template as its host project fills them in, with the zephyr
# template's include of logging.h (for the level names). The refused line is the one a user deletes;
# upstream's TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES is 30, below utvm's minimum of 35 (the CRT's own
# globals), so the migrated file says 40. UPSTREAM_STRINGS_AND_PAGES are upstream lines utvm once refused and
# now honours (issue 24; every name at its default: test_upstream_config_full.py).
UPSTREAM_HONOURED = """\
/* crt_config.h of a microTVM project (upstream names and host values). */
#ifndef TVM_RUNTIME_CRT_CRT_CONFIG_H_
#define TVM_RUNTIME_CRT_CRT_CONFIG_H_

#include <tvm/runtime/crt/logging.h>

#define TVM_CRT_LOG_LEVEL TVM_CRT_LOG_LEVEL_DEBUG
#define TVM_CRT_DEBUG 0
#define TVM_CRT_MAX_NDIM 6
#define TVM_CRT_MAX_ARGS 10
#define TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES 512
#define TVM_CRT_MAX_REGISTERED_MODULES 2
#define TVM_CRT_MAX_PACKET_SIZE_BYTES 2048
#define TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES 40
#define TVM_CRT_PAGE_BITS 10
"""
UPSTREAM_STRINGS_AND_PAGES = """\
#define TVM_CRT_MAX_STRLEN_DLTYPE 10
#define TVM_CRT_MAX_STRLEN_FUNCTION_NAME 120
#define TVM_CRT_MAX_STRLEN_PARAM_NAME 80
#define TVM_CRT_MAX_PAGES 300
"""
UPSTREAM_REFUSED = """\
#define TVM_CRT_FRAMER_ENABLE_LOGS
"""
END = "\n#endif  // TVM_RUNTIME_CRT_CRT_CONFIG_H_\n"

PROBE = r"""
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/page_allocator.h>

static int g_logged;  /* messages that reached the log sink */

void TVMPlatformLog(int level, const char* message, size_t length) {
  (void)level; (void)message; (void)length;
  ++g_logged;
}

static int noop(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_codes, void* h) {
  (void)args; (void)codes; (void)n; (void)ret; (void)ret_codes; (void)h;
  return 0;
}

int main(void) {
  TVMBackendPackedCFunc f = noop;
  TVMFunctionHandle handle;
  char name[100];
  int len, longest = 0, debug_logs = 0;
  memcpy(&handle, &f, sizeof(handle));
  if (TVMInitializeRuntime() != kTvmErrorNoError) { printf("init failed: %s\n", TVMGetLastError()); return 1; }
  for (len = (int)sizeof(name) - 1; len > 0 && longest == 0; --len) {  /* the longest name it takes */
    memset(name, 'x', (size_t)len);
    name[len] = '\0';
    if (TVMFuncRegisterGlobal(name, handle, 0) == 0) longest = len;
  }
  debug_logs = g_logged;
  LOG_DEBUG("probe %d", 1);  /* compiled in only at the debug level */
  debug_logs = g_logged - debug_logs;
  printf("upstream=%d log_level=%d debug_logs=%d max_args=%d max_ndim=%d packet=%d registry=%d modules=%d "
         "page_bytes=%d align=%d longest_name=%d\n",
         UTVM_CRT_CONFIG_IS_UPSTREAM, TVM_CRT_LOG_LEVEL, debug_logs, TVM_CRT_MAX_ARGS, TVM_CRT_MAX_NDIM,
         TVM_CRT_MAX_PACKET_SIZE_BYTES, TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES, TVM_CRT_MAX_REGISTERED_MODULES,
         (int)TVM_CRT_PAGE_SIZE_BYTES, TVM_CRT_ALLOC_ALIGNMENT_BYTES, longest);
  return 0;
}
"""


def _config_dir(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "config"
    d.mkdir(exist_ok=True)
    (d / "crt_config.h").write_text(text)
    return d


def _preprocess(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """Compile a translation unit that includes the CRT's config.h (as every CRT source does)."""
    cfg = _config_dir(tmp_path, text)
    src = tmp_path / "probe.c"
    src.write_text("#include <tvm/runtime/crt/config.h>\nint utvm_probe = TVM_CRT_MAX_ARGS;\n")
    return subprocess.run(["gcc", *cc.WARNING_FLAGS, f"-I{cfg}", f"-I{CRT / 'include'}", "-fsyntax-only", str(src)],
                          capture_output=True, text=True, timeout=60)


def _build_and_probe(tmp_path: Path, text: str) -> dict[str, int]:
    """Build every CRT library with `text` as crt_config.h (the Makefile's strict flags) and run PROBE."""
    cfg = _config_dir(tmp_path, text)
    libs = cc.make_crt_libs(tmp_path / "crt", cfg, ("common", "memory", "rpc_common", "rpc_server", "aot_executor",
                                                   "host"))
    src = tmp_path / "probe_main.c"
    src.write_text(PROBE)
    exe = cc.compile_link([src], tmp_path / "probe", include_dirs=[cfg, CRT / "include"],
                          cflags=[*cc.WARNING_FLAGS, "-O1"], ldflags=["-lm"],
                          libs=[libs["common"], libs["memory"], libs["host"]])
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
    return {k: int(v) for k, v in (item.split("=") for item in out.split())}


# ---- the list and the generated header -----------------------------------------------------------------
def test_generated_header_is_current() -> None:
    assert crt_config.header_path().read_text() == crt_config.render_header(), (
        "config_upstream.h is stale: run python -m utvm.crt_config")


def test_list_covers_upstream_template_names() -> None:
    guards = crt_config.upstream_guards()
    assert "TVM_RUNTIME_CRT_CRT_CONFIG_H_" in guards
    for name in [*crt_config.defined_names(UPSTREAM_HONOURED + UPSTREAM_STRINGS_AND_PAGES + UPSTREAM_REFUSED),
                 "TVM_CRT_LOG_LEVEL_DEBUG"]:
        assert name in NAMES or name in guards, f"{name} (upstream) is missing from upstream_config.json"


# ---- an upstream file ------------------------------------------------------------------------------------
def test_upstream_file_as_is_names_every_refused_macro(tmp_path: Path) -> None:
    as_is = (UPSTREAM_HONOURED.replace("NAME_LENGTH_BYTES 40", "NAME_LENGTH_BYTES 30") + UPSTREAM_STRINGS_AND_PAGES
             + UPSTREAM_REFUSED + END)
    proc = _preprocess(tmp_path, as_is)
    assert proc.returncode != 0
    for name in crt_config.defined_names(UPSTREAM_REFUSED):
        assert f"crt_config.h: {name} (microTVM) is not supported" in proc.stderr, proc.stderr
    assert "crt_config.h: TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES must be >= 35" in proc.stderr
    # ...and nothing else it sets is complained about.
    for name in crt_config.defined_names(UPSTREAM_HONOURED + UPSTREAM_STRINGS_AND_PAGES):
        if name != "TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES":
            assert f"crt_config.h: {name} " not in proc.stderr, proc.stderr


def test_upstream_file_builds_and_its_limits_take_effect(tmp_path: Path) -> None:
    got = _build_and_probe(tmp_path, UPSTREAM_HONOURED + END)
    assert got == {
        "upstream": 1,
        "log_level": crt_config.UTVM_LEVELS["TVM_CRT_LOG_LEVEL_DEBUG"],  # upstream's DEBUG is 3, utvm's 0
        "debug_logs": 1,
        "max_args": 10, "max_ndim": 6, "packet": 2048, "registry": 512, "modules": 2,
        "page_bytes": 1024,
        "align": 16,  # utvm's default: the file does not set it
        "longest_name": 39,  # TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES 40, with the NUL
    }


def test_utvm_config_is_not_upstream_and_keeps_its_values(tmp_path: Path) -> None:
    got = _build_and_probe(tmp_path, (CRT / "templates" / "crt_config.h.template").read_text())
    assert got["upstream"] == 0
    assert got["log_level"] == 3 and got["debug_logs"] == 0  # utvm's numbering: error
    assert got["max_args"] == 16 and got["longest_name"] == 79 and got["registry"] == 512


@pytest.mark.parametrize("name", REFUSED)
def test_each_refused_name_stops_the_build(tmp_path: Path, name: str) -> None:
    proc = _preprocess(tmp_path, f"#define {name} 1\n")
    assert proc.returncode != 0
    assert crt_config.refusal_message(NAMES[name]) in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", REFUSED)
def test_refused_name_in_utvm_style_file_is_refused_too(tmp_path: Path, name: str) -> None:
    text = (CRT / "host" / "crt_config.h").read_text().replace("#endif", f"#define {name} 4\n#endif")
    proc = _preprocess(tmp_path, text)
    assert proc.returncode != 0 and f"{name} (microTVM)" in proc.stderr


@pytest.mark.parametrize("value, ok", [("0", True), ("1", True), ("", False), ("2", False)])
def test_debug_is_0_or_1(tmp_path: Path, value: str, ok: bool) -> None:
    """TVM_CRT_DEBUG 1 is a debug build (test_upstream_config.c checks what it does); anything else but 0 stops."""
    proc = _preprocess(tmp_path, f"#define TVM_CRT_DEBUG {value}\n")
    assert (proc.returncode == 0) == ok, proc.stderr
    if not ok:
        assert "crt_config.h: TVM_CRT_DEBUG must be 0 (release build) or 1 (debug build)" in proc.stderr


@pytest.mark.parametrize("name", [n.name for n in NAMES.values() if n.kind == "always_on"])
def test_always_on_checks_are_accepted(tmp_path: Path, name: str) -> None:
    proc = _preprocess(tmp_path, f"#define {name}\n")
    assert proc.returncode == 0, proc.stderr


def test_aliases_set_the_utvm_setting(tmp_path: Path) -> None:
    text = "#define TVM_CRT_PAGE_BYTES_LOG 12\n#define TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES 32\n"
    got = _build_and_probe(tmp_path, text)
    assert got["upstream"] == 1 and got["page_bytes"] == 4096 and got["align"] == 32


#: Two values each alias takes (most take 8 and 16; a memory pool is whole 1 KiB pages).
ALIAS_VALUES = {"TVM_CRT_VIRT_MEM_SIZE": ("4096", "8192")}


@pytest.mark.parametrize("alias", [n for n in NAMES.values() if n.kind == "alias"], ids=lambda n: n.name)
def test_alias_disagreeing_with_utvm_name_is_refused(tmp_path: Path, alias: crt_config.UpstreamName) -> None:
    one, other = ALIAS_VALUES.get(alias.name, ("8", "16"))
    proc = _preprocess(tmp_path, f"#define {alias.name} {one}\n#define {alias.utvm} {other}\n")
    assert proc.returncode != 0
    assert f"{alias.name} (microTVM) and {alias.utvm} (utvm)" in proc.stderr, proc.stderr
    proc = _preprocess(tmp_path, f"#define {alias.name} {one}\n#define {alias.utvm} {one}\n")
    assert proc.returncode == 0, proc.stderr


#: What makes a file upstream's in the tests below: upstream's include guard (TVM_CRT_DEBUG is utvm's too now).
GUARD = "#define TVM_RUNTIME_CRT_CRT_CONFIG_H_\n"


@pytest.mark.parametrize("text, name", [
    (f"{GUARD}#define TVM_CRT_LOG_LEVEL 7\n", "TVM_CRT_LOG_LEVEL"),
    (f"{GUARD}#define TVM_CRT_MAX_PACKET_SIZE_BYTES 64\n", "TVM_CRT_MAX_PACKET_SIZE_BYTES"),
    (f"{GUARD}#define TVM_CRT_MAX_NDIM 0\n", "TVM_CRT_MAX_NDIM"),
    ("#define TVM_CRT_PAGE_BYTES_LOG 30\n", "TVM_CRT_PAGE_BITS"),
    ("#define TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES 24\n", "TVM_CRT_ALLOC_ALIGNMENT_BYTES"),
], ids=["log-level", "packet", "ndim", "page-bits-alias", "alignment-alias"])
def test_out_of_range_upstream_values_are_refused_by_name(tmp_path: Path, text: str, name: str) -> None:
    proc = _preprocess(tmp_path, text)
    assert proc.returncode != 0
    assert f"crt_config.h: {name}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("level, utvm", [(n.name, crt_config.UTVM_LEVELS[n.name]) for n in NAMES.values()
                                         if n.kind == "level_name"])
def test_upstream_log_levels_translate(tmp_path: Path, level: str, utvm: int) -> None:
    for value in (level, str(NAMES[level].upstream_value)):  # by name and by upstream's number
        text = f"{GUARD}#define TVM_CRT_LOG_LEVEL {value}\n"
        cfg = _config_dir(tmp_path, text)
        src = tmp_path / "level.c"
        src.write_text(f"#include <tvm/runtime/crt/config.h>\n#if TVM_CRT_LOG_LEVEL != {utvm}\n#error wrong level\n"
                       f"#endif\nint utvm_probe;\n")
        proc = subprocess.run(["gcc", *cc.WARNING_FLAGS, f"-I{cfg}", f"-I{CRT / 'include'}", "-fsyntax-only",
                               str(src)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{value}: {proc.stderr}"


# ---- a user's file in the host firmware build ------------------------------------------------------------
def test_user_config_text_keeps_the_file_and_fills_the_rest(tmp_path: Path) -> None:
    user = tmp_path / "crt_config.h"
    user.write_text(UPSTREAM_HONOURED + END)
    text = crt_config.user_config_text(user, {"TVM_CRT_LOG_LEVEL": 2, "TVM_CRT_MAX_ARGS": 16,
                                              "TVM_CRT_WORKSPACE_SIZE_BYTES": 4096},
                                       {"TVM_CRT_MAX_PACKET_SIZE_BYTES": 4096})
    assert UPSTREAM_HONOURED in text and str(user.resolve()) in text
    (tmp_path / "b").mkdir()
    got = _build_and_probe(tmp_path / "b", text)
    assert got["max_args"] == 10  # the file's value wins over the platform's
    assert got["packet"] == 4096  # an explicit override wins over the file
    assert got["log_level"] == 0


def test_host_firmware_takes_an_upstream_file(tmp_path: Path) -> None:
    from utvm.cli import main as cli_main
    from utvm.platform.host import HostPlatform

    user = _upstream_for_firmware(tmp_path)
    out = tmp_path / "fw"
    assert cli_main(["build-device", "--platform", "host", "--with-test-functions", "--crt-config-file", str(user),
                     "-o", str(out)]) == 0
    with HostPlatform().start(out) as session:
        sleep_ms = session.get_function("testing.sleep_ms")
        assert sleep_ms(1) == 1
        # TVM_CRT_MAX_ARGS 13 from the file: a call with 14 arguments is refused by the RPC server, by name.
        with pytest.raises(UtvmError, match=r"14 arguments, outside 0\.\.13 \(TVM_CRT_MAX_ARGS\)"):
            sleep_ms(*range(14))


def test_build_device_refuses_upstream_file_naming_the_macro(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from utvm.cli import main as cli_main

    user = tmp_path / "crt_config.h"
    user.write_text(UPSTREAM_HONOURED + UPSTREAM_REFUSED + END)
    status = cli_main(["build-device", "--platform", "host", "--crt-config-file", str(user),
                       "-o", str(tmp_path / "fw")])
    err = capsys.readouterr().err
    assert status == 2  # refused before the build, by config.h's own checks (docs/cli.md)
    assert "TVM_CRT_FRAMER_ENABLE_LOGS (microTVM) is not supported" in err and err.count("\n") == 1


def test_build_device_missing_config_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from utvm.cli import main as cli_main

    status = cli_main(["build-device", "--platform", "host", "--crt-config-file", str(tmp_path / "none.h"),
                       "-o", str(tmp_path / "fw")])
    assert status == 2
    assert "none.h" in capsys.readouterr().err


# ---- a user's file in the QEMU firmware build ------------------------------------------------------------
def _upstream_for_firmware(tmp_path: Path) -> Path:
    user = tmp_path / "crt_config.h"
    user.write_text(UPSTREAM_HONOURED.replace("GLOBAL_FUNC_REGISTRY_SIZE_BYTES 512",
                                              "GLOBAL_FUNC_REGISTRY_SIZE_BYTES 2048")
                    .replace("MAX_ARGS 10", "MAX_ARGS 13") + END)
    return user


def test_qemu_project_takes_an_upstream_file(tmp_path: Path) -> None:
    from utvm.platform.qemu.platform import DEFAULT_CRT_CONFIG, QemuCortexM3Platform
    from utvm.platform.qemu.project import spec_crt_config_text

    user = _upstream_for_firmware(tmp_path)
    spec = QemuCortexM3Platform().firmware_spec(crt_config={"TVM_CRT_MAX_NDIM": 4}, crt_config_file=user)
    text = spec_crt_config_text(spec)
    assert user.read_text().rstrip("\n") in text
    got = _build_and_probe(tmp_path, text)  # the header the firmware project gets, built for the host
    assert got["max_args"] == 13 and got["registry"] == 2048  # the file's values
    assert got["max_ndim"] == 4  # the explicit override
    assert got["packet"] == 2048 and got["log_level"] == 0
    # The platform's own value fills what the file leaves out (it differs from the CRT's default of 64 KiB).
    assert DEFAULT_CRT_CONFIG["TVM_CRT_WORKSPACE_SIZE_BYTES"] != 65536
    assert f"#define TVM_CRT_WORKSPACE_SIZE_BYTES {DEFAULT_CRT_CONFIG['TVM_CRT_WORKSPACE_SIZE_BYTES']}" in text


@pytest.mark.slow
def test_qemu_firmware_runs_with_an_upstream_file(tmp_path: Path) -> None:
    from utvm.platform.qemu.platform import QemuCortexM3Platform

    plat = QemuCortexM3Platform()
    elf = plat.build(with_test_functions=True, crt_config_file=_upstream_for_firmware(tmp_path))
    with plat.start(elf, handshake_retry_s=0.5, handshake_timeout_s=20.0, reply_timeout_s=60.0) as session:
        sleep_ms = session.get_function("testing.sleep_ms")
        assert sleep_ms(1) == 1
        with pytest.raises(UtvmError, match=r"14 arguments, outside 0\.\.13 \(TVM_CRT_MAX_ARGS\)"):
            sleep_ms(*range(14))


HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"


def test_run_takes_an_upstream_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from utvm.cli import main as cli_main

    user = _upstream_for_firmware(tmp_path)
    assert cli_main(["run", str(HELLO), "--platform", "host", "--check", "--seed", "3",
                     "--crt-config-file", str(user)]) == 0
    assert "OK (bit-exact)" in capsys.readouterr().out
    user.write_text(UPSTREAM_HONOURED + "#define TVM_CRT_FRAMER_ENABLE_LOGS\n" + END)
    assert cli_main(["run", str(HELLO), "--platform", "host", "--crt-config-file", str(user)]) == 2
    assert "TVM_CRT_FRAMER_ENABLE_LOGS (microTVM) is not supported" in capsys.readouterr().err
