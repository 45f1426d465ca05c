"""Model importers: TFLite (`from_tflite`) and ONNX (`from_onnx`) to `utvm.ir.Graph`, and `load(path)`.

The parsers are imported lazily, so importing `utvm.frontend` costs nothing and a missing optional
dependency of one frontend never breaks the other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from utvm.errors import ModelFormatError
from utvm.ir.graph import Graph

__all__ = ["from_onnx", "from_tflite", "load", "model_kind", "survey"]


def from_tflite(model: str | os.PathLike | bytes, **kwargs: Any) -> Graph:
    """Import a .tflite model (path or bytes); see utvm.frontend.tflite."""
    from utvm.frontend.tflite import from_tflite as _from_tflite

    return _from_tflite(model, **kwargs)


def from_onnx(model: Any, **kwargs: Any) -> Graph:
    """Import an ONNX model (path, bytes or onnx.ModelProto); see utvm.frontend.onnx."""
    from utvm.frontend.onnx import from_onnx as _from_onnx

    return _from_onnx(model, **kwargs)


def model_kind(path: str | os.PathLike) -> str:
    """"tflite" or "onnx", from the file's magic (TFLite's `TFL3` identifier at byte 4) or its suffix."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise ModelFormatError(f"cannot read model {str(p)!r}: {exc.strerror or exc}") from exc
    if head[4:8] == b"TFL3":
        return "tflite"
    suffix = p.suffix.lower()
    if suffix == ".tflite":
        return "tflite"
    if suffix == ".onnx":
        return "onnx"
    raise ModelFormatError(f"cannot tell the format of {str(p)!r}: no TFLite identifier and the suffix "
                           f"{suffix or '(none)'!r} is neither .tflite nor .onnx")


def load(path: str | os.PathLike, **kwargs: Any) -> Graph:
    """Import a model file, dispatching on its magic / suffix."""
    kind = model_kind(path)
    if kind == "tflite":
        return from_tflite(path, **kwargs)
    return from_onnx(path, **kwargs)


def survey(path: str | os.PathLike) -> tuple[Graph | None, list[Any]]:
    """Every unsupported operator and dtype of a model at once (`utvm info`): (what imported, problems).
    Each problem has `index` (operator/node index, -1 when the model as a whole), `op` and `reason`."""
    if model_kind(path) == "tflite":
        from utvm.frontend.tflite import survey as _survey
    else:
        from utvm.frontend.onnx import survey as _survey
    return _survey(path)
