"""The device farm's parts that need no Ray cluster (fast): the missing-Ray line, farm files, the batches
a plan proposes whatever is in flight, `error_kind` and what a resumed run measures again, and the QEMU
runtime library built once per board."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from utvm.cli import main
from utvm.errors import UsageError
from utvm.platform.qemu import project
from utvm.tune import log as tlog
from utvm.tune.driver import tune
from utvm.tune.farm import load_farm
from utvm.tune.measure import Measurement
from utvm.tune.plan import TaskPlan
from utvm.tune.strategy import point_key
from utvm.tune.tasks import Task, extract_tasks


def test_more_workers_without_ray_is_one_line(small_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as it does when it is not installed
    log = tmp_path / "log.jsonl"
    assert main(["tune", str(small_model), "--workers", "2", "-o", str(log), "-q"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "utvm tune: error: --workers 2 needs Ray: pip install 'utvm[distributed]'"]
    assert not log.exists()
    farm = tmp_path / "farm.toml"
    farm.write_text('[[devices]]\nplatform = "host"\n')
    assert main(["tune", str(small_model), "--farm", str(farm), "-o", str(log), "-q"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"utvm tune: error: --farm {farm} needs Ray: pip install 'utvm[distributed]'"]
    # One worker (the default) never imports Ray.
    task = extract_tasks(small_model, "host")[2]
    assert tune(small_model, log, "host", trials=1, only=[task.key]).measured == 1


def test_a_farm_file(tmp_path: Path) -> None:
    farm = tmp_path / "farm.toml"
    farm.write_text('[[devices]]\nplatform = "qemu-cortex-m4"\ncount = 3\n\n'
                    '[[devices]]\nname = "nucleo"\nplatform = "serial-board"\nboard_config = "boards/n.toml"\n'
                    'resources = { "board:nucleo-f746zg" = 1 }\nnum_cpus = 0.5\n\n'
                    '[[devices]]\nplatform = "qemu-cortex-m4"\n')
    config = load_farm(farm)
    a, b, c = config.groups
    assert (a.name, a.platform, a.count, a.board_config, dict(a.resources), a.num_cpus) == (
        "qemu-cortex-m4", "qemu-cortex-m4", 3, None, {}, 0.0)
    assert (b.name, b.count, b.board_config, b.needs()) == (
        "nucleo", 1, str(tmp_path / "boards" / "n.toml"), {"board:nucleo-f746zg": 1.0, "CPU": 0.5})
    assert c.name == "qemu-cortex-m4-3" and c.count == 1
    assert config.devices == 5 and config.source == f"--farm {farm}"


@pytest.mark.parametrize(("text", "error"), [
    ("", "no [[devices]] table"),
    ("devices = 3", "no [[devices]] table"),
    ("[[devices]]\nplatform = 'qemu-cortex-m4'\n[other]\n", "unknown key 'other'"),
    ("[[devices]]\nplatform = 'qemu-cortex-m4'\ncuont = 2\n", "[[devices]] 1: unknown key 'cuont'"),
    ("[[devices]]\nplatform = 'qemu-cortex-m9'\n", "[[devices]] 1: 'platform' 'qemu-cortex-m9' is not a platform"),
    ("[[devices]]\nplatform = 'host'\ncount = 0\n", "'count' must be an integer from 1 to 1024, got 0"),
    ("[[devices]]\nplatform = 'host'\ncount = true\n", "'count' must be an integer from 1 to 1024, got True"),
    ("[[devices]]\nplatform = 'host'\nresources = { CPU = 1 }\n", "'resources' must be a table"),
    ("[[devices]]\nplatform = 'host'\nresources = { x = -1 }\n", "'resources' must be a table"),
    ("[[devices]]\nplatform = 'host'\nnum_cpus = -1\n", "'num_cpus' must be a number >= 0"),
    ("[[devices]]\nplatform = 'host'\nboard_config = 'b.toml'\n", "'board_config' is a path, and only for"),
    ("[[devices]]\nplatform = 'serial-board'\n", "platform serial-board needs 'board_config'"),
    ("[[devices]]\nname = 'a'\nplatform = 'host'\n[[devices]]\nname = 'a'\nplatform = 'host'\n",
     "[[devices]] 2: 'name' 'a' must be a string of 1 to 64 characters, unique"),
    ("[[devices]\n", "not a TOML file"),
])
def test_a_bad_farm_file_is_refused_naming_the_key(tmp_path: Path, text: str, error: str) -> None:
    farm = tmp_path / "farm.toml"
    farm.write_text(text)
    with pytest.raises(UsageError) as exc:
        load_farm(farm)
    assert str(exc.value).startswith(f"farm {farm}") and error in str(exc.value) and "\n" not in str(exc.value)


def test_workers_and_a_farm_together_are_refused(small_model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    farm = tmp_path / "farm.toml"
    farm.write_text('[[devices]]\nplatform = "host"\n')
    assert main(["tune", str(small_model), "--farm", str(farm), "--workers", "2", "-o", str(tmp_path / "l")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"utvm tune: error: --workers 2 and --farm {farm}: give one (a farm file says how many devices)"]


def _record(task: Task, point: dict, cost: float | None, error: str | None = None,
            kind: str | None = None) -> tlog.Record:
    return tlog.Record(task.key, "host", dict(point), cost, "seconds", error, "0.1.0",
                       default=point_key(point) == point_key(task.space.default), error_kind=kind)


@pytest.mark.parametrize("strategy", ["grid", "random"])
def test_the_batches_of_a_plan_do_not_depend_on_what_is_in_flight(small_model: Path, strategy: str) -> None:
    """Serial tuning records each batch before it asks for the next; the farm asks for the next batches
    while earlier ones are in flight, and records them in any order: the batches are the same."""
    task = extract_tasks(small_model, "host")[0]

    def batches(in_flight: int) -> list[list[str]]:
        plan = TaskPlan(task, 11, {}, strategy, seed=5)
        out: list[list[dict]] = []
        flying: list[list[dict]] = []
        while True:
            while len(flying) < in_flight and (points := plan.next_batch(3)):
                out.append(points)
                flying.append(points)
            if not flying:
                return [[point_key(p) for p in b] for b in out]
            for p in reversed(flying.pop(-1)):  # the latest first
                plan.record(_record(task, p, 1.0))

    serial = batches(1)
    assert [len(b) for b in serial] == [3, 3, 3, 2] and serial[0][0] == point_key(task.space.default)
    assert batches(3) == serial and batches(4) == serial


class _Fake:
    """A measurer without a device: every point costs 1 s; records what it was asked to measure."""

    target, platform_name, unit = "host", "host", "seconds"

    def __init__(self) -> None:
        self.stats: dict[str, int] = {}
        self.asked: list[str] = []

    def measure(self, task: Task, points: Sequence[dict]) -> Iterator[Measurement]:
        for p in points:
            self.asked.append(point_key(p))
            yield Measurement(dict(p), 1.0, "seconds", None)


def test_a_resumed_run_measures_device_failures_again(small_model: Path, tmp_path: Path) -> None:
    """A record whose error was the device's (error_kind device, or an old record saying the device hung or
    crashed) is measured again, first; a wrong result or a failed build is not."""
    task = extract_tasks(small_model, "host")[0]
    d = task.space.default
    p1, p2, p3, p4 = [p for p in task.space.points() if p != d][:4]
    log = tmp_path / "log.jsonl"
    old = [_record(task, d, 2.0),
           _record(task, p1, None, "the device hung: no reply within 20 s (...); the firmware was restarted", "device"),
           _record(task, p2, None, "the device crashed or reset (LinkClosedError: ...); the firmware was restarted"),
           _record(task, p3, None, "wrong output: y differs from the reference in 3 of 8 elements", "result"),
           _record(task, p4, None, "building the candidate failed: error: x")]
    tlog.append(log, old)
    recs = tlog.read(log)
    assert [tlog.error_kind(r) for r in recs] == [None, "device", "device", "result", "build"]
    assert [tlog.retried(r) for r in recs] == [False, True, True, False, False]
    assert tlog.measured(recs) == {(task.key, point_key(p)) for p in (d, p3, p4)}
    fake = _Fake()
    r = tune(small_model, log, "host", trials=6, batch=6, strategy="grid", only=[task.key],
             measurer=fake)  # type: ignore[arg-type]
    assert fake.asked[:2] == [point_key(p1), point_key(p2)] and len(fake.asked) == 3 and r.resumed == 3
    summary = tlog.summarize(tlog.read(log))[0]
    assert summary.trials == 6 and summary.errors == 2  # p1 and p2 now measured without error


@pytest.mark.parametrize(("change", "error"), [
    ({"error_kind": "power"}, "'error_kind' 'power' is not one of build, result, device"),
    ({"error_kind": "device"}, "'error_kind' 'device' without an 'error'"),
    ({"error_kind": 3}, "'error_kind' 3 is not one of"),
])
def test_an_error_kind_is_checked(small_model: Path, change: dict, error: str) -> None:
    task = extract_tasks(small_model, "host")[0]
    line = tlog.encode(_record(task, task.space.default, 1.0)).decode()
    with pytest.raises(tlog.TuningLogError, match=re.escape(error)):
        tlog.parse_line(json.dumps({**json.loads(line), **change}))
    rec = _record(task, task.space.default, None, "the device hung", "device")
    assert tlog.parse_line(tlog.encode(rec)) == rec  # written, read back
    old = {k: v for k, v in json.loads(tlog.encode(dataclasses.replace(rec, error_kind=None))).items()
           if k != "error_kind"}
    assert tlog.error_kind(tlog.parse_line(json.dumps(old))) == "device"  # a record from before the key


def test_the_qemu_runtime_library_is_built_once_per_board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two firmwares of one board: the second takes the runtime (archives, objects, stack-usage files) from
    the cache, and is byte for byte the firmware its own runtime build gives."""
    from utvm.platform import get_platform

    monkeypatch.setenv("UTVM_CACHE_DIR", str(tmp_path / "cache"))
    plat = get_platform("qemu-cortex-m4")
    sources = []
    for i in range(2):
        src = tmp_path / f"f{i}.c"
        src.write_text(f"int utvm_f{i}(void);\nint utvm_f{i}(void) {{ return {i}; }}\n")
        sources.append(src)
    first, second = (plat.build(with_test_functions=False, extra_sources=[s]) for s in sources)
    # The first built its runtime (its make wrote the dependency files); the second has none: a copy of the
    # cache's, every file of it.
    assert list((first.parent / "crt").rglob("*.d"))
    crt = second.parent / "crt"
    assert list(crt.rglob("*.su")) and list(crt.rglob("*.ci")) and not list(crt.rglob("*.d"))  # (`utvm size`)
    files = {str(f.relative_to(crt)): f.read_bytes() for f in crt.rglob("*") if f.is_file()}
    entries = [{str(f.relative_to(e / "crt")): f.read_bytes() for f in (e / "crt").rglob("*") if f.is_file()}
               for e in (tmp_path / "cache").glob("qemu-crt-*")]
    assert files in entries
    digest = hashlib.sha256((second.parent / "firmware.bin").read_bytes()).hexdigest()
    monkeypatch.setattr(project, "RUNTIME_CACHE", False)
    monkeypatch.setenv("UTVM_CACHE_DIR", str(tmp_path / "uncached"))
    alone = plat.build(with_test_functions=False, extra_sources=[sources[1]])
    assert hashlib.sha256((alone.parent / "firmware.bin").read_bytes()).hexdigest() == digest
    assert list((alone.parent / "crt").rglob("*.d")) and not list((tmp_path / "uncached").glob("qemu-crt-*"))
