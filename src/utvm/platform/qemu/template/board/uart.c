/*
 * uart.c -- polled driver for the CMSDK APB UART0 of the MPS2 images (UTVM_UART0_BASE, utvm_mps2.h).
 *
 * Polled: no interrupt handler runs, so nothing the host does changes the instruction count of a computation.
 * While waiting for input the core sleeps (utvm_uart_wait_rx: WFI, woken by the RX interrupt with interrupts
 * masked). Under QEMU this matters: a core spinning on the STATE register keeps taking the lock QEMU's I/O
 * thread needs to deliver the next byte, and input slows to a crawl.
 */
#include <stddef.h>
#include <stdint.h>

#include "utvm_board.h"
#include "utvm_mps2.h"

void utvm_uart_init(void) {
  /* QEMU ignores the divisor's value but refuses to run with one below 16; 25 MHz / 217 = 115200 baud. */
  UTVM_UART_BAUDDIV = 217u;
  UTVM_UART_CTRL = UTVM_UART_CTRL_TXEN | UTVM_UART_CTRL_RXEN | UTVM_UART_CTRL_RXINTEN;
  /* One dummy read of DATA: enabling RX alone does not tell QEMU's character backend that the UART can take
   * input again, a read does. Without it bytes the host sent early can stay stuck in the backend. */
  (void)UTVM_UART_DATA;
  UTVM_UART_STATE = UTVM_UART_STATE_TXOVR | UTVM_UART_STATE_RXOVR; /* write-1-to-clear overrun flags */
}

void utvm_uart_write(const uint8_t* data, size_t num_bytes) {
  size_t i;
  for (i = 0; i < num_bytes; ++i) {
    while ((UTVM_UART_STATE & UTVM_UART_STATE_TXFULL) != 0u) {
    }
    UTVM_UART_DATA = data[i];
  }
}

void utvm_uart_puts(const char* text) {
  while (*text != '\0') {
    utvm_uart_write((const uint8_t*)text, 1u);
    ++text;
  }
}

uint8_t utvm_uart_getc(void) {
  while ((UTVM_UART_STATE & UTVM_UART_STATE_RXFULL) == 0u) {
  }
  return (uint8_t)UTVM_UART_DATA;
}

size_t utvm_uart_read_available(uint8_t* out, size_t max_bytes) {
  size_t n = 0;
  while (n < max_bytes && (UTVM_UART_STATE & UTVM_UART_STATE_RXFULL) != 0u) {
    out[n++] = (uint8_t)UTVM_UART_DATA;
  }
  return n;
}

void utvm_uart_wait_rx(void) {
  /* PRIMASK set: a pending interrupt wakes WFI but is not taken (Armv7-M ARM, B1.5.19). */
  __asm__ volatile("cpsid i" ::: "memory");
  UTVM_NVIC_ISER(UTVM_UART0_RX_IRQ) = UTVM_NVIC_BIT(UTVM_UART0_RX_IRQ);
  while ((UTVM_UART_STATE & UTVM_UART_STATE_RXFULL) == 0u) {
    __asm__ volatile("wfi" ::: "memory");
    UTVM_UART_INTSTATUS = UTVM_UART_INT_RX; /* write 1 to clear */
    UTVM_NVIC_ICPR(UTVM_UART0_RX_IRQ) = UTVM_NVIC_BIT(UTVM_UART0_RX_IRQ);
  }
  /* Disabled in the NVIC, the line may become pending again but is never taken. */
  UTVM_NVIC_ICER(UTVM_UART0_RX_IRQ) = UTVM_NVIC_BIT(UTVM_UART0_RX_IRQ);
  UTVM_UART_INTSTATUS = UTVM_UART_INT_RX;
  UTVM_NVIC_ICPR(UTVM_UART0_RX_IRQ) = UTVM_NVIC_BIT(UTVM_UART0_RX_IRQ);
  __asm__ volatile("dsb\n\tisb\n\tcpsie i" ::: "memory");
}
