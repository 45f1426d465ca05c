"""atheris (libFuzzer) targets for what reads untrusted model files, run by tests/fuzz/fuzz_import.py:

- tflite / tflite-gen: utvm.frontend.from_tflite on raw bytes / on models built from the bytes;
- onnx / onnx-proto:   utvm.frontend.from_onnx on raw bytes / with a ModelProto-field mutator;
- mlf:                 utvm.mlf.load on the bytes written to a tar file.

The invariant: every input imports or raises a utvm.errors.UtvmError, within the per-input timeout and the
memory allowance (see fuzz_import.py). Seed corpora come from the shared models (../shared/models; a
missing corpus fails the test) and, for mlf, archives exported from a compiled model plus malicious tars.

The targets run concurrently for UTVM_FUZZ_SECONDS each (default 60). A crash (any other exception),
timeout or out-of-memory fails the test and keeps the whole run directory (reproducer included) under the
system temp dir, named in the message; reproduce with `python tests/fuzz/fuzz_import.py <target> <reproducer>`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "fuzz_import.py"
MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "models"
SECONDS = int(os.environ.get("UTVM_FUZZ_SECONDS", "60"))
TARGETS = ("tflite", "tflite-gen", "onnx", "onnx-proto", "mlf")
ARTIFACTS = ("crash", "leak", "timeout", "oom")
ENV = {"UTVM_HOST_MEMORY_BUDGET": str(64 << 20), "PYTHONUNBUFFERED": "1"}


def _harness():  # noqa: ANN202 - the module, imported by path (tests/fuzz is no package)
    import importlib.util

    spec = importlib.util.spec_from_file_location("utvm_fuzz_import", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert tuple(module.TARGETS) == TARGETS
    return module


def _stat(log: str, key: str) -> str:
    lines = [ln for ln in log.splitlines() if ln.startswith(f"stat::{key}:")]
    return lines[-1].split(":", 3)[-1].strip() if lines else "?"


class FuzzRun:
    def __init__(self, name: str, harness) -> None:  # noqa: ANN001
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix=f"utvm-{name}-"))
        harness.write_seeds(name, self.dir / "seeds")
        (self.dir / "corpus").mkdir()
        self.log = self.dir / "fuzz.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(HARNESS), name, f"-max_total_time={SECONDS}", "-timeout=20",
                 "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={self.dir}/",
                 str(self.dir / "corpus"), str(self.dir / "seeds")],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **ENV}, cwd=self.dir,
            )

    def artifacts(self) -> list[Path]:
        return [p for p in self.dir.iterdir() if p.name.split("-")[0] in ARTIFACTS]

    def wait(self) -> tuple[int, list[Path], str]:
        rc = self.proc.wait(timeout=SECONDS + 300)
        return rc, self.artifacts(), self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def fuzz_runs():
    """Write every seed corpus, then start all targets at once (they run concurrently)."""
    if not MODELS.is_dir():
        pytest.fail(f"the shared model corpus {MODELS} is missing: the importer fuzzers' seed corpora are built "
                    "from it (it lives beside the repository, <repo>/../shared/models)")
    harness = _harness()
    runs: dict[str, FuzzRun] = {}
    try:
        for name in TARGETS:
            runs[name] = FuzzRun(name, harness)
        yield runs
    finally:
        for run in runs.values():
            if run.proc.poll() is None:  # its test did not get to wait for it (an earlier failure, -x)
                run.proc.kill()
                run.proc.wait()
                if not run.artifacts():
                    shutil.rmtree(run.dir, ignore_errors=True)


@pytest.mark.fuzz
@pytest.mark.timeout(SECONDS + 900)
@pytest.mark.parametrize("name", TARGETS)
def test_fuzz_importer(fuzz_runs: dict[str, FuzzRun], name: str) -> None:
    run = fuzz_runs[name]
    started = time.monotonic()
    rc, artifacts, log = run.wait()
    tail = "\n".join(log.splitlines()[-60:])
    if rc != 0 or artifacts:
        pytest.fail(
            f"{name} failed (exit {rc}); reproducer(s) kept: {', '.join(map(str, artifacts)) or '(none)'}\n"
            f"run directory: {run.dir}\nreproduce: {sys.executable} {HARNESS} {name} <reproducer>\n"
            f"--- last lines of the log\n{tail}"
        )
    assert "stat::number_of_executed_units" in log, tail
    sys.stderr.write(f"{name}: {_stat(log, 'number_of_executed_units')} execs, "
                     f"{_stat(log, 'average_exec_per_sec')} exec/s, peak RSS {_stat(log, 'peak_rss_mb')} MB "
                     f"({time.monotonic() - started:.0f}s wait)\n")
    shutil.rmtree(run.dir, ignore_errors=True)
