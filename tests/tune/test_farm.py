"""The device farm on Ray (slow): a local Ray with 2 device actors on qemu-cortex-m4 tunes the tests' small
model. Its log equals serial tuning's as a set; devices and actors killed mid-measurement lose nothing; a
farm needing a resource no node has fails at once in one line; Ctrl-C keeps every measurement and leaves no
Ray or QEMU process.

One local Ray serves the module (starting Ray costs seconds). Every process it starts, and every QEMU its
actors start, carries MARK in its environment: what the checks that nothing is left behind look for."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from utvm.cli import main
from utvm.tune import log as tlog
from utvm.tune.driver import tune
from utvm.tune.strategy import point_key
from utvm.tune.tasks import extract_tasks

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tune_farm")]
PLATFORM = "qemu-cortex-m4"
MARK = "UTVM_FARM_TEST"
#: The serial and the farm runs of the module: one task, two firmwares of three candidates.
RUN = {"trials": 6, "batch": 3, "strategy": "random", "seed": 3, "cost": "instructions"}


def marked(token: str, cmdline: str = "") -> list[int]:
    """Pids of this machine's processes (but this one) whose environment holds MARK=token (and whose
    command line holds `cmdline`)."""
    needle = f"{MARK}={token}".encode()
    out = []
    for entry in Path("/proc").glob("[0-9]*"):
        if int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
            cmd = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if needle in env.split(b"\0") and cmdline.encode() in cmd and state != "Z":
            out.append(int(entry.name))
    return out


def gone(token: str, cmdline: str = "", within: float = 20.0) -> list[int]:
    """The processes `marked` still has after waiting up to `within` s for them to exit (they are killed,
    their exit is asynchronous)."""
    deadline = time.monotonic() + within
    while (left := marked(token, cmdline)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="module")
def farm_ray() -> Iterator[str]:
    """A local Ray of 2 CPUs for the module; its processes (and the device processes of its actors) carry
    MARK=<token>. After the module: Ray shut down, no process of it left."""
    import ray

    token = uuid.uuid4().hex
    short = tempfile.mkdtemp(prefix="uf")  # Ray's sockets live under it: a short path
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(MARK, token)
        mp.setattr(tempfile, "tempdir", short)  # the farm's run directory (its firmware) goes there too
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                 _temp_dir=short)
        try:
            yield token
        finally:
            ray.shutdown()
    assert gone(token) == [], "a Ray or device process outlived the module"
    shutil.rmtree(short, ignore_errors=True)


def as_set(log: Path) -> set[str]:
    """The records of a log as a set of their JSON, without the time."""
    return {json.dumps({k: v for k, v in r.to_json().items() if k != "time"}, sort_keys=True) for r in tlog.read(log)}


@pytest.fixture(scope="module")
def serial(small_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The task (the 1x1 convolution) and the log serial tuning writes of it (no Ray)."""
    task = extract_tasks(small_model, "cortex-m4")[1]
    log = tmp_path_factory.mktemp("serial") / "serial.jsonl"
    tune(small_model, log, PLATFORM, only=[task.key], **RUN)
    return task.key, log


def test_a_farm_of_two_devices_writes_the_serial_log(farm_ray: str, small_model: Path, serial: tuple[str, Path],
                                                      tmp_path: Path) -> None:
    key, serial_log = serial
    log = tmp_path / "farm.jsonl"
    lines: list[str] = []
    r = tune(small_model, log, PLATFORM, only=[key], workers=2, progress=lines.append, **RUN)
    recs = tlog.read(log)
    assert r.measured == 6 and len(recs) == 6 and all(x.ok for x in recs)
    assert as_set(log) == as_set(serial_log)  # the same points, costs, footprints, in any order of completion
    assert r.stats["firmwares"] == 2 and r.stats["actor_restarts"] == 0
    assert "a farm of 2 device(s) (2 qemu-cortex-m4) on Ray" in lines[1]
    assert gone(farm_ray, "qemu-system") == []


def test_devices_and_actors_killed_mid_measurement_lose_nothing(farm_ray: str, small_model: Path,
                                                                serial: tuple[str, Path], tmp_path: Path) -> None:
    """Candidate A's QEMU is killed (by pid) the first time it is measured, B's actor process the first time,
    C's QEMU every time: A and B are measured again on another device and logged once, as serial tuning
    measured them; C, having taken down two devices, is logged as a device error."""
    key, serial_log = serial
    points = [json.loads(x)["schedule"] for x in sorted(as_set(serial_log))]
    points = [p for p in points if p != extract_tasks(small_model, "cortex-m4")[1].space.default]
    victims = {point_key(p): v for p, v in zip(points[:3], ("device once", "actor once", "device always"), strict=True)}
    marks = tmp_path / "marks"
    marks.mkdir()

    def hook(session, index: int, schedule: dict) -> None:  # noqa: ANN001 - runs in the device actors
        what = victims.get(json.dumps(schedule, sort_keys=True, separators=(",", ":")))
        if what is None:
            return
        if what != "device always":
            try:  # the first time only, whichever device measures it
                os.close(os.open(marks / what.replace(" ", "_"), os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
        if what == "actor once":
            os.kill(os.getpid(), signal.SIGKILL)  # the actor's process; its QEMU is left running
        os.kill(session.transport.proc.pid, signal.SIGKILL)

    log = tmp_path / "farm.jsonl"
    r = tune(small_model, log, PLATFORM, only=[key], workers=2, on_candidate=hook, **RUN)
    recs = tlog.read(log)
    assert len(recs) == 6 and len({x.schedule_key() for x in recs}) == 6  # each point once: nothing lost
    (bad,) = [x for x in recs if not x.ok]
    assert victims[bad.schedule_key()] == "device always" and bad.error_kind == "device"
    assert bad.error.startswith("the device crashed or reset") and tlog.retried(bad)
    assert as_set(log) - as_set(serial_log) == {x for x in as_set(log) if '"error_kind": "device"' in x}
    assert r.stats["restarts"] == 3 and r.stats["actor_restarts"] == 1  # A once, C twice; B's actor
    assert gone(farm_ray, "qemu-system") == []  # the QEMU of the killed actor too


def test_a_resource_no_node_has_is_one_line_at_once(farm_ray: str, small_model: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    farm = tmp_path / "farm.toml"
    farm.write_text('[[devices]]\nname = "nucleo"\nplatform = "qemu-cortex-m4"\ncount = 2\n'
                    'resources = { "board:nucleo-f746zg" = 1 }\n')
    log = tmp_path / "log.jsonl"
    assert main(["tune", str(small_model), "--farm", str(farm), "-o", str(log), "-q"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line == (f"utvm tune: error: --farm {farm}: device group nucleo needs 2 device(s), each with "
                    "board:nucleo-f746zg = 1; no node has board:nucleo-f746zg = 1 (`ray status` lists the resources "
                    "of each node)")
    assert not log.exists() or tlog.read(log) == []


def test_ctrl_c_keeps_every_measurement_and_leaves_no_process(small_model: Path, tmp_path: Path) -> None:
    """`utvm tune --workers 2` (its own local Ray) interrupted by SIGINT once measurements have come back:
    status 130, every record reported is in the log, no Ray or QEMU process of it is left."""
    token = uuid.uuid4().hex
    short = tempfile.mkdtemp(prefix="uc")
    log = tmp_path / "log.jsonl"
    env = {**os.environ, MARK: token, "TMPDIR": short, "RAY_TMPDIR": short}
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, "-m", "utvm", "tune", str(small_model), "--platform", PLATFORM, "--workers", "2",
           "--strategy", "random", "--trials", "12", "--batch", "2", "-o", str(log)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stderr is not None
        seen = 0
        for text in proc.stderr:  # progress lines: `... task i/n ...: k/12 trials ...`
            m = re.search(r": (\d+)/12 trials", text)
            if m and int(m[1]) > 0:
                seen = int(m[1])
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 130, rest
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rest.splitlines()[-1] == "utvm tune: interrupted"
    recs = tlog.read(log)  # every line a record
    assert seen > 0 and len(recs) >= seen and len({(x.task, x.schedule_key()) for x in recs}) == len(recs)
    assert gone(token) == []  # raylet, GCS, workers, actors and their QEMUs
    shutil.rmtree(short, ignore_errors=True)
