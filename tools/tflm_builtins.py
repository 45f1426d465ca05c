"""Which TFLite builtins the installed TensorFlow Lite Micro interpreter (`tflite-micro`) registers.

    .venv/bin/python tools/tflm_builtins.py          # prints the names, one per line, then the count

Each builtin is put alone in a one-operator model and handed to TFLM's interpreter in a subprocess of
its own (a kernel may abort on the dummy tensors): "Didn't find op for builtin opcode" means TFLM does
not have it; anything else (success, or a Prepare failure on the dummy tensors) means it does. The list
in tests/tflm/test_tflm_coverage.py was made with this script; re-run it when tflite-micro is upgraded.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from tflite_builder import TFLiteBuilder  # noqa: E402

_PROBE = "import sys\nfrom tflite_micro.python.tflite_micro import runtime\nruntime.Interpreter.from_file(sys.argv[1])"
_MISSING = ("Didn't find op for builtin opcode", "Failed to get registration")


def tflm_builtins() -> list[str]:
    import tflite

    codes = {k: v for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "op.tflite"
        for name, _ in sorted(codes.items(), key=lambda kv: kv[1]):
            if name in ("CUSTOM", "PLACEHOLDER_FOR_GREATER_OP_CODES"):
                continue
            b = TFLiteBuilder()
            x, y = b.tensor("x", (1,), "float32"), b.tensor("y", (1,), "float32")
            b.op(name, [x], [y])
            path.write_bytes(b.build([x], [y]))
            r = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True,
                               timeout=60)
            if not any(m in r.stderr + r.stdout for m in _MISSING):
                found.append(name)
    return found


if __name__ == "__main__":
    names = tflm_builtins()
    print("\n".join(names))
    print(len(names))
