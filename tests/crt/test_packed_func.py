"""The C-side PackedFunc helpers (tvm/runtime/crt/packed_func.h, issue 24): the cmocka tests of
test_packed_func.c (crt_config "default", plain and under ASan+UBSan; the upstream configurations run it too,
test_upstream_config_full.py), and docs/crt.md's complete program, which uses them, built as the page shows it
and checked against the output the page prints.
"""

from __future__ import annotations

import re
from pathlib import Path

import cbuild
import pytest

from utvm.support import cc

REPO = Path(__file__).resolve().parents[2]
CRT_MD = REPO / "docs" / "crt.md"


@pytest.mark.parametrize("variant", [cbuild.Variant("default"), cbuild.Variant("default", sanitize=True)],
                         ids=cbuild.variant_id)
def test_packed_func_c(variant: cbuild.Variant) -> None:
    out = cbuild.build_and_run("test_packed_func", [cbuild.HERE / "test_packed_func.c"], variant,
                               crt_libs=("common", "memory", "host"))
    runs = out.count("[ RUN      ]")
    assert runs == 8 and out.count("[       OK ]") == runs and "FAILED" not in out, out


def _doc_example() -> tuple[str, list[str]]:
    """docs/crt.md's complete program and the output printed under its build command."""
    text = CRT_MD.read_text()
    section = text[text.index("A complete program, built against the host libraries"):]
    source = re.search(r"```c\n(.*?)```", section, flags=re.S)
    shell = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert source and shell, "docs/crt.md: the complete program or its output block is missing"
    lines = shell.group(1).splitlines()
    assert lines[0].startswith("gcc ") and lines[1].lstrip().startswith("-L"), lines[:2]
    return source.group(1), lines[2:]


def test_crt_doc_example_uses_the_helpers_and_prints_what_the_page_says(tmp_path: Path) -> None:
    source, expected = _doc_example()
    assert "TVMPackedFunc_Call(" in source and "TVMFuncCall(" not in source  # no hand-filled TVMValue arrays
    main_c = tmp_path / "main.c"
    main_c.write_text(source)
    config = cbuild.CONFIGS["default"]  # the template's values, as the page's build/crt-cfg
    libs = cc.cached_crt_libs(config, libs=("common", "memory", "host"))
    exe = cc.compile_link([main_c], tmp_path / "demo", include_dirs=[config, cc.crt_dir() / "include"],
                          cflags=list(cc.WARNING_FLAGS), libs=list(libs.values()))
    assert cbuild.run_test(exe).splitlines() == expected
