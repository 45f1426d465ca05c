"""atheris (libFuzzer) targets for what reads untrusted model files, run by tests/fuzz/fuzz_import.py:

- tflite / tflite-gen: utvm.frontend.from_tflite on raw bytes / on models built from the bytes;
- onnx / onnx-proto:   utvm.frontend.from_onnx on raw bytes / with a ModelProto-field mutator;
- mlf:                 utvm.mlf.load on the bytes written to a tar file.

The invariant: every input imports or raises a utvm.errors.UtvmError, within the per-input timeout and the
memory allowance (see fuzz_import.py). Seed corpora come from the model corpus (models/, or
$UTVM_MODELS_DIR; a missing corpus fails the test) and, for mlf, archives exported from a compiled model
plus malicious tars.

The targets run concurrently for UTVM_FUZZ_SECONDS each (default 60), in one campaign with the C targets of
test_fuzz.py (campaign.py). A crash (any other exception), timeout or out-of-memory fails the test and keeps
the whole run directory (reproducer included) under the system temp dir, named in the message; reproduce
with `python tests/fuzz/fuzz_import.py <target> <reproducer>`.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import campaign
import pytest

from utvm.support.models import models_dir

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "fuzz_import.py"
MODELS = models_dir()
SECONDS = int(os.environ.get("UTVM_FUZZ_SECONDS", "60"))
TARGETS = ("tflite", "tflite-gen", "onnx", "onnx-proto", "mlf")
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


def start(name: str, harness) -> campaign.Run:  # noqa: ANN001 - the harness module
    run = campaign.Run(name)
    harness.write_seeds(name, run.seeds)
    run.start([sys.executable, str(HARNESS), name], SECONDS, ENV, cwd=run.dir)
    return run


def start_all() -> dict[str, campaign.Run]:
    """Write every seed corpus and start every target (beside the C targets of the same campaign)."""
    if not MODELS.is_dir():
        pytest.fail(f"the model corpus {MODELS} is missing: the importer fuzzers' seed corpora are built "
                    "from it (the repository's models/ folder, or $UTVM_MODELS_DIR)")
    harness = _harness()
    runs: dict[str, campaign.Run] = {}
    try:
        for name in TARGETS:
            runs[name] = start(name, harness)
    except BaseException:
        for run in runs.values():
            run.abandon()
        raise
    return runs


campaign.register("python", start_all)
pytestmark = pytest.mark.xdist_group(campaign.GROUP)


@pytest.fixture
def fuzz_runs(fuzz_campaign: dict[str, dict[str, campaign.Run]]) -> dict[str, campaign.Run]:
    return fuzz_campaign["python"]


@pytest.mark.fuzz
@pytest.mark.timeout(SECONDS + 900)
@pytest.mark.parametrize("name", TARGETS)
def test_fuzz_importer(fuzz_runs: dict[str, campaign.Run], name: str) -> None:
    run = fuzz_runs[name]
    started = time.monotonic()
    rc, artifacts, log = run.wait(timeout=SECONDS + 300)
    tail = "\n".join(log.splitlines()[-60:])
    if rc != 0 or artifacts:
        pytest.fail(
            f"{name} failed (exit {rc}); reproducer(s) kept: {', '.join(map(str, artifacts)) or '(none)'}\n"
            f"run directory: {run.dir}\nreproduce: {' '.join(run.command)} <reproducer>\n"
            f"--- last lines of the log\n{tail}"
        )
    assert "stat::number_of_executed_units" in log, tail
    sys.stderr.write(f"{name}: {_stat(log, 'number_of_executed_units')} execs, "
                     f"{_stat(log, 'average_exec_per_sec')} exec/s, peak RSS {_stat(log, 'peak_rss_mb')} MB "
                     f"({time.monotonic() - started:.0f}s wait)\n")
    shutil.rmtree(run.dir, ignore_errors=True)
