/*
 * crt_runtime_api.c -- the module table, the global function registry, handles and TVMFuncCall;
 * TVMInitializeRuntime. Handle encoding: see crt_internal.h.
 *
 * Function handles carry 32 bits in a pointer-sized value (TVMFunctionHandle is void*), so they are
 * converted between integers and pointers here and only here (MISRA.md, rule 11.6 deviation).
 * A debug build (TVM_CRT_DEBUG) also checks each module's registry when it is registered and each resolved
 * function before calling it, and logs registrations at debug level.
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/func_registry.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/utvm_custom_op.h>

#include "crt_internal.h"

/* A registered function arrives as a TVMFunctionHandle (void*) holding a TVMBackendPackedCFunc. ISO C
 * has no conversion between object and function pointers, so its bytes are copied; this requires equal
 * sizes, which holds on every target the CRT supports. */
typedef char tvm_crt_check_function_pointer_size[(sizeof(void*) == sizeof(TVMBackendPackedCFunc)) ? 1 : -1];

static const TVMModule* g_modules[TVM_CRT_MAX_REGISTERED_MODULES];
static TVMMutableFuncRegistry g_global_registry;
static uint8_t g_initialized = 0U;

static tvm_crt_error_t check_initialized(const char* api);
/* What a function handle resolves to. */
typedef struct {
  TVMBackendPackedCFunc func;
  void* resource_handle;
} ResolvedFunction;

static tvm_crt_error_t resolve_function(uint32_t module_index, uint32_t function_index, ResolvedFunction* out);
static const char* name_at(const TVMFuncRegistry* reg, uint32_t index);
static tvm_crt_error_t debug_check_module(const TVMModule* mod);

static tvm_crt_error_t check_initialized(const char* api) {
  tvm_crt_error_t err = kTvmErrorNoError;
  if (g_initialized == 0U) {
    err = TVMCrtError_Set(kTvmErrorPlatformCheckFailure, "%s: TVMInitializeRuntime() has not been called",
                          api);
  }
  return err;
}

/* Function pointer and resource_handle for well-formed indices; kTvmErrorFunctionHandleInvalid when
 * they name nothing. Time-evaluator handles are dispatched by the caller, not here. */
static tvm_crt_error_t resolve_function(uint32_t module_index, uint32_t function_index, ResolvedFunction* out) {
  tvm_crt_error_t err = kTvmErrorFunctionHandleInvalid;
  if (module_index == TVM_CRT_GLOBAL_MODULE_INDEX) {
    if (TVMFuncRegistry_GetByIndex(&g_global_registry.registry, (tvm_function_index_t)function_index,
                                   &out->func) == kTvmErrorNoError) {
      out->resource_handle = NULL;
      err = kTvmErrorNoError;
    }
  } else if ((module_index < TVM_CRT_GLOBAL_MODULE_INDEX) && (g_modules[module_index] != NULL)) {
    const TVMModule* mod = g_modules[module_index];
    if (TVMFuncRegistry_GetByIndex(mod->registry, (tvm_function_index_t)function_index, &out->func) ==
        kTvmErrorNoError) {
      /* The callee's resource_handle is its module (docs/architecture.md §4); the API type is a plain void*. */
      out->resource_handle = (void*)(uintptr_t)mod;
      err = kTvmErrorNoError;
    }
  } else {
    /* unknown module index: invalid */
  }
  return err;
}

static const char* name_at(const TVMFuncRegistry* reg, uint32_t index) {
  const char* name = "?";
  const uint16_t count = TVMFuncRegistry_GetNumFuncs(reg);
  if (index < (uint32_t)count) {
    const char* p = &reg->names[TVM_FUNC_REGISTRY_COUNT_BYTES];
    uint32_t i;
    for (i = 0U; i < index; i++) {
      p = &p[strlen(p) + 1U];
    }
    name = p;
  }
  return name;
}

/* A debug build's check of a module about to be registered: every function of its registry is there (no NULL
 * pointer, no empty name). Nothing in a release build. */
static tvm_crt_error_t debug_check_module(const TVMModule* mod) {
  tvm_crt_error_t err = kTvmErrorNoError;
#if TVM_CRT_DEBUG
  const uint16_t count = TVMFuncRegistry_GetNumFuncs(mod->registry);
  const char* name = &mod->registry->names[TVM_FUNC_REGISTRY_COUNT_BYTES];
  uint16_t i;
  for (i = 0U; (i < count) && (err == kTvmErrorNoError); i++) {
    if ((mod->registry->funcs == NULL) || (mod->registry->funcs[i] == NULL) || (name[0] == '\0')) {
      err = TVMCrtError_Set(kTvmErrorPlatformCheckFailure,
                            "TVMModCreateFromCModule: module function %u of %u ('%.40s') has %s (TVM_CRT_DEBUG check)",
                            (unsigned)i, (unsigned)count, name, (name[0] == '\0') ? "an empty name" : "no function");
    }
    name = &name[strlen(name) + 1U];
  }
#else
  (void)mod;
#endif
  return err;
}

/* ------------------------------------------------------------------------------------------------ */
/* Handles (internal)                                                                               */

TVMFunctionHandle TVMCrtHandle_EncodeFunction(uint32_t module_index, uint32_t function_index) {
  const uint32_t value = (((module_index | TVM_CRT_HANDLE_VALID_BIT) & 0xffffU) << 16U) |
                         ((function_index | TVM_CRT_HANDLE_VALID_BIT) & 0xffffU);
  return (TVMFunctionHandle)(uintptr_t)value;
}

tvm_crt_error_t TVMCrtHandle_DecodeFunction(TVMFunctionHandle handle, uint32_t* module_index,
                                            uint32_t* function_index) {
  tvm_crt_error_t err = kTvmErrorFunctionHandleInvalid;
  const uintptr_t raw = (uintptr_t)handle;
  /* Nothing above bit 31 (two 16-bit shifts: valid for 32- and 64-bit uintptr_t alike). */
  if (((raw >> 16U) >> 16U) == 0U) {
    const uint32_t value = (uint32_t)raw;
    const uint32_t hi = value >> 16U;
    const uint32_t lo = value & 0xffffU;
    if (((hi & TVM_CRT_HANDLE_VALID_BIT) != 0U) && ((lo & TVM_CRT_HANDLE_VALID_BIT) != 0U)) {
      *module_index = hi & 0x7fffU;
      *function_index = lo & 0x7fffU;
      err = kTvmErrorNoError;
    }
  }
  return err;
}

tvm_crt_error_t TVMCrtHandle_DecodeModule(TVMModuleHandle handle, const TVMModule** out_module) {
  tvm_crt_error_t err = kTvmErrorModuleHandleInvalid;
  const uintptr_t raw = (uintptr_t)handle;
  if ((raw & (uintptr_t)0xffffU) == 0U) {
    const uintptr_t hi = raw >> 16U;
    if ((hi & (uintptr_t)TVM_CRT_HANDLE_VALID_BIT) != 0U) {
      const uintptr_t index = hi & ~(uintptr_t)TVM_CRT_HANDLE_VALID_BIT;
      if ((index < (uintptr_t)TVM_CRT_MAX_REGISTERED_MODULES) && (g_modules[index] != NULL)) {
        *out_module = g_modules[index];
        err = kTvmErrorNoError;
      }
    }
  }
  return err;
}

const char* TVMCrtHandle_FunctionName(TVMFunctionHandle handle) {
  const char* name = "?";
  uint32_t module_index = 0U;
  uint32_t function_index = 0U;
  if (TVMCrtHandle_DecodeFunction(handle, &module_index, &function_index) == kTvmErrorNoError) {
    if (module_index == TVM_CRT_GLOBAL_MODULE_INDEX) {
      name = name_at(&g_global_registry.registry, function_index);
    } else if ((module_index < TVM_CRT_GLOBAL_MODULE_INDEX) && (g_modules[module_index] != NULL)) {
      name = name_at(g_modules[module_index]->registry, function_index);
    } else if (module_index == TVM_CRT_TIME_EVALUATOR_MODULE_INDEX) {
      name = "time evaluator";
    } else {
      /* unknown */
    }
  }
  return name;
}

unsigned long TVMCrtHandle_Print(const void* handle) { return (unsigned long)(uintptr_t)handle; }

/* ------------------------------------------------------------------------------------------------ */
/* Life cycle                                                                                       */

tvm_crt_error_t TVMInitializeRuntime(void) {
  /* Backing store of the global registry (names + pointers); Create aligns the pointer region itself. */
  static uint8_t registry_buffer[TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES];
  tvm_crt_error_t err;
  uint32_t i;
  g_initialized = 0U;
  TVMCrtError_Reset();
  for (i = 0U; i < (uint32_t)TVM_CRT_MAX_REGISTERED_MODULES; i++) {
    g_modules[i] = NULL;
  }
  TVMCrtTimeEvaluator_Reset();
  TVMCrtNDArray_Reset();
  err = TVMCrtWorkspace_Reset();
  if (err != kTvmErrorNoError) {
    return TVMCrtError_Set(err, "TVMInitializeRuntime: TVM_CRT_WORKSPACE_SIZE_BYTES=%lu is too small",
                           (unsigned long)TVM_CRT_WORKSPACE_SIZE_BYTES);
  }
  err = TVMMutableFuncRegistry_Create(&g_global_registry, registry_buffer, sizeof(registry_buffer));
  if (err != kTvmErrorNoError) {
    return TVMCrtError_Set(err, "TVMInitializeRuntime: global registry buffer too small (%lu bytes)",
                           (unsigned long)sizeof(registry_buffer));
  }
  g_initialized = 1U;
  err = TVMCrtBuiltins_Register();
  if (err != kTvmErrorNoError) {
    g_initialized = 0U;
  } else {
    TVM_CRT_DEBUG_LOG("TVMInitializeRuntime: %u module slots, %lu-byte global registry, %lu-byte workspace",
                      (unsigned)TVM_CRT_MAX_REGISTERED_MODULES, (unsigned long)TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES,
                      (unsigned long)TVM_CRT_WORKSPACE_SIZE_BYTES);
  }
  return err;
}

/* ------------------------------------------------------------------------------------------------ */
/* Modules                                                                                          */

tvm_crt_error_t TVMModCreateFromCModule(const TVMModule* mod, TVMModuleHandle* out_handle) {
  uint32_t i;
  uint32_t free_slot = TVM_CRT_GLOBAL_MODULE_INDEX;
  tvm_crt_error_t err;
  if ((mod == NULL) || (mod->registry == NULL) || (mod->registry->names == NULL) || (out_handle == NULL)) {
    return TVMCrtError_Set(kTvmErrorPlatformInvalidArgument,
                           "TVMModCreateFromCModule: NULL module, registry or out_handle");
  }
  for (i = 0U; i < (uint32_t)TVM_CRT_MAX_REGISTERED_MODULES; i++) {
    if (g_modules[i] == mod) {
      *out_handle = (TVMModuleHandle)(uintptr_t)((i | TVM_CRT_HANDLE_VALID_BIT) << 16U);
      return kTvmErrorNoError;
    }
    if ((g_modules[i] == NULL) && (free_slot == TVM_CRT_GLOBAL_MODULE_INDEX)) {
      free_slot = i;
    }
  }
  if (free_slot == TVM_CRT_GLOBAL_MODULE_INDEX) {
    *out_handle = NULL;
    return TVMCrtError_Set(kTvmErrorModuleRegistryFull,
                           "TVMModCreateFromCModule: all TVM_CRT_MAX_REGISTERED_MODULES=%u module slots "
                           "are in use",
                           (unsigned)TVM_CRT_MAX_REGISTERED_MODULES);
  }
  err = debug_check_module(mod);
  if (err != kTvmErrorNoError) {
    *out_handle = NULL;
    return err;
  }
  g_modules[free_slot] = mod;
  TVM_CRT_DEBUG_LOG("TVMModCreateFromCModule: module of %u functions in slot %lu",
                    (unsigned)TVMFuncRegistry_GetNumFuncs(mod->registry), (unsigned long)free_slot);
  *out_handle = (TVMModuleHandle)(uintptr_t)((free_slot | TVM_CRT_HANDLE_VALID_BIT) << 16U);
  return kTvmErrorNoError;
}

int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports, TVMFunctionHandle* out) {
  const TVMModule* module = NULL;
  tvm_function_index_t index = 0U;
  tvm_crt_error_t err;
  (void)query_imports; /* CRT modules have no imports */
  if ((out == NULL) || (func_name == NULL)) {
    return (int)TVMCrtError_Set(kTvmErrorPlatformInvalidArgument, "TVMModGetFunction: NULL %s",
                                (out == NULL) ? "out" : "func_name");
  }
  *out = NULL;
  if (TVMCrtHandle_DecodeModule(mod, &module) != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(kTvmErrorModuleHandleInvalid, "TVMModGetFunction: invalid module handle 0x%lx",
                                TVMCrtHandle_Print(mod));
  }
#if TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES > 0
  if (TVMCrtBoundedStrlen(func_name, (size_t)TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES) >=
      (size_t)TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES) {
    return (int)TVMCrtError_Set(kTvmErrorPlatformInvalidArgument,
                                "TVMModGetFunction: function name '%.24s...' has %u characters or more, past "
                                "TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES=%u (crt_config.h)",
                                func_name, (unsigned)TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES,
                                (unsigned)TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES);
  }
#endif
  err = TVMFuncRegistry_Lookup(module->registry, func_name, &index);
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err, "TVMModGetFunction: module 0x%lx has no function named '%s'",
                                TVMCrtHandle_Print(mod), func_name);
  }
  *out = TVMCrtHandle_EncodeFunction((uint32_t)(((uintptr_t)mod >> 16U) & 0x7fffU), (uint32_t)index);
  return 0;
}

int TVMModFree(TVMModuleHandle mod) {
  const TVMModule* module = NULL;
  /* Modules are static and stay registered; their handles (and function handles) remain valid. */
  if (TVMCrtHandle_DecodeModule(mod, &module) != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(kTvmErrorModuleHandleInvalid, "TVMModFree: invalid module handle 0x%lx",
                                TVMCrtHandle_Print(mod));
  }
  return 0;
}

int TVMModImport(TVMModuleHandle mod, TVMModuleHandle dep) {
  (void)mod;
  (void)dep;
  return (int)TVMCrtError_Set(kTvmErrorFunctionCallNotImplemented,
                              "TVMModImport: the CRT does not support module imports");
}

/* ------------------------------------------------------------------------------------------------ */
/* Global functions                                                                                 */

int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  tvm_function_index_t index = 0U;
  tvm_crt_error_t err;
  if ((out == NULL) || (name == NULL)) {
    return (int)TVMCrtError_Set(kTvmErrorPlatformInvalidArgument, "TVMFuncGetGlobal: NULL %s",
                                (out == NULL) ? "out" : "name");
  }
  *out = NULL;
  err = check_initialized("TVMFuncGetGlobal");
  if (err != kTvmErrorNoError) {
    return (int)err;
  }
  err = TVMFuncRegistry_Lookup(&g_global_registry.registry, name, &index);
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err, "TVMFuncGetGlobal: no global function named '%s'", name);
  }
  *out = TVMCrtHandle_EncodeFunction(TVM_CRT_GLOBAL_MODULE_INDEX, (uint32_t)index);
  return 0;
}

int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override) {
  TVMBackendPackedCFunc func = NULL;
  tvm_crt_error_t err = check_initialized("TVMFuncRegisterGlobal");
  if (err != kTvmErrorNoError) {
    return (int)err;
  }
  if ((name == NULL) || (f == NULL)) {
    return (int)TVMCrtError_Set(kTvmErrorPlatformInvalidArgument, "TVMFuncRegisterGlobal: NULL %s",
                                (name == NULL) ? "name" : "function");
  }
  (void)memcpy((void*)&func, (const void*)&f, sizeof(func));
  err = TVMMutableFuncRegistry_Set(&g_global_registry, name, func, override);
  if (err == kTvmErrorFunctionAlreadyDefined) {
    return (int)TVMCrtError_Set(err, "TVMFuncRegisterGlobal: '%s' is already registered (override=0)", name);
  }
  if (err == kTvmErrorFunctionRegistryFull) {
    return (int)TVMCrtError_Set(err,
                                "TVMFuncRegisterGlobal: no room for '%s' in the global registry "
                                "(TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES=%lu)",
                                name, (unsigned long)TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES);
  }
  if (err == kTvmErrorPlatformCheckFailure) {
    return (int)TVMCrtError_Set(err, "TVMFuncRegisterGlobal: the global registry is corrupt (TVM_CRT_DEBUG check: "
                                "its names or pointers were overwritten)");
  }
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err,
                                "TVMFuncRegisterGlobal: invalid name '%.*s' (empty, or %u characters or more)",
                                16, name, (unsigned)TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES);
  }
  TVM_CRT_DEBUG_LOG("TVMFuncRegisterGlobal: '%s'", name);
  return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Calls                                                                                            */

int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                TVMValue* ret_val, int* ret_type_code) {
  uint32_t module_index = 0U;
  uint32_t function_index = 0U;
  ResolvedFunction fn = {NULL, NULL};
  TVMValue scratch_value;
  int scratch_code = (int)kTVMNullptr;
  TVMValue* ret = (ret_val != NULL) ? ret_val : &scratch_value;
  int* ret_code = (ret_type_code != NULL) ? ret_type_code : &scratch_code;
  uint32_t serial;
  int rc;

  if ((num_args < 0) || ((num_args > 0) && ((arg_values == NULL) || (type_codes == NULL)))) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "TVMFuncCall: %d arguments with NULL values or type codes", num_args);
  }
  if (TVMCrtHandle_DecodeFunction(func, &module_index, &function_index) != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionHandleInvalid, "TVMFuncCall: invalid function handle 0x%lx",
                                TVMCrtHandle_Print(func));
  }
  ret->v_int64 = 0;
  *ret_code = (int)kTVMNullptr;
  if (module_index == TVM_CRT_TIME_EVALUATOR_MODULE_INDEX) {
    if (TVMCrtTimeEvaluator_IsLive(function_index) == 0) {
      return (int)TVMCrtError_Set(kTvmErrorTimeEvaluatorBadHandle,
                                  "TVMFuncCall: time evaluator handle 0x%lx is not live (freed?)",
                                  TVMCrtHandle_Print(func));
    }
    return TVMCrtTimeEvaluator_Call(function_index, arg_values, type_codes, num_args, ret, ret_code);
  }
  if (resolve_function(module_index, function_index, &fn) != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionHandleInvalid,
                                "TVMFuncCall: function handle 0x%lx names no function (module %lu, index %lu)",
                                TVMCrtHandle_Print(func), (unsigned long)module_index,
                                (unsigned long)function_index);
  }
#if TVM_CRT_DEBUG
  if (fn.func == NULL) {
    return (int)TVMCrtError_Set(kTvmErrorPlatformCheckFailure,
                                "TVMFuncCall: function handle 0x%lx ('%s') resolves to a NULL function pointer "
                                "(TVM_CRT_DEBUG check: its registry was overwritten)",
                                TVMCrtHandle_Print(func), TVMCrtHandle_FunctionName(func));
  }
#endif
  serial = TVMCrtError_Serial();
  rc = fn.func(arg_values, type_codes, num_args, ret, ret_code, fn.resource_handle);
  if ((rc != 0) && (TVMCrtError_Serial() == serial)) {
    if (rc == UTVM_CUSTOM_OP_ERROR_GUARD) { /* unpacked generated code, which sets no message: name the cause */
      TVMAPISetLastErrorf("%s: a user operator wrote outside an output or into an input (code %d, "
                          "UTVM_CUSTOM_OP_ERROR_GUARD)", TVMCrtHandle_FunctionName(func), rc);
    } else {
      TVMAPISetLastErrorf("%s failed with code %d and no message", TVMCrtHandle_FunctionName(func), rc);
    }
  }
  return rc;
}

int TVMFuncFree(TVMFunctionHandle func) {
  uint32_t module_index = 0U;
  uint32_t function_index = 0U;
  ResolvedFunction fn = {NULL, NULL};
  if (TVMCrtHandle_DecodeFunction(func, &module_index, &function_index) != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionHandleInvalid, "TVMFuncFree: invalid function handle 0x%lx",
                                TVMCrtHandle_Print(func));
  }
  if (module_index == TVM_CRT_TIME_EVALUATOR_MODULE_INDEX) {
    if (TVMCrtTimeEvaluator_Free(function_index) != kTvmErrorNoError) {
      return (int)TVMCrtError_Set(kTvmErrorTimeEvaluatorBadHandle,
                                  "TVMFuncFree: time evaluator handle 0x%lx is not live",
                                  TVMCrtHandle_Print(func));
    }
    return 0;
  }
  /* Module and global functions are static: freeing a handle only checks it. */
  if (resolve_function(module_index, function_index, &fn) != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionHandleInvalid,
                                "TVMFuncFree: function handle 0x%lx names no function", TVMCrtHandle_Print(func));
  }
  return 0;
}
