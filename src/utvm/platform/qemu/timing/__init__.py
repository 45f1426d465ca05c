"""Per-core timing models: estimated cycles beside instructions, from a QEMU TCG plugin (docs/timing.md).

Under `-icount shift=0` the emulated SysTick counts instructions, so what utvm measures on a QEMU board is
instructions. The plugin `cycles.c` (beside this file) adds a first-order cycle estimate from the executed
instruction stream, under the published instruction timings of one core: `m4`, `m7` (dual issue
approximated), `m33` and `m55` (beat-wise MVE, low-overhead loops). It is built with the host gcc at first use
into the cache (`$UTVM_CACHE_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/utvm`, under `timing/`, keyed by a hash of
the source and the compiler), atomically, so two processes may build it at once.

A region opens when the instruction at a `start` address executes and closes at the matching `end`: the
plugin writes one line per closed region, `region=<k> insns=<n> cycles=<c>`, flushed at once.

- `TimingLog`: one emulation's plugin arguments and output file; `regions()` reads the regions closed so far.
  `utvm.platform.qemu.runner.QemuTransport` starts QEMU with one, its regions being the span between
  `TVMPlatformTimerStart` and `TVMPlatformTimerStop` (the span the device's timer measures), so the time
  evaluator can give each timed call its estimated cycles (`utvm.runtime.backend.TimeEvaluator.cycles_est`).
- `call_sites` / `count_calls`: regions around the calls of a function from `main()` of a standalone
  firmware (the benchmark's and `utvm size`'s figures, and TFLM's peer firmware).
- `UTVM_TIMING_MODEL=off` (or `0`, `no`, `none`) starts QEMU without the plugin: no estimated cycles.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from utvm.errors import PlatformError
from utvm.runtime.backend import TimingRegion

if TYPE_CHECKING:
    from utvm.platform.qemu.boards import Board

__all__ = ["CORES", "ENV_SWITCH", "TimingLog", "TimingRegion", "call_sites", "count_calls",
           "enabled", "parse_regions", "plugin_library", "selftest_program", "symbol_addresses"]

#: The cores with a timing model (the plugin's `core=`).
CORES = ("m4", "m7", "m33", "m55")
#: QEMU boards -> their core's timing model.
#: The environment variable that turns the plugin off.
ENV_SWITCH = "UTVM_TIMING_MODEL"
#: The span the device's timer measures, whose estimated cycles the time evaluator reports.
TIMER_START = "TVMPlatformTimerStart"
TIMER_STOP = "TVMPlatformTimerStop"
#: Start/end pairs the plugin takes.
MAX_MARKERS = 32

SOURCE = Path(__file__).resolve().with_name("cycles.c")
#: Warnings stay warnings here (another gcc may warn where this one does not: the plugin must still build);
#: the tests build the source with -Werror.
_BUILD_FLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-pedantic")
STRICT_FLAGS = (*_BUILD_FLAGS, "-Werror")
_REGION = re.compile(rb"^region=(\d+) insns=(\d+) cycles=(\d+)$")


def enabled() -> bool:
    """False when $UTVM_TIMING_MODEL turns the plugin off."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "off", "no", "none", "false")


def _host_gcc() -> str:
    from utvm.platform.qemu.boards import find_tool

    return find_tool("gcc", "gcc")


def _build(kind: str, flags: Sequence[str], suffix: str) -> Path:
    """The plugin source built with `flags` into the cache (once per source, compiler and flags)."""
    from utvm.support import cc

    gcc = _host_gcc()
    key = hashlib.sha256(SOURCE.read_bytes() + "\0".join([cc.compiler_version(gcc), *flags]).encode())
    out = cc.cache_dir() / "timing" / f"{kind}-{key.hexdigest()[:16]}{suffix}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        p = subprocess.run([gcc, *flags, "-o", str(tmp), str(SOURCE)], capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise PlatformError(f"building the timing plugin {SOURCE.name} with {gcc} failed: "
                                f"{' '.join(p.stderr.split())[:600]}")
        os.replace(tmp, out)  # atomic: a concurrent build of the same key writes the same bytes
    finally:
        tmp.unlink(missing_ok=True)
    return out


def plugin_library() -> Path:
    """The QEMU plugin (a shared library), built at first use with the host gcc."""
    return _build("libutvm_cycles", (*_BUILD_FLAGS, "-shared", "-fPIC"), ".so")


def selftest_program() -> Path:
    """The same model as a host program that prints its view of instruction sequences (cycles.c, the end)."""
    return _build("cycles_selftest", (*_BUILD_FLAGS, "-DUTVM_CYCLES_SELFTEST"), "")


def plugin_argument(core: str, markers: Sequence[tuple[int, int]], out: Path | str) -> str:
    """The value of QEMU's `-plugin` option: the library, the core, the start/end pairs and the output file
    (QEMU's option syntax escapes a comma in a path as `,,`)."""
    if core not in CORES:
        raise PlatformError(f"unknown timing model {core!r}; the plugin models {', '.join(CORES)}")
    if len(markers) > MAX_MARKERS:
        raise PlatformError(f"{len(markers)} regions to mark; the timing plugin takes at most {MAX_MARKERS}")
    parts = [str(plugin_library()).replace(",", ",,"), f"core={core}"]
    parts += [f"start={s:#x},end={e:#x}" for s, e in markers]
    parts.append("out=" + str(out).replace(",", ",,"))
    return ",".join(parts)


def parse_regions(data: bytes) -> list[TimingRegion]:
    """The regions in the plugin's output (complete lines only)."""
    out = []
    for line in data.split(b"\n")[:-1]:  # the text after the last newline may be a line being written
        m = _REGION.match(line.strip())
        if m:
            out.append(TimingRegion(int(m.group(2)), int(m.group(3))))
    return out


@dataclass
class TimingLog:
    """The timing model of one emulation: the plugin's arguments (`qemu_args`) and, read as QEMU writes them,
    the regions it closed (`regions`). `close()` removes the output file."""

    core: str
    markers: list[tuple[int, int]]
    instructions_per_second: float
    path: Path = field(init=False)
    _offset: int = field(init=False, default=0)
    _regions: list[TimingRegion] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        fd, name = tempfile.mkstemp(prefix="utvm-timing-", suffix=".txt")
        os.close(fd)
        self.path = Path(name)

    def qemu_args(self) -> list[str]:
        return ["-plugin", plugin_argument(self.core, self.markers, self.path)]

    def regions(self) -> list[TimingRegion]:
        """Every region closed so far, oldest first (a copy)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            data = b""
        cut = data.rfind(b"\n") + 1
        if cut:
            self._regions += parse_regions(data[:cut])
            self._offset += cut
        return list(self._regions)

    def close(self) -> None:
        self.path.unlink(missing_ok=True)

    @classmethod
    def for_timer(cls, elf: Path, core: str, instructions_per_second: float) -> TimingLog:
        """Regions = the span TVMPlatformTimerStart .. TVMPlatformTimerStop of the firmware `elf`."""
        addr = symbol_addresses(elf, (TIMER_START, TIMER_STOP))
        missing = [s for s in (TIMER_START, TIMER_STOP) if s not in addr]
        if missing:
            raise PlatformError(f"firmware {elf} has no symbol {', '.join(missing)}: the {core} timing model cannot "
                                f"mark the timer's span (set {ENV_SWITCH}=off to run without it)")
        return cls(core, [(addr[TIMER_START], addr[TIMER_STOP])], instructions_per_second)


def symbol_addresses(elf: Path, names: Sequence[str]) -> dict[str, int]:
    """The addresses of the function symbols `names` in `elf` (arm-none-eabi-nm; a Thumb symbol's bit 0 cleared)."""
    from utvm.platform.qemu.boards import cross_tool

    p = subprocess.run([cross_tool("nm"), str(elf)], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise PlatformError(f"arm-none-eabi-nm {elf} failed: {' '.join(p.stderr.split())[:300]}")
    wanted = set(names)
    out: dict[str, int] = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in wanted and parts[1] in "TtWw":
            out[parts[2]] = int(parts[0], 16) & ~1
    return out


def call_sites(elf: Path, symbols: Sequence[str], function: str = "main") -> list[tuple[int, int]]:
    """(address of each `bl`/`blx` to one of `symbols` in `function`, address of the instruction after it):
    regions covering one call each, callee included (arm-none-eabi-objdump)."""
    from utvm.platform.qemu.boards import cross_tool

    cmd = [cross_tool("objdump"), "-d", "--no-show-raw-insn", f"--disassemble={function}", str(elf)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise PlatformError(f"arm-none-eabi-objdump {elf} failed: {' '.join(p.stderr.split())[:300]}")
    insns: list[tuple[int, str]] = []
    inside = False
    for line in p.stdout.splitlines():
        if re.match(rf"^[0-9a-f]+ <{re.escape(function)}>:", line):
            inside = True
        elif inside:
            m = re.match(r"^\s*([0-9a-f]+):\s+(.*?)\s*$", line)
            if m:
                insns.append((int(m.group(1), 16), m.group(2)))
            elif not line.strip() and insns:
                break
    if not insns:
        raise PlatformError(f"{elf}: no function {function}() in the symbol table")
    names = "|".join(re.escape(s) for s in symbols)
    call = re.compile(rf"blx?(\.w)?\s+[0-9a-f]+\s+<(?:{names})>")
    sites = [(a, insns[i + 1][0]) for i, (a, text) in enumerate(insns[:-1]) if call.fullmatch(text)]
    if not sites:
        raise PlatformError(f"{elf}: {function}() has no call to {' or '.join(symbols)}")
    return sites


@dataclass
class CallCount:
    """What one emulation of a standalone firmware under the plugin gave."""

    regions: list[TimingRegion]
    uart: str
    exit_status: int


def count_calls(board: Board, elf: Path, core: str, sites: Sequence[tuple[int, int]], timeout: float = 600.0,
                extra_args: Sequence[str] = ()) -> CallCount:
    """Run the standalone firmware `elf` on `board`'s QEMU machine (utvm's command line,
    `runner.qemu_command`, with an empty stdin) under the plugin with one region per call site; the regions in
    order and what the firmware printed."""
    from utvm.platform.qemu.runner import qemu_command

    fd, name = tempfile.mkstemp(prefix="utvm-timing-", suffix=".txt")
    os.close(fd)
    out = Path(name)
    try:
        cmd = qemu_command(board, elf, extra=["-plugin", plugin_argument(core, list(sites), out), *extra_args])
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise PlatformError(f"{elf} on {board.machine} still ran after {timeout:g} s") from None
        err = p.stderr.decode("utf-8", "replace")
        if "utvm cycles plugin:" in err:
            raise PlatformError(f"the timing plugin refused to start: {err.strip().splitlines()[-1]}")
        data = out.read_bytes()
        if b" open=1" in data:
            raise PlatformError(f"{elf}: a marked call did not return before the firmware exited")
        return CallCount(parse_regions(data), p.stdout.decode("utf-8", "replace"), p.returncode)
    finally:
        out.unlink(missing_ok=True)
