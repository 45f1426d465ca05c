"""The QEMU platforms (`qemu-cortex-m0`, `qemu-cortex-m3`, `qemu-cortex-m4`, `qemu-cortex-m7`,
`qemu-cortex-m33`, `qemu-cortex-m55`): evaluation firmware with the RPC server on UART0, run on
qemu-system-arm (boards.py).

Same interface as the host platform (`utvm.platform.Platform`):

    plat = get_platform("qemu-cortex-m4")
    elf = plat.build(with_test_functions=True, system_lib_sources=[...], include_dirs=[...])
    with plat.start(elf) as sess:            # a connected utvm.rpc.Session over the emulated UART
        ...

The firmware is the CRT (common, memory, rpc_common, rpc_server) + the board support and TVMPlatform hooks of
template/ + template/apps/main_rpc.c, optionally the platform-neutral test library of the host platform
(testing.add_one/fail/log/sleep_ms, plus testing.abort here) and generated model code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from utvm.errors import PlatformError
from utvm.platform import deliver
from utvm.platform.qemu.boards import BOARDS, INSTRUCTIONS_PER_SECOND, Board, get_board
from utvm.platform.qemu.project import APPS_DIR, FirmwareSpec, build_firmware
from utvm.platform.qemu.runner import QemuTransport

__all__ = ["CortexMFirmware", "QemuCortexM0Platform", "QemuCortexM3Platform", "QemuCortexM4Platform",
           "QemuCortexM7Platform", "QemuCortexM33Platform", "QemuCortexM55Platform", "QemuPlatform",
           "QemuTransport"]

#: The host platform's test library is platform neutral (C99 + CRT); the QEMU firmware links the same file.
TEST_FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "host"
CRT_LIBS = ("common", "memory", "rpc_common", "rpc_server")

#: crt_config.h of the RPC firmware unless the caller overrides it: 2 KiB packets (docs/architecture.md §5.3), room for
#: runtime.RPCTimeEvaluator's full argument list, and a 256 KiB workspace stack for generated code.
DEFAULT_CRT_CONFIG: dict[str, int] = {
    "TVM_CRT_MAX_PACKET_SIZE_BYTES": 2048,
    "TVM_CRT_MAX_ARGS": 16,
    "TVM_CRT_WORKSPACE_SIZE_BYTES": 256 * 1024,
}
#: Static pool behind TVMPlatformMemoryAllocate (RPC arrays): 1 MiB of the board's 4 MiB of RAM.
PLATFORM_MEMORY_BYTES = 1024 * 1024


class CortexMFirmware:
    """The Cortex-M RPC firmware (template/apps/main_rpc.c + CRT + board support) as a platform builds it:
    `firmware_spec` says what goes in, `build` makes and delivers the ELF. A subclass gives `name` and
    `board`, and may change the spec (the serial-board platform swaps the board files) or how the ELF is
    made (`_build_elf`)."""

    name: ClassVar[str] = ""
    board: Board

    def firmware_spec(
        self,
        *,
        with_test_functions: bool = True,
        crt_config: Mapping[str, int | str] | None = None,
        extra_sources: Sequence[Path | str] = (),
        system_lib_sources: Sequence[Path | str] = (),
        include_dirs: Sequence[Path | str] = (),
        crt_config_file: Path | str | None = None,
    ) -> FirmwareSpec:
        from utvm.errors import UsageError
        from utvm.platform import user_code

        sources: dict[str, str | bytes] = {"main.c": (APPS_DIR / "main_rpc.c").read_text()}
        headers: dict[str, str | bytes] = {}
        defines = ["UTVM_ABORT_RESETS=1", f"UTVM_PLATFORM_MEMORY_BYTES={PLATFORM_MEMORY_BYTES}u"]
        if with_test_functions:
            sources["utvm_test_functions.c"] = (TEST_FUNCTIONS_DIR / "src" / "utvm_test_functions.c").read_text()
            headers["utvm_test_functions.h"] = (TEST_FUNCTIONS_DIR / "include" / "utvm_test_functions.h").read_text()
            defines.append("UTVM_WITH_TEST_FUNCTIONS=1")
        extra_cflags: list[str] = []
        # Every source goes to src/ (compiled with the Makefile's strict flags: the user-code flags), every
        # header to include/, bytes as they are (a user's file in any encoding). utvm's headers first (the
        # generated ones beside the system library's sources); a user header that would take the place of
        # one of utvm's is refused (user_code.user_headers), one of the user's own path keeps the first, as
        # the host's search order does. An -I directory is copied whole, subdirectories kept.
        # A user's source is staged under a name make and every file system take (user_code.staged_name:
        # spaces, `$`, a 250-character stem); two of one staged name are refused, naming both.
        origin: dict[str, Path] = {"main.c": APPS_DIR / "main_rpc.c",
                                   "utvm_test_functions.c": TEST_FUNCTIONS_DIR / "src" / "utvm_test_functions.c"}
        user_code.check_given_once(extra_sources, self.name)
        user_names: set[str] = set()
        user = [(Path(src), True) for src in extra_sources] + [(Path(src), False) for src in system_lib_sources]
        for path, is_user in user:
            if not path.is_file():
                raise PlatformError(f"{self.name}: source {str(path)!r} does not exist")
            name = user_code.staged_name(path) if is_user else path.name
            if name in sources:  # (every name in sources has its origin)
                error = UsageError if is_user or name in user_names else PlatformError
                raise error(f"{self.name}: two sources would be src/{name} ({origin[name]} and {path}); rename one")
            if is_user:
                user_names.add(name)
            origin[name] = path
            sources[name] = user_code.read_user_file(path, self.name)
        for src in system_lib_sources:
            for h in sorted(Path(src).parent.glob("*.h")):
                headers.setdefault(h.name, user_code.read_user_file(h, self.name))
        for d in include_dirs:
            if not Path(d).is_dir():
                raise PlatformError(f"{self.name}: include directory {str(d)!r} does not exist")
        ours = user_code.own_headers(system_lib_sources)
        theirs = user_code.user_headers(extra_sources, include_dirs, ours, self.name)
        user_code.check_one_tree(theirs, self.name)
        for rel, h in theirs.items():
            headers.setdefault(rel, user_code.read_user_file(h, self.name))
        return FirmwareSpec(
            board=self.board,
            app_sources=sources,
            crt_libs=CRT_LIBS,
            crt_config=({**DEFAULT_CRT_CONFIG, **(crt_config or {})} if crt_config_file is None
                        else dict(crt_config or {})),
            crt_config_file=None if crt_config_file is None else Path(crt_config_file),
            crt_config_fallbacks={} if crt_config_file is None else dict(DEFAULT_CRT_CONFIG),
            include_files=headers,
            defines=defines,
            extra_cflags=extra_cflags,
        )

    def build(
        self,
        *,
        with_test_functions: bool = True,
        crt_config: Mapping[str, int | str] | None = None,
        extra_sources: Sequence[Path | str] = (),
        system_lib_sources: Sequence[Path | str] = (),
        output: Path | str | None = None,
        include_dirs: Sequence[Path | str] = (),
        crt_config_file: Path | str | None = None,
        **kwargs: Any,
    ) -> Path:
        """Build the RPC firmware; returns its ELF (a copy at `output` when given)."""
        if kwargs:
            raise PlatformError(f"{self.name}: build() got unsupported options {sorted(kwargs)}")
        spec = self.firmware_spec(
            with_test_functions=with_test_functions,
            crt_config=crt_config,
            extra_sources=extra_sources,
            system_lib_sources=system_lib_sources,
            include_dirs=include_dirs,
            crt_config_file=crt_config_file,
        )
        return deliver(self._build_elf(spec), output)

    def _build_elf(self, spec: FirmwareSpec) -> Path:
        """Make the firmware of `spec`; its ELF (cached by content)."""
        return build_firmware(spec, "rpc") / "build" / "firmware.elf"


class QemuPlatform(CortexMFirmware):
    """A QEMU MPS2 board as a utvm platform (subclasses fix the board)."""

    #: The CPU the board emulates (utvm.target): what code generated for this platform may assume.
    target: ClassVar[str] = ""
    #: Under -icount shift=0 the device's clock counts instructions: seconds * this = instructions.
    instructions_per_second: ClassVar[int] = INSTRUCTIONS_PER_SECOND
    #: The core's timing model in QEMU's cycles plugin (the board's, `Board.timing_model`), whose estimated
    #: cycles time evaluators report beside instructions; None: instructions only.
    timing_model: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name in BOARDS:
            cls.timing_model = BOARDS[cls.name].timing_model

    def __init__(self) -> None:
        if not self.name:
            raise PlatformError(f"QemuPlatform is abstract: use one of {', '.join(BOARDS)}")
        self.board = get_board(self.name)

    def start(self, firmware: Path | str, **session_kwargs: Any) -> Any:
        """Run `firmware` in QEMU and return a connected utvm.rpc.Session over UART0."""
        from utvm.rpc import Session

        path = Path(firmware)
        if not path.is_file():
            raise PlatformError(f"{self.name}: firmware {str(path)!r} does not exist (build it first)")
        transport = QemuTransport(self.board, path, timing_model=self.timing_model)
        try:
            return Session(transport, **session_kwargs)
        except BaseException:
            transport.close(timeout=0.0)
            raise


class QemuCortexM0Platform(QemuPlatform):
    """Armv6-M code (-mcpu=cortex-m0 throughout, portable C kernels, no FPU, division in libgcc) on the AN385's
    Cortex-M3: QEMU has no Cortex-M0 machine. Every image is proven Armv6-M-only when it is built (image_check.py)."""

    name = "qemu-cortex-m0"
    target = "cortex-m0"


class QemuCortexM3Platform(QemuPlatform):
    name = "qemu-cortex-m3"
    target = "cortex-m3"


class QemuCortexM4Platform(QemuPlatform):
    name = "qemu-cortex-m4"
    target = "cortex-m4"


class QemuCortexM7Platform(QemuPlatform):
    name = "qemu-cortex-m7"
    target = "cortex-m7"


class QemuCortexM33Platform(QemuPlatform):
    """The AN505 (Armv8-M Mainline with the DSP extension and a single-precision FPU), run in Secure state."""

    name = "qemu-cortex-m33"
    target = "cortex-m33"


class QemuCortexM55Platform(QemuPlatform):
    """The AN547 (Armv8.1-M Mainline with MVE, the DSP extension and a double-precision FPU), run in Secure
    state; code and constants in its 8 MiB QSPI flash, RAM in the SSE-300's 4 MiB SRAM (boards.py)."""

    name = "qemu-cortex-m55"
    target = "cortex-m55"
