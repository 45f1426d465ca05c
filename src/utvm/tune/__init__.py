"""Tuning operator schedules on the device (docs/architecture.md §11): tasks, the tuning log, search strategies and
the measurement of candidates over RPC. `utvm tune` drives it; `utvm compile --tuning-log` applies a log.

    from utvm.tune import extract_tasks, tune, format_summary
    result = tune("kws_ref_model.tflite", "kws.jsonl", platform="qemu-cortex-m4", rounding="double")
    print(format_summary(result.summaries))

Modules: `tasks` (extract_tasks: the distinct workloads with a schedule space), `measure` (Measurer: build a
batch of candidates into one firmware, check each bit-exact, time it, survive hangs and crashes),
`strategy` (grid, random, the learned cost model), `driver` (tune: the loop, resume, progress) and `log`
(the JSON-lines record format: the one place it is defined). docs/tuning.md is the user guide.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "extract_tasks": "utvm.tune.tasks",
    "Task": "utvm.tune.tasks",
    "tune": "utvm.tune.driver",
    "TuneResult": "utvm.tune.driver",
    "format_summary": "utvm.tune.driver",
    "summary_of_log": "utvm.tune.driver",
    "Measurer": "utvm.tune.measure",
    "Measurement": "utvm.tune.measure",
    "make_strategy": "utvm.tune.strategy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # imported on first use: `--tuning-log` needs only utvm.tune.log
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'utvm.tune' has no attribute {name!r}")
