/*
 * main_hello.c -- the board bring-up firmware the QEMU platform's tests run first.
 *
 * Over UART0: prints "utvm-hello\n" and 8 random bytes as hex + "\n"; echoes 256 bytes sent by the host
 * (the link must be binary clean); then times a fixed workload and prints its tick count as 16 hex digits +
 * "\n"; finally reads one byte and ends the emulation with it as the exit status (semihosting).
 */
#include <stdint.h>

#include "utvm_board.h"

static void put_hex(uint64_t value, int digits) {
  static const char kHex[] = "0123456789abcdef";
  char text[17];
  int i;
  for (i = digits - 1; i >= 0; --i) {
    text[i] = kHex[value & 0xFu];
    value >>= 4;
  }
  text[digits] = '\0';
  utvm_uart_puts(text);
}

static volatile uint32_t g_sink;

static void workload(void) {
  uint32_t acc = 1u;
  uint32_t i;
  for (i = 0; i < 12345u; ++i) {
    acc = acc * 1664525u + 1013904223u;
  }
  g_sink = acc;
}

int main(void) {
  uint8_t random_bytes[8];
  uint64_t ticks;
  int i;
  utvm_uart_init();
  utvm_uart_puts("utvm-hello\n");
  utvm_random_fill(random_bytes, sizeof(random_bytes));
  for (i = 0; i < 8; ++i) {
    put_hex(random_bytes[i], 2);
  }
  utvm_uart_puts("\n");
  for (i = 0; i < 256; ++i) {
    uint8_t c = utvm_uart_getc();
    utvm_uart_write(&c, 1u);
  }
  utvm_timer_restart();
  workload();
  ticks = utvm_timer_ticks();
  utvm_timer_stop();
  put_hex(ticks, 16);
  utvm_uart_puts("\n");
  return (int)utvm_uart_getc();
}
