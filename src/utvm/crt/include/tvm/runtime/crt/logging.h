/*
 * tvm/runtime/crt/logging.h -- leveled logging for the CRT and firmware.
 *
 * LOG_DEBUG/LOG_INFO/LOG_WARN/LOG_ERROR(fmt, ...) format with TVMPlatformFormatMessage into a stack
 * buffer of TVM_CRT_MAX_LOG_MESSAGE_BYTES (longer messages are truncated) and hand the text to
 * TVMPlatformLog. Levels below TVM_CRT_LOG_LEVEL (crt_config.h) compile to nothing: their arguments are
 * not evaluated. TVMPlatformLog has a weak do-nothing default in libcommon; a port (or the RPC server,
 * which forwards log text to the host as session log messages) replaces it with a strong definition.
 * TVM_CRT_DEBUG_LOG is the CRT's own trace (registrations, allocations): LOG_DEBUG in a debug build
 * (TVM_CRT_DEBUG 1), nothing otherwise. Depends on config.h, compiler.h.
 */
#ifndef TVM_RUNTIME_CRT_LOGGING_H_
#define TVM_RUNTIME_CRT_LOGGING_H_

#include <stddef.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/config.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Format one message at `level` (TVM_CRT_LOG_LEVEL_*) and pass it to TVMPlatformLog. Logs
 * even when `level` is below TVM_CRT_LOG_LEVEL; the LOG_* macros do the filtering. */
void TVMLogf(int level, const char* fmt, ...) TVM_CRT_FORMAT(2, 3);

/*! \brief The log sink: `message` is NUL-terminated, `length` bytes long (without the NUL). The CRT's
 * weak default drops it. Must not call back into the logging macros. */
void TVMPlatformLog(int level, const char* message, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_LOGGING_H_ */

/* The LOG_* macros depend on TVM_CRT_LOG_LEVEL, so they are defined once crt_config.h has been read. An
 * upstream microTVM crt_config.h includes this header while it is being read (UTVM_CRT_CONFIG_READING_,
 * config.h): the macros then come when the including header or source continues. */
#if !defined(UTVM_CRT_CONFIG_READING_) && !defined(TVM_RUNTIME_CRT_LOGGING_H_LEVELS_)
#define TVM_RUNTIME_CRT_LOGGING_H_LEVELS_

#if TVM_CRT_LOG_LEVEL <= TVM_CRT_LOG_LEVEL_DEBUG
#define LOG_DEBUG(...) TVMLogf(TVM_CRT_LOG_LEVEL_DEBUG, __VA_ARGS__)
#else
#define LOG_DEBUG(...) ((void)0)
#endif

#if TVM_CRT_LOG_LEVEL <= TVM_CRT_LOG_LEVEL_INFO
#define LOG_INFO(...) TVMLogf(TVM_CRT_LOG_LEVEL_INFO, __VA_ARGS__)
#else
#define LOG_INFO(...) ((void)0)
#endif

#if TVM_CRT_LOG_LEVEL <= TVM_CRT_LOG_LEVEL_WARN
#define LOG_WARN(...) TVMLogf(TVM_CRT_LOG_LEVEL_WARN, __VA_ARGS__)
#else
#define LOG_WARN(...) ((void)0)
#endif

#if TVM_CRT_LOG_LEVEL <= TVM_CRT_LOG_LEVEL_ERROR
#define LOG_ERROR(...) TVMLogf(TVM_CRT_LOG_LEVEL_ERROR, __VA_ARGS__)
#else
#define LOG_ERROR(...) ((void)0)
#endif

/* The CRT's own trace of what it registers and allocates: debug logs of a debug build (TVM_CRT_DEBUG 1) only,
 * so a release build at the debug level logs no more than the firmware does. */
#if TVM_CRT_DEBUG
#define TVM_CRT_DEBUG_LOG(...) LOG_DEBUG(__VA_ARGS__)
#else
#define TVM_CRT_DEBUG_LOG(...) ((void)0)
#endif

#endif /* TVM_RUNTIME_CRT_LOGGING_H_LEVELS_ */
