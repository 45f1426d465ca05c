"""Build and run a cmocka C test against the CRT, plain or under ASan+UBSan.

The CRT libraries come from the CRT's own standalone Makefile (`utvm.support.cc.make_crt_libs`) with the
chosen crt_config directory, so the tests exercise the same build users run. Builds are cached by a
content hash of the CRT tree, the test sources, the config and the flags (`utvm.support.cc.cached_build`).

Typical use from a pytest file::

    import cbuild   # pytest puts tests/crt on sys.path (rootdir-relative "prepend" import mode)

    @pytest.mark.parametrize("variant", cbuild.VARIANTS, ids=cbuild.variant_id)
    def test_func_registry(variant):
        cbuild.build_and_run("test_func_registry", [cbuild.HERE / "test_func_registry.c"], variant)

API (everything else here is private):
- `HERE`: this directory (tests/crt); `CONFIGS`: name -> crt_config directory ("default" = the template's
  defaults, "tiny" = 1 module, small registry/packets/workspace).
- `Variant(config, sanitize)`; `VARIANTS`: the four combinations of {default, tiny} x {plain, asan+ubsan};
  `variant_id(v)` gives a readable pytest id such as "tiny-asan".
- `build_test(name, sources, variant, *, crt_libs, include_dirs, defines, cflags, ldflags) -> Path`:
  compile `sources` with the strict flags (-std=c99 -Wall -Wextra -Werror -pedantic) plus
  `-I<config> -I<crt>/include`, link the CRT static libraries `crt_libs` (default common + memory; name
  "host" to link the POSIX platform port, or provide TVMPlatform* in your own sources) and cmocka.
- `run_test(exe, *, args=(), timeout=60) -> str`: run it; on a nonzero exit raise AssertionError whose
  message holds the exit status and the whole output (cmocka's report, sanitizer reports). Returns stdout.
- `build_and_run(name, sources, variant, **build_kwargs) -> str`: both.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from utvm.support import cc

HERE = Path(__file__).resolve().parent
CONFIGS: dict[str, Path] = {
    "default": HERE / "configs" / "default",
    "tiny": HERE / "configs" / "tiny",
}
DEFAULT_CRT_LIBS = ("common", "memory")
_TEST_CFLAGS = (*cc.WARNING_FLAGS, "-O1", "-g")
_SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


@dataclass(frozen=True)
class Variant:
    """One build flavour of a C test: which crt_config and whether to sanitize."""

    config: str = "default"
    sanitize: bool = False

    @property
    def config_dir(self) -> Path:
        try:
            return CONFIGS[self.config]
        except KeyError:
            raise ValueError(f"unknown crt_config variant {self.config!r}; known: {sorted(CONFIGS)}") from None


VARIANTS = [Variant(c, s) for c in ("default", "tiny") for s in (False, True)]


def variant_id(v: Variant) -> str:
    return f"{v.config}-{'asan' if v.sanitize else 'plain'}"


def _as_variant(variant: Variant | str) -> Variant:
    return Variant(variant) if isinstance(variant, str) else variant


def build_test(
    name: str,
    sources: Sequence[Path],
    variant: Variant | str = Variant(),
    *,
    crt_libs: Sequence[str] = DEFAULT_CRT_LIBS,
    include_dirs: Sequence[Path] = (),
    defines: Sequence[str] = (),
    cflags: Sequence[str] = (),
    ldflags: Sequence[str] = (),
) -> Path:
    """Build test executable `name` from `sources` + CRT libs `crt_libs` + cmocka; returns its path."""
    v = _as_variant(variant)
    config_dir = v.config_dir
    san = tuple(cc.SANITIZE_FLAGS) if v.sanitize else ()
    all_cflags = (*_TEST_CFLAGS, *san, *cflags)
    srcs = [Path(s).resolve() for s in sources]
    incs = [config_dir, cc.crt_dir() / "include", *[Path(d).resolve() for d in include_dirs]]
    key_extra = [name, variant_id(v), *all_cflags, *ldflags, *defines, *crt_libs, *map(str, incs),
                 *map(str, srcs), cc.compiler_version("gcc")]

    def builder(tmp: Path) -> Path:
        libs = cc.make_crt_libs(tmp / "crt", config_dir, crt_libs, cflags=["-g", *san])
        return cc.compile_link(
            srcs, tmp / name, include_dirs=incs, defines=defines, cflags=all_cflags,
            ldflags=[*san, *ldflags, "-lcmocka", "-lm"], libs=list(libs.values()),
        )

    key_inputs = [cc.crt_dir() / "include", cc.crt_dir() / "src", cc.crt_dir() / "host",
                  cc.crt_dir() / "Makefile", config_dir, *srcs, *include_dirs]
    return cc.cached_build(key_inputs, key_extra, name, builder)


def run_test(exe: Path, *, args: Sequence[str] = (), timeout: float = 60) -> str:
    """Run a built C test; AssertionError (with all its output) unless it exits 0. Returns stdout."""
    env = {**os.environ, **_SAN_ENV, "CMOCKA_MESSAGE_OUTPUT": "STDOUT"}
    try:
        proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{exe.name} timed out after {timeout}s\n{exc.stdout or ''}{exc.stderr or ''}") from exc
    if proc.returncode != 0:
        raise AssertionError(
            f"{exe.name} failed (exit {proc.returncode})\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def build_and_run(
    name: str, sources: Sequence[Path], variant: Variant | str = Variant(), *, args: Sequence[str] = (),
    timeout: float = 60, **build_kwargs: object,
) -> str:
    """build_test + run_test; returns the test's stdout."""
    exe = build_test(name, sources, variant, **build_kwargs)  # type: ignore[arg-type]
    return run_test(exe, args=args, timeout=timeout)
