/*
 * platform.c -- the TVMPlatform* hooks (tvm/runtime/crt/platform.h) for the QEMU MPS2/MPS3 boards.
 *
 * - Memory: a TVMPageAllocator over a static pool of UTVM_PLATFORM_MEMORY_BYTES, or over the CRT's own pool
 *   when crt_config.h sets one (TVM_CRT_MEMORY_POOL_BYTES; upstream's TVM_CRT_LOG_VIRT_MEM_SIZE...).
 * - Timer: SysTick (timer.c), restarted at every TVMPlatformTimerStart so readings repeat exactly under
 *   -icount; seconds = ticks / UTVM_CPU_CLOCK_HZ (the board's processor clock).
 * - Random: utvm_random_fill (random.c), seeded from the host on every boot.
 * - Abort: the firmware's utvm_app_report_abort() says what happened (the RPC firmware sends a session log
 *   message to the host; standalone firmware prints to the UART), then the board resets (RPC firmware, so
 *   the host sees the session end and can reconnect) or the emulation exits with status UTVM_EXIT_ABORT.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/page_allocator.h>
#include <tvm/runtime/crt/platform.h>

#include "utvm_board.h"
#include "utvm_mps2.h"
#include "utvm_platform.h"

#ifndef UTVM_PLATFORM_MEMORY_BYTES
#define UTVM_PLATFORM_MEMORY_BYTES (1024u * 1024u)
#endif

#if TVM_CRT_MEMORY_POOL_BYTES == 0
static uint8_t g_memory[UTVM_PLATFORM_MEMORY_BYTES] __attribute__((aligned(TVM_CRT_ALLOC_ALIGNMENT_BYTES)));
#endif /* else crt_config.h sizes the pool (an upstream file's TVM_CRT_LOG_VIRT_MEM_SIZE...): the CRT's own */
static TVMPageAllocator g_allocator;
static int g_allocator_ready;
static int g_timer_running;

tvm_crt_error_t TVMPlatformInitialize(void) {
  tvm_crt_error_t err;
  if (g_allocator_ready) {
    return kTvmErrorPlatformMemoryManagerInitialized;
  }
#if TVM_CRT_MEMORY_POOL_BYTES == 0
  err = TVMPageAllocator_Create(&g_allocator, g_memory, sizeof(g_memory));
#else
  err = TVMPageAllocator_CreateStatic(&g_allocator);
#endif
  if (err != kTvmErrorNoError) {
    return err;
  }
  g_allocator_ready = 1;
  return kTvmErrorNoError;
}

void TVMPlatformAbort(tvm_crt_error_t code) {
  utvm_app_report_abort(code);
#if UTVM_ABORT_RESETS
  utvm_system_reset();
#else
  utvm_semihost_exit(UTVM_EXIT_ABORT);
#endif
}

size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt, va_list args) {
  int n;
  if (out_buf_size_bytes == 0u) {
    return 0u;
  }
  n = vsnprintf(out_buf, out_buf_size_bytes, fmt, args);
  if (n < 0) {
    out_buf[0] = '\0';
    return 0u;
  }
  return (size_t)n < out_buf_size_bytes ? (size_t)n : out_buf_size_bytes - 1u;
}

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  if (out_ptr == NULL) {
    return kTvmErrorPlatformInvalidArgument;
  }
  *out_ptr = NULL;
  if (!g_allocator_ready) {
    tvm_crt_error_t err = TVMPlatformInitialize();
    if (err != kTvmErrorNoError) {
      return err;
    }
  }
  return TVMPageAllocator_Allocate(&g_allocator, num_bytes, out_ptr);
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  if (!g_allocator_ready) {
    return kTvmErrorPlatformInvalidArgument;
  }
  return TVMPageAllocator_Free(&g_allocator, ptr);
}

tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (g_timer_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  g_timer_running = 1;
  utvm_timer_restart();
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  uint64_t ticks = utvm_timer_ticks();
  if (!g_timer_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  utvm_timer_stop();
  g_timer_running = 0;
  if (elapsed_time_seconds != NULL) {
    *elapsed_time_seconds = (double)ticks / (double)UTVM_CPU_CLOCK_HZ;
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  if (buffer == NULL && num_bytes != 0u) {
    return kTvmErrorPlatformInvalidArgument;
  }
  utvm_random_fill(buffer, num_bytes);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformBeforeMeasurement(void) { return kTvmErrorNoError; }

tvm_crt_error_t TVMPlatformAfterMeasurement(void) { return kTvmErrorNoError; }
