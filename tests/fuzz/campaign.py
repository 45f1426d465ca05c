"""One fuzzing campaign per test session: every target, C (test_fuzz.py) and Python (test_fuzz_python.py),
starts at once and runs its UTVM_FUZZ_SECONDS concurrently with the others.

libFuzzer's budget is wall-clock time, so targets run one module after the other would hold the machine for
the sum of their windows; run together they hold it for one window. Each test module registers a starter
(`register(kind, start)`) when it is imported; the session fixture `fuzz_campaign` (conftest.py) calls every
registered starter and hands each module its own runs. Both modules carry `xdist_group("fuzz")`, so under
pytest-xdist (`--dist loadgroup`) they share one worker, and with it one campaign.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

#: What libFuzzer names the inputs it keeps when a target fails (<kind>-<hash> in the run directory).
ARTIFACTS = ("crash", "leak", "timeout", "oom")


class Run:
    """One target of the campaign: its run directory (seeds/, corpus/, fuzz.log and any artifact) and its
    libFuzzer process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix=f"utvm-{name}-"))
        self.seeds = self.dir / "seeds"
        (self.dir / "corpus").mkdir()
        self.log = self.dir / "fuzz.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.command: list[str] = []

    def start(self, command: list[str], seconds: int, env: Mapping[str, str], **popen: Any) -> None:
        """Run `command` with libFuzzer's budget, limits and directories; its output goes to fuzz.log.
        `command <reproducer>` reruns one input."""
        self.command = command
        argv = [*command, f"-max_total_time={seconds}", "-timeout=20", "-rss_limit_mb=2048", "-print_final_stats=1",
                f"-artifact_prefix={self.dir}/", str(self.dir / "corpus"), str(self.seeds)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                         **popen)

    def artifacts(self) -> list[Path]:
        return [p for p in self.dir.iterdir() if p.name.split("-")[0] in ARTIFACTS]

    def wait(self, timeout: float) -> tuple[int, list[Path], str]:
        """(exit status, artifacts, the log) once the target has finished."""
        assert self.proc is not None, f"{self.name} was never started"
        rc = self.proc.wait(timeout=timeout)
        return rc, self.artifacts(), self.log.read_text(errors="replace")

    def abandon(self) -> None:
        """Kill the target if its test never waited for it; keep its directory only if it found something."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            if not self.artifacts():
                shutil.rmtree(self.dir, ignore_errors=True)


_STARTERS: dict[str, Callable[[], dict[str, Any]]] = {}

#: The xdist group of every fuzz test: one worker, one campaign.
GROUP = "fuzz"


def register(kind: str, start: Callable[[], dict[str, Any]]) -> None:
    """`start()` builds and starts every target of `kind`, returning {target name: run}."""
    _STARTERS[kind] = start


def campaign() -> Iterator[dict[str, dict[str, Any]]]:
    """Start every registered kind (the builds first, so the windows overlap), yield {kind: {name: run}},
    then abandon whatever a test did not wait for (an earlier failure, -x, a deselected target)."""
    runs: dict[str, dict[str, Any]] = {}
    try:
        for kind, start in _STARTERS.items():
            runs[kind] = start()
        yield runs
    finally:
        for by_name in runs.values():
            for run in by_name.values():
                run.abandon()
