"""libFuzzer targets for the link's decoders (clang -fsanitize=fuzzer,address,undefined).

Three targets, each checking the invariants of src/utvm/crt/src/rpc_server/SECURITY.md:
- fuzz_unframer: TVMUnframer on arbitrary bytes;
- fuzz_session:  TVMSession behind an unframer, on raw and validly framed traffic;
- fuzz_minrpc:   the MinRPC request parser/executor with the real CRT runtime.

They run concurrently for UTVM_FUZZ_SECONDS each (default 60), in one campaign with the Python targets of
test_fuzz_python.py (campaign.py), from a seed corpus built here from the shared vectors and hand-assembled
requests. A crash, leak, timeout or out-of-memory fails the test and keeps the whole run directory
(reproducer included) under the system temp dir, named in the message; reproduce with `<binary>
<reproducer>`.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import time
from pathlib import Path

import campaign
import pytest

from utvm.support import cc

HERE = Path(__file__).resolve().parent
VECTORS = HERE.parent / "vectors"
CONFIG = HERE.parent / "crt" / "configs" / "default"
SECONDS = int(os.environ.get("UTVM_FUZZ_SECONDS", "60"))
SAN = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1")
TARGETS = {
    "fuzz_unframer": ("rpc_common",),
    "fuzz_session": ("rpc_common",),
    "fuzz_minrpc": ("common", "memory", "rpc_common", "rpc_server"),
}
ENV = {
    "ASAN_OPTIONS": "allocator_may_return_null=1:detect_leaks=1:abort_on_error=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


def build_target(name: str) -> Path:
    """The fuzz binary `name` (cached by content hash)."""
    if shutil.which("clang") is None:
        pytest.fail("clang is required for the libFuzzer targets (Debian package clang)")
    src = HERE / f"{name}.c"
    crt = cc.crt_dir()

    def builder(tmp: Path) -> Path:
        libs = cc.make_crt_libs(tmp / "crt", CONFIG, TARGETS[name], cc="clang",
                                cflags=[*SAN, "-fsanitize=fuzzer-no-link"])
        return cc.compile_link(
            [src], tmp / name, include_dirs=[CONFIG, crt / "include", crt / "src" / "rpc_server"],
            cflags=["-std=c99", "-Wall", "-Wextra", "-Werror", *SAN, "-fsanitize=fuzzer"],
            ldflags=["-fsanitize=fuzzer,address,undefined"], libs=[libs[lib] for lib in TARGETS[name]], cc="clang",
        )

    return cc.cached_build([crt / "include", crt / "src", crt / "Makefile", CONFIG, src],
                           [name, *SAN, cc.compiler_version("clang")], name, builder)


# ---------------------------------------------------------------------------------------------------
# Seed corpora


def _frame(payload: bytes) -> bytes:
    import binascii

    body = struct.pack("<I", len(payload)) + payload
    wire = b"\xff\xfd" + body.replace(b"\xff", b"\xff\xff")
    crc = binascii.crc_hqx(wire, 0xFFFF)
    return wire + struct.pack("<H", crc).replace(b"\xff", b"\xff\xff")


def _seq(*items: tuple[int, bytes]) -> bytes:
    return struct.pack("<i", len(items)) + b"".join(struct.pack("<i", tc) for tc, _ in items) + b"".join(
        v for _, v in items
    )


def _req(code: int, body: bytes) -> bytes:
    payload = struct.pack("<i", code) + body
    return struct.pack("<Q", len(payload)) + payload


def _s(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


def _tensor(data: bytes, shape: tuple[int, ...], offset: int = 0) -> bytes:
    return (data + struct.pack("<iii", 1, 0, len(shape)) + bytes([2, 32, 1, 0])
            + b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<Q", offset))


ALLOC = [bytes([0xA1] * 7 + [0xA0 + k]) for k in range(4)]  # placeholders, see fuzz_minrpc.c
FUNC = [bytes([0xB1] * 7 + [0xB0 + k]) for k in range(4)]


def minrpc_requests() -> list[bytes]:
    i64 = lambda v: struct.pack("<q", v)  # noqa: E731
    return [
        _req(2, _s("0.8.0") + _seq()),
        _req(9, _seq((11, _s("fuzz.echo")))),
        _req(3, FUNC[0] + _seq((0, i64(1)), (11, _s("hello")))),
        _req(3, FUNC[0] + _seq((0, i64(1)), (7, _tensor(ALLOC[0], (4, 4))))),
        _req(3, FUNC[0] + _seq((0, i64(2)), (5, bytes([0, 8, 1, 0, 0, 0, 0, 0])), (6, i64(1)))),
        _req(3, FUNC[0] + _seq((0, i64(1)), (12, _s("\x00\xff")))),
        _req(3, FUNC[1] + _seq((0, i64(4)))),
        _req(3, FUNC[2] + _seq((0, i64(7)))),
        _req(3, FUNC[3] + _seq((7, _tensor(ALLOC[0], (16,))))),
        _req(7, _tensor(ALLOC[0], (4,)) + struct.pack("<Q", 16) + bytes(range(240, 256))),
        _req(6, _tensor(ALLOC[1], (4,), 4) + struct.pack("<Q", 8)),
        _req(13, _seq((6, i64(1)), (0, i64(32)), (0, i64(64)), (5, bytes([2, 32, 1, 0, 0, 0, 0, 0])))),
        _req(14, _seq((6, i64(1)), (3, ALLOC[2]))),
        _req(10, _seq((3, ALLOC[3]), (0, i64(13)))),
        _req(12, _seq((6, i64(1)), (0, i64(0)))),
        _req(16, _seq((7, _tensor(ALLOC[1], (4,))), (7, _tensor(ALLOC[0], (4,))), (3, i64(0)))),
        _req(17, _seq((7, _tensor(i64(0), (2, 2))), (11, _s("global")))),
        _req(15, _seq((6, i64(1)), (3, i64(0)))),
        _req(1, b""),
    ]


def seed_corpus(name: str, directory: Path) -> None:
    framing = json.loads((VECTORS / "framing.json").read_text())
    session = json.loads((VECTORS / "session.json").read_text())
    seeds: list[bytes] = []
    if name == "fuzz_unframer":
        wires = [bytes.fromhex(p["wire"]) for p in framing["packets"]]
        wires += [bytes.fromhex(m["wire"]) for m in session["messages"]]
        seeds = [bytes([0x10, 0xFF]) + b"\xfe" + w for w in wires]
        seeds.append(bytes([0x01, 0x00]) + b"".join(wires))
        seeds.append(bytes([0x00, 0x03]) + b"\xff\xfd\x05\x00\x00\x00ab" + wires[0] + b"\xff\x01" + wires[1])
    elif name == "fuzz_session":
        for m in session["messages"]:
            payload = struct.pack("<HB", m["session_id"], m["type"]) + bytes.fromhex(m["body"])
            seeds.append(bytes([1, len(payload)]) + payload)
        init = struct.pack("<HB", 0x82, 0) + b"\x01"
        normal = struct.pack("<HB", 0, 0x10) + b"hello"
        seeds.append(bytes([1, len(init)]) + init + bytes([3, len(normal)]) + normal + bytes([0x13, 3]) + b"abc")
        seeds.append(bytes([8, 0]) + bytes([1, 4]) + struct.pack("<HB", 0x0000, 2) + b"")
    else:
        reqs = minrpc_requests()
        for r in reqs:
            seeds.append(bytes([0]) + struct.pack("<H", len(r)) + r)
        seeds.append(b"".join(bytes([i % 8]) + struct.pack("<H", len(r)) + r for i, r in enumerate(reqs)))
    directory.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(seeds):
        (directory / f"seed{i:03d}").write_bytes(s)


# ---------------------------------------------------------------------------------------------------
# Running


def start(name: str, binary: Path) -> campaign.Run:
    run = campaign.Run(name)
    seed_corpus(name, run.seeds)
    run.start([str(binary)], SECONDS, ENV)
    return run


def start_all() -> dict[str, campaign.Run]:
    """Build every target, then start all of them (the campaign starts the Python targets beside them)."""
    binaries = {name: build_target(name) for name in TARGETS}
    return {name: start(name, binary) for name, binary in binaries.items()}


campaign.register("c", start_all)
pytestmark = pytest.mark.xdist_group(campaign.GROUP)


@pytest.fixture
def fuzz_runs(fuzz_campaign: dict[str, dict[str, campaign.Run]]) -> dict[str, campaign.Run]:
    return fuzz_campaign["c"]


@pytest.mark.fuzz
@pytest.mark.timeout(SECONDS + 900)
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz_target(fuzz_runs: dict[str, campaign.Run], name: str) -> None:
    run = fuzz_runs[name]
    started = time.monotonic()
    rc, artifacts, log = run.wait(timeout=SECONDS + 300)
    tail = "\n".join(log.splitlines()[-40:])
    if rc != 0 or artifacts:
        pytest.fail(
            f"{name} failed (exit {rc}); reproducer(s) kept: {', '.join(map(str, artifacts)) or '(none)'}\n"
            f"run directory: {run.dir}\nreproduce: {' '.join(run.command)} <reproducer>\n"
            f"--- last lines of the log\n{tail}"
        )
    assert "Done" in log or "stat::number_of_executed_units" in log, tail
    runs = [ln for ln in log.splitlines() if "stat::number_of_executed_units" in ln]
    sys.stderr.write(f"{name}: {runs[-1] if runs else '?'} ({time.monotonic() - started:.0f}s wait)\n")
    shutil.rmtree(run.dir, ignore_errors=True)
