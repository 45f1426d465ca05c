"""Lines of code per package (docs/architecture.md §12.11): informs, never fails the build.

    python tools/sz.py            # table of non-blank, non-comment lines per folder, Python and C
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_PARTS = {"__pycache__", ".venv", "build", ".git"}


def count_lines(path: Path) -> int:
    n = 0
    in_block = False
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.strip()
        if path.suffix in (".c", ".h"):
            if in_block:
                if "*/" in line:
                    in_block = False
                continue
            if line.startswith("/*"):
                in_block = "*/" not in line
                continue
            if not line or line.startswith("//") or line.startswith("*"):
                continue
        elif not line or line.startswith("#"):
            continue
        n += 1
    return n


def main(argv: list[str]) -> int:
    roots = [ROOT / a for a in argv] or [ROOT / "src" / "utvm", ROOT / "tests", ROOT / "bench"]
    per_dir: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for root in roots:
        for f in sorted(root.rglob("*")):
            if not f.is_file() or SKIP_PARTS & set(f.parts) or f.suffix not in (".py", ".c", ".h"):
                continue
            key = str(f.parent.relative_to(ROOT))
            per_dir[key][0 if f.suffix == ".py" else 1] += count_lines(f)
            per_dir[key][2] += 1
    print(f"{'folder':<52} {'files':>5} {'python':>7} {'C':>7}")
    tot = [0, 0, 0]
    for key in sorted(per_dir):
        py, c, files = per_dir[key]
        tot = [tot[0] + py, tot[1] + c, tot[2] + files]
        print(f"{key:<52} {files:>5} {py:>7} {c:>7}")
    print(f"{'total':<52} {tot[2]:>5} {tot[0]:>7} {tot[1]:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
