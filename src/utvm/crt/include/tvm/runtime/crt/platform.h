/*
 * tvm/runtime/crt/platform.h -- the porting seam: every hook a platform implements (DESIGN.md §4).
 * Nothing else in the CRT touches hardware or the OS.
 */
#ifndef TVM_RUNTIME_CRT_PLATFORM_H_
#define TVM_RUNTIME_CRT_PLATFORM_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TVM_CRT_NORETURN __attribute__((noreturn))
#define TVM_CRT_FORMAT(fmt_idx, first_arg) __attribute__((format(printf, fmt_idx, first_arg)))
#else
#define TVM_CRT_NORETURN
#define TVM_CRT_FORMAT(fmt_idx, first_arg)
#endif

/*! \brief Called on an unrecoverable error; must not return (reset, trap, or exit). */
void TVMPlatformAbort(tvm_crt_error_t code) TVM_CRT_NORETURN;

/*! \brief vsnprintf-like formatting into out_buf (always NUL-terminated); returns the length written. */
size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt, va_list args);

/*! \brief Memory for the runtime (page allocator backing, NDArrays). */
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr);
tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev);

/*! \brief A timer for the time evaluator: start, then stop reporting elapsed seconds. */
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
