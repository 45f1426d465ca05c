/*
 * lossy_stdin.c -- a TEST-ONLY broken link driver for the host firmware (utvm.acceptance.faults, fault
 * "lossy-link"): the host device reads its link from stdin with read(2); this definition of read() in the
 * executable takes the place of the C library's and loses every UTVM_ACC_FAULT_DROP_EVERY-th byte that
 * arrives on stdin since the start, as a receiver that overruns would. Other descriptors are untouched.
 */
#define _DEFAULT_SOURCE

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef UTVM_ACC_FAULT_DROP_EVERY
#error "UTVM_ACC_FAULT_DROP_EVERY (lose every N-th received byte) must be defined"
#endif

static unsigned long g_acc_fault_received;

ssize_t read(int fd, void* buf, size_t count) {
  for (;;) {
    const long n = syscall(SYS_read, fd, buf, count);
    unsigned char* bytes = (unsigned char*)buf;
    size_t kept = 0u;
    long i;
    if ((fd != STDIN_FILENO) || (n <= 0)) {
      return (ssize_t)n;
    }
    for (i = 0; i < n; ++i) {
      g_acc_fault_received++;
      if ((g_acc_fault_received % (unsigned long)UTVM_ACC_FAULT_DROP_EVERY) != 0u) {
        bytes[kept] = bytes[i];
        kept++;
      }
    }
    if (kept > 0u) {
      return (ssize_t)kept;
    }
    /* every byte of this read was lost: read again (returning 0 would mean end of input) */
  }
}
