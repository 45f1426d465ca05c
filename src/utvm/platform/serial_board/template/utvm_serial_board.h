/*
 * utvm_serial_board.h -- what a board's driver implements for utvm's serial-board firmware.
 *
 * The firmware is utvm's RPC evaluation firmware (the CRT, the RPC server, the TVMPlatform hooks and a
 * SysTick timer); the board brings its startup code (vector table with weak SysTick_Handler, .data/.bss
 * init, then main()), its linker script and one C file implementing the six functions below on the UART
 * that is wired to the host (a USB-serial bridge, a debug probe's virtual COM port). Nothing else of the
 * board is used. Every function may block; none is called from an interrupt.
 */
#ifndef UTVM_SERIAL_BOARD_H_
#define UTVM_SERIAL_BOARD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! A utvm_board_uart_read timeout meaning "until at least one byte has arrived". */
#define UTVM_BOARD_WAIT_FOREVER 0xFFFFFFFFu

/*! Clocks and pins as the board needs them, and the UART at `baud` bits/s, 8N1, no flow control. */
void utvm_board_init(uint32_t baud);

/*! Send all `num_bytes` (blocking until the UART has taken them). */
void utvm_board_uart_write(const uint8_t* data, size_t num_bytes);

/*! Store up to `max_bytes` received bytes in `out`; returns how many. Waits up to `timeout_ms` for the first
 *  one (0: only what has already arrived; UTVM_BOARD_WAIT_FOREVER: until one arrives) and never for more
 *  after it. Bytes must not be lost between calls (a receive FIFO or an interrupt-fed ring buffer). */
size_t utvm_board_uart_read(uint8_t* out, size_t max_bytes, uint32_t timeout_ms);

/*! Why the board last reset, as the board's own reset-cause register reads (0 if it has none). Mixed into the
 *  random seed (a watchdog reset and a power-on reset then start different streams). */
uint32_t utvm_board_reset_reason(void);

/*! 32 bits that differ from boot to boot (a hardware RNG, a free-running timer sampled while waiting for the
 *  host); 0 if the board has no such source. Seeds TVMPlatformGenerateRandom. */
uint32_t utvm_board_entropy(void);

/*! Reset the board (e.g. SCB AIRCR.SYSRESETREQ). Never returns. The firmware calls it on TVMPlatformAbort; the
 *  rebooted firmware tells the host (session TERMINATE), so the host fails the call and can reconnect. */
void utvm_board_reset(void) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif /* UTVM_SERIAL_BOARD_H_ */
