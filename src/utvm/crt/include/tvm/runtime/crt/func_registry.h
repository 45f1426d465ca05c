/*
 * tvm/runtime/crt/func_registry.h -- function registries: a const one that can live in flash, and a
 * mutable one over a caller-supplied RAM buffer. Depends on c_runtime_api.h and error_codes.h only.
 *
 * names layout (DESIGN.md §4): a little-endian u16 count, then each NUL-terminated name, then one more
 * NUL. funcs[i] is the function named by the i-th name.
 */
#ifndef TVM_RUNTIME_CRT_FUNC_REGISTRY_H_
#define TVM_RUNTIME_CRT_FUNC_REGISTRY_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t tvm_function_index_t;
typedef uint16_t tvm_module_index_t;

/*! \brief Size in bytes of the count prefix of `names`. */
#define TVM_FUNC_REGISTRY_COUNT_BYTES 2U

typedef struct TVMFuncRegistry {
  /*! \brief u16 LE count, concatenated NUL-terminated names, one extra NUL. Not owned. */
  const char* names;
  /*! \brief Function pointers in the same order as `names`. Not owned. */
  const TVMBackendPackedCFunc* funcs;
} TVMFuncRegistry;

/*! \brief Number of functions in a registry (reads the u16 count). */
uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg);

/*! \brief Find `name`; on success *function_index is its index. kTvmErrorFunctionNameNotFound otherwise. */
tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index);

/*! \brief The function at `index`; kTvmErrorFunctionIndexInvalid when out of range. */
tvm_crt_error_t TVMFuncRegistry_GetByIndex(const TVMFuncRegistry* reg,
                                           tvm_function_index_t function_index,
                                           TVMBackendPackedCFunc* out_func);

typedef struct TVMMutableFuncRegistry {
  TVMFuncRegistry registry;
  /*! \brief Bytes available for names (grows from the front of the buffer). */
  size_t max_functions;
} TVMMutableFuncRegistry;

/*! \brief Create a mutable registry in `buffer` (caller-owned, `buffer_size_bytes` long, kept alive
 * while the registry is used). Names grow from the front, function pointers from the back. */
tvm_crt_error_t TVMMutableFuncRegistry_Create(TVMMutableFuncRegistry* reg, uint8_t* buffer,
                                              size_t buffer_size_bytes);

/*! \brief Add or (with override != 0) replace a function. kTvmErrorFunctionAlreadyDefined if present
 * and !override; kTvmErrorFunctionRegistryFull if there is no room. */
tvm_crt_error_t TVMMutableFuncRegistry_Set(TVMMutableFuncRegistry* reg, const char* name,
                                           TVMBackendPackedCFunc func, int override);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_FUNC_REGISTRY_H_ */
