"""`python -m utvm.demo` (what `make demo` runs) works from an empty build cache: MLPerf Tiny keyword
spotting compiled to C, built into host firmware with the CRT, run over RPC, bit-exact with TFLite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def test_demo_from_clean_cache(tmp_path: Path) -> None:
    env = dict(os.environ, UTVM_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "utvm.demo"], capture_output=True, text=True, env=env,
                          timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for step in range(1, 6):
        assert f"[{step}/5] " in out, f"step {step} missing:\n{out}"
    assert len(re.findall(r"input \d+: top class .*, bit-exact", out)) == 10, out
    assert "10/10 outputs bit-exact with TFLite" in out
    latency = re.search(r"latency ([0-9.]+) ms", out)
    assert latency is not None and float(latency.group(1)) > 0
    cache = tmp_path / "cache"
    assert list(cache.glob("crt-*")) and list(cache.glob("utvm_host_device-*/utvm_host_device"))  # a real build
