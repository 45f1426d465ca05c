/*
 * main_rpc.c -- the RPC firmware: the utvm RPC server on UART0 (DESIGN.md §5).
 *
 * Boot: UART, platform (memory), RPC server (which initialises the runtime, registers the built-in globals
 * and sends a session terminate so the host knows the device restarted), then the firmware's own globals
 * (utvm_register_app_globals, e.g. the testing.* functions). Loop: every byte that arrives is fed to the
 * server; the server writes its replies with uart_write.
 *
 * TVMPlatformAbort sends the reason to the host as a session log message (through TVMLogf, which the RPC
 * server forwards), then resets the board (UTVM_ABORT_RESETS=1): the host sees the session end.
 */
#include <stddef.h>
#include <stdint.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>

#include "utvm_board.h"
#include "utvm_platform.h"

/*! Registers the firmware's extra global functions; defined by the generated app_globals.c. */
tvm_crt_error_t utvm_register_app_globals(void);

static ssize_t uart_write(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  utvm_uart_write(data, num_bytes);
  return (ssize_t)num_bytes;
}

void utvm_app_report_abort(tvm_crt_error_t code) {
  TVMLogf(TVM_CRT_LOG_LEVEL_ERROR, "TVMPlatformAbort: error 0x%08lx; the device resets", (unsigned long)code);
}

int main(void) {
  microtvm_rpc_server_t server;
  tvm_crt_error_t err;
  utvm_uart_init();
  err = TVMPlatformInitialize();
  if (err != kTvmErrorNoError) {
    TVMPlatformAbort(err);
  }
  server = MicroTVMRpcServerInit(uart_write, NULL);
  if (server == NULL) {
    TVMPlatformAbort(kTvmErrorPlatformCheckFailure);
  }
  err = utvm_register_app_globals();
  if (err != kTvmErrorNoError) {
    TVMPlatformAbort(err);
  }
  for (;;) {
    uint8_t buf[128];
    uint8_t* data = buf;
    size_t size = utvm_uart_read_available(buf, sizeof(buf));
    while (size > 0u) {
      err = MicroTVMRpcServerLoop(server, &data, &size);
      if (err == kTvmErrorPlatformShutdown) {
        return 0; /* the host shut the server down: end the emulation */
      }
      if (err != kTvmErrorNoError && err != kTvmErrorFramingShortPacket) {
        TVMPlatformAbort(err);
      }
    }
  }
}
