/*
 * lossy_uart.c -- a TEST-ONLY broken UART driver for the Cortex-M RPC firmware (utvm.acceptance.faults, fault
 * "lossy-link"): the firmware's main.c reads the link through utvm_acceptance_lossy_read instead of
 * utvm_uart_read_available (the kit renames the call), and this wrapper loses every
 * UTVM_ACC_FAULT_DROP_EVERY-th byte received since boot, as a receiver that overruns would.
 */
#include <stddef.h>
#include <stdint.h>

#include "utvm_board.h"

#ifndef UTVM_ACC_FAULT_DROP_EVERY
#error "UTVM_ACC_FAULT_DROP_EVERY (lose every N-th received byte) must be defined"
#endif

size_t utvm_acceptance_lossy_read(uint8_t* out, size_t max_bytes);

static uint32_t g_acc_fault_received;

size_t utvm_acceptance_lossy_read(uint8_t* out, size_t max_bytes) {
  size_t n = utvm_uart_read_available(out, max_bytes);
  size_t kept = 0u;
  size_t i;
  for (i = 0u; i < n; ++i) {
    g_acc_fault_received++;
    if ((g_acc_fault_received % (uint32_t)UTVM_ACC_FAULT_DROP_EVERY) != 0u) {
      out[kept] = out[i];
      kept++;
    }
  }
  return kept;
}
