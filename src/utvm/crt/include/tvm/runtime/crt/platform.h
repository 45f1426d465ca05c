/*
 * tvm/runtime/crt/platform.h -- the porting seam: every hook a platform implements (docs/architecture.md §4).
 * Nothing else in the CRT touches hardware or the OS. src/utvm/crt/host/platform.c is the POSIX port.
 * Every hook returning tvm_crt_error_t returns kTvmErrorNoError (0) on success.
 */
#ifndef TVM_RUNTIME_CRT_PLATFORM_H_
#define TVM_RUNTIME_CRT_PLATFORM_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Called on an unrecoverable error; must not return (reset, trap, or exit). */
void TVMPlatformAbort(tvm_crt_error_t code) TVM_CRT_NORETURN;

/*! \brief vsnprintf-like formatting into out_buf, truncating to fit and always NUL-terminating when
 * out_buf_size_bytes > 0. Returns the number of characters stored, excluding the NUL (so at most
 * out_buf_size_bytes - 1). */
size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt, va_list args);

/*! \brief Memory for NDArrays and device data. The result must be aligned to
 * TVM_CRT_ALLOC_ALIGNMENT_BYTES; num_bytes 0 gives a unique freeable pointer. kTvmErrorPlatformNoMemory
 * when out of memory (then *out_ptr is NULL). A port may back it with TVMPageAllocator (page_allocator.h). */
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr);
tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev);

/*! \brief A timer for the time evaluator: start, then stop reporting elapsed seconds since the start.
 * Start while running or Stop while stopped gives kTvmErrorPlatformTimerBadState. */
tvm_crt_error_t TVMPlatformTimerStart(void);
tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds);

/*! \brief Fill buffer with random bytes (used for session nonces and random_fill). */
tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes);

/*! \brief Bracket a measurement (e.g. disable interrupts, flush caches). */
tvm_crt_error_t TVMPlatformBeforeMeasurement(void);
tvm_crt_error_t TVMPlatformAfterMeasurement(void);

/*! \brief One-time platform setup (memory manager etc.), before TVMInitializeRuntime. */
tvm_crt_error_t TVMPlatformInitialize(void);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_PLATFORM_H_ */
