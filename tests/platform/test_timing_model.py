"""The cycles plugin's timing models (utvm.platform.qemu.timing, docs/timing.md), checked on hand-written
instruction sequences whose cycles the documented tables give.

Each core gets one tiny bare-metal image (a vector table, a reset handler that enables the FPU/MVE and jumps
to each sequence in turn, semihosting exit) with one region per sequence, run once in QEMU on the core's
machine under the plugin: every sequence's instructions and estimated cycles are checked exactly. A host
build of the same model (`selftest_program`) checks the decoder's classes and the MVE pipes without QEMU.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from utvm.errors import PlatformError
from utvm.platform.qemu import timing
from utvm.platform.qemu.boards import BOARDS, Board

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="needs the host gcc and arm-none-eabi-gcc")


@dataclass(frozen=True)
class Machine:
    board: Board
    code: int  # where the core reads its vector table at reset (the image goes there)
    ram: int  # a RAM address for the stack and the data the sequences load


#: each timing model on its board (boards.py): the image at the reset vector's address (the AN547's ITCM)
MACHINES = {b.timing_model: Machine(b, b.flash_origin if b.boot_origin is None else b.boot_origin, b.ram_origin)
            for b in BOARDS.values() if b.timing_model is not None}


@dataclass(frozen=True)
class Case:
    name: str
    body: str  # the sequence (the region), `;`-separated lines
    instructions: int
    cycles: dict[str, int]  # core -> estimated cycles
    setup: str = ""  # run before the region (not counted)


# r1 points at a 64-byte buffer in RAM whose first word holds its own address, r0 = 0 and r4 = 1 on entry to
# every setup. Expected cycles follow docs/timing.md's tables; the comments give the sums (M4 unless named).
CASES = [
    Case("ldr_ldr", "ldr r0, [r1]; ldr r2, [r1, #4]", 2,
         {"m4": 3, "m33": 3, "m55": 3, "m7": 2}),  # 2 + 1 (pipelined); M7: 1 + 1
    Case("ldr_add_ldr", "ldr r0, [r1]; add.w r3, r3, #1; ldr r2, [r1, #4]", 3,
         {"m4": 5, "m33": 5, "m55": 5, "m7": 2}),  # 2 + 1 + 2; M7: ldr, add dual-issued, ldr
    Case("ldr_address_dependency", "ldr r0, [r1]; ldr r2, [r0]", 2,
         {"m4": 4, "m33": 4, "m55": 4, "m7": 3}),  # 2 + 2 (the address is the loaded value); M7: 1 + 1 + load-use
    Case("ldm_1", "ldmia r1!, {r2}", 1, {"m4": 2, "m33": 2, "m55": 2, "m7": 2}),  # 1 + N; M7: 1 + ceil(N/2)
    Case("ldm_4", "ldmia r1!, {r2, r3, r5, r6}", 1, {"m4": 5, "m33": 5, "m55": 5, "m7": 3}),
    Case("ldm_8", "ldm.w r1, {r2, r3, r5, r6, r7, r8, r9, r10}", 1, {"m4": 9, "m33": 9, "m55": 9, "m7": 5}),
    Case("mul", "mul r0, r2, r3", 1, {"m4": 1, "m33": 1, "m55": 1, "m7": 1}),
    Case("mla", "mla r0, r2, r3, r5", 1, {"m4": 2, "m33": 2, "m55": 2, "m7": 1}),
    Case("sdiv", "sdiv r0, r4, r4", 1, {"m4": 7, "m33": 7, "m55": 7, "m7": 7}),
    # cmp 1 + beq 1 + refill 2 (taken) + the target's nop 1; M7: cmp+beq dual-issued, forward taken = mispredicted (4)
    Case("branch_taken", "cmp r0, r0; beq 1f; nop; 1: nop", 3, {"m4": 5, "m33": 5, "m55": 5, "m7": 6}),
    # cmp 1 + beq 1 (not taken) + nop + nop; M7: cmp+beq, nop+nop dual-issued
    Case("branch_not_taken", "cmp r0, #1; beq 1f; nop; 1: nop", 4, {"m4": 4, "m33": 4, "m55": 4, "m7": 2}),
    # movs 1, then 3 x (subs 1 + bne 1) and 2 taken refills: 11. M33/M55: bne pairs with the (16-bit) subs: 8.
    # M7: bne pairs with subs, backward taken is predicted (0), the loop exit is mispredicted (4): 8.
    Case("loop_backward", "movs r0, #3; 1: subs r0, #1; bne 1b", 7, {"m4": 11, "m33": 8, "m55": 8, "m7": 8}),
    Case("it_folded", "cmp r0, #0; it eq; moveq r2, #1", 3, {"m4": 2, "m33": 2, "m55": 2, "m7": 2}),
    Case("vfp", "vadd.f32 s0, s1, s2; vmla.f32 s3, s4, s5", 2, {"m4": 4, "m33": 4, "m55": 4, "m7": 4}),
    # bl 1+2, push 1+2, pop 1+2+2, the return lands on `b 3f` 1+2, nop 1 -> 15;
    # M7: bl 1, push 1+1, pop 1+1+4, b 1, nop 1 -> 11
    Case("pop_pc", "bl 2f; b 3f; 2: push {r4, lr}; pop {r4, pc}; 3: nop", 5,
         {"m4": 15, "m33": 15, "m55": 15, "m7": 11}),
    # MVE, beat-wise: VLDR 2, VMLADAV on the multiply pipe overlaps it (1), VLDR (1), VADD on the integer pipe
    # (1), a second VADD on the same pipe (2): 7
    Case("mve_overlap", "vldrb.u8 q0, [r1]; vmladava.s8 r2, q0, q1; vldrb.u8 q2, [r1, #16]; vadd.i8 q3, q2, q2; "
         "vadd.i8 q4, q3, q2", 5, {"m55": 7}),
    # movs 1, dls 1; iteration 1: vldrb 2 + vmladava 1 + le (executes: 1 + refill 2); iteration 2: 3 and the
    # running loop's branch is free, its vmladava and the next vldrb overlap (-1); iteration 3: 3, the loop exit 1
    Case("mve_low_overhead_loop", "movs r2, #3; dls lr, r2; 1: vldrb.u8 q0, [r1]; vmladava.s8 r6, q0, q1; "
         "le lr, 1b", 11, {"m55": 14}),
    Case("mve_gather", "vldrw.u32 q0, [r1, q5]", 1, {"m55": 4}, setup="vmov.i32 q5, #0"),  # one element a cycle
]


def _cases_for(core: str) -> list[Case]:
    return [c for c in CASES if core in c.cycles]


def _image_source(core: str, m: Machine) -> str:
    lines = [
        ".syntax unified", ".thumb",
        ".section .vectors, \"a\"", f".word {m.ram + 0x8000:#x}", ".word reset",
        ".text", ".thumb_func", ".global reset", "reset:",
        # CP10/CP11 full access (the FPU; on the M55 also MVE)
        "ldr r0, =0xE000ED88", "ldr r1, [r0]", "orr r1, r1, #(0xF << 20)", "str r1, [r0]", "dsb", "isb",
    ]  # fmt: skip
    for i, c in enumerate(_cases_for(core)):
        lines += [f"ldr r1, ={m.ram + 0x1000:#x}", "str r1, [r1]", "movs r0, #0", "movs r4, #1",
                  *[s.strip() for s in c.setup.split(";") if s.strip()],
                  f"b start_{i}",  # a block of its own: nothing before the region pairs or pipelines with it
                  f"start_{i}:", *[s.strip() for s in c.body.split(";")], f"end_{i}:", "nop"]
    lines += ["movs r0, #0x18", "ldr r1, =0x20026", "bkpt 0xab", "b .", ".ltorg", ""]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, timing.TimingRegion]]:
    """core -> case name -> the region measured in QEMU (each core's image runs once)."""
    if shutil.which("qemu-system-arm") is None:
        pytest.skip("needs qemu-system-arm")
    out: dict[str, dict[str, timing.TimingRegion]] = {}
    for core, m in MACHINES.items():
        d = tmp_path_factory.mktemp(f"timing-{core}")
        (d / "image.S").write_text(_image_source(core, m))
        (d / "image.ld").write_text(f"SECTIONS {{ . = {m.code:#x}; .text : {{ KEEP(*(.vectors)) *(.text*) }} }}\n")
        elf = d / "image.elf"
        built = subprocess.run(["arm-none-eabi-gcc", f"-mcpu={m.board.cpu}", "-mthumb", "-mfloat-abi=hard", "-nostdlib",
                                "-nostartfiles", "-T", str(d / "image.ld"), "-o", str(elf), str(d / "image.S")],
                               check=False, capture_output=True, text=True)
        assert built.returncode == 0, f"{core} image: {built.stderr}"
        cases = _cases_for(core)
        names = [f"{p}_{i}" for i in range(len(cases)) for p in ("start", "end")]
        addr = timing.symbol_addresses(elf, names)
        sites = [(addr[f"start_{i}"], addr[f"end_{i}"]) for i in range(len(cases))]
        run = timing.count_calls(m.board, elf, core, sites, timeout=60)
        assert run.exit_status == 0, f"{core} image: QEMU exited {run.exit_status}"
        assert len(run.regions) == len(cases), f"{core}: {len(run.regions)} regions for {len(cases)} sequences"
        out[core] = {c.name: r for c, r in zip(cases, run.regions, strict=True)}
    return out


@pytest.mark.slow
@pytest.mark.parametrize("core, case", [(core, c) for core in MACHINES for c in _cases_for(core)],
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_sequence_cycles(measured: dict[str, dict[str, timing.TimingRegion]], core: str, case: Case) -> None:
    region = measured[core][case.name]
    assert region == timing.TimingRegion(case.instructions, case.cycles[core]), (
        f"{core} {case.name}: {case.body}")


# --- the host build of the model: decoder classes and MVE pipes, no QEMU ------------------------------------
def _assemble(lines: list[str], tmp: Path) -> list[str]:
    """Each instruction's encoding as the selftest takes it (4 or 8 hex digits)."""
    src = tmp / "seq.s"
    src.write_text(".syntax unified\n.thumb\n.arch armv8.1-m.main\n.arch_extension mve.fp\n.text\n"
                   + "\n".join(lines) + "\n")
    subprocess.run(["arm-none-eabi-as", "-o", str(tmp / "seq.o"), str(src)], check=True, capture_output=True)
    dump = subprocess.run(["arm-none-eabi-objdump", "-d", str(tmp / "seq.o")], check=True, capture_output=True,
                          text=True).stdout
    import re

    encs = []
    for line in dump.splitlines():
        m = re.match(r"^\s+[0-9a-f]+:\t([0-9a-f]{4})(?: ([0-9a-f]{4}))?\s*\t", line)
        if m:
            encs.append(m.group(1) + (m.group(2) or ""))
    assert len(encs) == len(lines), dump
    return encs


def _classify(core: str, lines: list[str], tmp: Path) -> list[tuple[str, str, int]]:
    """(class, MVE pipe, cost) of each instruction alone, from the host build of the model."""
    encs = _assemble(lines, tmp)
    text = "".join(f"{core} 0 {e}\nreset\n" for e in encs)
    out = subprocess.run([str(timing.selftest_program())], input=text, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    rows = [line.split() for line in out if line and not line.startswith(("block", "settle"))]
    return [(k, p, int(c)) for k, p, c in rows]


M4_TABLE = [  # instruction, class, cycles alone on the M4 (docs/timing.md)
    ("adds r0, r1, r2", "alu", 1), ("ldr r0, [r1, #4]", "ld", 2), ("ldr.w r0, [r1, r2, lsl #2]", "ld", 2),
    ("ldrb r0, [r1], #1", "ld", 2), ("str r0, [r1]", "st", 1), ("ldrd r0, r1, [r2]", "ldrd", 3),
    ("strd r0, r1, [r2, #8]!", "strd", 3), ("push {r4-r7, lr}", "stm", 6), ("pop {r4, r5, pc}", "ldm", 6),
    ("pop.w {r4-r11, pc}", "ldm", 12), ("ldr pc, [sp], #4", "ldpc", 4), ("tbb [pc, r0]", "tbb", 4),
    ("muls r0, r1", "mul", 1), ("mla r0, r1, r2, r3", "mla", 2), ("mls r0, r1, r2, r3", "mla", 2),
    ("smull r0, r1, r2, r3", "mul", 1), ("smlal r0, r1, r2, r3", "mul", 1), ("smlad r0, r1, r2, r3", "mul", 1),
    ("smlabb r0, r1, r2, r3", "mul", 1), ("udiv r0, r1, r2", "div", 7), ("bx lr", "bx", 3),
    ("b .", "b", 3), ("bl .+100", "bl", 3), ("beq .", "bcc", 1), ("cbz r0, .+8", "cbz", 1),
    ("mov pc, lr", "pcw", 3), ("vadd.f32 s0, s1, s2", "fp", 1), ("vmla.f32 s0, s1, s2", "fmac", 3),
    ("vfma.f32 s0, s1, s2", "fmac", 3), ("vdiv.f32 s0, s1, s2", "fdiv", 14), ("vsqrt.f32 s0, s1", "fdiv", 14),
    ("vldr s0, [r0]", "fld", 2), ("vldr d0, [r0]", "fld64", 3), ("vpush {s16-s19}", "fstm", 5),
    ("vmov r0, s0", "fmov", 1), ("vmov r0, r1, d0", "fmov2", 2), ("pld [r0]", "nop", 1), ("dmb", "sys", 1),
]  # fmt: skip


def test_m4_table(tmp_path: Path) -> None:
    got = _classify("m4", [i for i, _, _ in M4_TABLE], tmp_path)
    assert [(k, c) for k, _, c in got] == [(k, c) for _, k, c in M4_TABLE]


MVE_PIPES = [  # instruction, pipe on the Cortex-M55 (docs/timing.md)
    ("vldrb.u8 q0, [r0]", "ls"), ("vldrw.u32 q0, [r0, #16]!", "ls"), ("vstrb.8 q0, [r0]", "ls"),
    ("vld20.8 {q0, q1}, [r0]", "ls"), ("vmladava.s8 r0, q1, q2", "mul"), ("vmlav.s8 r0, q1, q2", "mul"),
    ("vmlaldav.s16 r0, r1, q1, q2", "mul"), ("vaddv.s8 r0, q1", "mul"), ("vmul.i32 q0, q1, r2", "mul"),
    ("vmla.u8 q0, q1, r2", "mul"), ("vqrdmulh.s32 q0, q1, r2", "mul"), ("vqdmulh.s32 q0, q1, q2", "mul"),
    ("vmul.i8 q0, q1, q2", "mul"), ("vcmp.s8 gt, q0, q1", "mul"), ("vfma.f32 q0, q1, q2", "mul"),
    ("vadd.i8 q0, q1, q2", "int"), ("vadd.i32 q0, q1, r2", "int"), ("vrshl.s32 q0, r2", "int"),
    ("vshl.s32 q0, q1, #3", "int"), ("vmax.s8 q0, q1, q2", "int"), ("vmaxv.s8 r0, q1", "int"),
    ("vmovlb.s8 q0, q1", "int"), ("vqmovnb.s32 q0, q1", "int"), ("vdup.8 q0, r1", "int"),
    ("vpsel q0, q1, q2", "int"), ("vand q0, q1, q2", "int"), ("vmov.i32 q0, #0", "int"),
]  # fmt: skip


def test_mve_pipes(tmp_path: Path) -> None:
    got = _classify("m55", [i for i, _ in MVE_PIPES], tmp_path)
    assert [(i, p) for (i, _), (_k, p, _c) in zip(MVE_PIPES, got, strict=True)] == MVE_PIPES
    assert all(k == "mve" and c == 2 for k, _p, c in got)  # 4 beats at 2 a cycle


def test_mve_system_and_gathers(tmp_path: Path) -> None:
    got = _classify("m55", ["vpst", "vaddt.i8 q0, q1, q2", "vctp.8 r1", "vldrb.u8 q2, [r2, q3]",
                            "vldrh.u16 q2, [r2, q3]", "vstrw.32 q2, [r2, q3]", "vldrw.u32 q2, [q3, #8]"], tmp_path)
    assert [(k, c) for k, _p, c in got] == [("mvesys", 1), ("mve", 2), ("mvesys", 1), ("gather", 16),
                                            ("gather", 8), ("gather", 4), ("gather", 4)]


def test_selftest_settles_branches(tmp_path: Path) -> None:
    """The dynamic part: a conditional branch's refill only when the next block is its target (the beq at
    0x102 branches to 0x10a)."""
    enc = _assemble(["cmp r0, #1", "beq .+8"], tmp_path)
    prog = str(timing.selftest_program())
    block = f"m4 100 {' '.join(enc)}\n"
    taken = subprocess.run([prog], input=block + "m4 10a bf00\n", capture_output=True, text=True, check=True).stdout
    not_taken = subprocess.run([prog], input=block + "m4 104 bf00\n", capture_output=True, text=True,
                               check=True).stdout
    assert "settle 2" in taken.split("\n")
    assert "settle 0" in not_taken.split("\n")


@pytest.mark.parametrize("extra", [["-shared", "-fPIC"], ["-DUTVM_CYCLES_SELFTEST"]], ids=["plugin", "selftest"])
def test_source_builds_without_warnings(tmp_path: Path, extra: list[str]) -> None:
    p = subprocess.run(["gcc", *timing.STRICT_FLAGS, *extra, "-o", str(tmp_path / "out"), str(timing.SOURCE)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr


def test_plugin_argument_checks() -> None:
    with pytest.raises(PlatformError, match="unknown timing model 'm3'"):
        timing.plugin_argument("m3", [(0, 2)], "out.txt")
    with pytest.raises(PlatformError, match="at most 32"):
        timing.plugin_argument("m4", [(0, 2)] * 33, "out.txt")
    arg = timing.plugin_argument("m4", [(0x100, 0x104)], "a,b.txt")
    assert arg.endswith(",core=m4,start=0x100,end=0x104,out=a,,b.txt")


def test_parse_regions_ignores_a_partial_line() -> None:
    data = b"region=1 insns=10 cycles=14\nregion=2 insns=3 cyc"
    assert timing.parse_regions(data) == [timing.TimingRegion(10, 14)]
