/*
 * semihost.c -- the Arm semihosting calls utvm firmware makes (Arm "Semihosting for AArch32 and AArch64",
 * v2): on M-profile a call is `bkpt 0xAB` with the operation in r0 and its parameter in r1; the result comes
 * back in r0. QEMU serves them with -semihosting-config enable=on,target=native.
 */
#include <stddef.h>
#include <stdint.h>

#include "utvm_board.h"

#define SYS_TIME 0x11u
#define SYS_GET_CMDLINE 0x15u
#define SYS_EXIT 0x18u
#define SYS_EXIT_EXTENDED 0x20u
#define SYS_ELAPSED 0x30u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

static uint32_t semihost_call(uint32_t op, const void* param) {
  register uint32_t r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = param;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void utvm_semihost_exit(int status) {
  /* SYS_EXIT_EXTENDED takes a block {reason, subcode}; with ApplicationExit the subcode is the exit code. */
  uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status};
  (void)semihost_call(SYS_EXIT_EXTENDED, block);
  /* Fallback for hosts without the extension: plain SYS_EXIT only tells success from failure. */
  (void)semihost_call(SYS_EXIT, (const void*)(uintptr_t)(status == 0 ? ADP_STOPPED_APPLICATION_EXIT : 0x20024u));
  for (;;) {
  }
}

int utvm_semihost_cmdline(char* buf, size_t buf_size) {
  uint32_t block[2];
  if (buf == NULL || buf_size < 2u) {
    return -1;
  }
  block[0] = (uint32_t)(uintptr_t)buf;
  block[1] = (uint32_t)buf_size;
  if (semihost_call(SYS_GET_CMDLINE, block) != 0u) {
    return -1;
  }
  buf[buf_size - 1u] = '\0';
  return (int)block[1];
}

uint32_t utvm_semihost_time(void) { return semihost_call(SYS_TIME, NULL); }

uint64_t utvm_semihost_elapsed(void) {
  uint32_t block[2] = {0u, 0u};
  if (semihost_call(SYS_ELAPSED, block) != 0u) {
    return 0u;
  }
  return ((uint64_t)block[1] << 32) | block[0];
}
