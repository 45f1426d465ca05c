"""The conformance firmware: the platform's normal RPC evaluation firmware, a tiny model's system library and the
conformance module (c/utvm_acceptance.c, registered by utvm_user_init as the user's C of every platform).

    fw = build(plat, model_path)                 # ConformanceFirmware: .path, .compiled, .model_path
    with plat.start(fw.path) as sess: ...

It is built the way `utvm build-device --model M --extra-source utvm_acceptance.c` builds: with the platform's own
`build()` (the host, plugins), or, when a test asks for a deliberately broken port (faults.py), from the Cortex-M
platform's firmware spec with the fault applied. Nothing else differs from what `utvm run` runs, so what the kit
checks is the port the platform ships (or the porter's, for a plugin or a serial board).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utvm.acceptance.faults import Fault, apply_to_spec, host_sources
from utvm.errors import UsageError

C_DIR = Path(__file__).resolve().parent / "c"
#: The conformance module (its functions are listed in its header comment).
CONFORMANCE_SOURCE = C_DIR / "utvm_acceptance.c"
#: The model the kit runs unless told otherwise: TFLM's hello_world (int8, one fully connected stack), in the
#: repository's model corpus (utvm.support.models: $UTVM_MODELS_DIR or models/).
DEFAULT_MODEL = Path("tflm") / "hello_world_int8.tflite"
#: The model's name in the firmware (its symbols are tvmgen_acceptance_*).
MODEL_NAME = "acceptance"
#: crt_config.h values the kit needs beyond the platform's: room in the global registry for the conformance
#: module's eleven functions (and acceptance.late, registered at run time) beside the built-ins.
KIT_CRT_CONFIG: dict[str, int] = {"TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES": 1024}


@dataclass(frozen=True)
class ConformanceFirmware:
    path: Path
    compiled: Any  # utvm.compiler.CompiledModel
    model_path: Path


def default_model() -> Path:
    from utvm.support.models import model_path

    return model_path(DEFAULT_MODEL)


def compile_model(plat: Any, model: Path) -> Any:
    """`model` compiled for the platform's target with the default options (as `utvm run` would)."""
    from utvm.compiler import compile
    from utvm.frontend import load

    return compile(load(model), model_name=MODEL_NAME, target=getattr(plat, "target", None) or "host")


def build(plat: Any, model: Path | None = None, faults: Sequence[Fault] = ()) -> ConformanceFirmware:
    """Build the conformance firmware of platform instance `plat` (cached by content like every firmware)."""
    from utvm import evaluate
    from utvm.platform.host import HostPlatform
    from utvm.platform.qemu.platform import CortexMFirmware

    spec_faults = bool(faults) and isinstance(plat, CortexMFirmware)
    if faults and not spec_faults and not isinstance(plat, HostPlatform):
        raise UsageError(f"{plat.name}: the kit's test faults exist for the host and the Cortex-M firmware only")
    model_path = Path(model) if model is not None else default_model()
    compiled = compile_model(plat, model_path)
    sources = evaluate.firmware_sources(compiled)
    config = {**KIT_CRT_CONFIG, **evaluate.firmware_crt_config(compiled)}
    common: dict[str, Any] = {"with_test_functions": False, "crt_config": config,
                              "system_lib_sources": sources}
    if spec_faults:
        spec = plat.firmware_spec(extra_sources=[CONFORMANCE_SOURCE], **common)
        path = plat._build_elf(apply_to_spec(spec, faults))  # noqa: SLF001 - the subclass hook of CortexMFirmware
    else:
        extra = [CONFORMANCE_SOURCE, *host_sources(faults)]
        path = Path(plat.build(extra_sources=extra, **common))
    return ConformanceFirmware(Path(path), compiled, model_path)
