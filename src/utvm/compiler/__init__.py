"""The model compiler: Graph -> C for the AOT executor, memory plan, model header, MLF (docs/architecture.md §6-8).

    compiled = utvm.compiler.compile(graph, model_name="kws", unpacked_api=True, interface_api="c")
    utvm.compiler.export_model_library_format(compiled, "kws.tar")

Modules: `driver` (compile, CompiledModel), `lower` (kernels, aliases, liveness), `memory` (planner
algorithms), `codegen` (the three calling conventions, system library), `header` (model header and its
metadata mapping), `kernels` (the C kernel interface and kernels), `local` (build + run on the host
through ctypes), `oracle` (reference interpreters in a subprocess). Passes live in `passes/` and run in
the order of `pipeline.PIPELINE`. Attributes are imported lazily so `import utvm.compiler.passes...`
never drags the code generator in.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CompileOptions", "CompiledModel", "compile", "export_model_library_format"]


def __getattr__(name: str) -> Any:
    if name in ("compile", "CompiledModel", "CompileOptions", "OperatorInfo", "run_passes"):
        from utvm.compiler import driver

        return getattr(driver, name)
    if name == "export_model_library_format":
        from utvm.mlf import export_model_library_format

        return export_model_library_format
    raise AttributeError(f"module 'utvm.compiler' has no attribute {name!r}")
