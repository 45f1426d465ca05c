"""Data-movement kernels: reshape (an alias of its input's bytes)."""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, register


@register("reshape", alias=True)
def reshape(ctx: KernelContext) -> KernelCode:
    """Normally no code: the memory planner gives input and output one buffer. This copy runs only when
    both are caller buffers (a model input reshaped straight into a model output)."""
    n = ctx.out_tensor().nbytes
    return KernelCode(body=f"""\
const uint8_t* src = (const uint8_t*){ctx.inputs[0]};
uint8_t* dst = (uint8_t*){ctx.outputs[0]};
for (int32_t i = 0; i < {n}; ++i) {{
  dst[i] = src[i];
}}
return 0;""")
