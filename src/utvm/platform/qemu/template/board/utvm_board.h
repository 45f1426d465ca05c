/*
 * utvm_board.h -- the board support of utvm's QEMU MPS2 firmware: UART0, SysTick timing, semihosting, stack
 * painting. Every firmware the QEMU platform builds (RPC server, standalone deploy, hello) links these.
 * No dynamic allocation; nothing here depends on the C runtime.
 */
#ifndef UTVM_BOARD_H_
#define UTVM_BOARD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- UART0 (uart.c) ------------------------------------------------------------------------------------ */
/*! Enable TX and RX (and drain the receive register once, see uart.c). */
void utvm_uart_init(void);
/*! Blocking: send all `num_bytes`. */
void utvm_uart_write(const uint8_t* data, size_t num_bytes);
/*! Blocking: send a NUL-terminated string. */
void utvm_uart_puts(const char* text);
/*! Blocking: wait for one byte. */
uint8_t utvm_uart_getc(void);
/*! Non-blocking: store up to `max_bytes` already received bytes; returns how many (0 if none). */
size_t utvm_uart_read_available(uint8_t* out, size_t max_bytes);
/*! Sleep (WFI) until a byte has arrived. Interrupts stay masked: the RX interrupt only wakes the core. */
void utvm_uart_wait_rx(void);

/* --- SysTick timing (timer.c) ------------------------------------------------------------------------ */
/*! Restart the tick counter at zero. Re-anchors the tick grid at this instruction, so a reading taken a
 *  fixed number of instructions later is always the same (under -icount shift=0, 1 tick = 40 instructions at
 *  25 MHz). */
void utvm_timer_restart(void);
/*! Ticks of the processor clock (UTVM_CPU_CLOCK_HZ: 25 MHz on the AN385) since the last utvm_timer_restart
 *  (64 bits: wraps are counted). */
uint64_t utvm_timer_ticks(void);
/*! Stop the counter and its interrupt. */
void utvm_timer_stop(void);

/* --- Semihosting (semihost.c), served by QEMU's -semihosting-config enable=on,target=native ------------ */
/*! End the emulation with `status` as QEMU's exit code (SYS_EXIT_EXTENDED). Never returns. */
void utvm_semihost_exit(int status) __attribute__((noreturn));
/*! Copy the semihosting command line (QEMU's -semihosting-config arg=...) into buf; returns its length or
 *  -1 when the debugger/emulator has none. */
int utvm_semihost_cmdline(char* buf, size_t buf_size);
/*! Host wall-clock seconds (SYS_TIME). */
uint32_t utvm_semihost_time(void);
/*! Host ticks since the emulation started (SYS_ELAPSED), or 0 when unsupported. */
uint64_t utvm_semihost_elapsed(void);

/* --- Entropy (random.c) ------------------------------------------------------------------------------ */
/*! Fill buf with pseudo-random bytes whose seed differs on every boot: the host passes fresh entropy on the
 *  semihosting command line (`seed=<hex>`), mixed with the host clock (SYS_TIME, SYS_ELAPSED). Under
 *  -icount nothing on the device itself is random, so the seed has to come from outside. */
void utvm_random_fill(uint8_t* buf, size_t num_bytes);

/* --- System (startup.c) ------------------------------------------------------------------------------ */
/*! Request a system reset (SCB AIRCR.SYSRESETREQ). Never returns. */
void utvm_system_reset(void) __attribute__((noreturn));
/*! Bytes of the stack ever used since reset: the stack is painted with UTVM_STACK_PAINT at reset and this
 *  scans for the deepest overwritten word. */
size_t utvm_stack_high_water(void);
/*! Size of the stack region (linker script symbol __stack_size). */
size_t utvm_stack_size(void);
#define UTVM_STACK_PAINT 0xC5C5C5C5u

#ifdef __cplusplus
}
#endif

#endif /* UTVM_BOARD_H_ */
