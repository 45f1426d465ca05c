/*
 * host/platform.c -- the POSIX (Linux, macOS) port: every TVMPlatform* hook of
 * tvm/runtime/crt/platform.h. Hosted C is fine here (this is the port, not the core): stdio for the
 * abort message, posix_memalign for memory, CLOCK_MONOTONIC for the timer, /dev/urandom for randomness.
 * It does not define TVMPlatformLog: the CRT's weak default (or the RPC server's) stays in charge.
 * With a CRT memory pool configured (TVM_CRT_MEMORY_POOL_BYTES > 0, e.g. an upstream crt_config.h's
 * TVM_CRT_LOG_VIRT_MEM_SIZE) memory comes from that pool through the page allocator instead (link libmemory).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/page_allocator.h>
#include <tvm/runtime/crt/platform.h>

static struct timespec g_timer_start;
static int g_timer_running = 0;

#if TVM_CRT_MEMORY_POOL_BYTES > 0
static TVMPageAllocator g_pool;
static int g_pool_ready = 0;

/* The pool is laid out once, at the first use (before TVMPlatformInitialize or not), and never again: a second
 * TVMPlatformInitialize must not take back memory that is in use. */
static tvm_crt_error_t pool(TVMPageAllocator** out) {
  if (g_pool_ready == 0) {
    const tvm_crt_error_t err = TVMPageAllocator_CreateStatic(&g_pool);
    if (err != kTvmErrorNoError) {
      return err;
    }
    g_pool_ready = 1;
  }
  *out = &g_pool;
  return kTvmErrorNoError;
}
#endif

void TVMPlatformAbort(tvm_crt_error_t code) {
  (void)fprintf(stderr, "TVMPlatformAbort: error 0x%x\n", (unsigned)code);
  (void)fflush(stderr);
  abort();
}

size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt, va_list args) {
  int n;
  if ((out_buf == NULL) || (out_buf_size_bytes == 0U)) {
    return 0U;
  }
  n = vsnprintf(out_buf, out_buf_size_bytes, fmt, args);
  if (n < 0) {
    out_buf[0] = '\0';
    return 0U;
  }
  if ((size_t)n >= out_buf_size_bytes) {
    return out_buf_size_bytes - 1U;
  }
  return (size_t)n;
}

#if TVM_CRT_MEMORY_POOL_BYTES > 0
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  TVMPageAllocator* alloc = NULL;
  tvm_crt_error_t err;
  (void)dev;
  if (out_ptr == NULL) {
    return kTvmErrorPlatformInvalidArgument;
  }
  *out_ptr = NULL;
  err = pool(&alloc);
  return (err != kTvmErrorNoError) ? err : TVMPageAllocator_Allocate(alloc, num_bytes, out_ptr);
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  TVMPageAllocator* alloc = NULL;
  tvm_crt_error_t err;
  (void)dev;
  if (ptr == NULL) {
    return kTvmErrorNoError; /* as free(NULL) */
  }
  err = pool(&alloc);
  return (err != kTvmErrorNoError) ? err : TVMPageAllocator_Free(alloc, ptr);
}
#else
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  size_t alignment = (size_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES;
  void* ptr = NULL;
  (void)dev;
  if (out_ptr == NULL) {
    return kTvmErrorPlatformInvalidArgument;
  }
  *out_ptr = NULL;
  if (alignment < sizeof(void*)) {
    alignment = sizeof(void*); /* posix_memalign's minimum */
  }
  if (posix_memalign(&ptr, alignment, (num_bytes == 0U) ? 1U : num_bytes) != 0) {
    return kTvmErrorPlatformNoMemory;
  }
  *out_ptr = ptr;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  free(ptr);
  return kTvmErrorNoError;
}
#endif

tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (g_timer_running != 0) {
    return kTvmErrorPlatformTimerBadState;
  }
  if (clock_gettime(CLOCK_MONOTONIC, &g_timer_start) != 0) {
    return kTvmErrorPlatformCheckFailure;
  }
  g_timer_running = 1;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  struct timespec now;
  if (g_timer_running == 0) {
    return kTvmErrorPlatformTimerBadState;
  }
  g_timer_running = 0;
  if ((elapsed_time_seconds == NULL) || (clock_gettime(CLOCK_MONOTONIC, &now) != 0)) {
    return kTvmErrorPlatformCheckFailure;
  }
  *elapsed_time_seconds = (double)(now.tv_sec - g_timer_start.tv_sec) +
                          ((double)(now.tv_nsec - g_timer_start.tv_nsec) * 1e-9);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  size_t done = 0U;
  int fd;
  if ((buffer == NULL) && (num_bytes > 0U)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  fd = open("/dev/urandom", O_RDONLY);
  if (fd < 0) {
    return kTvmErrorPlatformCheckFailure;
  }
  while (done < num_bytes) {
    const ssize_t n = read(fd, &buffer[done], num_bytes - done);
    if (n > 0) {
      done += (size_t)n;
    } else if ((n < 0) && (errno == EINTR)) {
      continue;
    } else {
      (void)close(fd);
      return kTvmErrorPlatformCheckFailure;
    }
  }
  (void)close(fd);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformBeforeMeasurement(void) { return kTvmErrorNoError; }

tvm_crt_error_t TVMPlatformAfterMeasurement(void) { return kTvmErrorNoError; }

tvm_crt_error_t TVMPlatformInitialize(void) {
  g_timer_running = 0;
  return kTvmErrorNoError;
}
