"""The board acceptance kit (`utvm acceptance`, utvm.acceptance): every check passes on the host, on every QEMU
board and on the serial board (QEMU behind a pty, as tests/platform/test_serial_board.py runs it), and a
deliberately broken port fails the check named after what is broken, not a later one: an allocator handing out
overlapping blocks fails `allocator`, a link driver losing every N-th byte fails `link` naming the request.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.platform.serial_board.board_toml import write_board_toml

import utvm.acceptance as kit
from utvm.acceptance import CHECKS, Fault, Options, run_acceptance
from utvm.acceptance.firmware import build as build_firmware
from utvm.cli import EXIT_DEVICE, EXIT_USAGE, main
from utvm.errors import UsageError
from utvm.platform.qemu.boards import BOARDS
from utvm.platform.serial_board.config import ENV_VAR, use_board_config

ORDER = ["link", "registries", "allocator", "ndarray", "recovery", "timer", "model", "logging"]


@pytest.fixture(autouse=True)
def no_board_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ENV_VAR, raising=False)
    use_board_config(None)
    yield
    use_board_config(None)


def statuses(report: kit.Report) -> list[tuple[str, str]]:
    return [(r.name, r.status) for r in report.results]


# --- the host (fast) ------------------------------------------------------------------------------------------

def test_the_host_port_passes_every_check_in_order_through_the_cli(capsys: pytest.CaptureFixture) -> None:
    assert [c.name for c in CHECKS] == ORDER
    assert main(["acceptance", "--platform", "host", "--json"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and (out["passed"], out["failed"], out["skipped"]) == (8, 0, 0)
    assert [(c["name"], c["status"]) for c in out["checks"]] == [(n, "PASS") for n in ORDER], out
    detail = {c["name"]: c["detail"] for c in out["checks"]}
    assert "TVM_CRT_MAX_PACKET_SIZE_BYTES=2048" in detail["link"]
    assert "a request of exactly 2048 bytes served, one of 2049 dropped" in detail["ndarray"]
    assert "0x0206" in detail["ndarray"]  # the device said why it dropped the oversized request
    assert "made 13 calls" in detail["timer"]
    assert "bit-exact" in detail["model"] and "hello_world_int8.tflite" in detail["model"]
    assert "device reset not tried" in detail["recovery"]


def test_an_overlapping_allocator_fails_the_allocator_check_first() -> None:
    report = run_acceptance("host", faults=[Fault("overlapping-allocator")])
    assert statuses(report)[:3] == [("link", "PASS"), ("registries", "PASS"), ("allocator", "FAIL")]
    assert report.first_failure is not None and report.first_failure.name == "allocator"
    line = report.lines()[2]
    assert re.match(r"FAIL allocator: TVMPlatformMemoryAllocate/Free: first round: blocks 0 \[0x[0-9a-f]+, \+200\) "
                    r"and 1 \[0x[0-9a-f]+, \+224\) overlap by \d+ bytes$", line), line
    assert not report.ok and report.summary().endswith("the port fails allocator")


def test_a_link_that_loses_every_nth_byte_fails_the_link_check_naming_the_request(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    real = kit.run_acceptance

    def lossy(platform: Any, **kwargs: Any) -> kit.Report:
        assert kwargs["options"].link_timeout_s == 2.0  # --link-timeout reaches the kit
        return real(platform, faults=[Fault("lossy-link", every=500)], **kwargs)

    monkeypatch.setattr(kit, "run_acceptance", lossy)
    assert main(["acceptance", "--platform", "host", "--link-timeout", "2"]) == EXIT_DEVICE
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9, lines
    assert re.match(r"FAIL link: request \d+ \((acceptance\.\w+ of \d+ bytes|GetGlobalFunc acceptance\.\w+|"
                    r"acceptance\.info\(\)), bytes \d+\.\.\d+ of the host->device stream counted after the "
                    r"handshake\) got no reply within 2 s; the device reported ", lines[0]), lines[0]
    assert "a new session then worked" in lines[0]
    assert all(line.startswith(f"SKIP {name}: not run: the link check failed") for line, name in
               zip(lines[1:8], ORDER[1:], strict=True)), lines
    assert lines[8] == "acceptance on host: 0 passed, 1 failed, 7 skipped: the port fails link"


def test_faults_exist_only_where_the_kit_can_put_them() -> None:
    with pytest.raises(UsageError, match="unknown fault 'nope'; the kit knows overlapping-allocator, lossy-link"):
        Fault("nope")
    with pytest.raises(UsageError, match="every must be an int >= 2"):
        Fault("lossy-link", every=1)

    class Plugin:
        name = "my-board"

    with pytest.raises(UsageError, match="my-board: the kit's test faults exist for the host and the Cortex-M"):
        build_firmware(Plugin(), faults=[Fault("overlapping-allocator")])


def test_the_cli_refuses_a_board_config_for_another_platform(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    board = write_board_toml(tmp_path)
    assert main(["acceptance", "--platform", "qemu-cortex-m4", "--board-config", str(board)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "only --platform serial-board uses a board description" in err, err
    (tmp_path / "bad.toml").write_text("[board]\n")
    assert main(["acceptance", "--platform", "serial-board", "--board-config", str(tmp_path / "bad.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.toml: [board] name: missing" in err, err


# --- every board (slow) ---------------------------------------------------------------------------------------


def kill_stand_in(port: Path) -> None:
    """Stop the QEMU qemu_flash.py started for `port` (by the pid it recorded, if that is still a QEMU)."""
    try:
        pid = int(port.with_name(port.name + ".pid").read_text())
        if b"qemu-system-arm" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("board", [*BOARDS, "serial-board"])
def test_every_board_passes_the_kit(board: str, tmp_path: Path) -> None:
    options = Options(link_timeout_s=10.0)
    if board == "serial-board":
        try:
            report = run_acceptance(board, board_config=write_board_toml(tmp_path), options=options)
        finally:
            kill_stand_in(tmp_path / "ttyBOARD")
    else:
        report = run_acceptance(board, options=options)
    assert report.ok, "\n".join(report.lines())
    assert [r.name for r in report.results] == ORDER
    recovery = report.results[ORDER.index("recovery")].detail
    assert "TVMPlatformAbort reset the board and a new session started" in recovery, recovery
    if board != "qemu-cortex-m4":
        return
    # The broken ports on the Cortex-M firmware (the faults go into its project, not the host's link line).
    broken = run_acceptance(board, faults=[Fault("overlapping-allocator")], options=options)
    assert broken.first_failure is not None and broken.first_failure.name == "allocator", broken.lines()
    assert statuses(broken)[:2] == [("link", "PASS"), ("registries", "PASS")]
    assert "overlap by" in broken.first_failure.detail
    lossy = run_acceptance(board, faults=[Fault("lossy-link", every=500)], options=Options(link_timeout_s=2.0))
    assert statuses(lossy) == [("link", "FAIL")] + [(name, "SKIP") for name in ORDER[1:]], lossy.lines()
    assert re.search(r"request \d+ \(.+, bytes \d+\.\.\d+ of the host->device stream .+\) got no reply within 2 s",
                     lossy.results[0].detail), lossy.results[0].detail
