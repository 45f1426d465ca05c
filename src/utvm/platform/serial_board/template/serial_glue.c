/*
 * serial_glue.c -- utvm's board layer (utvm_board.h, as the QEMU firmware's main_rpc.c and platform.c use it)
 * on top of a board's utvm_serial_board.h driver, for the serial-board platform.
 *
 * - UART: utvm_uart_* over utvm_board_uart_*. utvm_uart_wait_rx (wait until a byte has arrived) keeps the
 *   byte it waited for in a one-byte holding slot, which utvm_uart_read_available hands out first.
 * - Reset: utvm_system_reset is the board's utvm_board_reset (weak: board code that has one keeps its own).
 * - Heap: newlib's printf family (TVMPlatformFormatMessage) links malloc, so _sbrk must exist; the firmware
 *   uses no heap, and this weak _sbrk refuses (ENOMEM). A board's own syscalls override it.
 * - Random: SplitMix64 seeded, on first use, from the board's entropy, its reset reason and how many waits
 *   for the host there have been (the host's timing differs between boots).
 * timer.c (SysTick, architectural on every Cortex-M) is the QEMU template's, clocked at UTVM_CPU_CLOCK_HZ.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "utvm_board.h"
#include "utvm_serial_board.h"

#ifndef UTVM_BOARD_BAUD
#error "UTVM_BOARD_BAUD (the UART's bits per second) must be defined by the build (board.toml [board] baud)"
#endif

static uint8_t g_held;
static int g_have_held;
static uint32_t g_waits;
static uint64_t g_state;
static int g_seeded;

void utvm_uart_init(void) { utvm_board_init((uint32_t)UTVM_BOARD_BAUD); }

void utvm_uart_write(const uint8_t* data, size_t num_bytes) { utvm_board_uart_write(data, num_bytes); }

void utvm_uart_puts(const char* text) { utvm_board_uart_write((const uint8_t*)text, strlen(text)); }

uint8_t utvm_uart_getc(void) {
  uint8_t c;
  utvm_uart_wait_rx();
  g_have_held = 0;
  c = g_held;
  return c;
}

size_t utvm_uart_read_available(uint8_t* out, size_t max_bytes) {
  size_t n = 0;
  if (max_bytes == 0u) {
    return 0u;
  }
  if (g_have_held) {
    out[0] = g_held;
    g_have_held = 0;
    n = 1;
  }
  return n + utvm_board_uart_read(out + n, max_bytes - n, 0u);
}

void utvm_uart_wait_rx(void) {
  while (!g_have_held) {
    ++g_waits;
    if (utvm_board_uart_read(&g_held, 1u, UTVM_BOARD_WAIT_FOREVER) == 1u) {
      g_have_held = 1;
    }
  }
}

__attribute__((weak)) void utvm_system_reset(void) { utvm_board_reset(); }

void* _sbrk(ptrdiff_t increment);

__attribute__((weak)) void* _sbrk(ptrdiff_t increment) {
  (void)increment;
  errno = ENOMEM;
  return (void*)-1;
}

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void utvm_random_fill(uint8_t* buf, size_t num_bytes) {
  size_t i;
  if (!g_seeded) {
    g_state = mix64(((uint64_t)utvm_board_entropy() << 32) ^ utvm_board_reset_reason());
    g_state = mix64(g_state ^ g_waits);
    g_seeded = 1;
  }
  for (i = 0; i < num_bytes; ++i) {
    if ((i & 7u) == 0u) {
      g_state += 0x9E3779B97F4A7C15ull;
    }
    buf[i] = (uint8_t)(mix64(g_state) >> (8u * (i & 7u)));
  }
}
