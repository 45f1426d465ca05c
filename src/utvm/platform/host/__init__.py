"""The host platform: evaluation firmware as a Linux program speaking the link on stdin/stdout.

`build_device()` links the CRT (common, memory, rpc_common, rpc_server and the POSIX port) with
`src/main.c` (reads stdin, feeds MicroTVMRpcServerLoop, writes replies raw and unbuffered to stdout, exits
on end of input or Shutdown) and, optionally, the test library `src/utvm_test_functions.c`
(testing.add_one / fail / log / sleep_ms) and extra sources (e.g. a generated system library). The CRT
libraries come from the CRT's own Makefile, cached per CRT tree + crt_config.h + compiler + flags
(`utvm.support.cc.cached_crt_libs`), so a firmware build compiles only main.c, the test functions and the
extra sources. The executable is cached by a content hash of every input (`utvm.support.cc.cached_build`),
so an unchanged rebuild costs a hash.

Started with no arguments the executable needs nothing from Python: any client that speaks the wire
format (docs/architecture.md §5) can drive it. `HostPlatform().start(exe)` starts it and returns a connected
`utvm.rpc.Session`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from utvm.errors import PlatformError
from utvm.platform import deliver
from utvm.support import cc

HOST_DIR = Path(__file__).resolve().parent
SOURCE_DIR = HOST_DIR / "src"
INCLUDE_DIR = HOST_DIR / "include"
EXECUTABLE_NAME = "utvm_host_device"
CRT_LIBS = ("common", "memory", "rpc_common", "rpc_server", "host")
OPT_FLAGS = ("-O2",)

#: crt_config.h values of the host firmware unless the caller overrides them: 2 KiB packets (docs/architecture.md
#: §5.3) and room for runtime.RPCTimeEvaluator's full argument list (TVM clients send up to 12). The rest
#: come from the CRT's host/crt_config.h.
DEFAULT_CRT_CONFIG: dict[str, int] = {"TVM_CRT_MAX_PACKET_SIZE_BYTES": 2048, "TVM_CRT_MAX_ARGS": 16}

_NAME = re.compile(r"TVM_CRT_[A-Z0-9_]+\Z")
_VALUE = re.compile(r"-?(0x[0-9a-fA-F]+|[0-9]+)[uUlL]*\Z")
_DEFINE = re.compile(r"^#define\s+(TVM_CRT_[A-Z0-9_]+)\s+(\S+)\s*$", re.MULTILINE)


def render_crt_config(overrides: Mapping[str, int | str] | None = None, user_file: Path | str | None = None) -> str:
    """The crt_config.h of a host build (_render_crt_config), checked against the CRT's limits first."""
    from utvm.crt_config import check_config_text

    return check_config_text(_render_crt_config(overrides, user_file))


def _render_crt_config(overrides: Mapping[str, int | str] | None = None, user_file: Path | str | None = None) -> str:
    """The crt_config.h of a host build: the CRT's host/crt_config.h with `overrides` applied.

    Unknown TVM_CRT_* names are added (the CRT gives each a default in config.h, and sizes such as
    TVM_CRT_FRAMER_BUFFER_SIZE_BYTES are read where they are used). The framer's staging buffer defaults
    to a whole escaped packet, so every reply leaves in one write() call.

    With `user_file` (a user's crt_config.h, utvm's or upstream microTVM's) that file is the base instead:
    its values win over the host defaults, which fill only what it leaves out (utvm.crt_config).
    """
    for name, value in (overrides or {}).items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise PlatformError(f"crt_config: {name!r} is not a TVM_CRT_* macro name")
        if isinstance(value, bool) or not _VALUE.match(str(value)):
            raise PlatformError(f"crt_config: {name} = {value!r} is not an integer")
    if user_file is not None:
        from utvm import crt_config as user_config

        base_values = dict(_DEFINE.findall((cc.crt_dir() / "host" / "crt_config.h").read_text()))
        fallbacks = {**base_values, **{k: str(v) for k, v in DEFAULT_CRT_CONFIG.items()},
                     "TVM_CRT_FRAMER_BUFFER_SIZE_BYTES": "(2 * (TVM_CRT_MAX_PACKET_SIZE_BYTES) + 32)"}
        try:
            return user_config.user_config_text(user_file, fallbacks, {k: str(v) for k, v in (overrides or {}).items()})
        except (OSError, ValueError) as exc:
            raise PlatformError(f"crt_config file {str(user_file)!r}: {exc}") from exc
    values: dict[str, str] = {}
    for name, value in {**DEFAULT_CRT_CONFIG, **(overrides or {})}.items():
        values[name] = str(value)
    if "TVM_CRT_FRAMER_BUFFER_SIZE_BYTES" not in values:
        packet = int(values["TVM_CRT_MAX_PACKET_SIZE_BYTES"], 0)
        values["TVM_CRT_FRAMER_BUFFER_SIZE_BYTES"] = str(2 * packet + 32)
    base = (cc.crt_dir() / "host" / "crt_config.h").read_text()
    seen: set[str] = set()

    def replace(m: re.Match[str]) -> str:
        seen.add(m.group(1))
        return f"#define {m.group(1)} {values.get(m.group(1), m.group(2))}"

    text = _DEFINE.sub(replace, base)
    extra = "".join(f"#define {k} {v}\n" for k, v in sorted(values.items()) if k not in seen)
    guard_end = text.rfind("#endif")
    if guard_end < 0:
        raise PlatformError("crt host/crt_config.h has no include guard #endif")
    header = "/* Generated by utvm.platform.host.build_device from the CRT's host/crt_config.h. */\n"
    return header + text[:guard_end] + extra + text[guard_end:]


def _resolve(paths: Sequence[Path | str], what: str) -> list[Path]:
    out = []
    for p in paths:
        path = Path(p).resolve()
        if not path.is_file():
            raise PlatformError(f"build_device: {what} {str(p)!r} does not exist")
        out.append(path)
    return out


def build_device(
    with_test_functions: bool = True,
    crt_config: Mapping[str, int | str] | None = None,
    extra_sources: Sequence[Path | str] = (),
    system_lib_sources: Sequence[Path | str] = (),
    sanitize: bool = False,
    output: Path | str | None = None,
    *,
    include_dirs: Sequence[Path | str] = (),
    compiler: str = "gcc",
    crt_config_file: Path | str | None = None,
) -> Path:
    """Build the host firmware; returns the executable (a copy at `output` when given).

    - `with_test_functions`: link the testing.* globals (utvm_test_functions.h).
    - `crt_config`: TVM_CRT_* overrides, e.g. {"TVM_CRT_MAX_PACKET_SIZE_BYTES": 4096}.
    - `crt_config_file`: a user's crt_config.h (utvm's or upstream microTVM's) to build with; the host
      defaults fill only what it leaves out, `crt_config` overrides it (render_crt_config).
    - `extra_sources`: the user's C files (`--extra-source`, e.g. one defining utvm_user_init), each held
      to the user-code flags of every platform (utvm.platform.user_code.USER_CODE_FLAGS, as every source
      on the QEMU boards is): a warning fails the build with a BuildError naming the file.
    - `system_lib_sources`: generated C (a system library defining TVMSystemLibEntryPoint), compiled
      -std=c99 -O2, except a user operator's C file among them (`utvm_user_*.c`, utvm.custom_ops), which
      gets the user-code flags too. Both see the CRT headers, the config, each file's own directory and
      `include_dirs`, utvm's directories first; a user header that would shadow one of utvm's is refused
      (utvm.platform.user_code.user_headers).
    - `sanitize`: build everything with ASan+UBSan.
    Raises PlatformError for bad arguments and BuildError (with the compiler output) if compiling fails.
    """
    from utvm.custom_ops import is_user_source
    from utvm.platform.user_code import USER_CODE_FLAGS, check_given_once, own_headers, user_headers

    config_text = render_crt_config(crt_config, crt_config_file)
    check_given_once(extra_sources, "host")
    generated = _resolve(system_lib_sources, "system library source")
    # the user's C: --extra-source files, then a user operator's C among the generated sources
    user_sources = _resolve(extra_sources, "extra source") + [p for p in generated if is_user_source(p)]
    lib_sources = [p for p in generated if not is_user_source(p)]
    extras = user_sources + lib_sources
    includes = [Path(d).resolve() for d in include_dirs]
    for d in includes:
        if not d.is_dir():
            raise PlatformError(f"build_device: include directory {str(d)!r} does not exist")
    user_headers(extra_sources, includes, own_headers(generated), "host")  # none may shadow one of utvm's
    san = tuple(cc.SANITIZE_FLAGS) if sanitize else ()
    own_sources = [SOURCE_DIR / "main.c"]
    defines: list[str] = []
    if with_test_functions:
        own_sources.append(SOURCE_DIR / "utvm_test_functions.c")
        defines.append("UTVM_WITH_TEST_FUNCTIONS=1")

    def builder(tmp: Path) -> Path:
        config_dir = tmp / "config"
        config_dir.mkdir()
        (config_dir / "crt_config.h").write_text(config_text)
        # The CRT libraries depend only on the config, compiler and flags: cached apart from the firmware,
        # so a new model (or a changed main.c) recompiles just its own sources.
        libs = cc.cached_crt_libs(config_text, compiler, [*OPT_FLAGS, *san], CRT_LIBS)
        incs = [config_dir, cc.crt_dir() / "include", INCLUDE_DIR]
        objects = []
        for src in own_sources:  # our own C is held to the strict flags
            obj = tmp / f"{src.stem}.o"
            cc.run([compiler, *cc.WARNING_FLAGS, *OPT_FLAGS, *san, *[f"-I{d}" for d in incs],
                    *[f"-D{d}" for d in defines], "-c", str(src), "-o", str(obj)], what=f"compiling {src.name}")
            objects.append(obj)
        # utvm's directories first (the generated sources' own), then the user's: a user header never shadows
        user_incs = list(dict.fromkeys([*(p.parent for p in generated), *(p.parent for p in user_sources),
                                        *includes]))
        for k, src in enumerate(user_sources):  # the user's C: the user-code flags, one file at a time
            obj = tmp / f"user{k}_{src.stem[:64]}.o"
            cc.run([compiler, *USER_CODE_FLAGS, *OPT_FLAGS, *san, *[f"-I{d}" for d in [*incs, *user_incs]],
                    "-c", str(src), "-o", str(obj)], what=f"compiling {src}")
            objects.append(obj)
        return cc.compile_link(
            [*objects, *lib_sources], tmp / EXECUTABLE_NAME, include_dirs=[*incs, *user_incs],
            cflags=["-std=c99", *OPT_FLAGS, *san], ldflags=[*san, "-lm"], libs=[libs[name] for name in CRT_LIBS],
            cc=compiler,
        )

    key_inputs = [cc.crt_dir() / "include", cc.crt_dir() / "src", cc.crt_dir() / "host", cc.crt_dir() / "Makefile",
                  SOURCE_DIR, INCLUDE_DIR, *extras, *includes]
    key_extra = [config_text, str(with_test_functions), str(sanitize), compiler, cc.compiler_version(compiler),
                 *map(str, extras), *map(str, includes)]
    exe = cc.cached_build(key_inputs, key_extra, EXECUTABLE_NAME, builder)
    return deliver(exe, output)


class HostPlatform:
    """The `host` platform (entry point ``utvm.platforms:host``)."""

    name = "host"
    #: Portable C99 (utvm.target): the host compiler vectorises it.
    target = "host"

    def build(
        self,
        *,
        with_test_functions: bool = True,
        crt_config: Mapping[str, int | str] | None = None,
        extra_sources: Sequence[Path | str] = (),
        system_lib_sources: Sequence[Path | str] = (),
        output: Path | str | None = None,
        **kwargs: Any,
    ) -> Path:
        """build_device(...) (extra keywords: sanitize, include_dirs, compiler, crt_config_file)."""
        return build_device(with_test_functions=with_test_functions, crt_config=crt_config,
                            extra_sources=extra_sources, system_lib_sources=system_lib_sources, output=output,
                            **kwargs)

    def start(self, firmware: Path | str, **session_kwargs: Any) -> Any:
        """Run `firmware` as a subprocess and return a connected utvm.rpc.Session over its stdin/stdout."""
        from utvm.rpc import connect_subprocess  # rpc sits below platform; imported on use

        path = Path(firmware)
        if not path.is_file():
            raise PlatformError(f"host platform: firmware {str(path)!r} does not exist (build it first)")
        return connect_subprocess([str(path.resolve())], **session_kwargs)
