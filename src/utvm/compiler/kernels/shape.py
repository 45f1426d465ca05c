"""Data-movement kernels: reshape (an alias of its input's bytes)."""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, register
from utvm.compiler.kernels.cemit import for_loop, lines


@register("reshape", alias=True)
def reshape(ctx: KernelContext) -> KernelCode:
    """Normally no code: the memory planner gives input and output one buffer. This copy runs only when
    both are caller buffers (a model input reshaped straight into a model output)."""
    return KernelCode(body=lines(f"const uint8_t* src = (const uint8_t*){ctx.inputs[0]};",
                                 f"uint8_t* dst = (uint8_t*){ctx.outputs[0]};",
                                 for_loop("i", 0, ctx.out_tensor().nbytes, "dst[i] = src[i];"), "return 0;"))
