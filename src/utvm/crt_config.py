"""crt_config.h files: upstream microTVM names, and a user's own file in a utvm firmware build.

The utvm CRT reads a firmware's crt_config.h through tvm/runtime/crt/config.h. A file written for upstream
microTVM (apache/tvm) works too: `include/tvm/runtime/crt/config_upstream.h`, which config.h includes
right after crt_config.h, maps every upstream name utvm honours and stops the build with an #error naming
each one it cannot honour. That header is generated from the one list of upstream names,
`<crt>/upstream_config.json` (kinds explained there); tests and docs read the same list.

    python -m utvm.crt_config            # rewrite config_upstream.h from the list
    python -m utvm.crt_config --check    # exit 1 if the committed header is stale

`user_config_text(file, fallbacks, overrides)` is how a platform build takes a user's crt_config.h (utvm's
or upstream's): the file's text as is (behind a #line, so compiler messages name the user's file), then the
platform's own value of each limit the file leaves out, then explicit overrides.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from utvm.errors import UsageError
from utvm.support import cc
from utvm.support.ctext import c_string

KINDS = ("same", "log_level", "level_name", "alias", "log2_alias", "pow2_alias", "pages", "accepted", "always_on",
         "refused")
#: Kinds of names only an upstream file defines: any of them defined switches upstream mode on.
UPSTREAM_ONLY_KINDS = ("alias", "log2_alias", "pow2_alias", "pages", "accepted", "always_on", "refused")
#: Kinds that set the utvm setting named by `utvm`.
SETTING_KINDS = ("alias", "log2_alias", "pow2_alias", "pages")
#: Kinds whose value must lie in min .. max.
RANGE_KINDS = ("log2_alias", "pow2_alias", "accepted")
#: What a `pages` name becomes for config.h, which multiplies it by the page size once that is known.
POOL_PAGES_MACRO = "UTVM_CRT_UPSTREAM_POOL_PAGES_"
#: utvm's numbering of log levels (tvm/runtime/crt/config.h): name -> value.
UTVM_LEVELS = {"TVM_CRT_LOG_LEVEL_DEBUG": 0, "TVM_CRT_LOG_LEVEL_INFO": 1, "TVM_CRT_LOG_LEVEL_WARN": 2,
               "TVM_CRT_LOG_LEVEL_ERROR": 3}


@dataclass(frozen=True)
class UpstreamName:
    """One configuration macro of upstream microTVM and what utvm does with it."""

    name: str
    kind: str
    utvm: str = ""  # SETTING_KINDS: the utvm setting it sets
    upstream_value: int | None = None  # level_name: its number upstream
    min: int | None = None  # RANGE_KINDS: the smallest value accepted (log2_alias: of the exponent)
    max: int | None = None  # RANGE_KINDS: the largest
    why: str = ""
    todo: str = ""


def list_path() -> Path:
    return cc.crt_dir() / "upstream_config.json"


def header_path() -> Path:
    return cc.crt_dir() / "include" / "tvm" / "runtime" / "crt" / "config_upstream.h"


def upstream_names() -> list[UpstreamName]:
    """The list, checked: known kinds, unique names, the fields each kind needs."""
    data = json.loads(list_path().read_text())
    out: list[UpstreamName] = []
    for item in data["names"]:
        n = UpstreamName(**item)
        if n.kind not in KINDS:
            raise ValueError(f"{list_path().name}: {n.name}: unknown kind {n.kind!r}")
        if not re.fullmatch(r"TVM_[A-Z0-9_]+", n.name):
            raise ValueError(f"{list_path().name}: {n.name!r} is not a TVM_* macro name")
        if n.kind in SETTING_KINDS and not re.fullmatch(r"TVM_CRT_[A-Z0-9_]+", n.utvm):
            raise ValueError(f"{list_path().name}: {n.name}: a {n.kind} name needs 'utvm', the TVM_CRT_* setting "
                             "it sets")
        if n.kind in RANGE_KINDS and (n.min is None or n.max is None or n.min > n.max):
            raise ValueError(f"{list_path().name}: {n.name}: a {n.kind} name needs 'min' <= 'max'")
        if n.kind == "level_name" and n.upstream_value is None:
            raise ValueError(f"{list_path().name}: {n.name}: a level_name needs 'upstream_value'")
        if n.kind == "refused" and not (n.why and n.todo):
            raise ValueError(f"{list_path().name}: {n.name}: a {n.kind} name needs 'why' and 'todo'")
        if n.kind in (*SETTING_KINDS, "accepted", "always_on") and not n.why:
            raise ValueError(f"{list_path().name}: {n.name}: a {n.kind} name needs 'why' (what it means, docs/crt.md)")
        if '"' in n.why + n.todo:
            raise ValueError(f"{list_path().name}: {n.name}: no double quotes in 'why'/'todo' (C strings)")
        out.append(n)
    names = [n.name for n in out]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise ValueError(f"{list_path().name}: names listed twice: {dup}")
    if len([n for n in out if n.kind == "pages"]) > 1:
        raise ValueError(f"{list_path().name}: more than one name of kind pages ({POOL_PAGES_MACRO} is one macro)")
    return out


def upstream_guards() -> list[str]:
    return list(json.loads(list_path().read_text())["upstream_guards"])


def refusal_message(n: UpstreamName) -> str:
    """The #error text for a refused name."""
    return f"crt_config.h: {n.name} (microTVM) is not supported by utvm: {n.why}; {n.todo}"


def empty_message(n: UpstreamName) -> str:
    """The #error text for a name that needs a value and is defined without one."""
    return f"crt_config.h: {n.name} (microTVM) is defined without a value: give it one or remove it"


def range_message(n: UpstreamName) -> str:
    """The #error text for a RANGE_KINDS name out of its range."""
    if n.kind == "log2_alias":
        return (f"crt_config.h: {n.name} (microTVM) must be a power of two from {1 << int(n.min or 0)} to "
                f"{1 << int(n.max or 0)}: {n.why}")
    return f"crt_config.h: {n.name} (microTVM) must be {n.min} .. {n.max}: {n.why}"


def conflict_message(n: UpstreamName) -> str:
    """The #error text for a SETTING_KINDS name whose value disagrees with its utvm setting's."""
    return (f"crt_config.h: {n.name} (microTVM) and {n.utvm} (utvm) are the same setting with different values "
            f"({n.utvm} was given, or set by another microTVM name of it): keep one")


def _empty(name: str) -> str:
    """A preprocessor test true when `name` is defined without a value: `0 - - 1 == 1` then; a value of -2
    gives the same, told apart by `+ 0`."""
    return f"((0 - {name} - 1) == 1) && (({name} + 0) != -2)"


def _setting_lines(n: UpstreamName) -> list[str]:
    """config_upstream.h lines for one SETTING_KINDS or `accepted` name."""
    out = [f"#ifdef {n.name}", f"#if {_empty(n.name)}", f'#error "{empty_message(n)}"']
    if n.kind == "accepted":
        return out + [f"#elif (({n.name}) < {n.min}) || (({n.name}) > {n.max})", f'#error "{range_message(n)}"',
                      "#endif", "#endif"]
    if n.kind == "pages":
        return out + [f"#elif ({n.name}) < 1", f'#error "crt_config.h: {n.name} (microTVM) must be >= 1: {n.why}"',
                      "#else", f"#define {POOL_PAGES_MACRO} ({n.name})", "#endif", "#endif"]
    value = f"({n.name})"  # the utvm setting's value
    if n.kind == "log2_alias":
        value = f"UTVM_CRT_UPSTREAM_LOG2_{n.name}_"
        for e in range(int(n.min or 0), int(n.max or 0) + 1):
            out += [f"#elif ({n.name}) == {1 << e}", f"#define {value} {e}"]
        out += ["#else", f'#error "{range_message(n)}"', "#endif"]
        out += [f"#ifdef {value}"]
    elif n.kind == "pow2_alias":
        out += [f"#elif (({n.name}) < {n.min}) || (({n.name}) > {n.max})", f'#error "{range_message(n)}"', "#else"]
        value = f"(1UL << ({n.name}))"
    else:
        out += ["#else"]
    out += [f"#ifdef {n.utvm}", f"#if ({n.utvm}) != {value}", f'#error "{conflict_message(n)}"', "#endif", "#else",
            f"#define {n.utvm} {value}", "#endif", "#endif", "#endif"]
    return out


def render_header() -> str:
    """The text of include/tvm/runtime/crt/config_upstream.h."""
    names = upstream_names()
    by_kind = {k: [n for n in names if n.kind == k] for k in KINDS}
    detect = [*upstream_guards(), *(n.name for n in names if n.kind in UPSTREAM_ONLY_KINDS)]
    out = [
        "/*",
        " * tvm/runtime/crt/config_upstream.h -- upstream microTVM crt_config.h names in the utvm CRT.",
        " *",
        " * GENERATED by `python -m utvm.crt_config` from upstream_config.json (the one list of upstream",
        " * names): do not edit. config.h includes it right after <crt_config.h>, before its own defaults.",
        " * - UTVM_CRT_CONFIG_IS_UPSTREAM: 1 when crt_config.h is an upstream file (its include guard, or",
        " *   any name only upstream defines);",
        " * - other names of utvm settings set them (given twice: the values must agree): aliases as they",
        " *   are, a page size as its log2, a log2 pool size as a size, a page count for config.h to multiply;",
        " * - names utvm has no use for are range-checked and accepted (`accepted` in the list);",
        " * - TVM_CRT_LOG_LEVEL of an upstream file is translated (upstream counts 0 error .. 3 debug);",
        " * - every name utvm cannot honour stops the build with an #error naming it, why, and what to do.",
        " * Names with the same meaning in both (checked by config.h like utvm's own):",
    ]
    out += [f" *   {n.name}" for n in by_kind["same"]]
    out += [" * Checks utvm always makes (defining these asks for nothing more):"]
    out += [f" *   {n.name}: {n.why}" for n in by_kind["always_on"]]
    out += [" */", "#ifndef TVM_RUNTIME_CRT_CONFIG_UPSTREAM_H_", "#define TVM_RUNTIME_CRT_CONFIG_UPSTREAM_H_", ""]
    out += ["/* ---- is crt_config.h upstream's? ---- */"]
    out.append("#if " + " || \\\n    ".join(f"defined({m})" for m in detect))
    out += ["#define UTVM_CRT_CONFIG_IS_UPSTREAM 1", "#else", "#define UTVM_CRT_CONFIG_IS_UPSTREAM 0", "#endif", ""]
    out += ["/* ---- other names of utvm settings ---- */"]
    for n in names:
        if n.kind in SETTING_KINDS:
            out += [f"/* {n.name} ({n.kind}) -> {n.utvm} */", *_setting_lines(n)]
    out += ["", "/* ---- names with nothing to bound in utvm: range-checked, accepted ---- */"]
    for n in by_kind["accepted"]:
        out += _setting_lines(n)
    out += ["", "/* ---- names utvm cannot honour ---- */"]
    for n in by_kind["refused"]:
        out += [f"#ifdef {n.name}", f'#error "{refusal_message(n)}"', "#endif"]
    levels = sorted(by_kind["level_name"], key=lambda n: -int(n.upstream_value or 0))
    out += ["", "/* ---- an upstream TVM_CRT_LOG_LEVEL, in utvm's numbering ---- */",
            "#if UTVM_CRT_CONFIG_IS_UPSTREAM && defined(TVM_CRT_LOG_LEVEL)"]
    # config.h defines the level names (in utvm's numbering) after this header: upstream's numbers stand in
    # for them only while the file's value is read.
    out += [f"#define {n.name} {n.upstream_value}" for n in levels]
    for i, n in enumerate(levels):
        out += [f"#{'if' if i == 0 else 'elif'} (TVM_CRT_LOG_LEVEL) == {n.upstream_value}",
                f"#define UTVM_CRT_UPSTREAM_LOG_LEVEL_ {UTVM_LEVELS[n.name]}"]
    allowed = ", ".join(n.name for n in levels)
    out += ["#else", f'#error "crt_config.h: TVM_CRT_LOG_LEVEL (microTVM) must be one of {allowed}"', "#endif"]
    out += [f"#undef {n.name}" for n in levels]
    out += ["#undef TVM_CRT_LOG_LEVEL", "#ifdef UTVM_CRT_UPSTREAM_LOG_LEVEL_",
            "#define TVM_CRT_LOG_LEVEL UTVM_CRT_UPSTREAM_LOG_LEVEL_", "#endif", "#endif", ""]
    out += ["#endif /* TVM_RUNTIME_CRT_CONFIG_UPSTREAM_H_ */", ""]
    return "\n".join(out)


# ---- a user's crt_config.h in a platform build -----------------------------------------------------------
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(TVM_[A-Z0-9_]+)\b", re.MULTILINE)


def defined_names(text: str) -> list[str]:
    """TVM_* macro names a crt_config.h text #defines (in order, once each)."""
    return list(dict.fromkeys(_DEFINE.findall(text)))


def user_config_text(user_file: Path | str, fallbacks: Mapping[str, int | str] = {},  # noqa: B006
                     overrides: Mapping[str, int | str] = {}) -> str:  # noqa: B006
    """crt_config.h of a platform build from a user's file (utvm's or upstream microTVM's).

    The file's text comes first, as is, so its #errors and include guard work as written; `fallbacks`
    (the platform's values) fill each limit the file leaves out (#ifndef), written after it: a limit the file
    sets through an upstream name of it (TVM_CRT_PAGE_BYTES for TVM_CRT_PAGE_BITS...) counts as set, so the
    platform's value does not contradict the file's; `overrides` (explicit NAME=VALUE settings) replace the
    file's value. A numeric TVM_CRT_LOG_LEVEL fallback is written by name (TVM_CRT_LOG_LEVEL_WARN...), which
    means the same in utvm's and upstream's numbering.
    Raises OSError if the file cannot be read, ValueError if it is not text.
    """
    path = Path(user_file)
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file ({exc.reason})") from None
    level_names = {v: k for k, v in UTVM_LEVELS.items()}
    upstream_names_of: dict[str, list[str]] = {}
    for n in upstream_names():
        if n.kind in SETTING_KINDS:
            upstream_names_of.setdefault(n.utvm, []).append(n.name)
    out = [f"/* Generated by utvm: {path.name} as given, then the platform's values of what it leaves out. */",
           f'#line 1 "{c_string(str(path.resolve()))}"', text.rstrip("\n"), "",
           "/* ---- the platform's values of the limits the file above leaves out ---- */",
           "#ifndef UTVM_CRT_CONFIG_FALLBACKS_", "#define UTVM_CRT_CONFIG_FALLBACKS_"]
    for name, value in fallbacks.items():
        if name == "TVM_CRT_LOG_LEVEL" and re.fullmatch(r"[0-9]+", str(value)):
            value = level_names.get(int(str(value)), value)
        others = upstream_names_of.get(name, [])
        test = " && ".join(f"!defined({x})" for x in [name, *others]) if others else ""
        out += [f"#if {test}" if test else f"#ifndef {name}", f"#define {name} {value}", "#endif"]
    for name, value in overrides.items():
        out += [f"#undef {name}", f"#define {name} {value}"]
    out += ["#endif", ""]
    return "\n".join(out)


_ERROR_LINE = re.compile(r"error: (?:#error )?(.*)")


@functools.lru_cache(maxsize=64)  # a text accepted once is not preprocessed again (a refusal is not cached)
def check_config_text(text: str) -> str:
    """`text` (a build's crt_config.h) if the CRT accepts it: preprocessed on the host with
    tvm/runtime/crt/config.h, whose sanity checks are the one definition of what is allowed, before any
    firmware is built. Otherwise a UsageError of one line: config.h's complaints (`crt_config.h:
    TVM_CRT_MAX_NDIM must be 1 .. 32`), or the preprocessor's first on a value it cannot read."""
    with tempfile.TemporaryDirectory(prefix="utvm-crt-config-") as tmp:
        (Path(tmp) / "crt_config.h").write_text(text)
        try:
            proc = subprocess.run(["gcc", "-E", "-P", "-I", tmp, "-I", str(cc.crt_dir() / "include"), "-x", "c",
                                   "-"], input="#include <tvm/runtime/crt/config.h>\n", capture_output=True, text=True)
        except OSError:  # no host compiler: the firmware build checks the same and says so
            return text
    if proc.returncode == 0:
        return text
    found = [m.group(1).strip().strip('"') for m in map(_ERROR_LINE.search, proc.stderr.splitlines()) if m]
    if found:  # every complaint, in one line
        raise UsageError(f"the CRT configuration of this build (--crt-config, --crt-config-file, the board "
                         f"config) is refused: {'; '.join(dict.fromkeys(found))}")
    raise UsageError("the CRT configuration of this build is refused by the preprocessor: "
                     + (proc.stderr.strip().splitlines() or ["(no message)"])[0])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render_header()
    path = header_path()
    if args == ["--check"]:
        if not path.is_file() or path.read_text() != text:
            print(f"{path} is stale: run python -m utvm.crt_config", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: python -m utvm.crt_config [--check]", file=sys.stderr)
        return 2
    path.write_text(text)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
