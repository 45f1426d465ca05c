"""A call on the device that never returns, and Ctrl-C, through the real command line.

tests/cli/hang_driver.py runs `utvm run` with the model call replaced by a 10-minute `testing.sleep_ms`
(an operator that hangs). These tests check what the user sees and what is left running — the error that
names the call, exit statuses 7 and 130, the device process killed by its PID, no handshake attempted on
the way out — never how fast (CI is a busy machine); the `wait` bounds only stop a broken build from
hanging the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from utvm.cli import EXIT_DEVICE, EXIT_INTERRUPTED
from utvm.support.models import models_dir

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "hang_driver.py"
HELLO = models_dir() / "tflm" / "hello_world_int8.tflite"
HANG_GUARD_S = 300  # not a speed requirement: only so a regression cannot hang CI for ever


def _start(platform: str, *extra: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(DRIVER), "run", str(HELLO), "--platform", platform, "-q", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    pid = -1
    for line in proc.stdout:
        if line.startswith("DEVICE_PID "):
            pid = int(line.split()[1])
        if line.strip() == "READY":
            return proc, pid
    proc.wait(HANG_GUARD_S)
    pytest.fail(f"the driver ended before the call: {proc.returncode}\n{proc.stderr.read()}")  # type: ignore[union-attr]


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie has stopped running


PLATFORMS = ["host", pytest.param("qemu-cortex-m4", marks=pytest.mark.slow)]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_ctrl_c_during_a_call_exits_130_and_kills_the_device(platform: str) -> None:
    proc, device_pid = _start(platform)
    assert device_pid > 0 and not _dead(device_pid)
    proc.send_signal(signal.SIGINT)  # only the command: it must stop its device itself, by PID
    _out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert err.strip().splitlines()[-1] == "utvm run: interrupted", err
    assert "START_REPLY" not in err and "Traceback" not in err, err
    assert _dead(device_pid)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_call_that_never_returns_is_reported_as_such(platform: str) -> None:
    proc, device_pid = _start(platform, "--timeout", "2")
    _out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == EXIT_DEVICE, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("utvm run: error: ") and "testing.sleep_ms" in last, err
    assert "did not return within 2 s" in last, err
    assert "START_REPLY" not in err and "Traceback" not in err, err
    assert _dead(device_pid)


def test_the_driver_really_hangs_without_a_timeout() -> None:
    """The stand-in is honest: with the default timeout the call is still running when we look (so the two
    tests above exercise a hung call, not a crash)."""
    proc, device_pid = _start("host")
    try:
        assert proc.poll() is None and not _dead(device_pid)
    finally:
        proc.kill()
        proc.wait(HANG_GUARD_S)
        if not _dead(device_pid):
            os.kill(device_pid, signal.SIGKILL)
