/*
 * startup.c -- reset handler and vector table of utvm's MPS2 firmware.
 *
 * Reset: copy .data from flash, zero .bss, paint the unused stack (for utvm_stack_high_water), enable the FPU
 * (and with it MVE) when built for one, run main(), and end the emulation with main's return value
 * (semihosting).
 * The same C serves every core: Armv6-M (built for the Cortex-M0: no VTOR, nothing but Armv6-M instructions,
 * which the compiler guarantees for C and the inline assembly here keeps to: MRS, DSB, MOV from SP), Armv7-M,
 * Armv8-M Mainline and Armv8.1-M Mainline (the Cortex-M33 and M55 run it in Secure state: VTOR and CPACR are
 * then the Secure ones). A board whose core boots from outside the code memory (UTVM_BOOT_VECTORS, the
 * AN547) also gets a two-entry boot table there (mps2.ld's .boot_vectors).
 * A fault ends the emulation with exit status 128 + the exception number (HardFault: 131), so the host can
 * tell a crash from a normal exit.
 */
#include <stddef.h>
#include <stdint.h>

#include "utvm_board.h"
#include "utvm_mps2.h"

/* Linker script symbols (mps2.ld). */
extern uint32_t __data_load__[];
extern uint32_t __data_start__[];
extern uint32_t __data_end__[];
extern uint32_t __bss_start__[];
extern uint32_t __bss_end__[];
extern uint32_t __stack_limit__[];
extern uint32_t __stack_top__[];

int main(void);
/* no-tree-loop-distribute-patterns: keep the copy/zero/paint loops as loops (GCC would call memcpy and
 * memset, pulling the C library into every firmware and into the reset path's stack). */
void Reset_Handler(void) __attribute__((noreturn, optimize("no-tree-loop-distribute-patterns")));
void Default_Handler(void);

/* Exception handlers: weak, so firmware can provide its own (timer.c provides SysTick_Handler). */
#define UTVM_WEAK_HANDLER(name) void name(void) __attribute__((weak, alias("Default_Handler")))
UTVM_WEAK_HANDLER(NMI_Handler);
UTVM_WEAK_HANDLER(HardFault_Handler);
UTVM_WEAK_HANDLER(MemManage_Handler);
UTVM_WEAK_HANDLER(BusFault_Handler);
UTVM_WEAK_HANDLER(UsageFault_Handler);
UTVM_WEAK_HANDLER(SVC_Handler);
UTVM_WEAK_HANDLER(DebugMon_Handler);
UTVM_WEAK_HANDLER(PendSV_Handler);
UTVM_WEAK_HANDLER(SysTick_Handler);

typedef void (*utvm_vector_t)(void);

/*! Number of external interrupt lines given a slot (MPS2 images use up to 32; all go to Default_Handler). */
#define UTVM_NUM_IRQS 32

/* The vector table: initial stack pointer, then the handlers (Armv7-M ARM, B1.5.3). */
__attribute__((section(".vectors"), used)) const utvm_vector_t utvm_vector_table[16 + UTVM_NUM_IRQS] = {
    (utvm_vector_t)(uintptr_t)__stack_top__,
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    0,
    0,
    0,
    0,
    SVC_Handler,
    DebugMon_Handler,
    0,
    PendSV_Handler,
    SysTick_Handler,
    /* external interrupts: Default_Handler */
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler,
};

#if defined(UTVM_BOOT_VECTORS)
/* What the core reads at reset where it boots (the AN547's ITCM): the initial stack pointer and the reset
 * handler; the reset handler then moves VTOR to utvm_vector_table. No exception can happen before that (a
 * fault this early would find no handler: QEMU reports a lockup). */
__attribute__((section(".boot_vectors"), used)) const utvm_vector_t utvm_boot_vectors[2] = {
    (utvm_vector_t)(uintptr_t)__stack_top__,
    Reset_Handler,
};
#endif

void Default_Handler(void) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  utvm_semihost_exit((int)(128u + (ipsr & 0x7Fu)));
}

void Reset_Handler(void) {
  uint32_t* src = __data_load__;
  uint32_t* dst = __data_start__;
  uint32_t* sp;
  while (dst < __data_end__) {
    *dst++ = *src++;
  }
  for (dst = __bss_start__; dst < __bss_end__; ++dst) {
    *dst = 0u;
  }
  /* Paint the stack below this frame (leaving a margin for it) so the high-water mark can be measured. */
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (dst = __stack_limit__; dst < sp - 16; ++dst) {
    *dst = UTVM_STACK_PAINT;
  }
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  /* Full access to CP10 and CP11 (the FPU; on Armv8.1-M also the MVE vector instructions) before any
   * floating-point or vector instruction runs. */
  UTVM_SCB_CPACR |= (0xFu << 20);
  __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
#if !defined(__ARM_ARCH_6M__)
  /* Armv6-M has no VTOR (the Cortex-M0 reads its vector table at 0x0, where mps2.ld puts it). */
  UTVM_SCB_VTOR = (uint32_t)(uintptr_t)utvm_vector_table;
#endif
  utvm_semihost_exit(main());
}

void utvm_system_reset(void) {
  __asm__ volatile("dsb" ::: "memory");
  UTVM_SCB_AIRCR = UTVM_AIRCR_VECTKEY | UTVM_AIRCR_SYSRESETREQ;
  __asm__ volatile("dsb" ::: "memory");
  for (;;) {
  }
}

size_t utvm_stack_size(void) { return (size_t)((uintptr_t)__stack_top__ - (uintptr_t)__stack_limit__); }

size_t utvm_stack_high_water(void) {
  const uint32_t* p = __stack_limit__;
  while (p < __stack_top__ && *p == UTVM_STACK_PAINT) {
    ++p;
  }
  return (size_t)((uintptr_t)__stack_top__ - (uintptr_t)p);
}
