"""Building and running the C applications of tests/capi on the host, the way a firmware team would build them:
the app, the generated sources and the CRT headers, under the project's warning flags."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from utvm.support import cc


def run_host_app(app: Path, srcs: Sequence[Path], inc: Path, out_dir: Path) -> str:
    """Compile `app` with the model's `srcs` (headers in `inc`) into `out_dir`, run it, and return its stdout;
    a build that fails or an exit status other than 0 fails the test with the app's output."""
    exe = out_dir / app.stem
    cc.run(["gcc", *cc.WARNING_FLAGS, "-O2", "-I", str(inc), "-I", str(cc.crt_dir() / "include"),
            str(app), *map(str, srcs), "-o", str(exe)], what=f"building {app.name}")
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
