"""CPU targets: what the generated C may assume about the processor it runs on (docs/architecture.md §11).

A target names a CPU and its features; code generation asks the target (never the platform's name), and
each platform declares its target (`Platform.target`; `utvm compile --target` overrides):

| target      | ISA            | DSP extension | FPU          | MVE | generated int8 kernels                      |
|-------------|----------------|---------------|--------------|-----|---------------------------------------------|
| host        | the build host | -             | -            | -   | portable C99 (the host compiler vectorises) |
| cortex-m0   | ARMv6-M        | no            | no           | no  | portable C99                                |
| cortex-m3   | ARMv7-M        | no            | no           | no  | portable C99                                |
| cortex-m4   | ARMv7E-M       | yes           | fpv4-sp-d16  | no  | SIMD MACs through <arm_acle.h>              |
| cortex-m7   | ARMv7E-M       | yes           | fpv5-d16     | no  | SIMD MACs through <arm_acle.h>              |
| cortex-m33  | ARMv8-M Main   | yes           | fpv5-sp-d16  | no  | SIMD MACs through <arm_acle.h>              |
| cortex-m55  | ARMv8.1-M Main | yes           | fp-armv8     | yes | MVE kernels through <arm_mve.h>             |

"DSP extension" is the ARMv7E-M/ARMv8-M DSP instructions (SMLAD, SXTB16, SSAT, ...), which the C compiler
exposes through ACLE's <arm_acle.h> when `__ARM_FEATURE_DSP` is defined; a DSP target's generated C checks
that macro and fails to compile with a clear #error on a compiler told a different CPU. Cortex-M33 parts
may omit the DSP extension; use `cortex-m33-nodsp` for those. "MVE" is the Armv8.1-M M-profile Vector
Extension (Helium: 128-bit vectors in the FPU's registers), exposed through ACLE's <arm_mve.h> when
`__ARM_FEATURE_MVE` is defined; code generated for an MVE target runs only on a CPU with MVE
(`Target.runs_on`), and only where the FPU's coprocessors CP10/CP11 are enabled (the QEMU boards' startup
does).
"""

from __future__ import annotations

from dataclasses import dataclass

from utvm.errors import UsageError

DEFAULT_TARGET = "host"


@dataclass(frozen=True)
class Target:
    name: str
    isa: str
    #: gcc's -mcpu (None: the host compiler's default CPU)
    mcpu: str | None
    dsp: bool = False
    fpu: str | None = None
    mve: bool = False
    #: bits of size_t / pointers (the host may be 64-bit; every Cortex-M is 32)
    pointer_bits: int = 32

    @property
    def is_cortex_m(self) -> bool:
        return self.mcpu is not None

    @property
    def float_flags(self) -> tuple[str, ...]:
        """gcc's float ABI flags for the CPU: hard float with its FPU; an MVE core takes the FPU its -mcpu
        implies (which carries MVE: an explicit -mfpu would only pick another newlib multilib); soft
        without an FPU."""
        if self.mve:
            return ("-mfloat-abi=hard",)
        return ("-mfloat-abi=hard", f"-mfpu={self.fpu}") if self.fpu else ("-mfloat-abi=soft",)

    @property
    def cpu_flags(self) -> tuple[str, ...]:
        """Flags the target's C is cross-compiled with (arm-none-eabi-gcc); empty for the host."""
        if self.mcpu is None:
            return ()
        return (f"-mcpu={self.mcpu}", "-mthumb", *self.float_flags)

    def features(self) -> list[str]:
        out = []
        if self.dsp:
            out.append("dsp")
        if self.fpu:
            out.append(f"fpu={self.fpu}")
        if self.mve:
            out.append("mve")
        return out

    def describe(self) -> str:
        feats = ", ".join(self.features()) or "no DSP, no FPU"
        return f"{self.name} ({self.isa}; {feats})"

    def runs_on(self, cpu: Target) -> str | None:
        """None if code generated for this target runs on `cpu`; else why not (one line). The DSP extension
        and MVE add requirements: everything else generated is portable C99 (the FPU is the C compiler's:
        a float ABI is the platform's build flags, not the generated C's)."""
        missing = [ext for ext, needed, present in (("the DSP extension", self.dsp, cpu.dsp),
                                                     ("MVE (Helium)", self.mve, cpu.mve))
                   if needed and not present]
        if missing:
            return (f"the code was generated for {self.name}, whose kernels use {' and '.join(missing)}, and "
                    f"{cpu.name} has {'neither' if len(missing) > 1 else 'none'}")
        return None

    def mlf_string(self) -> str:
        """The target as MLF metadata spells it (TVM's `c -keys=... -mcpu=...` form)."""
        keys = "arm_cpu,cpu" if self.is_cortex_m else "cpu"
        return f"c -keys={keys}" + (f" -mcpu={self.mcpu}" if self.mcpu else "")


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("host", "host", None, pointer_bits=64),
    Target("cortex-m0", "armv6-m", "cortex-m0"),
    Target("cortex-m3", "armv7-m", "cortex-m3"),
    Target("cortex-m4", "armv7e-m", "cortex-m4", dsp=True, fpu="fpv4-sp-d16"),
    Target("cortex-m7", "armv7e-m", "cortex-m7", dsp=True, fpu="fpv5-d16"),
    Target("cortex-m33", "armv8-m.main", "cortex-m33", dsp=True, fpu="fpv5-sp-d16"),
    Target("cortex-m33-nodsp", "armv8-m.main", "cortex-m33+nodsp", fpu="fpv5-sp-d16"),
    Target("cortex-m55", "armv8.1-m.main", "cortex-m55", dsp=True, fpu="fp-armv8", mve=True),
)}


def get_target(name: str | Target) -> Target:
    """The target called `name` (a Target is returned as it is); UsageError listing the known ones."""
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except KeyError:
        raise UsageError(f"unknown target {name!r}; known targets: {', '.join(TARGETS)}") from None


def platform_target(platform: str) -> Target:
    """The target a platform declares (its class attribute `target`); plugins that declare none get the
    portable `host` target."""
    from utvm.platform import get_platform_class

    return get_target(getattr(get_platform_class(platform), "target", DEFAULT_TARGET))
