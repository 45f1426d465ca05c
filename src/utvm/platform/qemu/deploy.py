"""Standalone deployment firmware for the QEMU boards (`utvm deploy`, and what `utvm size` measures).

The project (see project.py for the layout) holds the model's generated code, a header of sample inputs
(`include/utvm_samples.h`) and a `src/main.c` that fills the model's inputs from it, runs the model once
through its entry point, prints every output over UART0 and ends the emulation with a status:

- interface `c`: `TVMExecute(&tvmgen_<m>_model, &inputs, &outputs, context)` (tvm_micro_runtime.h, header
  only: no CRT library is linked at all; a `--workspace user` model gets a static workspace through a
  `static const TVMContext`);
- interface `packed` (packed or unpacked operators): `tvmgen_<m>_run` called as a PackedFunc over DLTensors;
  the CRT's common library (error reporting) and the TVMPlatform hooks are linked.

No RPC server and no function registry are linked unless `with_rpc` (then the system library is added
and, after printing, the firmware serves RPC on the same UART until the host sends Shutdown).

A model compiled with `--params external` keeps its weights in a parameter blob (utvm.compiler.params): the
project carries it as `src/params.bin`, which `src/params.c` pulls into the flash section `utvm_params` with
an assembler `.incbin` (the template Makefile rebuilds `src/NAME.o` when `src/NAME.bin` changes), between the
symbols `utvm_params_start` and `utvm_params_end` (include/utvm_params.h). Before the first run main.c
validates the blob and installs it (`TVMSetParameters` into its context, interface `c`;
`tvmgen_<m>_set_parameters` into the model's own context, interface packed, and with RPC for the C interface
too) and prints a `params` line; a refused blob ends the firmware with the refusal as its status and the
model never runs. A product replaces the weights in the field by writing another params.bin of the same
code (same size) at `utvm_params_start` (printed at boot, in build/firmware.map and `nm`).

UART output (text, one item per line):

    utvm-deploy <model> <board>
    params <address of the blob, 0x + 8 hex digits> <bytes> <status of its validation>   (--params external)
    output <index> <name> <dtype> <d0>x<d1>... <count>      (shape `()` for a scalar, a rank-0 tensor)
    <values, 16 per line; integers in decimal, float32 as 0x + 8 hex digits of its IEEE-754 bits>
    status <return code of the model>
    stack <bytes of stack ever used since reset (stack painting)>
    end

With a refused parameter blob no output is printed and `status` is the refusal (kTvmErrorParams*).

Exit status (semihosting): 0 when the model returned 0, 1 when it returned an error (or its parameter blob
was refused), 86 on TVMPlatformAbort, 128 + N on fault exception N.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utvm.errors import PlatformError
from utvm.platform.qemu.boards import Board, get_board
from utvm.platform.qemu.project import FirmwareSpec, generate_project
from utvm.platform.qemu.runner import qemu_command
from utvm.support.ctext import c_comment, c_string

# dtype -> (C type, DLDataTypeCode, bits)
C_TYPES: dict[str, tuple[str, int, int]] = {
    "int8": ("int8_t", 0, 8),
    "int16": ("int16_t", 0, 16),
    "int32": ("int32_t", 0, 32),
    "uint8": ("uint8_t", 1, 8),
    "uint16": ("uint16_t", 1, 16),
    "uint32": ("uint32_t", 1, 32),
    "uint64": ("uint64_t", 1, 64),
    "float32": ("float", 2, 32),
    "bool": ("uint8_t", 6, 8),
}
DEPLOY_CRT_LIBS = ("common", "memory")
RPC_CRT_LIBS = ("common", "memory", "rpc_common", "rpc_server")
EXIT_MODEL_ERROR = 1
EXIT_ABORT = 86
DEFAULT_STACK_SIZE = 0x10000
#: --params external: the blob's file in the project's src/, the C file that links it, its flash section and
#: the header naming its bounds (see the module docstring)
PARAMS_FILE = "params.bin"
PARAMS_SOURCE = "params.c"
PARAMS_SECTION = "utvm_params"
PARAMS_HEADER = "utvm_params.h"


def _ctype(dtype: str, what: str) -> tuple[str, int, int]:
    try:
        return C_TYPES[dtype]
    except KeyError:
        raise PlatformError(f"{what}: dtype {dtype!r} is not supported by the deploy firmware") from None


def _c_literal(value: Any, dtype: str) -> str:
    if dtype == "float32":
        v = float(value)
        if not np.isfinite(v):
            raise PlatformError(f"sample input value {v} is not finite")
        return f"{v.hex()}f"
    return str(int(value))


def samples_header(compiled: Any, inputs: Sequence[np.ndarray], note: str = "") -> str:
    """include/utvm_samples.h: the sample inputs as const arrays, in model order."""
    iface = compiled.interface
    if len(inputs) != len(iface.inputs):
        raise PlatformError(f"model {compiled.model_name!r} has {len(iface.inputs)} inputs, got {len(inputs)}")
    out = [
        "/*",
        f" * utvm_samples.h -- sample inputs of model '{compiled.model_name}' (written by utvm deploy).",
        f" * {note}" if note else " * Replace them with your own data (same types and sizes).",
        " */",
        "#ifndef UTVM_SAMPLES_H_",
        "#define UTVM_SAMPLES_H_",
        "",
        "#include <stdint.h>",
        "",
    ]
    for i, (x, a) in enumerate(zip(iface.inputs, inputs, strict=True)):
        a = np.asarray(a)
        if str(a.dtype) != x.dtype or tuple(a.shape) != tuple(x.shape):
            raise PlatformError(
                f"sample input {x.name!r} must be {x.dtype}{list(x.shape)}, got {a.dtype}{list(a.shape)}"
            )
        ctype = _ctype(x.dtype, f"input {x.name!r}")[0]
        flat = a.reshape(-1)
        values = [_c_literal(v, x.dtype) for v in flat]
        rows = [", ".join(values[j : j + 16]) for j in range(0, len(values), 16)] or ["0"]
        out.append(f"/*! Input {i} {c_comment(repr(x.name))}: {x.dtype}{list(x.shape)} */")
        out.append(f"static const {ctype} utvm_sample_input_{i}[{max(1, flat.size)}] __attribute__((aligned(16))) = {{")
        out += [f"    {r}," for r in rows]
        out += ["};", ""]
    out += ["#endif /* UTVM_SAMPLES_H_ */", ""]
    return "\n".join(out)


def _external_params(compiled: Any) -> bool:
    """Whether `compiled` reads its weights from a parameter blob (--params external)."""
    return getattr(compiled, "params_blob", None) is not None


def params_source(compiled: Any) -> str:
    """src/params.c: the assembler copies src/params.bin, byte for byte, into the flash section PARAMS_SECTION
    (16-byte aligned, as TVMSetParameters requires), between utvm_params_start and utvm_params_end. The path
    of `.incbin` is relative to the project's directory, where make runs the compiler."""
    return "\n".join([
        "/*",
        f" * params.c -- the parameter blob of model '{c_comment(compiled.model_name)}' (--params external; written by "
        "utvm deploy).",
        f" * The assembler copies src/{PARAMS_FILE} as it is into the flash section `{PARAMS_SECTION}`, between",
        " * utvm_params_start and utvm_params_end (include/utvm_params.h); main.c validates it with",
        " * TVMSetParameters before the first run. Replace src/params.bin with another blob of the same compiled",
        " * code (utvm compile --params external: parameters/params.bin of its MLF) and run make: only this file is",
        " * rebuilt. In a product, write the new blob at utvm_params_start instead (see README.md).",
        " */",
        f'#include "{PARAMS_HEADER}"',
        "",
        "__asm__(",
        f'    "  .section {PARAMS_SECTION}, \\"a\\", %progbits\\n"',
        '    "  .balign 16\\n"',
        '    "  .global utvm_params_start\\n"',
        '    "  .type utvm_params_start, %object\\n"',
        '    "utvm_params_start:\\n"',
        f'    "  .incbin \\"src/{PARAMS_FILE}\\"\\n"',
        '    "  .global utvm_params_end\\n"',
        '    "utvm_params_end:\\n"',
        '    "  .size utvm_params_start, utvm_params_end - utvm_params_start\\n"',
        '    "  .previous\\n");',
        "",
    ])


def params_header(compiled: Any) -> str:
    """include/utvm_params.h: the bounds of the blob src/params.c puts in flash."""
    m = compiled.model_name
    up = compiled.prefix.upper()
    return "\n".join([
        "/*",
        f" * utvm_params.h -- where the parameter blob of model '{c_comment(m)}' is (written by utvm deploy).",
        f" * src/params.c puts src/{PARAMS_FILE} in the flash section `{PARAMS_SECTION}`: its first byte is",
        f" * utvm_params_start (16-byte aligned), and it holds UTVM_PARAMS_BYTES bytes ({up}_PARAMS_SIZE",
        " * when the blob is one of this model's; TVMSetParameters refuses any other). A field update writes a",
        " * new blob of the same size at utvm_params_start (the firmware prints the address at boot).",
        " */",
        "#ifndef UTVM_PARAMS_H_",
        "#define UTVM_PARAMS_H_",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        f'#define UTVM_PARAMS_SECTION "{PARAMS_SECTION}"',
        "extern const uint8_t utvm_params_start[];",
        "extern const uint8_t utvm_params_end[];",
        "#define UTVM_PARAMS_BYTES ((size_t)(utvm_params_end - utvm_params_start))",
        "",
        "#endif /* UTVM_PARAMS_H_ */",
        "",
    ])


_PRINT_HELPERS = r"""
/* Not every model needs every printer. */
#define UTVM_MAYBE_UNUSED __attribute__((unused))

static UTVM_MAYBE_UNUSED void put_uint(uint32_t value) {
  char text[11];
  int i = 10;
  text[i] = '\0';
  do {
    text[--i] = (char)('0' + (value % 10u));
    value /= 10u;
  } while (value != 0u);
  utvm_uart_puts(&text[i]);
}

static UTVM_MAYBE_UNUSED void put_int(int32_t value) {
  if (value < 0) {
    utvm_uart_puts("-");
    put_uint((uint32_t)(-(value + 1)) + 1u);
  } else {
    put_uint((uint32_t)value);
  }
}

static UTVM_MAYBE_UNUSED void put_hex32(uint32_t value) {
  static const char kHex[] = "0123456789abcdef";
  char text[11];
  int i;
  text[0] = '0';
  text[1] = 'x';
  for (i = 0; i < 8; ++i) {
    text[2 + i] = kHex[(value >> (28 - 4 * i)) & 0xFu];
  }
  text[10] = '\0';
  utvm_uart_puts(text);
}

static UTVM_MAYBE_UNUSED void put_sep(size_t i, size_t count) {
  utvm_uart_puts(((i + 1u) % 16u == 0u || i + 1u == count) ? "\n" : " ");
}
"""


def deploy_main(compiled: Any, board: Board, with_rpc: bool = False) -> str:
    """src/main.c of the deploy firmware (see the module docstring)."""
    iface = compiled.interface
    m = compiled.model_name
    prefix = compiled.prefix
    conv = compiled.options.convention
    user_ws = compiled.options.workspace == "user"
    external = _external_params(compiled)
    # the C interface runs with the application's context: a mutable one when TVMSetParameters fills it
    context_decl = "static TVMContext" if external else "static const TVMContext"
    lines = [
        "/*",
        f" * main.c -- standalone firmware of model '{m}' on {board.name} (written by utvm deploy).",
        " * Fills the inputs from utvm_samples.h, runs the model once, prints the outputs on UART0 and ends",
        " * the emulation with the status (0 = the model returned 0). See utvm.platform.qemu.deploy.",
        *([f" * The weights are in src/{PARAMS_FILE} (--params external), validated and installed before the run;",
           " * a refused blob is reported (`params` line) and ends the firmware with the refusal as the status."]
          if external else []),
        " */",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <string.h>",
        "",
    ]
    if conv == "c":
        lines += ["#include <tvm/runtime/crt/tvm_micro_runtime.h>"]
    else:
        lines += ["#include <tvm/runtime/c_runtime_api.h>", "#include <tvm/runtime/crt/error_codes.h>"]
    if with_rpc:
        lines += ["#include <tvm/runtime/crt/microtvm_rpc_server.h>", "#include <tvm/runtime/crt/platform.h>"]
    lines += ["", f'#include "{compiled.header_name}"', '#include "utvm_board.h"', '#include "utvm_samples.h"']
    if external:
        lines += [f'#include "{PARAMS_HEADER}"']
    if conv != "c" or with_rpc:
        lines += ['#include "utvm_platform.h"']
    lines.append("")
    for i, x in enumerate(iface.outputs):
        ctype = _ctype(x.dtype, f"output {x.name!r}")[0]
        count = max(1, int(np.prod(x.shape)))
        lines.append(f"static {ctype} utvm_output_{i}[{count}] __attribute__((aligned(16)));")
    pools = compiled.plan.pools
    if conv == "c" and user_ws and pools:
        # One array per memory pool (in its linker section when it has one), in pool order.
        for u in pools:
            attrs = f"aligned({u.spec.align})" + (f", section(\"{u.spec.section}\")" if u.spec.section else "")
            size = f"TVMGEN_{m.upper()}_{u.spec.name.upper()}_WORKSPACE_SIZE"
            lines.append(f"static uint8_t utvm_workspace_{u.spec.name}[{size} > 0 ? {size} : 1] "
                         f"__attribute__(({attrs}));")
        names = ", ".join(f"utvm_workspace_{u.spec.name}" for u in pools)
        lines += [f"static void* const utvm_workspaces[{len(pools)}] = {{{names}}};",
                  f"{context_decl} utvm_context = {{.workspace = utvm_workspaces}};"]
    elif conv == "c" and user_ws:
        size = f"TVMGEN_{m.upper()}_WORKSPACE_SIZE"  # 0 for a model without intermediates: no zero-size array
        lines.append(f"static uint8_t utvm_workspace[{size} > 0 ? {size} : 1] __attribute__((aligned(16)));")
        # A context fixed at build time: const, so it can live in flash (TVMExecute takes const TVMContext*).
        lines += ["static void* const utvm_workspaces[1] = {utvm_workspace};",
                  f"{context_decl} utvm_context = {{.workspace = utvm_workspaces}};"]
    elif conv == "c" and external:
        lines.append("static TVMContext utvm_context = {.workspace = NULL};  /* params: TVMSetParameters */")
    lines.append(_PRINT_HELPERS)
    if conv != "c" or with_rpc:
        lines += [
            "void utvm_app_report_abort(tvm_crt_error_t code) {",
            '  utvm_uart_puts("abort ");',
            "  put_hex32((uint32_t)code);",
            '  utvm_uart_puts("\\n");',
            "}",
            "",
        ]
    if with_rpc:
        lines += [
            "static tvm_crt_ssize_t uart_write(void* context, const uint8_t* data, size_t num_bytes) {",
            "  (void)context;",
            "  utvm_uart_write(data, num_bytes);",
            "  return (tvm_crt_ssize_t)num_bytes;",
            "}",
            "",
            "static int serve_rpc(void) {",
            "  microtvm_rpc_server_t server;",
            "  if (TVMPlatformInitialize() != kTvmErrorNoError) {",
            "    return 2;",
            "  }",
            "  server = MicroTVMRpcServerInit(uart_write, NULL);",
            "  for (;;) {",
            "    uint8_t buf[256];",
            "    uint8_t* data = buf;",
            "    size_t size = utvm_uart_read_available(buf, sizeof(buf));",
            "    while (size > 0u) {",
            "      tvm_crt_error_t err = MicroTVMRpcServerLoop(server, &data, &size);",
            "      if (err == kTvmErrorPlatformShutdown) {",
            "        return 0;",
            "      }",
            "      if (err != kTvmErrorNoError) {",
            "        TVMPlatformAbort(err);",
            "      }",
            "    }",
            "  }",
            "}",
            "",
        ]
    lines += ["int main(void) {", "  int32_t rc;", "  size_t i = 0u;",
              "  (void)i;  /* no loop when every output is empty */"]
    if conv == "c":
        lines += [f"  struct {prefix}_inputs inputs;", f"  struct {prefix}_outputs outputs;"]
    else:
        n = len(iface.inputs) + len(iface.outputs)
        lines += [f"  DLTensor tensors[{n}];", f"  TVMValue args[{n}];", f"  int type_codes[{n}];",
                  "  TVMValue ret_value;", "  int ret_code = 0;"]
        for k, x in enumerate([*iface.inputs, *iface.outputs]):
            dims = ", ".join(str(int(d)) for d in x.shape) or "1"
            lines.append(f"  static int64_t shape_{k}[{max(1, len(x.shape))}] = {{{dims}}};")
    lines += ["  utvm_uart_init();", f'  utvm_uart_puts("utvm-deploy {m} {board.name}\\n");']
    if external:
        lines += _install_params(compiled, with_rpc)
    if conv == "c":
        for i, x in enumerate(iface.inputs):
            ctype = _ctype(x.dtype, x.name)[0]
            lines.append(f"  inputs.{x.field} = ({ctype}*)(uintptr_t)utvm_sample_input_{i};")
        for i, x in enumerate(iface.outputs):
            lines.append(f"  outputs.{x.field} = utvm_output_{i};")
        if user_ws or external:
            lines.append(f"  rc = TVMExecute(&{prefix}_model, &inputs, &outputs, &utvm_context);")
        else:
            lines.append(f"  rc = TVMExecute(&{prefix}_model, &inputs, &outputs, NULL);")
    else:
        tensors = [*(f"(void*)(uintptr_t)utvm_sample_input_{i}" for i in range(len(iface.inputs))),
                   *(f"(void*)utvm_output_{i}" for i in range(len(iface.outputs)))]
        for k, (x, data) in enumerate(zip([*iface.inputs, *iface.outputs], tensors, strict=True)):
            _, code, bits = _ctype(x.dtype, x.name)
            lines += [
                f"  tensors[{k}].data = {data};",
                f"  tensors[{k}].device.device_type = kDLCPU;",
                f"  tensors[{k}].device.device_id = 0;",
                f"  tensors[{k}].ndim = {len(x.shape)};",
                f"  tensors[{k}].dtype.code = {code}u;",
                f"  tensors[{k}].dtype.bits = {bits}u;",
                f"  tensors[{k}].dtype.lanes = 1u;",
                f"  tensors[{k}].shape = shape_{k};",
                f"  tensors[{k}].strides = NULL;",
                f"  tensors[{k}].byte_offset = 0u;",
                f"  args[{k}].v_handle = &tensors[{k}];",
                f"  type_codes[{k}] = (int)kTVMDLTensorHandle;",
            ]
        n = len(iface.inputs) + len(iface.outputs)
        lines.append(f"  rc = {prefix}_run(args, type_codes, {n}, &ret_value, &ret_code, NULL);")
    for i, x in enumerate(iface.outputs):
        count = int(np.prod(x.shape))  # 0 for a tensor with a zero dimension: nothing printed, no loop
        shape = "x".join(str(int(d)) for d in x.shape) or "()"  # a scalar keeps its rank 0
        name = c_string("".join(c if c.isprintable() else repr(c)[1:-1] for c in x.name))  # one line of text
        lines.append(f'  utvm_uart_puts("output {i} {name} {x.dtype} {shape} {count}\\n");')
        if count == 0:
            continue
        lines.append(f"  for (i = 0; i < {count}u; ++i) {{")
        if x.dtype == "float32":
            lines += ["    uint32_t bits;", f"    memcpy(&bits, &utvm_output_{i}[i], sizeof(bits));",
                      "    put_hex32(bits);"]
        elif x.dtype in ("uint32",):
            lines.append(f"    put_uint(utvm_output_{i}[i]);")
        else:
            lines.append(f"    put_int((int32_t)utvm_output_{i}[i]);")
        lines += [f"    put_sep(i, {count}u);", "  }"]
    lines += [
        '  utvm_uart_puts("status ");',
        "  put_int(rc);",
        '  utvm_uart_puts("\\nstack ");',
        "  put_uint((uint32_t)utvm_stack_high_water());",
        '  utvm_uart_puts("\\nend\\n");',
    ]
    if with_rpc:
        lines += ['  utvm_uart_puts("rpc\\n");', "  (void)serve_rpc();"]
    lines += [f"  return rc == 0 ? 0 : {EXIT_MODEL_ERROR};", "}", ""]
    return "\n".join(lines)


def _install_params(compiled: Any, with_rpc: bool) -> list[str]:
    """main.c, --params external: validate and install the blob in flash, print the `params` line, and end the
    firmware with the refusal as its status when the blob is refused (the model never runs on it)."""
    prefix = compiled.prefix
    blob = "utvm_params_start, UTVM_PARAMS_BYTES"
    if compiled.options.convention == "c":
        lines = [f"  rc = TVMSetParameters(&utvm_context, &{prefix}_params_info, {blob});"]
        if with_rpc:  # RPC runs the model with its own context: the same blob there
            lines += ["  if (rc == 0) {", f"    rc = {prefix}_set_parameters({blob});", "  }"]
    else:
        lines = [f"  rc = {prefix}_set_parameters({blob});"]
    return [
        f"  /* The parameter blob in flash (src/{PARAMS_FILE}, section {PARAMS_SECTION}): validated before the first",
        "   * run. */",
        *lines,
        '  utvm_uart_puts("params ");',
        "  put_hex32((uint32_t)(uintptr_t)utvm_params_start);",
        '  utvm_uart_puts(" ");',
        "  put_uint((uint32_t)UTVM_PARAMS_BYTES);",
        '  utvm_uart_puts(" ");',
        "  put_int(rc);",
        '  utvm_uart_puts("\\n");',
        "  if (rc != 0) {  /* refused: report it and stop, never run the model on it */",
        '    utvm_uart_puts("status ");',
        "    put_int(rc);",
        '    utvm_uart_puts("\\nstack ");',
        "    put_uint((uint32_t)utvm_stack_high_water());",
        '    utvm_uart_puts("\\nend\\n");',
        f"    return {EXIT_MODEL_ERROR};",
        "  }",
    ]


def deploy_spec(
    compiled: Any,
    board_name: str,
    inputs: Sequence[np.ndarray],
    with_rpc: bool = False,
    stack_size: int = DEFAULT_STACK_SIZE,
    note: str = "",
    opt: str = "-O2",
) -> FirmwareSpec:
    """The FirmwareSpec of the deploy firmware of `compiled` on `board_name`."""
    board = get_board(board_name)
    sources: dict[str, str | bytes] = {"main.c": deploy_main(compiled, board, with_rpc)}
    codegen = {}
    for name, text in (compiled.firmware_sources if with_rpc else compiled.sources).items():
        if name.endswith("_system_lib.c") and not with_rpc:
            continue  # the function registry only serves RPC
        codegen[f"src/{name}"] = text
    for name, text in compiled.includes.items():
        codegen[f"include/{name}"] = text
    includes = {"utvm_samples.h": samples_header(compiled, inputs, note)}
    if _external_params(compiled):  # the blob as a file of the project, linked into flash (module docstring)
        sources[PARAMS_SOURCE] = params_source(compiled)
        sources[PARAMS_FILE] = bytes(compiled.params_blob)
        includes[PARAMS_HEADER] = params_header(compiled)
    conv = compiled.options.convention
    crt_libs: tuple[str, ...] = ()
    if with_rpc:
        crt_libs = RPC_CRT_LIBS
    elif conv != "c":
        crt_libs = DEPLOY_CRT_LIBS
    config: dict[str, int | str] = {}
    if with_rpc:
        config = {"TVM_CRT_MAX_PACKET_SIZE_BYTES": 2048, "TVM_CRT_MAX_ARGS": 16}
    return FirmwareSpec(
        board=board,
        app_sources=sources,
        crt_libs=crt_libs,
        crt_config=config,
        include_files=includes,
        codegen_files=codegen,
        defines=["UTVM_ABORT_RESETS=0", "UTVM_PLATFORM_MEMORY_BYTES=4096u"] if crt_libs else [],
        stack_size=stack_size,
        opt=opt,
    )


def generate_deploy_project(
    compiled: Any, board_name: str, out_dir: Path, inputs: Sequence[np.ndarray], with_rpc: bool = False,
    note: str = "",
) -> Path:
    """Write the self-contained deploy project to out_dir (see the module docstring)."""
    spec = deploy_spec(compiled, board_name, inputs, with_rpc=with_rpc, note=note)
    project = generate_project(spec, Path(out_dir))
    (project / "README.md").write_text(_readme(compiled, spec.board, with_rpc))
    return project


def _libm_note(compiled: Any) -> str:
    """What the README says about <math.h>: which functions the model calls, and that libm is linked."""
    funcs = tuple(getattr(compiled, "libm_functions", ()))
    linked = ("the Makefile links newlib's libm (`-lm`, always on the link line, so C you add to `src/` may "
              "call <math.h> too; unused, it costs nothing)")
    if funcs:
        return f"- The model calls {', '.join(f'`{f}`' for f in funcs)} from <math.h>: {linked}."
    return f"- The model calls no <math.h> function; {linked}."


def _readme(compiled: Any, board: Board, with_rpc: bool) -> str:
    rpc = "- Built with the RPC server: after printing, the firmware serves RPC on the UART." if with_rpc else ""
    return f"""# {compiled.model_name} on {board.name}

Standalone firmware written by `utvm deploy` ({compiled.options.convention} convention, QEMU machine
`{board.machine}`). Needs `arm-none-eabi-gcc` with newlib and `qemu-system-arm`; nothing else.

    make            # build build/firmware.elf
    make run        # run it in QEMU: prints the outputs over the UART, exits with the model's status
    make size       # flash/RAM of the firmware

- `src/main.c` fills the model's inputs from `include/utvm_samples.h`, runs the model and prints every
  output (integers in decimal, float32 as IEEE-754 bits in hex), the status and the stack high-water mark.
- `codegen/host/` is the generated model (as in the Model Library Format); `board/` the startup code,
  UART, SysTick and semihosting; `crt/` the utvm C runtime, when this convention needs it.
{_libm_note(compiled)}
{_params_note(compiled)}{rpc}
{_isa_note(board)}{_boot_note(board)}"""


def _params_note(compiled: Any) -> str:
    """What the README says about the parameter blob (--params external), empty for embedded weights."""
    if not _external_params(compiled):
        return ""
    up = compiled.prefix.upper()
    return f"""- The weights are not in the code (`--params external`): they are `src/{PARAMS_FILE}`, a parameter
  blob of {len(compiled.params_blob)} bytes (`{up}_PARAMS_SIZE`) that `src/{PARAMS_SOURCE}` links into the flash section
  `{PARAMS_SECTION}` (`.incbin`), between `utvm_params_start` and `utvm_params_end` (`include/{PARAMS_HEADER}`).
  Before the first run `main.c` validates it and installs it (`TVMSetParameters`, or
  `{compiled.prefix}_set_parameters` in the packed interface) and prints `params <address> <bytes> <status>`;
  a refused blob (another model's, truncated, corrupt: the `kTvmErrorParams*` codes of
  `tvm/runtime/crt/error_codes.h`) ends the firmware with that status, the model never runs on it.
- New weights for the same code (a retrained model compiled with the same options and `--params external`:
  `parameters/params.bin` of its MLF; its model hash must match `{up}_PARAMS_HASH`): drop the file in as
  `src/{PARAMS_FILE}` and run `make` (only `{PARAMS_SOURCE}` is rebuilt). A product updates them in the field
  without reflashing the program: write the new blob (same size) at the section's address, `utvm_params_start`,
  which the firmware prints at boot and `build/firmware.map` (section `{PARAMS_SECTION}`) and
  `arm-none-eabi-nm build/firmware.elf` show. `board/mps2.ld` puts the section right after the code, so the
  address moves when the code changes size: give its `utvm_params` output section a fixed address if your
  updater needs one.
"""


def _boot_note(board: Board) -> str:
    if board.boot_origin is None:
        return ""
    return (f"- The core reads its vector table at reset from {board.boot_origin:#010x}, outside the code memory\n"
            f"  ({board.flash_origin:#010x}): `board/mps2.ld` puts a boot table there (the initial stack pointer\n"
            f"  and the reset handler). It is in `build/firmware.elf`, which QEMU loads; `build/firmware.bin` is\n"
            f"  the code memory's image only.\n")


def _isa_note(board: Board) -> str:
    if board.isa_check is None:
        return ""
    return (f"- Every object is compiled for `-mcpu={board.cpu}` ({board.isa_check}) and runs on `{board.machine}`,\n"
            f"  whose core also runs instructions {board.isa_check} lacks: check the image with\n"
            f"  `python -m utvm.platform.qemu.image_check build/firmware.elf` (`utvm deploy --build` does).\n")


# --- running and reading the output ----------------------------------------------------------------------
@dataclass(frozen=True)
class DeployParams:
    """The firmware's `params` line (--params external): where its blob is, its bytes, its validation."""

    address: int
    size: int
    status: int


@dataclass
class DeployOutput:
    model: str
    board: str
    outputs: dict[str, np.ndarray]
    status: int
    stack_high_water: int
    exit_status: int | None = None
    params: DeployParams | None = None


_OUTPUT_HEADER = re.compile(r"^output (\d+) (.+) (\S+) (\S+) (\d+)$")


def parse_deploy_output(text: str) -> DeployOutput:
    """Read what the deploy firmware printed (see the module docstring)."""
    lines = text.replace("\r", "").split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("utvm-deploy "))
    except StopIteration:
        raise PlatformError(f"no 'utvm-deploy' banner in the firmware's output: {text[:200]!r}") from None
    _, model, board = lines[start].split(" ", 2)
    outputs: dict[str, np.ndarray] = {}
    status = stack = None
    params: DeployParams | None = None
    i = start + 1
    while i < len(lines):
        line = lines[i]
        m = _OUTPUT_HEADER.match(line)
        if m:
            name, dtype, shape_s, count = m[2], m[3], m[4], int(m[5])
            values: list[str] = []
            i += 1
            while len(values) < count and i < len(lines):
                values += lines[i].split()
                i += 1
            if len(values) != count:
                raise PlatformError(f"output {name!r}: expected {count} values, the firmware printed {len(values)}")
            try:
                shape = tuple(int(d) for d in shape_s.split("x")) if shape_s not in ("", "()") else ()
            except ValueError:
                raise PlatformError(f"output {name!r}: bad shape {shape_s!r} in the firmware's output") from None
            if int(np.prod(shape)) != count:
                raise PlatformError(f"output {name!r}: shape {shape_s} does not hold {count} values")
            if dtype == "float32":
                arr = np.array([int(v, 16) for v in values], dtype=np.uint32).view(np.float32)
            else:
                arr = np.array([int(v) for v in values], dtype=np.int64).astype(dtype)
            outputs[name] = arr.reshape(shape)
            continue
        if line.startswith("params "):
            fields = line.split()
            try:
                params = DeployParams(int(fields[1], 16), int(fields[2]), int(fields[3]))
            except (IndexError, ValueError):
                raise PlatformError(f"bad params line in the firmware's output: {line!r}") from None
        elif line.startswith("status "):
            status = int(line.split()[1])
        elif line.startswith("stack "):
            stack = int(line.split()[1])
        elif line == "end":
            break
        elif line.startswith("abort "):
            raise PlatformError(f"the firmware aborted (TVMPlatformAbort, error {line.split()[1]})")
        i += 1
    if status is None or stack is None:
        raise PlatformError(f"the firmware's output ends early (no status/stack line): {text[-200:]!r}")
    return DeployOutput(model, board, outputs, status, stack, params=params)


def run_deploy_firmware(board_name: str, elf: Path, timeout: float = 120.0) -> DeployOutput:
    """Run a (non-RPC) deploy firmware in QEMU and parse what it printed."""
    board = get_board(board_name)
    cmd = qemu_command(board, elf)
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PlatformError(f"deploy firmware {elf} did not finish within {timeout:g} s") from None
    text = proc.stdout.decode("utf-8", errors="replace")
    out = parse_deploy_output(text)
    out.exit_status = proc.returncode
    return out
