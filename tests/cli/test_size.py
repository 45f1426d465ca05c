"""`utvm size`: text/data/bss by category agreeing with the ELF, worst-case stack from the call graph,
cross-checked against QEMU's stack-painting high-water mark, and the AOT RFC's convention table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from utvm.cli import main
from utvm.compiler import compile
from utvm.frontend import load
from utvm.platform.qemu.boards import get_board
from utvm.platform.qemu.footprint import MapEntry, categorize, parse_map, size_footprint, stack_analysis
from utvm.platform.qemu.project import FirmwareSpec, build_firmware
from utvm.support.models import models_dir

MODELS = models_dir()
KWS = MODELS / "mlperf_tiny" / "kws_ref_model.tflite"
MICRO_SPEECH = MODELS / "tflm" / "micro_speech_quantized.tflite"


def arm_size(elf: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-size", "-B", str(elf)], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in out.splitlines()[1].split()[:3])
    return {"text": text, "data": data, "bss": bss}


MAP = """\
Archive member included to satisfy reference by file (symbol)

Linker script and memory map

LOAD build/obj/src/main.o
.text           0x00000000      0x140
 *(.vectors)
 .vectors       0x00000000       0xc0 build/obj/board/startup.o
                0x00000000                utvm_vector_table
 .text.tvmgen_m_fused_conv2d
                0x000000c0       0x40 build/obj/codegen/host/src/tvmgen_m_ops.o
                0x000000c0                tvmgen_m_fused_conv2d
 .text          0x00000100       0x24 /usr/lib/libc_nano.a(lib_a-memcpy.o)
 *fill*         0x00000124        0x4
 .rodata.tvmgen_m_weights
                0x00000128       0x18 build/obj/codegen/host/src/tvmgen_m_ops.o

.data           0x20000000        0x8 load address 0x00000140
 .data.x        0x20000000        0x8 build/crt/libcommon.a(crt_error.o)

.bss            0x20000008       0x10 load address 0x00000148
 .bss.tvmgen_m_workspace
                0x20000008       0x10 build/obj/codegen/host/src/tvmgen_m_main.o
"""


def test_parse_map_and_categories() -> None:
    entries = [e for e in parse_map(MAP) if e.size]
    got = [(e.output_section, e.input_section, e.size, categorize(e)) for e in entries]
    assert got == [
        (".text", ".vectors", 0xC0, "application"),
        (".text", ".text.tvmgen_m_fused_conv2d", 0x40, "operators"),
        (".text", ".text", 0x24, "runtime"),
        (".text", "*fill*", 4, "application"),
        (".text", ".rodata.tvmgen_m_weights", 0x18, "constants"),
        (".data", ".data.x", 8, "runtime"),
        (".bss", ".bss.tvmgen_m_workspace", 0x10, "operators"),
    ]
    assert categorize(MapEntry(".text", ".text.f", 0, 4, "build/obj/board/platform.o")) == "runtime"
    with pytest.raises(Exception, match="not a GNU ld map"):
        parse_map("hello")


STACK_PROGRAM = r"""
#include <stdint.h>
typedef int (*op_t)(int);
static volatile int sink;
__attribute__((noinline)) int leaf(int x) { volatile uint8_t buf[200]; buf[x & 7] = (uint8_t)x; return buf[1]; }
__attribute__((noinline)) int small(int x) { volatile uint8_t buf[24]; buf[0] = (uint8_t)x; return buf[0]; }
op_t table[2] = {leaf, small};
__attribute__((noinline)) int rec(int n) {
  volatile uint8_t b[16];
  b[0] = (uint8_t)n;
  return n ? rec(n - 1) + b[0] : 0;
}
__attribute__((noinline)) int dyn(int n) { volatile uint8_t b[n]; b[0] = 1; return b[0]; }
__attribute__((noinline)) int via_table(int i) { return table[i & 1](i); }
int main(void) { sink = via_table(sink) + rec(3) + dyn(8); return 0; }
"""


def test_stack_analysis_follows_indirect_calls_and_flags(tmp_path: Path) -> None:
    spec = FirmwareSpec(get_board("qemu-cortex-m4"), {"main.c": STACK_PROGRAM}, opt="-O1")
    build = build_firmware(spec, "stacktest") / "build"
    elf = build / "firmware.elf"
    fp = size_footprint(elf)
    assert fp.totals() == fp.elf_totals == arm_size(elf)
    rep = stack_analysis(elf, build, handlers=("SysTick_Handler", "Default_Handler"), fpu=True)
    # main -> via_table -> (through the table) leaf, whose 200-byte buffer dominates
    assert rep.path[:4] == ["Reset_Handler", "main", "via_table", "leaf"]
    assert rep.thread_cost >= 200
    assert rep.worst_case == rep.thread_cost + rep.exception_frame + rep.handler_cost
    assert rep.exception_frame == 104 + 4  # FPU context on the M4
    assert "via_table" in rep.indirect_calls
    assert rep.recursion == ["rec"]
    assert rep.dynamic == ["dyn"]


@pytest.mark.slow
def test_size_json_agrees_with_the_elf(capsys: pytest.CaptureFixture) -> None:
    assert main(["size", str(KWS), "--platform", "qemu-cortex-m4", "--json", "-q"]) == 0
    res = json.loads(capsys.readouterr().out)
    elf = Path(res["project"]) / "build" / "firmware.elf"
    size = arm_size(elf)
    assert res["elf_totals"] == size
    assert {k: res["totals"][k] for k in size} == size
    for col in ("text", "data", "bss"):
        assert sum(res["sizes"][cat][col] for cat in res["sizes"]) == size[col]
    # The weights (and the per-channel requantisation tables derived from them) sit in the constants.
    weights = compile(load(KWS)).constant_bytes
    assert weights <= res["sizes"]["constants"]["text"] < 2 * weights
    assert res["sizes"]["operators"]["text"] > 1000 and res["sizes"]["operators"]["bss"] > 1000  # code, workspace
    st = res["stack"]
    assert st["consistent"] is True and 0 < st["measured_high_water"] <= st["worst_case"]
    assert st["path"][:2] == ["Reset_Handler", "main"]


@pytest.mark.slow
def test_compare_conventions_table(capsys: pytest.CaptureFixture) -> None:
    assert main(["size", str(MICRO_SPEECH), "--platform", "qemu-cortex-m4", "--compare-conventions", "-q",
                 "--model-name", "ms"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = lines[1].split()
    assert header[:5] == ["model", "/", "convention", "text", "data"]
    rows = {" ".join(line.split()[1:-8]): [int(v) for v in line.split()[-8:]] for line in lines[3:6]}
    assert list(rows) == ["packed", "unpacked", "unpacked + C interface"]
    text, data, bss, total, saved, stack, stack_saved, measured = range(8)
    for r in rows.values():
        assert r[total] == r[text] + r[data] + r[bss]
        assert r[measured] <= r[stack]
    packed, unpacked, c = rows.values()
    # The RFC's point: each step removes code and stack.
    assert packed[total] > unpacked[total] > c[total]
    assert packed[stack] > unpacked[stack] > c[stack]
    assert packed[measured] > c[measured]
    assert c[saved] == packed[total] - c[total] and c[stack_saved] == packed[stack] - c[stack]


@pytest.mark.slow
def test_size_text_report(capsys: pytest.CaptureFixture) -> None:
    argv = ["size", str(MICRO_SPEECH), "--platform", "qemu-cortex-m3", "--model-name", "ms", "-q",
            "--unpacked-api", "--interface-api", "c"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "model ms on qemu-cortex-m3 (c convention)" in out
    rows = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in out.splitlines()[3:8]}
    assert list(rows) == ["runtime", "operators", "constants", "application", "total"]
    assert rows["total"] == [sum(r[i] for name, r in rows.items() if name != "total") for i in range(4)]
    assert "(matches)" in out and "(consistent)" in out
    assert "exception frame" in out and "deepest path: Reset_Handler -> main" in out
    # The C interface reaches the model through TVMModel's function pointer: an indirect call, flagged.
    assert "flagged, indirect calls" in out
    assert main([*argv, "--no-run"]) == 0
    assert "measured in QEMU" not in capsys.readouterr().out
