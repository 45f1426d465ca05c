/*
 * crt_builtins.c -- the global functions TVMInitializeRuntime registers (docs/architecture.md §4):
 *   runtime.SystemLib([name])                            -> module handle (kTVMModuleHandle): no name or
 *                                                           "" the default, else the model `name`
 *   tvm.rpc.server.ModuleGetFunction(mod, name[, query]) -> function handle, or null if absent
 *   runtime.RPCTimeEvaluator(...)                        -> see time_evaluator.c
 *   tvm.contrib.random.random_fill(tensor)               -> fills the tensor, returns nothing
 * (tvm.rpc.server.GetCRTMaxPacketSize is registered by the RPC server.)
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>

#include "crt_internal.h"

static int system_lib(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val, int* ret_type_code,
                      void* resource_handle);
static int module_get_function(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                               int* ret_type_code, void* resource_handle);
static int random_fill(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val, int* ret_type_code,
                       void* resource_handle);
static void floats_from_random_bits(uint8_t* data, size_t num_bytes, uint8_t bits);
static TVMFunctionHandle as_handle(TVMBackendPackedCFunc func);

/* TVMFuncRegisterGlobal takes functions as TVMFunctionHandle (TVM's ABI); see crt_runtime_api.c. */
static TVMFunctionHandle as_handle(TVMBackendPackedCFunc func) {
  TVMFunctionHandle handle = NULL;
  (void)memcpy((void*)&handle, (const void*)&func, sizeof(handle));
  return handle;
}

tvm_crt_error_t TVMCrtBuiltins_Register(void) {
  static const struct {
    const char* name;
    TVMBackendPackedCFunc func;
  } builtins[] = {
      {"runtime.SystemLib", &system_lib},
      {"tvm.rpc.server.ModuleGetFunction", &module_get_function},
      {"runtime.RPCTimeEvaluator", &TVMCrtTimeEvaluator_Create},
      {"tvm.contrib.random.random_fill", &random_fill},
  };
  size_t i;
  tvm_crt_error_t err = kTvmErrorNoError;
  for (i = 0U; i < (sizeof(builtins) / sizeof(builtins[0])); i++) {
    const char* name = builtins[i].name;
    TVMBackendPackedCFunc func = builtins[i].func;
    const int rc = TVMFuncRegisterGlobal(name, as_handle(func), 1);
    if (rc != 0) {
      err = (tvm_crt_error_t)rc;
      break;
    }
  }
  return err;
}

const TVMModule* TVMSystemLibLookup(const char* name) {
  size_t count = 0U;
  size_t i;
  const TVMSystemLibTableEntry* table = TVMSystemLibTable(&count);
  if ((name == NULL) || (table == NULL)) {
    return NULL;
  }
  for (i = 0U; i < count; i++) {
    if ((table[i].name != NULL) && (strcmp(table[i].name, name) == 0)) {
      return table[i].entry_point();
    }
  }
  return NULL;
}

/* runtime.SystemLib(name) of a name the firmware does not link: the error lists the models it does. */
static int system_lib_unknown(const char* name) {
  char linked[96];
  size_t used = 0U;
  size_t count = 0U;
  size_t i;
  const TVMSystemLibTableEntry* table = TVMSystemLibTable(&count);
  linked[0] = '\0';
  for (i = 0U; (table != NULL) && (i < count); i++) {
    const char* model = (table[i].name != NULL) ? table[i].name : "?";
    size_t sep = (i == 0U) ? (size_t)0U : (size_t)2U;
    size_t len = strlen(model);
    if ((used + sep + len + 4U) >= sizeof(linked)) {
      (void)memcpy(&linked[used], "...", 4U);
      break;
    }
    (void)memcpy(&linked[used], ", ", sep);
    (void)memcpy(&linked[used + sep], model, len + 1U);
    used += sep + len;
  }
  if (count == 0U) {
    return (int)TVMCrtError_Set(kTvmErrorSystemLibMissing,
                                "runtime.SystemLib: no model named '%.40s': this firmware links no named models "
                                "(call it without a name)",
                                name);
  }
  return (int)TVMCrtError_Set(kTvmErrorSystemLibMissing, "runtime.SystemLib: no model named '%.40s'; linked: %s",
                              name, linked);
}

static int system_lib(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val, int* ret_type_code,
                      void* resource_handle) {
  const TVMModule* mod;
  TVMModuleHandle handle = NULL;
  tvm_crt_error_t err;
  const char* name = NULL;
  (void)resource_handle;
  /* An optional name (TVM clients pass a symbol prefix here): empty means the default system library. */
  if ((num_args > 1) || ((num_args == 1) && (type_codes[0] != (int)kTVMStr))) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallNumArguments,
                                "runtime.SystemLib: takes no arguments (or one model name string), got %d",
                                num_args);
  }
  if ((num_args == 1) && (args[0].v_str != NULL) && (args[0].v_str[0] != '\0')) {
    name = args[0].v_str;
  }
#if TVM_CRT_MAX_MODEL_NAME_BYTES > 0
  if ((name != NULL) &&
      (TVMCrtBoundedStrlen(name, (size_t)TVM_CRT_MAX_MODEL_NAME_BYTES) >= (size_t)TVM_CRT_MAX_MODEL_NAME_BYTES)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "runtime.SystemLib: model name '%.24s...' has %u characters or more, past "
                                "TVM_CRT_MAX_MODEL_NAME_BYTES=%u (crt_config.h)",
                                name, (unsigned)TVM_CRT_MAX_MODEL_NAME_BYTES, (unsigned)TVM_CRT_MAX_MODEL_NAME_BYTES);
  }
#endif
  if (name != NULL) {
    mod = TVMSystemLibLookup(name);
    if (mod == NULL) {
      return system_lib_unknown(name);
    }
  } else {
    mod = TVMSystemLibEntryPoint();
  }
  if (mod == NULL) {
    return (int)TVMCrtError_Set(kTvmErrorSystemLibMissing,
                                "runtime.SystemLib: this firmware has no system library "
                                "(TVMSystemLibEntryPoint() returned NULL; link the generated model code)");
  }
  err = TVMModCreateFromCModule(mod, &handle);
  if (err != kTvmErrorNoError) {
    return (int)err; /* message already set */
  }
  ret_val->v_handle = handle;
  *ret_type_code = (int)kTVMModuleHandle;
  return 0;
}

static int module_get_function(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                               int* ret_type_code, void* resource_handle) {
  TVMFunctionHandle func = NULL;
  const TVMModule* mod = NULL;
  tvm_function_index_t index = 0U;
  (void)resource_handle;
  if ((num_args < 2) || (num_args > 3)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallNumArguments,
                                "tvm.rpc.server.ModuleGetFunction: expects (module, name[, query_imports]), "
                                "got %d arguments",
                                num_args);
  }
  if (type_codes[0] != (int)kTVMModuleHandle) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallWrongArgType,
                                "tvm.rpc.server.ModuleGetFunction: argument 0 (module) has type code %d, "
                                "expected %d (module handle)",
                                type_codes[0], (int)kTVMModuleHandle);
  }
  if (type_codes[1] != (int)kTVMStr) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallWrongArgType,
                                "tvm.rpc.server.ModuleGetFunction: argument 1 (name) has type code %d, "
                                "expected %d (string)",
                                type_codes[1], (int)kTVMStr);
  }
  if (TVMCrtHandle_DecodeModule(args[0].v_handle, &mod) != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(kTvmErrorModuleHandleInvalid,
                                "tvm.rpc.server.ModuleGetFunction: invalid module handle 0x%lx",
                                TVMCrtHandle_Print(args[0].v_handle));
  }
  /* A missing function is not an error here: the caller gets a null handle (as TVM's RPC server does). */
  if ((args[1].v_str != NULL) && (TVMFuncRegistry_Lookup(mod->registry, args[1].v_str, &index) == kTvmErrorNoError)) {
    const int rc = TVMModGetFunction(args[0].v_handle, args[1].v_str, 0, &func);
    if (rc != 0) {
      return rc;
    }
    ret_val->v_handle = func;
    *ret_type_code = (int)kTVMPackedFuncHandle;
  } else {
    ret_val->v_handle = NULL;
    *ret_type_code = (int)kTVMNullptr;
  }
  return 0;
}

/* Turn random bits into uniform floats in [0, 1) in place (32- and 64-bit floats), so a filled tensor
 * holds no NaN or infinity. Other widths keep their random bits. */
static void floats_from_random_bits(uint8_t* data, size_t num_bytes, uint8_t bits) {
  size_t i;
  if (bits == 32U) {
    for (i = 0U; (i + 4U) <= num_bytes; i += 4U) {
      uint32_t r;
      float f;
      (void)memcpy((void*)&r, (const void*)&data[i], sizeof(r));
      const uint32_t mantissa = r >> 8U; /* 24 random bits */
      f = (float)mantissa * (1.0f / 16777216.0f);
      (void)memcpy((void*)&data[i], (const void*)&f, sizeof(f));
    }
  } else if (bits == 64U) {
    for (i = 0U; (i + 8U) <= num_bytes; i += 8U) {
      uint64_t r;
      double d;
      (void)memcpy((void*)&r, (const void*)&data[i], sizeof(r));
      const uint64_t mantissa = r >> 11U; /* 53 random bits */
      d = (double)mantissa * (1.0 / 9007199254740992.0);
      (void)memcpy((void*)&data[i], (const void*)&d, sizeof(d));
    }
  } else {
    /* keep the random bits */
  }
}

static int random_fill(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val, int* ret_type_code,
                       void* resource_handle) {
  DLTensor* tensor;
  size_t num_bytes = 0U;
  uint8_t* data;
  tvm_crt_error_t err;
  (void)ret_val;
  (void)ret_type_code;
  (void)resource_handle;
  if (num_args != 1) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallNumArguments,
                                "tvm.contrib.random.random_fill: expects 1 argument (tensor), got %d", num_args);
  }
  if ((type_codes[0] != (int)kTVMDLTensorHandle) && (type_codes[0] != (int)kTVMNDArrayHandle)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallWrongArgType,
                                "tvm.contrib.random.random_fill: argument 0 has type code %d, expected a tensor",
                                type_codes[0]);
  }
  tensor = (DLTensor*)args[0].v_handle;
  if ((tensor == NULL) || (tensor->data == NULL)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "tvm.contrib.random.random_fill: tensor or its data is NULL");
  }
  if (tensor->strides != NULL) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "tvm.contrib.random.random_fill: strided tensors are not supported");
  }
  err = TVMNDArray_DataSizeBytes(tensor, &num_bytes);
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err, "tvm.contrib.random.random_fill: invalid tensor shape or dtype");
  }
  data = &((uint8_t*)tensor->data)[tensor->byte_offset];
  err = TVMPlatformGenerateRandom(data, num_bytes);
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err, "tvm.contrib.random.random_fill: TVMPlatformGenerateRandom failed (0x%x)",
                                (unsigned)err);
  }
  if ((tensor->dtype.code == (uint8_t)kDLFloat) && (tensor->dtype.lanes >= 1U)) {
    floats_from_random_bits(data, num_bytes, tensor->dtype.bits);
  }
  return 0;
}
