/*
 * timer.c -- SysTick as a 64-bit tick counter of the processor clock (UTVM_CPU_CLOCK_HZ: 25 MHz on the AN385,
 * 20 MHz on the AN505, 32 MHz on the AN547).
 *
 * SysTick counts down 24 bits from its reload value; the interrupt counts the wraps. Under QEMU's
 * -icount shift=0 one instruction is one nanosecond of virtual time, so a tick (40 ns at 25 MHz) is 40
 * instructions (31.25 at 32 MHz: the tick grid, not the instruction count, is then fractional).
 * utvm_timer_restart writes the current-value register, which restarts the tick grid at that instruction: a
 * measurement that starts there and stops a fixed number of instructions later reads the same tick count on
 * every run, whatever happened before (e.g. however long the device waited for the host's bytes).
 */
#include <stdint.h>

#include "utvm_board.h"
#include "utvm_mps2.h"

void SysTick_Handler(void);

static volatile uint32_t g_wraps;

void SysTick_Handler(void) { g_wraps = g_wraps + 1u; }

void utvm_timer_restart(void) {
  UTVM_SYST_CSR = 0u;
  UTVM_SYST_RVR = UTVM_SYST_MAX_RELOAD;
  g_wraps = 0u;
  UTVM_SYST_CVR = 0u; /* any write clears the counter; it reloads on the next tick */
  UTVM_SYST_CSR = UTVM_SYST_CSR_CLKSOURCE | UTVM_SYST_CSR_TICKINT | UTVM_SYST_CSR_ENABLE;
}

uint64_t utvm_timer_ticks(void) {
  uint32_t wraps;
  uint32_t value;
  do {
    wraps = g_wraps;
    value = UTVM_SYST_CVR;
  } while (wraps != g_wraps);
  /* The counter starts at 0 and loads the reload value on the first tick: after k ticks it reads
   * RELOAD - (k - 1) (mod RELOAD + 1), and each wrap is RELOAD + 1 ticks. */
  return (uint64_t)wraps * (UTVM_SYST_MAX_RELOAD + 1u) + ((UTVM_SYST_MAX_RELOAD - value + 1u) & UTVM_SYST_MAX_RELOAD);
}

void utvm_timer_stop(void) { UTVM_SYST_CSR = 0u; }
