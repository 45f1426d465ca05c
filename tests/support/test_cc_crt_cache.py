"""utvm.support.cc.cached_crt_libs: the CRT static libraries built once per CRT tree + crt_config.h +
compiler + flags, shared by every firmware build, and safe when several processes build at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from utvm.errors import BuildError
from utvm.support import cc

HOST_CONFIG = cc.crt_dir() / "host"


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("UTVM_CACHE_DIR", str(root))
    return root


@pytest.fixture
def make_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Count the CRT make builds (the real make_crt_libs still runs)."""
    calls: list[tuple[str, ...]] = []
    real = cc.make_crt_libs

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(tuple(kwargs.get("libs", args[2] if len(args) > 2 else ())))
        return real(*args, **kwargs)

    monkeypatch.setattr(cc, "make_crt_libs", counting)
    return calls


def _members(archive: Path) -> set[str]:
    return set(subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True, check=True).stdout.split())


def test_built_once_then_found(fresh_cache: Path, make_calls: list) -> None:
    first = cc.cached_crt_libs(HOST_CONFIG, libs=("memory",), cflags=["-O2"])
    again = cc.cached_crt_libs(HOST_CONFIG, libs=("memory",), cflags=["-O2"])
    assert first == again and len(make_calls) == 1
    lib = first["memory"]
    assert lib.parent.parent == fresh_cache and lib.parent.name.startswith("crt-")
    want = {f"{c.stem}.o" for c in (cc.crt_dir() / "src" / "memory").glob("*.c")}
    assert want and _members(lib) == want
    assert (lib.parent / "config" / "crt_config.h").read_text() == (HOST_CONFIG / "crt_config.h").read_text()
    assert not (lib.parent / "obj").exists()
    # The same config given as text or as the file is the same entry.
    text = (HOST_CONFIG / "crt_config.h").read_text()
    assert cc.cached_crt_libs(text, libs=["memory"], cflags=["-O2"]) == first
    assert cc.cached_crt_libs(HOST_CONFIG / "crt_config.h", libs=["memory"], cflags=["-O2"]) == first
    assert len(make_calls) == 1


def test_every_input_is_in_the_key(fresh_cache: Path, make_calls: list) -> None:
    text = (HOST_CONFIG / "crt_config.h").read_text()
    base = cc.cached_crt_libs(text, libs=("memory",))["memory"].parent
    other_config = text.replace("#endif", "#define TVM_CRT_UNUSED_BY_THIS_TEST 1\n#endif", 1)
    entries = {
        base,
        cc.cached_crt_libs(other_config, libs=("memory",))["memory"].parent,
        cc.cached_crt_libs(text, libs=("memory",), cflags=["-O1"])["memory"].parent,
        cc.cached_crt_libs(text, libs=("memory", "rpc_common"))["memory"].parent,
    }
    assert len(entries) == 4 and len(make_calls) == 4
    assert sorted(p.name for p in fresh_cache.iterdir()) == sorted(p.name for p in entries)


def test_a_bad_config_or_flag_fails_naming_it(fresh_cache: Path) -> None:
    with pytest.raises(BuildError, match="neither a crt_config.h nor a directory holding one"):
        cc.cached_crt_libs(fresh_cache, libs=("memory",))
    with pytest.raises(BuildError, match=r"CRT build \(memory\) failed.*-fno-such-flag"):
        cc.cached_crt_libs(HOST_CONFIG, libs=("memory",), cflags=["-fno-such-flag"])
    assert not [p for p in fresh_cache.iterdir() if p.name != "model-src"], "a failed build leaves nothing behind"


_RACER = """
import json, sys, time
from pathlib import Path
from utvm.support import cc
go = Path(sys.argv[1])
real = cc.make_crt_libs
built = []
def slow(*args, **kwargs):
    built.append(1)
    time.sleep(1.0)  # both processes are now past the cache lookup
    return real(*args, **kwargs)
cc.make_crt_libs = slow
while not go.exists():
    time.sleep(0.01)
libs = cc.cached_crt_libs(cc.crt_dir() / "host", libs=("memory",))
print(json.dumps({"built": len(built), "lib": str(libs["memory"])}))
"""


def test_concurrent_processes_agree_on_one_entry(fresh_cache: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, str(go)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    time.sleep(0.5)
    go.touch()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        results.append(json.loads(out))
    assert [r["built"] for r in results] == [1, 1], "both processes missed the cache and built"
    assert results[0]["lib"] == results[1]["lib"]
    lib = Path(results[0]["lib"])
    assert lib.is_file() and _members(lib)
    assert [p.name for p in fresh_cache.iterdir()] == [lib.parent.name], "the loser's copy is discarded"


def test_host_firmware_builds_reuse_the_crt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from utvm.platform.host import build_device

    def extra(n: int) -> Path:  # a source no cached firmware has: the firmware itself is always built
        src = tmp_path / f"extra{n}.c"
        token = time.time_ns() % 100003
        src.write_text(f"int utvm_cache_test_{n}(void);\nint utvm_cache_test_{n}(void) {{ return {token}; }}\n")
        return src

    build_device(with_test_functions=False, extra_sources=[extra(1)])  # the CRT entry exists from here on
    calls: list[int] = []

    def no_make(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        raise AssertionError("the CRT was rebuilt for a firmware whose config, compiler and flags are cached")

    monkeypatch.setattr(cc, "make_crt_libs", no_make)
    exe = build_device(with_test_functions=False, extra_sources=[extra(2)], output=tmp_path / "fw")
    assert exe.is_file() and calls == []
    syms = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    assert "utvm_cache_test_2" in syms and "MicroTVMRpcServerLoop" in syms
