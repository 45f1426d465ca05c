"""The repository's model corpus (models/): every file recorded with its digest, every model with its origin
and licence, found through utvm.support.models; and nothing in the tree reaching outside the repository."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from utvm.errors import ModelNotFoundError, UtvmError
from utvm.support import models

ROOT = Path(__file__).resolve().parents[1]
CORPUS = models.REPO_MODELS
RECORDS = ("MANIFEST.md", "SHA256SUMS")


def _sums() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (CORPUS / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        assert name not in out, f"SHA256SUMS lists {name} twice"
        out[name] = digest
    return out


def _manifest_rows() -> list[list[str]]:
    rows = []
    for line in (CORPUS / "MANIFEST.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 6:
            rows.append(cells)
    return rows


def test_the_corpus_is_the_repositorys_own_folder() -> None:
    assert CORPUS == ROOT / "models"
    assert (CORPUS / "mlperf_tiny" / "kws_ref_model.tflite").is_file()


def test_every_file_has_its_recorded_digest() -> None:
    sums = _sums()
    files = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()}
    files -= set(RECORDS)
    files = {f for f in files if not f.startswith("LICENSES/")}
    assert sorted(files - set(sums)) == [], "files in models/ without a line in SHA256SUMS"
    assert sorted(set(sums) - files) == [], "SHA256SUMS lines whose file is missing"
    bad = [name for name, digest in sums.items() if hashlib.sha256((CORPUS / name).read_bytes()).hexdigest() != digest]
    assert bad == [], "files whose content differs from SHA256SUMS"


def test_every_model_has_origin_digest_and_licence() -> None:
    rows = _manifest_rows()
    sums = _sums()
    listed = {r[0] for r in rows}
    model_files = {n for n in sums if n.endswith((".tflite", ".onnx")) and "onnx_node_subset/" not in n}
    assert listed == model_files, "every model file (outside the node-test subset) has one manifest row"
    licences = {p.name for p in (CORPUS / "LICENSES").iterdir()}
    for file, repo, commit, path, digest, licence in rows:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", repo), (file, repo)
        assert re.fullmatch(r"[0-9a-f]{40}", commit), (file, commit)
        assert Path(path).name == Path(file).name, (file, path)
        assert sums[file] == digest, f"{file}: manifest and SHA256SUMS disagree"
        spdx = licence.split()[0]
        assert any(name.startswith(spdx) for name in licences), f"{file}: no licence text for {spdx} in LICENSES/"
    text = (CORPUS / "MANIFEST.md").read_text()
    assert "6be0677fc22e74563e6eb472f931513aefe5648d" in text and "onnx_node_subset" in text


def test_models_dir_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(models.ENV, raising=False)
    assert models.models_dir() == CORPUS
    monkeypatch.setenv(models.ENV, "")
    assert models.models_dir() == CORPUS
    (tmp_path / "tflm").mkdir()
    (tmp_path / "tflm" / "m.tflite").write_bytes(b"x")
    monkeypatch.setenv(models.ENV, str(tmp_path))
    assert models.models_dir() == tmp_path
    assert models.model_path("tflm/m.tflite") == tmp_path / "tflm" / "m.tflite"


@pytest.mark.parametrize("env", [None, "elsewhere"])
def test_a_missing_model_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str | None) -> None:
    if env is None:
        monkeypatch.delenv(models.ENV, raising=False)
    else:
        monkeypatch.setenv(models.ENV, str(tmp_path / env))
    with pytest.raises(ModelNotFoundError) as info:
        models.model_path("tflm/no_such_model.tflite")
    msg = str(info.value)
    assert isinstance(info.value, UtvmError) and "\n" not in msg
    assert "tflm/no_such_model.tflite" in msg and models.ENV in msg
    if env is not None:
        assert str(tmp_path / env) in msg


# A path that climbs out of the repository to a sibling folder: '../<name>' in text, or a pathlib chain that
# goes above the repository root ('parents[N].parent', 'ROOT.parent / "x"', 'REPO.parent / "x"').
_OUTSIDE = re.compile(r"\.\./shared|\"shared\"\s*/|(?:ROOT|REPO)\.parent\s*/|parents\[\d\]\.parent\b")
_SCANNED = ("src", "tests", "bench", "docs", "tools", "README.md", "Makefile", ".ci")


def test_nothing_reaches_outside_the_repository() -> None:
    hits = []
    for top in _SCANNED:
        base = ROOT / top
        for p in [base] if base.is_file() else sorted(base.rglob("*")):
            if not p.is_file() or p.suffix in (".pyc", ".tflite", ".onnx", ".pb") or "egg-info" in str(p):
                continue
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                if _OUTSIDE.search(line) and p != Path(__file__):
                    hits.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == [], "paths outside the repository:\n" + "\n".join(hits)
