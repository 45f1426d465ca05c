"""Generating and building firmware projects for the QEMU boards.

A project is a self-contained directory that builds with `make` alone (no Python, no utvm package):

    Makefile  project.mk   the template Makefile; project.mk names the board and what to link
    board/                 startup + vector table, UART0, SysTick, semihosting, linker script
                           (+ platform.c, the TVMPlatform* hooks, when the firmware links the CRT)
    src/                   the application (main.c, ...)
    include/               crt_config.h and generated headers
    crt/                   a copy of the utvm C runtime (its own Makefile builds the static libraries)
    codegen/host/          the compiled model (from a Model Library Format archive), when there is one

Every project links the same toolchain libraries after its objects and the CRT archives: newlib's libm,
newlib-nano's libc and libgcc (the Makefile's LDLIBS), like the host platform, which always links -lm. The
generated code of a float model calls <math.h> functions (`CompiledModel.libm_functions`), and any model
that runs on the host must link on every board, whichever firmware (RPC evaluation, `utvm deploy`,
`utvm size`) carries it; static archives contribute only what is referenced, so unused libm costs nothing.

`build_firmware(spec)` generates the project, builds it with make and caches the result by a hash of the
whole project (plus the cross-compiler's version), so an unchanged firmware is never rebuilt. The C runtime's
libraries of a project (build/crt/: archives, objects and their -fstack-usage/-fcallgraph-info files) are
cached apart, as the host platform caches its own (`cached_runtime`): a new firmware for the same board, CRT
and crt_config.h (e.g. each batch of the tuner's candidates) compiles only its own sources.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from utvm.errors import BuildError, PlatformError
from utvm.platform.qemu.boards import Board, cross_tool
from utvm.support import cc

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
BOARD_DIR = TEMPLATE_DIR / "board"
PLATFORM_DIR = TEMPLATE_DIR / "platform"
APPS_DIR = TEMPLATE_DIR / "apps"
CRT_PARTS = ("Makefile", "include", "src")


@dataclass
class FirmwareSpec:
    """Everything that goes into one firmware project."""

    board: Board
    #: file name -> C source (text, or bytes written as they are: the user's files, in any encoding), in src/.
    app_sources: Mapping[str, str | bytes]
    #: CRT static libraries to link (common, memory, rpc_common, rpc_server, aot_executor); none = no CRT.
    crt_libs: Sequence[str] = ()
    #: crt_config.h overrides: TVM_CRT_* name -> value (the rest keep the template's defaults).
    crt_config: Mapping[str, int | str] = field(default_factory=dict)
    #: A user's crt_config.h (utvm's or upstream microTVM's) to use as the base instead of the template; then
    #: `crt_config` overrides it and `crt_config_fallbacks` fill the limits it leaves out (utvm.crt_config).
    crt_config_file: Path | None = None
    crt_config_fallbacks: Mapping[str, int | str] = field(default_factory=dict)
    #: Directory holding codegen/host/{src,include} (an extracted MLF); copied to codegen/.
    codegen_dir: Path | None = None
    #: Generated model files by path under codegen/host/ ("src/x.c", "include/x.h"), like an MLF.
    codegen_files: Mapping[str, str] = field(default_factory=dict)
    #: path under include/ (subdirectories allowed: an -I tree) -> text or bytes, written to include/.
    include_files: Mapping[str, str | bytes] = field(default_factory=dict)
    #: preprocessor definitions for the application and board sources (NAME or NAME=VALUE).
    defines: Sequence[str] = ()
    stack_size: int = 0x10000
    opt: str = "-O2"
    #: Extra flags for the application, board and model sources (e.g. relaxed warnings for a model).
    extra_cflags: Sequence[str] = ()
    #: Which files of template/board/ the project gets (None: all; a board of another platform picks the
    #: portable ones, e.g. timer.c, and brings its own startup, UART and linker script in board_files).
    template_board_files: Sequence[str] | None = None
    #: file name -> text or bytes (a board's own files, any encoding), written to board/ after the template's.
    board_files: Mapping[str, str | bytes] = field(default_factory=dict)
    #: The linker script, a file of board/.
    linker_script: str = "mps2.ld"


def crt_config_text(overrides: Mapping[str, int | str]) -> str:
    """crt_config.h: the CRT's documented template with `overrides` substituted.

    A TVM_CRT_* name the template does not list is added (config.h gives every limit a default, and some
    sizes are only read where they are used); anything else is refused.
    """
    text = (cc.crt_dir() / "templates" / "crt_config.h.template").read_text()
    extra = []
    for name, value in overrides.items():
        if not re.fullmatch(r"TVM_CRT_[A-Z0-9_]+", str(name)):
            raise PlatformError(f"crt_config: {name!r} is not a TVM_CRT_* setting")
        if isinstance(value, bool) or not re.fullmatch(r"-?(0x[0-9a-fA-F]+|[0-9]+)[uUlL]*", str(value)):
            raise PlatformError(f"crt_config: {name} = {value!r} is not an integer")
        pattern = re.compile(rf"^#define {re.escape(name)} .*$", re.MULTILINE)
        if pattern.search(text):
            text = pattern.sub(f"#define {name} {value}", text)
        else:
            extra.append(f"#define {name} {value}\n")
    end = text.rfind("#endif")
    return text[:end] + "".join(extra) + text[end:]


def spec_crt_config_text(spec: FirmwareSpec) -> str:
    """The crt_config.h of `spec` (the template with overrides, or the user's file: crt_config_file), checked
    against the CRT's limits before any firmware is built."""
    from utvm.crt_config import check_config_text

    return check_config_text(_spec_crt_config_text(spec))


def _spec_crt_config_text(spec: FirmwareSpec) -> str:
    if spec.crt_config_file is None:
        return crt_config_text(spec.crt_config)
    from utvm import crt_config as user_config

    crt_config_text({**spec.crt_config_fallbacks, **spec.crt_config})  # the same checks of names and values
    try:
        return user_config.user_config_text(spec.crt_config_file, spec.crt_config_fallbacks, spec.crt_config)
    except (OSError, ValueError) as exc:
        raise PlatformError(f"crt_config file {str(spec.crt_config_file)!r}: {exc}") from exc


def project_mk(spec: FirmwareSpec) -> str:
    b = spec.board
    return "\n".join(
        [
            "# This project's board and contents (written by utvm; the Makefile includes it).",
            f"BOARD := {b.name}",
            f"QEMU_MACHINE := {b.machine}",
            f"CPU_FLAGS := {' '.join(b.cpu_flags)}",
            f"FLASH_ORIGIN := {b.flash_origin:#010x}",
            f"RAM_ORIGIN := {b.ram_origin:#010x}",
            *([] if b.boot_origin is None else [f"BOOT_ORIGIN := {b.boot_origin:#010x}"]),
            f"BOARD_DEFINES := {' '.join('-D' + d for d in b.c_defines)}",
            f"CRT_LIBS := {' '.join(spec.crt_libs)}",
            f"APP_DEFINES := {' '.join('-D' + d for d in spec.defines)}",
            f"EXTRA_CFLAGS := {' '.join(spec.extra_cflags)}",
            f"STACK_SIZE := {spec.stack_size:#x}",
            f"OPT := {spec.opt}",
            f"LINKER_SCRIPT := board/{spec.linker_script}",
            "",
        ]
    )


def generate_project(spec: FirmwareSpec, out_dir: Path) -> Path:
    """Write the project for `spec` into out_dir (created; must not hold another project's files)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(TEMPLATE_DIR / "Makefile", out_dir / "Makefile")
    (out_dir / "project.mk").write_text(project_mk(spec))
    board = out_dir / "board"
    if spec.template_board_files is None:
        shutil.copytree(BOARD_DIR, board, dirs_exist_ok=True)
    else:
        board.mkdir(exist_ok=True)
        for name in spec.template_board_files:
            shutil.copy2(BOARD_DIR / name, board / name)
    src = out_dir / "src"
    src.mkdir(exist_ok=True)
    include = out_dir / "include"
    include.mkdir(exist_ok=True)
    # The CRT's headers always (generated code includes them); its sources only when libraries are linked.
    shutil.copytree(cc.crt_dir() / "include", out_dir / "crt" / "include", dirs_exist_ok=True)
    if spec.crt_libs:
        shutil.copytree(PLATFORM_DIR, board, dirs_exist_ok=True)
        for part in CRT_PARTS:
            p = cc.crt_dir() / part
            if p.is_dir():
                shutil.copytree(
                    p,
                    out_dir / "crt" / part,
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"),
                )
            else:
                (out_dir / "crt").mkdir(exist_ok=True)
                shutil.copy2(p, out_dir / "crt" / part)
        (include / "crt_config.h").write_text(spec_crt_config_text(spec))
    for name, text in spec.board_files.items():
        _write(board, name, text, "board file", nested=False)  # a board's own files: bytes, any encoding
    for name, text in spec.app_sources.items():
        _write(src, name, text, "source", nested=False)
    for name, text in spec.include_files.items():
        if name == "crt_config.h" and spec.crt_libs:  # utvm's, written above: never replaced
            raise PlatformError("include file 'crt_config.h' would replace the generated crt_config.h")
        _write(include, name, text, "include file", nested=True)
    if spec.codegen_dir is not None:
        codegen = Path(spec.codegen_dir) / "codegen" / "host"
        if not codegen.is_dir():
            raise PlatformError(f"{spec.codegen_dir} holds no codegen/host directory (not an extracted MLF?)")
        shutil.copytree(codegen, out_dir / "codegen" / "host", dirs_exist_ok=True)
    for rel, text in spec.codegen_files.items():
        path = out_dir / "codegen" / "host" / rel
        if ".." in Path(rel).parts or Path(rel).parts[0] not in ("src", "include"):
            raise PlatformError(f"generated file {rel!r} must be under src/ or include/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return out_dir


def _write(directory: Path, name: str, content: str | bytes, what: str, nested: bool) -> None:
    """Write one file of the project: `name` is a relative path inside `directory` (a plain file name unless
    `nested`); bytes as they are, text as UTF-8."""
    rel = Path(name)
    if (not name or rel.is_absolute() or ".." in rel.parts or "\0" in name
            or (not nested and len(rel.parts) != 1)):
        raise PlatformError(f"{what} {name!r} must be a {'relative path' if nested else 'plain file name'}")
    path = directory / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


def make(project_dir: Path, *targets: str, jobs: int | None = None) -> str:
    """Run make in a project; BuildError (with the compiler's output) on failure."""
    cross_tool("gcc")  # a clear error when the toolchain is missing
    jobs = jobs or min(2, os.cpu_count() or 1)
    return cc.run(
        ["make", "-C", str(project_dir), f"-j{jobs}", *targets], what=f"firmware build in {project_dir}"
    )


def build_project(project_dir: Path, board: Board | None = None) -> Path:
    """Build a generated project; returns its firmware.elf. With the project's `board`, an image that leaves
    the board's instruction set (`Board.isa_check`) is refused (PlatformError naming the instruction)."""
    make(project_dir)
    elf = Path(project_dir) / "build" / "firmware.elf"
    if not elf.is_file():
        raise BuildError(f"make in {project_dir} succeeded but produced no {elf}")
    if board is not None and board.isa_check is not None:
        from utvm.platform.qemu.image_check import check_image

        check_image(elf, board.isa_check, board.name)
    return elf


def build_firmware(spec: FirmwareSpec, name: str = "firmware") -> Path:
    """Generate, build and cache the firmware of `spec`; returns the project directory (built).

    The ELF is `<project>/build/firmware.elf`, next to its map file and the -fstack-usage/-fcallgraph-info
    outputs. Cached under utvm's cache directory by a hash of the generated project and the toolchain. A
    board with an instruction-set check (`qemu-cortex-m0`) has every build proven before it is cached.
    """
    with tempfile.TemporaryDirectory(prefix="utvm-qemu-gen-") as tmp:
        staged = generate_project(spec, Path(tmp) / "project")
        # hash_inputs keys files by name and content; the layout (which directory a file is in) matters too.
        layout = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
        extra = [cc.compiler_version(cross_tool("gcc")), spec.board.name, "qemu-firmware-v2", *layout]

        def builder(out: Path) -> Path:
            project = out / "project"
            shutil.copytree(staged, project)
            if spec.crt_libs and RUNTIME_CACHE:
                cached_runtime(project, spec)
            build_project(project, spec.board)  # (an image the board's ISA check refuses is never cached)
            return out / name

        marker = cc.cached_build([staged], extra, name, lambda out: _touch(builder(out)))
    return marker.parent / "project"


def _touch(path: Path) -> Path:
    path.write_text("built\n")
    return path


#: Whether build_firmware takes a project's C runtime from the cache (`cached_runtime`); off, every project
#: builds its own (what a benchmark turns off to measure what the cache saves).
RUNTIME_CACHE = True
_RUNTIME_NAME = "qemu-crt.txt"


def cached_runtime(project: Path, spec: FirmwareSpec) -> Path:
    """Put the C runtime of the generated `project` in its build/crt/, built once and cached: returns that
    directory. On a miss the project's own `make crt` builds it and a copy goes to the cache; on a hit the
    cached libraries and objects are copied in, dated now, so the project's make finds them current and only
    compiles the project's own sources. The key is everything the CRT build reads: the project's crt/ tree and
    include/ (its crt_config.h: the CRT's include path), with where each file sits, the template Makefile
    (the flags it gives the CRT), the board's CPU flags, the optimisation level, the libraries, the
    cross-compiler's version and the CFLAGS and CROSS_COMPILE environment variables (make passes them on).
    The dependency files (.d) are not cached: they name the directory the runtime was first built in, and the
    key already covers every header."""
    crt, include = project / "crt", project / "include"
    layout = sorted(str(p.relative_to(project)) for d in (crt, include) for p in d.rglob("*") if p.is_file())
    extra = ["qemu-crt-v1", cc.compiler_version(cross_tool("gcc")), " ".join(spec.board.cpu_flags), spec.opt,
             *spec.crt_libs, f"CFLAGS={os.environ.get('CFLAGS', '')}",
             f"CROSS_COMPILE={os.environ.get('CROSS_COMPILE', '')}", *layout]
    dest = project / "build" / "crt"

    def builder(tmp: Path) -> Path:
        make(project, "crt")
        shutil.copytree(dest, tmp / "crt", ignore=shutil.ignore_patterns("*.d"))
        (tmp / _RUNTIME_NAME).write_text(f"board: {spec.board.name}\nlibs: {' '.join(spec.crt_libs)}\n")
        return tmp / _RUNTIME_NAME

    entry = cc.cached_build([crt, include, TEMPLATE_DIR / "Makefile"], extra, _RUNTIME_NAME, builder).parent
    if not dest.is_dir():  # a hit (on a miss this project built it)
        shutil.copytree(entry / "crt", dest, copy_function=shutil.copy)
        now = time.time()
        for f in dest.rglob("*"):
            os.utime(f, (now, now))  # newer than the sources and crt_config.h they were built from
    return dest
