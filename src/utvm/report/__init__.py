"""`utvm report`: a model on a platform as one JSON document and one static HTML page (docs/report.md).

    from utvm.report import build_document, render
    doc = build_document(compiled, "qemu-cortex-m4", commands, run_json, size=size_json, firmware=fw)
    html = render(doc)

- `data.build_document`: the figures `utvm compile` (metadata.json), `utvm info`, `utvm size --json` and
  `utvm run --profile --json` give for one build, gathered in one JSON document (the CLI, utvm.cli.report,
  runs them; nothing here measures anything);
- `firmware.firmware_bytes`: each operator function's code and weights in the deploy firmware `utvm size`
  measures (its linker map and call graph);
- `html.render`: the page, drawn from the document alone with the inline SVG charts of `svg`.
"""

from __future__ import annotations

from utvm.report.data import FORMAT, VERSION, build_document
from utvm.report.firmware import FirmwareBytes, firmware_bytes
from utvm.report.html import render

__all__ = ["FORMAT", "VERSION", "FirmwareBytes", "build_document", "firmware_bytes", "render"]
