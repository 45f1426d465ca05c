"""`python -m utvm.demo` (what `make demo` runs) works from an empty build cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_demo_from_clean_cache(tmp_path: Path) -> None:
    env = dict(os.environ, UTVM_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "utvm.demo"], capture_output=True, text=True, env=env,
                          timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "compiling the CRT libraries" in out and "linking libutvm_local.so" in out  # a real build
    assert "[python] demo.py_square(12) -> 144" in out  # Python ran, called from C
    assert "RESULT: C called Python and returned 144" in out
    assert "utvm.local.accumulate(square, 10) = 285" in out
    assert "raised ValueError: 13 is not welcome here" in out
    assert list((tmp_path / "cache").glob("libutvm_local-*/libutvm_local.so"))
