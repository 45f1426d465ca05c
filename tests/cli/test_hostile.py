"""The command line under hostile input, class by class (issue: nothing unsafe, nothing misleading).

- archives: every kind of bad member or metadata path is refused before anything is written;
- outputs: an existing device node, FIFO, socket, directory or symbolic link is never replaced, an empty
  path never means a default name;
- arguments: every bad value is one line on stderr with exit status 2, never a traceback;
- checking: NaN equals NaN, JSON is strict.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import stat
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from utvm import mlf
from utvm.cli import EXIT_MODEL, EXIT_USAGE, build_parser, main
from utvm.compiler import compile
from utvm.compiler.driver import MAX_MODEL_NAME
from utvm.errors import ArchiveError
from utvm.evaluate import compare
from utvm.frontend import load
from utvm.support import jsonout
from utvm.support.archive import ArchiveLimits, read_tar, read_tree, safe_name
from utvm.support.models import models_dir

MODELS = models_dir()
HELLO = MODELS / "tflm" / "hello_world_int8.tflite"
HELLO_FLOAT = MODELS / "tflm" / "hello_world_float.tflite"
HELLO_INPUT = "serving_default_dense_input:0"


def one_line_error(err: str, command: str) -> str:
    assert err.startswith(f"utvm {command}: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# --- archives -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hello_files() -> dict[str, bytes]:
    compiled = compile(load(HELLO), model_name="hello")
    compiled.source_model_name, compiled.source_model_bytes = HELLO.name, HELLO.read_bytes()
    return mlf.model_library_files(compiled)


def _write_tar(path: Path, files: dict[str, bytes], extra: Callable[[tarfile.TarFile], None] | None = None) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if extra is not None:
            extra(tar)
    return path


def _with_metadata(files: dict[str, bytes], edit: Callable[[dict], None]) -> dict[str, bytes]:
    meta = json.loads(files["metadata.json"])
    edit(meta["modules"]["hello"])
    out = dict(files)
    out["metadata.json"] = json.dumps(meta).encode()
    return out


# One name per test run, the same in every pytest-xdist worker (test ids must agree between workers).
EVIL = f"evil_{os.environ.get('PYTEST_XDIST_TESTRUNUID', uuid.uuid4().hex)[:12]}"
# A bad entry a test plants on disk itself: named apart from EVIL, which must never appear on disk while any
# test of the run (in any pytest-xdist worker) looks for escaped members.
PLANTED = f"planted_{EVIL[len('evil_'):]}"


def _add(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"int x;\n", linkname: str = "") -> Callable:
    def extra(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = linkname
        info.size = len(data) if kind == tarfile.REGTYPE else 0
        tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return extra


BAD_MEMBERS = {
    "dotdot": (_add(f"../../../../{EVIL}.c"), "'..' component"),
    "dotdot-inside": (_add(f"codegen/../../{EVIL}.c"), "'..' component"),
    "absolute": (_add(f"/tmp/{EVIL}.c"), "an absolute path"),
    "symlink": (_add(f"codegen/host/src/{EVIL}.c", tarfile.SYMTYPE, linkname="/etc/passwd"), "a symbolic link"),
    "symlink-dir": (_add(f"{EVIL}", tarfile.SYMTYPE, linkname="/tmp"), "a symbolic link"),
    "hardlink": (_add(f"{EVIL}.c", tarfile.LNKTYPE, linkname="metadata.json"), "a hard link"),
    "chardev": (_add(f"{EVIL}", tarfile.CHRTYPE), "a device node"),
    "blockdev": (_add(f"{EVIL}", tarfile.BLKTYPE), "a device node"),
    "fifo": (_add(f"{EVIL}", tarfile.FIFOTYPE), "a FIFO"),
    "duplicate": (_add("metadata.json", data=b"{}"), "appears more than once"),
    "long-component": (_add("x" * 300 + ".c"), "longer than 255 bytes"),
    "dir-dotdot": (_add(f"../{EVIL}", tarfile.DIRTYPE), "'..' component"),
}

BAD_METADATA_NAMES = [f"../../../../{EVIL}.c", f"/tmp/{EVIL}.c", f"sub/{EVIL}.c", "..", "", "x\0.c", "a\\b.c",
                      "y" * 300 + ".c"]
METADATA_FIELDS = {
    "source": lambda mod, bad: mod["utvm"]["sources"].append(bad),
    "header": lambda mod, bad: mod["utvm"].__setitem__("header", bad),
    "source_model": lambda mod, bad: mod["utvm"].__setitem__("source_model", bad),
}


def _nothing_escaped(tmp_path: Path) -> None:
    assert not Path(tempfile.gettempdir(), f"{EVIL}.c").exists()
    base = tmp_path.parents[1]  # the whole pytest temp tree of this run
    # os.walk, not rglob: the other workers' directories come and go during the walk (a build cleaning its
    # objects), and rglob fails on a directory that vanished between listing and entering it; os.walk passes
    # over it. A name starting with EVIL is found as a file, a directory or a link, as rglob found it.
    escaped = [Path(d, n) for d, dirs, files in os.walk(base) for n in (*dirs, *files) if n.startswith(EVIL)]
    assert not escaped, f"a member was written outside the archive: {escaped}"


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("UTVM_CACHE_DIR", str(cache))
    return cache


@pytest.mark.parametrize("case", sorted(BAD_MEMBERS))
def test_bad_tar_members_are_refused_before_anything_is_written(case: str, hello_files: dict[str, bytes],
                                                               tmp_path: Path, private_cache: Path,
                                                               capsys: pytest.CaptureFixture) -> None:
    extra, reason = BAD_MEMBERS[case]
    tar = _write_tar(tmp_path / "crafted.tar", hello_files, extra)
    for argv in (["run", str(tar), "--platform", "host", "-q"],
                 ["deploy", str(tar), "-o", str(tmp_path / "fw"), "-q"]):
        assert main(argv) == EXIT_MODEL
        err = one_line_error(capsys.readouterr().err, argv[0])
        assert reason in err and "crafted.tar" in err
    assert not (tmp_path / "fw").exists()
    _nothing_escaped(tmp_path)


@pytest.mark.parametrize("field, bad", [(f, b) for f in sorted(METADATA_FIELDS) for b in BAD_METADATA_NAMES
                                         if (f, b) != ("source_model", "")],  # "": no source model kept
                         ids=lambda v: repr(v[:20]))
def test_bad_metadata_paths_are_refused(field: str, bad: str, hello_files: dict[str, bytes], tmp_path: Path,
                                        private_cache: Path, capsys: pytest.CaptureFixture) -> None:
    files = _with_metadata(hello_files, lambda mod: METADATA_FIELDS[field](mod, bad))
    if field == "source" and bad and "\0" not in bad:
        files[f"codegen/host/src/{bad}"] = b"int x;\n"  # present, so only the name itself is at fault
    tar = _write_tar(tmp_path / "crafted.tar", {k: v for k, v in files.items() if _plain(k)})
    assert main(["run", str(tar), "--platform", "host", "-q"]) == EXIT_MODEL
    err = one_line_error(capsys.readouterr().err, "run")
    assert "metadata.json" in err or "member" in err
    _nothing_escaped(tmp_path)


def _plain(name: str) -> bool:
    try:
        safe_name(name)
        return True
    except ArchiveError:
        return False


@pytest.mark.parametrize("model_name", ["../x", "a/b", "", "x" * (MAX_MODEL_NAME + 1), "9lives"])
def test_bad_model_name_in_metadata_is_refused(model_name: str, hello_files: dict[str, bytes], tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    meta = json.loads(hello_files["metadata.json"])
    meta["modules"][model_name] = meta["modules"].pop("hello")
    meta["modules"][model_name]["utvm"]["options"]["model_name"] = model_name
    files = {**hello_files, "metadata.json": json.dumps(meta).encode()}
    tar = _write_tar(tmp_path / "crafted.tar", files)
    assert main(["run", str(tar), "--platform", "host", "-q"]) == EXIT_MODEL
    one_line_error(capsys.readouterr().err, "run")


@pytest.mark.parametrize("kind", ["symlink-file", "symlink-dir", "fifo"])
def test_bad_entries_of_an_extracted_mlf_directory(kind: str, hello_files: dict[str, bytes], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "mlf"
    for name, data in hello_files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    bad = root / "codegen" / "host" / "src" / f"{PLANTED}.c"
    if kind == "symlink-file":
        bad.symlink_to("/etc/hostname")
    elif kind == "symlink-dir":
        (root / PLANTED).symlink_to(tmp_path)
    else:
        os.mkfifo(bad)
    assert main(["run", str(root), "--platform", "host", "-q"]) == EXIT_MODEL
    err = one_line_error(capsys.readouterr().err, "run")
    assert PLANTED in err


@pytest.mark.parametrize("limits, message", [
    (ArchiveLimits(max_members=3), "more than 3 members"),
    (ArchiveLimits(max_member_bytes=100), "(at most 100)"),
    (ArchiveLimits(max_total_bytes=1000), "more than 1,000 bytes in all"),
])
def test_archive_size_limits(limits: ArchiveLimits, message: str, hello_files: dict[str, bytes],
                             tmp_path: Path) -> None:
    tar = _write_tar(tmp_path / "big.tar", hello_files)
    with pytest.raises(ArchiveError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_tar(tar, limits)
    root = tmp_path / "tree"
    for name, data in hello_files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    with pytest.raises(ArchiveError):
        read_tree(root, limits)


@pytest.mark.parametrize("name", ["model.tar", "model.tflite"])
def test_a_fifo_given_as_the_model_is_refused_not_waited_on(name: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    # A bad path is a bad argument (status 2) whatever its name says, refused for what it is when the command
    # line is parsed (it was status 4 for a name ending in .tar, from the archive reader, issue 19).
    os.mkfifo(tmp_path / name)  # opening it would block until a writer comes: never
    assert main(["run", str(tmp_path / name), "-q"]) == EXIT_USAGE
    assert "is a FIFO, not a" in one_line_error(capsys.readouterr().err, "run")


def _corrupt_xz(raw: bytes) -> bytes:
    import lzma

    data = bytearray(lzma.compress(raw))
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize("case", ["xz-corrupt", "gzip-corrupt", "bzip2-corrupt", "legacy-lzma-4gib-dictionary",
                                  "gzip-bomb", "xz-bomb", "bzip2-bomb", "truncated-gzip"])
def test_compressed_archives_are_inflated_safely(case: str, hello_files: dict[str, bytes], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    """Compressed MLF tars are inflated by utvm under the size limits, never by tarfile's guessing (which
    tries the legacy .lzma format too): corrupt streams and bombs are one-line errors."""
    import bz2
    import gzip
    import lzma

    raw = _write_tar(tmp_path / "ok.tar", hello_files).read_bytes()
    bomb = io.BytesIO()
    with tarfile.open(fileobj=bomb, mode="w") as t:
        info = tarfile.TarInfo("metadata.json")
        info.size = 1 << 31  # declares 2 GiB of zeros
        t.addfile(info)
    zeros = bytes(64 << 20)  # what the bombs inflate to (and more: each is refused long before)

    def flip(data: bytes) -> bytes:
        d = bytearray(data)
        d[len(d) // 2] ^= 0xFF
        return bytes(d)

    data = {
        "xz-corrupt": lambda: _corrupt_xz(raw),
        "gzip-corrupt": lambda: flip(gzip.compress(raw)),
        "bzip2-corrupt": lambda: flip(bz2.compress(raw)),
        "legacy-lzma-4gib-dictionary": lambda: b"\x5d" + b"\xff" * 12 + bytes(64),
        "gzip-bomb": lambda: gzip.compress(bomb.getvalue()[:512] + zeros),
        "xz-bomb": lambda: lzma.compress(bomb.getvalue()[:512] + zeros),
        "bzip2-bomb": lambda: bz2.compress(bomb.getvalue()[:512] + zeros),
        "truncated-gzip": lambda: gzip.compress(raw)[:200],
    }[case]()
    tar = tmp_path / "crafted.tar"
    tar.write_bytes(data)
    limits = ArchiveLimits(max_total_bytes=8 << 20)
    with pytest.raises(ArchiveError, match="crafted.tar"):
        read_tar(tar, limits)
    assert main(["run", str(tar), "--platform", "host", "-q"]) == EXIT_MODEL
    one_line_error(capsys.readouterr().err, "run")


@pytest.mark.parametrize("compress", ["gzip", "bz2", "lzma"])
def test_compressed_archives_still_load(compress: str, hello_files: dict[str, bytes], tmp_path: Path) -> None:
    import importlib

    raw = _write_tar(tmp_path / "ok.tar", hello_files).read_bytes()
    (tmp_path / "ok.tar.z").write_bytes(importlib.import_module(compress).compress(raw))
    assert sorted(read_tar(tmp_path / "ok.tar.z")) == sorted(hello_files)


def test_a_valid_archive_still_loads(hello_files: dict[str, bytes], tmp_path: Path) -> None:
    tar = _write_tar(tmp_path / "ok.tar", hello_files)
    assert mlf.load(tar).model_name == "hello"
    assert sorted(read_tar(tar)) == sorted(hello_files)


# --- output paths -------------------------------------------------------------------------------------------

def _make_target(kind: str, where: Path) -> tuple[str, Callable[[], object]]:
    """An output path of `kind` and a function that snapshots what is there (to check it is unchanged)."""
    p = where / "out"
    if kind == "empty":
        return "", lambda: None
    if kind == "blank":
        return "   ", lambda: None
    if kind == "chardev":
        try:
            os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # what /dev/null is
        except PermissionError:
            p = Path(os.devnull)
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    elif kind == "directory":
        p.mkdir()
        (p / "keep").write_text("mine")
    elif kind == "symlink-file":
        (where / "target").write_text("mine")
        p.symlink_to(where / "target")
    elif kind == "symlink-dangling":
        p.symlink_to(where / "nowhere")
    elif kind == "symlink-dir":
        (where / "emptydir").mkdir()
        p.symlink_to(where / "emptydir")
    elif kind == "file":
        p.write_text("mine")
    else:
        raise AssertionError(kind)

    def snapshot() -> object:
        st = os.lstat(p)
        content = p.read_text() if kind in ("symlink-file", "file") else None
        listing = sorted(os.listdir(p)) if kind == "directory" else None
        link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
        return stat.S_IFMT(st.st_mode), st.st_rdev, content, listing, link, (where / "nowhere").exists()

    return str(p), snapshot


FILE_OUTPUT_KINDS = ["empty", "blank", "chardev", "fifo", "socket", "directory", "symlink-file", "symlink-dangling"]
FILE_COMMANDS = {
    "compile": lambda p: ["compile", str(HELLO), "-o", p, "-q"],
    "build-device": lambda p: ["build-device", "--platform", "host", "-o", p],
    "run --profile-plot": lambda p: ["run", str(HELLO), "--profile-plot", p, "-q"],
}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="utvm-out-"))  # short: a UNIX socket path must fit 108 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("command, kind", [(c, k) for c in sorted(FILE_COMMANDS) for k in FILE_OUTPUT_KINDS
                                           # a directory is a valid build-device -o: the firmware goes into it
                                           if (c, k) != ("build-device", "directory")])
def test_file_outputs_never_replace_what_is_there(command: str, kind: str, short_dir: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    path, snapshot = _make_target(kind, short_dir)
    before = snapshot()
    argv = FILE_COMMANDS[command](path)
    assert main(argv) == EXIT_USAGE
    err = one_line_error(capsys.readouterr().err, argv[0])
    assert (path.strip() and path in err) or "empty" in err
    assert snapshot() == before
    assert not [p for p in short_dir.iterdir() if p.name.endswith(".partial")]


DIR_OUTPUT_KINDS = ["empty", "blank", "chardev", "fifo", "socket", "file", "symlink-dir", "symlink-dangling"]


@pytest.mark.parametrize("kind", DIR_OUTPUT_KINDS)
def test_deploy_directory_output_is_never_replaced(kind: str, short_dir: Path, capsys: pytest.CaptureFixture) -> None:
    path, snapshot = _make_target(kind, short_dir)
    before = snapshot()
    assert main(["deploy", str(HELLO), "-o", path, "-q"]) == EXIT_USAGE
    one_line_error(capsys.readouterr().err, "deploy")
    assert snapshot() == before


def test_outputs_are_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """A write that fails midway leaves the old file as it was and no temporary file behind."""
    from utvm.support.files import write_file_atomic

    target = tmp_path / "model.tar"
    target.write_bytes(b"old")

    def failing(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file_atomic(target, failing)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.tar"]
    write_file_atomic(target, b"new")
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_the_longest_model_name_makes_an_archive_tar_extracts(tmp_path: Path) -> None:
    name = "m" * MAX_MODEL_NAME
    out = tmp_path / "long.tar"
    assert main(["compile", str(HELLO), "-o", str(out), "--model-name", name, "-q"]) == 0
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["tar", "-xf", str(out), "-C", str(dest)], check=True, capture_output=True)
    assert (dest / "codegen" / "host" / "src" / f"tvmgen_{name}_system_lib.c").is_file()


# --- arguments ----------------------------------------------------------------------------------------------

def _npy_files(d: Path) -> dict[str, Path]:
    files = {}
    np.savez(d / "x.npz", a=np.zeros((1, 1), np.int8))
    files["npz"] = d / "x.npz"
    (d / "x.txt").write_text("17\n")
    files["text"] = d / "x.txt"
    np.save(d / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    files["pickle"] = d / "obj.npy"
    (d / "trunc.npy").write_bytes((d / "x.npz").read_bytes()[:0] + b"\x93NUMPY\x01\x00")
    files["truncated"] = d / "trunc.npy"
    np.save(d / "big.npy", np.zeros((1 << 18,), np.int8))
    files["far too big"] = d / "big.npy"
    files["missing"] = d / "missing.npy"
    files["directory"] = d
    os.mkfifo(d / "fifo.npy")
    files["fifo"] = d / "fifo.npy"
    np.save(d / "f.npy", np.zeros((1, 1), np.float32))
    files["wrong dtype"] = d / "f.npy"
    return files


INPUT_CASES = {
    "npz": "is a .npz archive",
    "text": "is not a .npy file",
    "pickle": "Python objects",
    "truncated": "cannot read",
    "far too big": "far more than the tensor's 1",
    "missing": "cannot read",
    "directory": "is not a regular file",
    "fifo": "is not a regular file",
    "wrong dtype": "the model takes int8[1, 1]",
}


@pytest.mark.parametrize("case", sorted(INPUT_CASES))
@pytest.mark.parametrize("command", ["run", "deploy"])
def test_bad_input_files_are_one_line_errors(command: str, case: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    f = _npy_files(tmp_path)[case]
    argv = [command, str(HELLO), "--input", f"{HELLO_INPUT}={f}", "-q"]
    if command == "deploy":
        argv += ["-o", str(tmp_path / "fw")]
    assert main(argv) == EXIT_USAGE
    err = one_line_error(capsys.readouterr().err, command)
    assert INPUT_CASES[case] in err and f"--input {HELLO_INPUT}" in err
    assert not (tmp_path / "fw").exists()


BAD_VALUES = {
    "--seed": ["-1", "abc", str(2**64), "1.5", ""],
    "--repeat": ["0", "-3", "x", ""],
    "--timeout": ["0", "-1", "nan", "inf", "x", ""],
    "--model-name": ["", "9lives", "a-b", "x" * 300, "a b"],
    "--platform": ["toaster", "", "HOST"],
    "--rounding": ["triple"],
    "--memory-planner": ["magic"],
    "--interface-api": ["java"],
    "--profile-plot": [""],
    "--board-config": ["", "no-such-board.toml"],
}


def _cases() -> list[tuple[str, str, str]]:
    parser = build_parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices  # noqa: SLF001
    out = []
    for command, sub in subs.items():
        options = {s for a in sub._actions for s in a.option_strings}  # noqa: SLF001
        for option, values in BAD_VALUES.items():
            if option in options:
                out += [(command, option, v) for v in values]
    return out


@pytest.mark.parametrize("command, option, value", _cases())
def test_every_bad_option_value_is_one_line_and_exit_2(command: str, option: str, value: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    argv = [command]
    if command not in ("build-device",):
        argv.append(str(HELLO))
    argv += [option, value]
    if command in ("deploy", "build-device"):
        argv += ["-o", str(tmp_path / "out")]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and option.lstrip("-") in err, err


def test_an_input_name_may_contain_equals(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tests.tflite_builder import one_op_model

    model = tmp_path / "eq.tflite"
    model.write_bytes(one_op_model("in=put"))
    np.save(tmp_path / "v=1.npy", np.array([[-1, 2, -3, 4]], np.float32))
    assert main(["run", str(model), "--input", f"in=put={tmp_path / 'v=1.npy'}", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["y"] == [[0.0, 2.0, 0.0, 4.0]]


# --- checking and JSON --------------------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("got, want, bit_exact, ok", [
    ([NAN, 1.0], [NAN, 1.0], True, True),
    ([NAN, 1.0], [NAN, 1.0 + 1e-7], False, True),
    ([INF, -INF], [INF, -INF], True, True),
    ([NAN, 1.0], [0.0, 1.0], False, False),
    ([0.0, 1.0], [NAN, 1.0], False, False),
    ([INF, 1.0], [-INF, 1.0], False, False),
    ([INF, 1.0], [NAN, 1.0], False, False),
    ([NAN, NAN], [NAN, NAN], True, True),
])
def test_comparison_is_nan_aware(got: list[float], want: list[float], bit_exact: bool, ok: bool) -> None:
    v = compare([np.array(got, np.float32)], [np.array(want, np.float32)])
    assert (v.bit_exact, v.ok) == (bit_exact, ok)
    assert (v.max_abs_err == float("inf")) == (not ok)


@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_json_is_strict(value: float) -> None:
    text = jsonout.dumps({"outputs": {"y": [[value, 1.0]]}, "max_abs_err": value})

    def refuse(name: str) -> None:
        raise AssertionError(f"bare {name} in JSON")

    obj = json.loads(text, parse_constant=refuse)
    assert obj == {"outputs": {"y": [[None, 1.0]]}, "max_abs_err": None, "nonfinite": True}
    assert json.loads(jsonout.dumps({"a": 1.0})) == {"a": 1.0}


def test_nan_outputs_match_a_nan_reference_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    x = tmp_path / "nan.npy"
    np.save(x, np.array([[np.nan]], np.float32))
    assert main(["run", str(HELLO_FLOAT), "--input", f"{HELLO_INPUT}={x}", "--check", "--json", "-q"]) == 0
    res = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert res["bit_exact"] is True and res["max_abs_err"] == 0.0
    assert res["outputs"]["StatefulPartitionedCall:0"] == [[None]] and res["nonfinite"] is True
    assert main(["run", str(HELLO_FLOAT), "--input", f"{HELLO_INPUT}={x}", "--check", "-q"]) == 0
    assert "OK (bit-exact)" in capsys.readouterr().out
