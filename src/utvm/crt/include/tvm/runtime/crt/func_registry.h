/*
 * tvm/runtime/crt/func_registry.h -- function registries: a const one that can live in flash, and a
 * mutable one over a caller-supplied RAM buffer. Depends on c_runtime_api.h and error_codes.h only.
 *
 * names layout (docs/architecture.md §4): a little-endian u16 count, then each NUL-terminated name, then one more
 * NUL. funcs[i] is the function named by the i-th name. Example, two functions "ab" and "c":
 *   names = 02 00 'a' 'b' 00 'c' 00 00          funcs = { ab, c }
 * Names are never empty (an empty name would read as the end marker). Lookup is a linear scan and never
 * writes, so a generated registry can be `static const` and live in flash. A registry holds at most
 * TVM_FUNC_REGISTRY_MAX_FUNCS functions, the most a 15-bit function index in a handle can name.
 */
#ifndef TVM_RUNTIME_CRT_FUNC_REGISTRY_H_
#define TVM_RUNTIME_CRT_FUNC_REGISTRY_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t tvm_function_index_t;
typedef uint16_t tvm_module_index_t;

/*! \brief Size in bytes of the count prefix of `names`. */
#define TVM_FUNC_REGISTRY_COUNT_BYTES 2U

/*! \brief Most functions one registry can hold (function indices are 15 bits in a handle). */
#define TVM_FUNC_REGISTRY_MAX_FUNCS 0x7fffU

typedef struct TVMFuncRegistry {
  /*! \brief u16 LE count, concatenated NUL-terminated names, one extra NUL. Not owned. */
  const char* names;
  /*! \brief Function pointers in the same order as `names`. Not owned. */
  const TVMBackendPackedCFunc* funcs;
} TVMFuncRegistry;

/*! \brief Number of functions in a registry (reads the u16 count); 0 for a NULL registry. */
uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg);

/*! \brief Find `name`; on success *function_index is its index. kTvmErrorFunctionNameNotFound otherwise,
 * kTvmErrorPlatformInvalidArgument for NULL arguments. Sets no last-error text. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index);

/*! \brief The function at `index`; kTvmErrorFunctionIndexInvalid when out of range. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMFuncRegistry_GetByIndex(const TVMFuncRegistry* reg,
                                           tvm_function_index_t function_index,
                                           TVMBackendPackedCFunc* out_func);

typedef struct TVMMutableFuncRegistry {
  /*! \brief The registry proper; names and funcs point into `buffer`. Read it like any registry. */
  TVMFuncRegistry registry;
  /*! \brief The caller's buffer (not owned). */
  uint8_t* buffer;
  /*! \brief Upper bound on the number of functions this buffer can ever hold (reached only if every
   * name were one character long). The real capacity depends on the name lengths: names grow from the
   * front of the buffer, function pointers from the back, and the registry is full when they meet. */
  size_t max_functions;
  /*! \brief Size in bytes of the caller's buffer (names + pointers). */
  size_t buffer_size_bytes;
} TVMMutableFuncRegistry;

/*! \brief Create an empty mutable registry in `buffer` (caller-owned, `buffer_size_bytes` long, kept
 * alive while the registry is used; any alignment). Names grow from the front, function pointers from the
 * back (registry.funcs always points at the first of them). kTvmErrorBufferTooSmall if the buffer cannot
 * hold one function with a one-character name. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMMutableFuncRegistry_Create(TVMMutableFuncRegistry* reg, uint8_t* buffer,
                                              size_t buffer_size_bytes);

/*! \brief Add or (with override != 0) replace a function. A replaced function keeps its index. Errors
 * (the registry is unchanged after each): kTvmErrorFunctionAlreadyDefined if present and !override;
 * kTvmErrorFunctionRegistryFull if there is no room; kTvmErrorPlatformInvalidArgument for a NULL or empty
 * name, a name of TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES or more characters, or a NULL func; in a debug build
 * (TVM_CRT_DEBUG), kTvmErrorPlatformCheckFailure when the registry's layout in its buffer is broken. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMMutableFuncRegistry_Set(TVMMutableFuncRegistry* reg, const char* name,
                                           TVMBackendPackedCFunc func, int override);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_FUNC_REGISTRY_H_ */
