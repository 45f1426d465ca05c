/*
 * main.c -- the host "device": a Linux program that speaks the link on stdin/stdout (raw, unbuffered)
 * and serves RPC with the CRT. Exits 0 on end of input or after Shutdown, 2 if the link breaks.
 * Built by utvm.platform.host.build_device (UTVM_WITH_TEST_FUNCTIONS adds the testing.* globals).
 * utvm_user_init() (the user's code: `--extra-source`; a weak default does nothing) runs once after the
 * runtime is initialised and before RPC is served; a last error it leaves set stops the device (exit 2).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>

#include "utvm_test_functions.h"

void utvm_user_init(void);

/* The user's hook (docs/platforms.md): firmware without user code links this default (a GCC/Clang weak
 * symbol, TVM_CRT_WEAK), which a strong utvm_user_init in an --extra-source replaces. */
TVM_CRT_WEAK void utvm_user_init(void) {}

static ssize_t write_stdout(void* context, const uint8_t* data, size_t num_bytes) {
  ssize_t written;
  (void)context;
  do {
    written = write(STDOUT_FILENO, data, num_bytes);
  } while ((written < 0) && (errno == EINTR));
  return written;
}

void UTVMPlatformSleepMs(uint32_t ms) {
  struct timespec remaining;
  remaining.tv_sec = (time_t)(ms / 1000U);
  remaining.tv_nsec = (long)(ms % 1000U) * 1000000L;
  while ((nanosleep(&remaining, &remaining) != 0) && (errno == EINTR)) {
  }
}

int main(int argc, char** argv) {
  static uint8_t buffer[65536];
  microtvm_rpc_server_t server;
  tvm_crt_error_t err;
  (void)argv;
  if (argc > 1) {
    (void)fprintf(stderr, "usage: %s (no arguments: speaks the utvm link on stdin/stdout)\n", argv[0]);
    return 64;
  }
  /* A vanished host must not kill us with SIGPIPE: the write fails and we exit with a message. */
  (void)signal(SIGPIPE, SIG_IGN);
  err = TVMPlatformInitialize();
  if (err != kTvmErrorNoError) {
    (void)fprintf(stderr, "utvm host device: TVMPlatformInitialize failed: 0x%x\n", (unsigned)err);
    return 2;
  }
  server = MicroTVMRpcServerInit(write_stdout, NULL);
#ifdef UTVM_WITH_TEST_FUNCTIONS
  err = UTVMTestFunctions_Register();
  if (err != kTvmErrorNoError) {
    (void)fprintf(stderr, "utvm host device: registering the test functions failed: 0x%x\n", (unsigned)err);
    return 2;
  }
#endif
  TVMAPISetLastError("");
  utvm_user_init();
  if (TVMGetLastError()[0] != '\0') {
    (void)fprintf(stderr, "utvm host device: utvm_user_init failed: %s\n", TVMGetLastError());
    return 2;
  }
  for (;;) {
    uint8_t* data = buffer;
    size_t size;
    ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      (void)fprintf(stderr, "utvm host device: read from stdin failed: %s\n", strerror(errno));
      return 2;
    }
    if (n == 0) {
      return 0; /* the host closed the link */
    }
    size = (size_t)n;
    while (size > 0U) {
      err = MicroTVMRpcServerLoop(server, &data, &size);
      if (err == kTvmErrorPlatformShutdown) {
        return 0;
      }
      if (err != kTvmErrorNoError) {
        (void)fprintf(stderr, "utvm host device: writing to stdout failed (0x%x): %s\n", (unsigned)err,
                      strerror(errno));
        return 2;
      }
    }
  }
}
