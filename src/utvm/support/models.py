"""Where the model corpus is: `models/` at the root of the repository (see models/MANIFEST.md for each file's
origin and licence), or the folder named by `$UTVM_MODELS_DIR`.

The demo, the tests and the benchmarks find their models only through `models_dir()` / `model_path()`, so a
clone of the repository runs on its own, and a user can point every one of them at another corpus.
"""

from __future__ import annotations

import os
from pathlib import Path

from utvm.errors import ModelNotFoundError

#: The environment variable that names another model folder (same layout: mlperf_tiny/, tflm/, onnx/).
ENV = "UTVM_MODELS_DIR"

#: The repository's own corpus: <repo>/models, beside src/ (this file is <repo>/src/utvm/support/models.py).
REPO_MODELS = Path(__file__).resolve().parents[3] / "models"


def models_dir() -> Path:
    """The model folder: `$UTVM_MODELS_DIR` when set (and not empty), else the repository's `models/`."""
    env = os.environ.get(ENV, "")
    return Path(env) if env else REPO_MODELS


def model_path(relative: str | Path) -> Path:
    """`models_dir() / relative`, checked to be a file; otherwise ModelNotFoundError naming both."""
    path = models_dir() / relative
    if not path.is_file():
        where = f"${ENV}={os.environ[ENV]}" if os.environ.get(ENV) else "the repository's models/ folder"
        raise ModelNotFoundError(f"model {relative} not found in {where} ({path}); "
                                 f"set ${ENV} to a folder holding it")
    return path
