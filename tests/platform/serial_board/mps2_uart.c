/*
 * mps2_uart.c -- the "board driver" of the QEMU stand-in board of tests/platform/test_serial_board.py: the
 * utvm_serial_board.h interface on the CMSDK UART0 of QEMU's mps2-an386, written the way a user writes one
 * for a real board (its startup code and linker script are the QEMU platform's template/board files).
 *
 * Timeouts are not kept to: a read that would wait sleeps (WFI) until a byte arrives, which is what
 * UTVM_BOARD_WAIT_FOREVER asks and the only way utvm's firmware waits. The entropy is the number of polls
 * that found no byte (it depends on when the host's bytes arrive).
 */
#include <stddef.h>
#include <stdint.h>

#include "utvm_mps2.h"
#include "utvm_serial_board.h"

static uint32_t g_empty_polls;

void utvm_board_init(uint32_t baud) {
  /* QEMU ignores the divisor's value but refuses one below 16. */
  UTVM_UART_BAUDDIV = UTVM_CPU_CLOCK_HZ / baud;
  UTVM_UART_CTRL = UTVM_UART_CTRL_TXEN | UTVM_UART_CTRL_RXEN | UTVM_UART_CTRL_RXINTEN;
  (void)UTVM_UART_DATA; /* tells QEMU's character backend the UART takes input again */
  UTVM_UART_STATE = UTVM_UART_STATE_TXOVR | UTVM_UART_STATE_RXOVR;
}

void utvm_board_uart_write(const uint8_t* data, size_t num_bytes) {
  size_t i;
  for (i = 0; i < num_bytes; ++i) {
    while ((UTVM_UART_STATE & UTVM_UART_STATE_TXFULL) != 0u) {
    }
    UTVM_UART_DATA = data[i];
  }
}

static void wait_rx(void) {
  /* PRIMASK set: the pending RX interrupt wakes WFI but is not taken. */
  __asm__ volatile("cpsid i" ::: "memory");
  UTVM_NVIC_ISER0 = 1u << UTVM_UART0_RX_IRQ;
  while ((UTVM_UART_STATE & UTVM_UART_STATE_RXFULL) == 0u) {
    __asm__ volatile("wfi" ::: "memory");
    UTVM_UART_INTSTATUS = UTVM_UART_INT_RX;
    UTVM_NVIC_ICPR0 = 1u << UTVM_UART0_RX_IRQ;
  }
  UTVM_NVIC_ICER0 = 1u << UTVM_UART0_RX_IRQ;
  UTVM_UART_INTSTATUS = UTVM_UART_INT_RX;
  UTVM_NVIC_ICPR0 = 1u << UTVM_UART0_RX_IRQ;
  __asm__ volatile("dsb\n\tisb\n\tcpsie i" ::: "memory");
}

size_t utvm_board_uart_read(uint8_t* out, size_t max_bytes, uint32_t timeout_ms) {
  size_t n = 0;
  if (max_bytes == 0u) {
    return 0u;
  }
  if (timeout_ms != 0u && (UTVM_UART_STATE & UTVM_UART_STATE_RXFULL) == 0u) {
    ++g_empty_polls;
    wait_rx();
  }
  while (n < max_bytes && (UTVM_UART_STATE & UTVM_UART_STATE_RXFULL) != 0u) {
    out[n++] = (uint8_t)UTVM_UART_DATA;
  }
  return n;
}

uint32_t utvm_board_reset_reason(void) { return 0u; /* the MPS2 images have no reset-cause register */ }

uint32_t utvm_board_entropy(void) { return g_empty_polls; }

void utvm_board_reset(void) {
  __asm__ volatile("dsb" ::: "memory");
  UTVM_SCB_AIRCR = UTVM_AIRCR_VECTKEY | UTVM_AIRCR_SYSRESETREQ;
  __asm__ volatile("dsb" ::: "memory");
  for (;;) {
  }
}
