"""The board acceptance kit: black-box checks that a platform's port (its TVMPlatform* hooks, its link driver, the
CRT built for it) does what utvm's runtime needs, run over the platform's own link (docs/acceptance.md).

    from utvm.acceptance import run_acceptance
    report = run_acceptance("qemu-cortex-m4")           # or a Platform instance (a board, a plugin)
    for line in report.lines(): print(line)             # "PASS link: ...", ..., the summary
    report.ok, report.to_json()

It builds a conformance firmware (firmware.py: the platform's normal RPC firmware + a tiny model + the
conformance module of c/utvm_acceptance.c), starts it, and runs CHECKS (checks.py) in order; each gives one
result, PASS with what was shown or FAIL naming what is at fault. A failed link check skips the rest (they need
the link); after any other failure the next check first gets a working session back (restarting the firmware
if it has to). `faults` (faults.py) builds a deliberately broken port, for the kit's own tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utvm.acceptance.checks import CHECKS, Check
from utvm.acceptance.context import CheckFailed, Context, Options
from utvm.acceptance.faults import Fault
from utvm.errors import BuildError, PlatformError, UtvmError

__all__ = ["CHECKS", "Check", "CheckResult", "Fault", "Options", "Report", "run_acceptance"]

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str
    seconds: float

    def line(self) -> str:
        return f"{self.status} {self.name}: {self.detail}"


@dataclass
class Report:
    platform: str
    firmware: str
    results: list[CheckResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.status == PASS for r in self.results)

    @property
    def first_failure(self) -> CheckResult | None:
        return next((r for r in self.results if r.status == FAIL), None)

    def summary(self) -> str:
        verdict = "the port passes" if self.ok else f"the port fails {self.first_failure.name}" \
            if self.first_failure else "not every check ran"
        return (f"acceptance on {self.platform}: {self.count(PASS)} passed, {self.count(FAIL)} failed, "
                f"{self.count(SKIP)} skipped: {verdict}")

    def lines(self) -> list[str]:
        return [r.line() for r in self.results] + [self.summary()]

    def to_json(self) -> dict[str, Any]:
        return {"platform": self.platform, "firmware": self.firmware, "ok": self.ok,
                "passed": self.count(PASS), "failed": self.count(FAIL), "skipped": self.count(SKIP),
                "checks": [{"name": r.name, "status": r.status, "detail": r.detail, "seconds": round(r.seconds, 3)}
                           for r in self.results]}


def run_acceptance(
    platform: str | Any,
    *,
    board_config: str | Path | None = None,
    model: str | Path | None = None,
    options: Options | None = None,
    faults: Sequence[Fault] = (),
    on_result: Callable[[CheckResult], None] | None = None,
) -> Report:
    """Build the conformance firmware for `platform` (a name, or a platform instance) and run every check.

    `board_config`: the board.toml of `serial-board` (default: the one in use, $UTVM_BOARD_CONFIG). `model`:
    the model file to run bit-exact (default: TFLM's hello_world from the model corpus). `on_result` is called
    with each result as it comes (the CLI prints it at once). Building raises (BuildError, PlatformError: the
    firmware could not be made); everything the device does, including not answering, is a check's result."""
    from utvm.acceptance import firmware as fw_mod
    from utvm.platform import get_platform

    if isinstance(platform, str):
        if board_config is not None and platform == "serial-board":
            from utvm.platform.serial_board.platform import SerialBoardPlatform

            plat = SerialBoardPlatform(board_config)
        else:
            plat = get_platform(platform)
    else:
        plat = platform
    opts = options or Options()
    fw = fw_mod.build(plat, Path(model) if model is not None else None, faults)
    report = Report(getattr(plat, "name", type(plat).__name__), str(fw.path))
    ctx = Context(plat, fw, opts)
    ctx.logs.attach()
    try:
        blocked = ""
        for check in CHECKS:
            t0 = time.monotonic()
            if not blocked and check.name != "link" and ctx.session is not None:
                why = ctx.revive()
                if why:
                    blocked = why
            if blocked:
                result = CheckResult(check.name, SKIP, f"not run: {blocked}", 0.0)
            else:
                result = _run_one(check, ctx, t0)
                if result.status == FAIL and check.name == "link":
                    blocked = "the link check failed, and every other check needs the link"
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        ctx.close()
        ctx.logs.detach()
    return report


def _run_one(check: Check, ctx: Context, t0: float) -> CheckResult:
    try:
        detail = check.run(ctx)
        status = PASS
    except CheckFailed as exc:
        detail, status = str(exc), FAIL
    except (BuildError, PlatformError):  # the firmware could not be built or started: not the device's doing
        raise
    except UtvmError as exc:  # a call the check made failed: the device (or the link) is at fault
        detail, status = f"{type(exc).__name__}: {exc}", FAIL
    return CheckResult(check.name, status, detail, time.monotonic() - t0)
