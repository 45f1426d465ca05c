/*
 * tvm/runtime/crt/compiler.h -- the few compiler extensions the CRT uses, each with a portable fallback.
 * Depends on nothing. Every macro is #ifndef-guarded so a port can define its own before including it.
 *
 * - TVM_CRT_WARN_UNUSED: on functions returning tvm_crt_error_t; with -Werror a dropped error fails
 *   the build (like nanopb's checkreturn).
 * - TVM_CRT_WEAK: a default definition that firmware may replace (TVMSystemLibEntryPoint, TVMPlatformLog).
 *   Without GNU attributes it expands to nothing and the firmware must not redefine those symbols.
 * - TVM_CRT_NORETURN, TVM_CRT_FORMAT(fmt_idx, first_arg): diagnostics only.
 */
#ifndef TVM_RUNTIME_CRT_COMPILER_H_
#define TVM_RUNTIME_CRT_COMPILER_H_

#if defined(__GNUC__) || defined(__clang__)
#define TVM_CRT_HAVE_GNU_ATTRIBUTES 1
#else
#define TVM_CRT_HAVE_GNU_ATTRIBUTES 0
#endif

#ifndef TVM_CRT_WARN_UNUSED
#if TVM_CRT_HAVE_GNU_ATTRIBUTES
#define TVM_CRT_WARN_UNUSED __attribute__((warn_unused_result))
#else
#define TVM_CRT_WARN_UNUSED
#endif
#endif

#ifndef TVM_CRT_WEAK
#if TVM_CRT_HAVE_GNU_ATTRIBUTES
#define TVM_CRT_WEAK __attribute__((weak))
#else
#define TVM_CRT_WEAK
#endif
#endif

#ifndef TVM_CRT_NORETURN
#if TVM_CRT_HAVE_GNU_ATTRIBUTES
#define TVM_CRT_NORETURN __attribute__((noreturn))
#else
#define TVM_CRT_NORETURN
#endif
#endif

#ifndef TVM_CRT_FORMAT
#if TVM_CRT_HAVE_GNU_ATTRIBUTES
#define TVM_CRT_FORMAT(fmt_idx, first_arg) __attribute__((format(printf, fmt_idx, first_arg)))
#else
#define TVM_CRT_FORMAT(fmt_idx, first_arg)
#endif
#endif

#endif /* TVM_RUNTIME_CRT_COMPILER_H_ */
