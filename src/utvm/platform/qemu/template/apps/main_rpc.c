/*
 * main_rpc.c -- the RPC firmware: the utvm RPC server on UART0 (docs/architecture.md §5).
 *
 * Boot: UART, platform (memory), RPC server (initialises the runtime and sends a session terminate, so a
 * waiting host learns of the reset), then the firmware's own globals: with UTVM_WITH_TEST_FUNCTIONS the
 * testing.* library (utvm_test_functions.h) plus testing.abort(code), which calls TVMPlatformAbort.
 * Then the user's hook utvm_user_init() (`--extra-source`; a weak default does nothing), once, before RPC is
 * served: a last error it leaves set (e.g. TVMFuncRegisterGlobal found the registry full) is sent to the host
 * as an error log message, and the firmware serves RPC all the same (an abort here would reset it forever).
 * Loop: every byte that arrives is fed to the server, which writes its replies with uart_write. A Shutdown
 * from the host ends the emulation (exit status 0).
 *
 * TVMPlatformAbort sends its reason to the host as a session log message (TVMLogf goes through the RPC
 * server), then resets the board (UTVM_ABORT_RESETS=1): the rebooted firmware's terminate ends the session.
 */
#include <stddef.h>
#include <stdint.h>

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>

#include "utvm_board.h"
#include "utvm_platform.h"

#ifdef UTVM_WITH_TEST_FUNCTIONS
#include <string.h>

#include "utvm_test_functions.h"

/* Under -icount shift=0 one instruction is 1 ns of virtual time: 1 ms is 10^6 instructions, i.e. 500000
 * iterations of this two-instruction loop (subs + bne). A low register ("l") makes it the 16-bit SUBS every
 * core has, Armv6-M's included; `.syntax unified` because GCC hands Thumb-1 (Armv6-M) inline assembly to the
 * assembler in the old divided syntax (and restores unified syntax after it on every target). */
void UTVMPlatformSleepMs(uint32_t ms) {
  uint32_t i;
  for (i = 0u; i < ms; ++i) {
    uint32_t n = 500000u;
    __asm__ volatile(".syntax unified\n1: subs %0, %0, #1\n\tbne 1b" : "+l"(n) : : "cc");
  }
}

static int testing_abort(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                         void* resource_handle) {
  (void)ret_value;
  (void)ret_type_code;
  (void)resource_handle;
  if ((num_args != 1) || (type_codes[0] != (int)kTVMArgInt)) {
    TVMAPISetLastError("testing.abort: expects one int argument (the error code)");
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  TVMPlatformAbort((tvm_crt_error_t)args[0].v_int64);
}

static tvm_crt_error_t register_test_functions(void) {
  TVMBackendPackedCFunc func = &testing_abort;
  TVMFunctionHandle handle = NULL;
  tvm_crt_error_t err = UTVMTestFunctions_Register();
  if (err != kTvmErrorNoError) {
    return err;
  }
  /* TVMFuncRegisterGlobal takes the function as a TVMFunctionHandle (TVM's ABI): copy its bytes. */
  (void)memcpy((void*)&handle, (const void*)&func, sizeof(handle));
  return TVMFuncRegisterGlobal("testing.abort", handle, 1) == 0 ? kTvmErrorNoError : kTvmErrorFunctionRegistryFull;
}
#endif

void utvm_user_init(void);

/* The user's hook (docs/platforms.md): firmware without user code links this default (a GCC/Clang weak
 * symbol, TVM_CRT_WEAK), which a strong utvm_user_init in an --extra-source replaces. */
TVM_CRT_WEAK void utvm_user_init(void) {}

static tvm_crt_ssize_t uart_write(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  utvm_uart_write(data, num_bytes);
  return (tvm_crt_ssize_t)num_bytes;
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
#ifdef UTVM_WITH_TEST_FUNCTIONS
  err = register_test_functions();
  if (err != kTvmErrorNoError) {
    TVMPlatformAbort(err);
  }
#endif
  TVMAPISetLastError("");
  utvm_user_init();
  if (TVMGetLastError()[0] != '\0') {
    TVMLogf(TVM_CRT_LOG_LEVEL_ERROR, "utvm_user_init failed: %s", TVMGetLastError());
  }
  for (;;) {
    uint8_t buf[256];
    uint8_t* data = buf;
    size_t size = utvm_uart_read_available(buf, sizeof(buf));
    if (size == 0u) {
      utvm_uart_wait_rx();
    }
    while (size > 0u) {
      err = MicroTVMRpcServerLoop(server, &data, &size);
      if (err == kTvmErrorPlatformShutdown) {
        return 0;
      }
      if (err != kTvmErrorNoError) {
        TVMPlatformAbort(err);
      }
    }
  }
}
