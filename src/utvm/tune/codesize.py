"""How much machine code a schedule puts in a firmware: what the tuning log's `code` records.

A candidate of a task is compiled as the deploy firmware would hold it (the unpacked convention, the
model's `task_count` nodes of the task: a kernel shared between them counts once, a per-layer one `count`
times), its operators file is compiled with the target's C compiler at -O2 with one section per function,
and the sizes of the text sections of its functions are added up: the operator function times the count,
plus the file-scope functions the kernel emitted (a shared GEMM). Data (weights, tables) is not code.
Each tool runs at most TOOL_TIMEOUT_S seconds; a tool that hangs, fails or vanishes leaves the size unknown
(None), never a traceback or a stuck tuner.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from utvm.compiler.schedule import Schedule
from utvm.support import cc
from utvm.target import get_target
from utvm.tune.tasks import Task

#: Seconds the target compiler (or `size`) may take on one candidate before it counts as unmeasurable.
TOOL_TIMEOUT_S = 120.0

_SECTION = re.compile(r"^\.text\.(\S+)\s+(\d+)\s+\d+\s*$", re.MULTILINE)


def _tools(target: str) -> tuple[list[str], str] | None:
    t = get_target(target)
    if t.mcpu is None:
        gcc, size = shutil.which("gcc"), shutil.which("size")
        return ([gcc], size) if gcc and size else None
    gcc, size = shutil.which("arm-none-eabi-gcc"), shutil.which("arm-none-eabi-size")
    return ([gcc, *t.cpu_flags], size) if gcc and size else None


def code_bytes(task: Task, point: Schedule, target: str) -> int | None:
    """Bytes of machine code `point` puts in a firmware holding the model's `task.count` nodes of `task`;
    None when the target's compiler is not installed or the candidate does not compile (the measurement
    reports that)."""
    from utvm.compiler import compile as compile_graph

    tools = _tools(target)
    if tools is None:
        return None
    compiler, size = tools
    try:
        compiled: Any = compile_graph(task.graph, model_name="cs", rounding=task.rounding, target=target,
                                      schedules={task.key: dict(point)}, passes=False, unpacked_api=True,
                                      task_counts={task.key: task.count})
    except Exception:  # noqa: BLE001 - measuring code is best effort; the candidate's own compile reports it
        return None
    op = next((o for o in compiled.operators if o.task == task.key), None)
    if op is None:
        return None
    with tempfile.TemporaryDirectory(prefix="utvm-codesize-") as tmp:
        src = Path(tmp) / "ops.c"
        src.write_text(compiled.sources[f"{compiled.prefix}_ops.c"])
        obj = Path(tmp) / "ops.o"
        try:
            proc = subprocess.run([*compiler, "-std=c99", "-O2", "-ffunction-sections", "-fdata-sections",
                                   f"-I{cc.crt_dir() / 'include'}", "-c", str(src), "-o", str(obj)],
                                  capture_output=True, text=True, errors="replace", timeout=TOOL_TIMEOUT_S)
            if proc.returncode != 0:
                return None
            out = subprocess.run([size, "-A", str(obj)], capture_output=True, text=True, errors="replace",
                                 timeout=TOOL_TIMEOUT_S).stdout
        except (subprocess.TimeoutExpired, OSError):  # a hung or vanished tool: the code size is unknown
            return None
    total = 0
    for name, nbytes in _SECTION.findall(out):
        if name == op.name:
            total += int(nbytes) * task.count
        elif name.startswith(f"{compiled.prefix}_"):  # file-scope functions of the kernel (shared code)
            total += int(nbytes)
    return total
