/*
 * syscalls.c -- the newlib system calls a bare-metal utvm firmware needs: the heap grows between the end of
 * .bss and the stack (mps2.ld), stdout/stderr go to UART0 (only standalone firmware writes text; the RPC
 * firmware keeps the UART for the binary link), _exit ends the emulation through semihosting.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "utvm_board.h"

extern char __heap_start__[];
extern char __heap_end__[];

void* _sbrk(ptrdiff_t increment);
int _write(int fd, const char* buf, int len);
int _read(int fd, char* buf, int len);
int _close(int fd);
int _lseek(int fd, int offset, int whence);
int _fstat(int fd, struct stat* st);
int _isatty(int fd);
int _kill(int pid, int sig);
int _getpid(void);
void _exit(int status);

void* _sbrk(ptrdiff_t increment) {
  static char* brk = __heap_start__;
  char* prev = brk;
  if (increment < 0 || (size_t)(__heap_end__ - brk) < (size_t)increment) {
    errno = ENOMEM;
    return (void*)-1;
  }
  brk += increment;
  return prev;
}

int _write(int fd, const char* buf, int len) {
  if (fd != 1 && fd != 2) {
    errno = EBADF;
    return -1;
  }
  utvm_uart_write((const uint8_t*)buf, (size_t)len);
  return len;
}

int _read(int fd, char* buf, int len) {
  (void)fd;
  (void)buf;
  (void)len;
  errno = EBADF;
  return -1;
}

int _close(int fd) {
  (void)fd;
  return -1;
}

int _lseek(int fd, int offset, int whence) {
  (void)fd;
  (void)offset;
  (void)whence;
  return 0;
}

int _fstat(int fd, struct stat* st) {
  (void)fd;
  st->st_mode = S_IFCHR;
  return 0;
}

int _isatty(int fd) { return fd <= 2; }

int _kill(int pid, int sig) {
  (void)pid;
  (void)sig;
  errno = EINVAL;
  return -1;
}

int _getpid(void) { return 1; }

void _exit(int status) { utvm_semihost_exit(status); }
