/*
 * crt_internal.h -- declarations shared between the files of libcommon; not part of the public API.
 *
 * Handles (docs/architecture.md §4): a function handle is ((module_index | 0x8000) << 16) | (function_index | 0x8000)
 * as a pointer-sized integer; never NULL. Module indices:
 *   0 .. TVM_CRT_MAX_REGISTERED_MODULES - 1   registered modules
 *   TVM_CRT_MAX_REGISTERED_MODULES            the global function registry
 *   TVM_CRT_MAX_REGISTERED_MODULES + 1        time evaluators (function index = evaluator slot)
 * A module handle is ((module_index | 0x8000) << 16): its function half lacks the valid bit.
 */
#ifndef TVM_CRT_SRC_COMMON_CRT_INTERNAL_H_
#define TVM_CRT_SRC_COMMON_CRT_INTERNAL_H_

#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/func_registry.h>
#include <tvm/runtime/crt/module.h>

#define TVM_CRT_HANDLE_VALID_BIT 0x8000U
#define TVM_CRT_GLOBAL_MODULE_INDEX ((uint32_t)TVM_CRT_MAX_REGISTERED_MODULES)
#define TVM_CRT_TIME_EVALUATOR_MODULE_INDEX ((uint32_t)TVM_CRT_MAX_REGISTERED_MODULES + 1U)

/* --- errors (crt_error.c) --- */
/*! \brief Format the last error and return `code`, so callers can `return TVMCrtError_Set(code, ...)`. */
tvm_crt_error_t TVMCrtError_Set(tvm_crt_error_t code, const char* fmt, ...) TVM_CRT_FORMAT(2, 3);
/*! \brief Counts calls that set the last error; lets TVMFuncCall see whether a callee left a message. */
uint32_t TVMCrtError_Serial(void);
void TVMCrtError_Reset(void);

/*! \brief strlen that looks at no more than max_len bytes (returns max_len when no NUL is among them). */
size_t TVMCrtBoundedStrlen(const char* s, size_t max_len);

/* --- handles and calls (crt_runtime_api.c) --- */
TVMFunctionHandle TVMCrtHandle_EncodeFunction(uint32_t module_index, uint32_t function_index);
/*! \brief Split a function handle; kTvmErrorFunctionHandleInvalid if it is not well formed (no check of
 * what the indices name). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMCrtHandle_DecodeFunction(TVMFunctionHandle handle,
                                                                uint32_t* module_index,
                                                                uint32_t* function_index);
/*! \brief The registered module a module handle names; kTvmErrorModuleHandleInvalid otherwise. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMCrtHandle_DecodeModule(TVMModuleHandle handle,
                                                              const TVMModule** out_module);
/*! \brief Name of the function a handle names, for messages ("?" when unknown). */
const char* TVMCrtHandle_FunctionName(TVMFunctionHandle handle);
/*! \brief Handle value printable with %lx. */
unsigned long TVMCrtHandle_Print(const void* handle);

/* --- built-in globals (crt_builtins.c) --- */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMCrtBuiltins_Register(void);

/* --- time evaluators (time_evaluator.c) --- */
void TVMCrtTimeEvaluator_Reset(void);
/*! \brief Is `slot` a live evaluator? */
int TVMCrtTimeEvaluator_IsLive(uint32_t slot);
int TVMCrtTimeEvaluator_Call(uint32_t slot, TVMValue* args, int* type_codes, int num_args,
                             TVMValue* ret_val, int* ret_type_code);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMCrtTimeEvaluator_Free(uint32_t slot);
/*! \brief The runtime.RPCTimeEvaluator global. */
int TVMCrtTimeEvaluator_Create(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                               int* ret_type_code, void* resource_handle);

/* --- NDArray table and workspace (ndarray.c, crt_backend_api.c) --- */
void TVMCrtNDArray_Reset(void);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMCrtWorkspace_Reset(void);

#endif /* TVM_CRT_SRC_COMMON_CRT_INTERNAL_H_ */
