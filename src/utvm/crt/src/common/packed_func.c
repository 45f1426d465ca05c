/*
 * packed_func.c -- TVMPackedFunc: a PackedFunc called from C (see tvm/runtime/crt/packed_func.h).
 *
 * Lookups go through TVMFuncGetGlobal / TVMModGetFunction and calls through TVMFuncCall, so a TVMPackedFunc
 * reaches exactly what the C API reaches, with its checks and messages. Every Add goes through add_arg, which
 * keeps the first failure in arg_error; kTVMBytes arguments point at the struct's own TVMByteArray slots, set
 * again at each Call so a copied struct stays right. Getters compare the return type code with the one(s)
 * they accept and name both on a mismatch.
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/packed_func.h>

#include "crt_internal.h"

static tvm_crt_error_t invalid_pf(const char* api);
static tvm_crt_error_t add_arg(TVMPackedFunc* pf, const char* api, TVMValue value, int type_code, int present);
static const char* type_name(int type_code);
static tvm_crt_error_t check_ret(const TVMPackedFunc* pf, const void* out, const char* api, int wanted,
                                 int also_wanted);
static tvm_crt_error_t init_with(TVMPackedFunc* pf, TVMFunctionHandle handle);

static tvm_crt_error_t invalid_pf(const char* api) {
  return TVMCrtError_Set(kTvmErrorPlatformInvalidArgument, "%s: NULL TVMPackedFunc", api);
}

/* Names of the type codes a PackedFunc passes, for messages. */
static const char* type_name(int type_code) {
  static const char* const names[] = {"int",    "uint",     "float",        "handle",      "null",
                                      "dtype",  "device",   "DLTensor*",    "object",      "module",
                                      "function", "str",    "bytes",        "NDArray",     "object rvalue"};
  const char* name = "extension type";
  if ((type_code >= 0) && ((size_t)type_code < (sizeof(names) / sizeof(names[0])))) {
    name = names[type_code];
  }
  return name;
}

/* Append one argument; `present` 0 means the value a pointer argument needs is NULL. */
static tvm_crt_error_t add_arg(TVMPackedFunc* pf, const char* api, TVMValue value, int type_code, int present) {
  tvm_crt_error_t err = kTvmErrorNoError;
  if (pf == NULL) {
    return invalid_pf(api);
  }
  if (pf->num_args >= (int)TVM_CRT_MAX_ARGS) {
    err = TVMCrtError_Set(kTvmErrorFunctionCallNumArguments,
                          "%s: '%s' has %d arguments already, the most a call takes (TVM_CRT_MAX_ARGS)", api,
                          TVMCrtHandle_FunctionName(pf->handle), (int)TVM_CRT_MAX_ARGS);
  } else if (present == 0) {
    err = TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg, "%s: argument %d of '%s' is a NULL %s", api,
                          pf->num_args, TVMCrtHandle_FunctionName(pf->handle), type_name(type_code));
  } else {
    pf->args[pf->num_args] = value;
    pf->type_codes[pf->num_args] = type_code;
    pf->num_args++;
  }
  if ((err != kTvmErrorNoError) && (pf->arg_error == kTvmErrorNoError)) {
    pf->arg_error = err;
  }
  return err;
}

static tvm_crt_error_t init_with(TVMPackedFunc* pf, TVMFunctionHandle handle) {
  pf->handle = handle;
  pf->ret_value.v_int64 = 0;
  pf->ret_type_code = (int)kTVMNullptr;
  TVMPackedFunc_ClearArgs(pf);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPackedFunc_InitGlobal(TVMPackedFunc* pf, const char* name) {
  TVMFunctionHandle handle = NULL;
  int rc;
  if (pf == NULL) {
    return invalid_pf("TVMPackedFunc_InitGlobal");
  }
  (void)init_with(pf, NULL);
  rc = TVMFuncGetGlobal(name, &handle);
  if (rc != 0) {
    return (tvm_crt_error_t)rc; /* TVMFuncGetGlobal's codes are tvm_crt_error_t values; its message stays */
  }
  return init_with(pf, handle);
}

tvm_crt_error_t TVMPackedFunc_InitModuleFunction(TVMPackedFunc* pf, TVMModuleHandle mod, const char* name) {
  TVMFunctionHandle handle = NULL;
  int rc;
  if (pf == NULL) {
    return invalid_pf("TVMPackedFunc_InitModuleFunction");
  }
  (void)init_with(pf, NULL);
  rc = TVMModGetFunction(mod, name, 0, &handle);
  if (rc != 0) {
    return (tvm_crt_error_t)rc;
  }
  return init_with(pf, handle);
}

tvm_crt_error_t TVMPackedFunc_InitHandle(TVMPackedFunc* pf, TVMFunctionHandle handle) {
  if (pf == NULL) {
    return invalid_pf("TVMPackedFunc_InitHandle");
  }
  (void)init_with(pf, NULL);
  if (handle == NULL) {
    return TVMCrtError_Set(kTvmErrorFunctionHandleInvalid, "TVMPackedFunc_InitHandle: NULL function handle");
  }
  return init_with(pf, handle);
}

void TVMPackedFunc_ClearArgs(TVMPackedFunc* pf) {
  if (pf != NULL) {
    pf->num_args = 0;
    pf->arg_error = kTvmErrorNoError;
  }
}

tvm_crt_error_t TVMPackedFunc_AddInt(TVMPackedFunc* pf, int64_t value) {
  TVMValue v;
  v.v_int64 = value;
  return add_arg(pf, "TVMPackedFunc_AddInt", v, (int)kTVMArgInt, 1);
}

tvm_crt_error_t TVMPackedFunc_AddFloat(TVMPackedFunc* pf, double value) {
  TVMValue v;
  v.v_float64 = value;
  return add_arg(pf, "TVMPackedFunc_AddFloat", v, (int)kTVMArgFloat, 1);
}

tvm_crt_error_t TVMPackedFunc_AddHandle(TVMPackedFunc* pf, void* handle) {
  TVMValue v;
  v.v_handle = handle;
  return add_arg(pf, "TVMPackedFunc_AddHandle", v, (int)kTVMOpaqueHandle, 1);
}

tvm_crt_error_t TVMPackedFunc_AddTensor(TVMPackedFunc* pf, DLTensor* tensor) {
  TVMValue v;
  v.v_handle = tensor;
  return add_arg(pf, "TVMPackedFunc_AddTensor", v, (int)kTVMDLTensorHandle, (tensor != NULL) ? 1 : 0);
}

tvm_crt_error_t TVMPackedFunc_AddString(TVMPackedFunc* pf, const char* text) {
  TVMValue v;
  v.v_str = text;
  return add_arg(pf, "TVMPackedFunc_AddString", v, (int)kTVMStr, (text != NULL) ? 1 : 0);
}

tvm_crt_error_t TVMPackedFunc_AddBytes(TVMPackedFunc* pf, const void* data, size_t size) {
  TVMValue v;
  tvm_crt_error_t err;
  int present = 0;
  if ((data != NULL) || (size == 0U)) {
    present = 1;
  }
  if (pf == NULL) {
    return invalid_pf("TVMPackedFunc_AddBytes");
  }
  v.v_handle = NULL; /* pointed at bytes[i] by Call */
  err = add_arg(pf, "TVMPackedFunc_AddBytes", v, (int)kTVMBytes, present);
  if (err == kTvmErrorNoError) {
    TVMByteArray* slot = &pf->bytes[pf->num_args - 1];
    slot->data = (const char*)data;
    slot->size = size;
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_AddModule(TVMPackedFunc* pf, TVMModuleHandle mod) {
  TVMValue v;
  v.v_handle = mod;
  return add_arg(pf, "TVMPackedFunc_AddModule", v, (int)kTVMModuleHandle, (mod != NULL) ? 1 : 0);
}

tvm_crt_error_t TVMPackedFunc_AddFunction(TVMPackedFunc* pf, TVMFunctionHandle func) {
  TVMValue v;
  v.v_handle = func;
  return add_arg(pf, "TVMPackedFunc_AddFunction", v, (int)kTVMPackedFuncHandle, (func != NULL) ? 1 : 0);
}

tvm_crt_error_t TVMPackedFunc_AddNull(TVMPackedFunc* pf) {
  TVMValue v;
  v.v_handle = NULL;
  return add_arg(pf, "TVMPackedFunc_AddNull", v, (int)kTVMNullptr, 1);
}

int TVMPackedFunc_Call(TVMPackedFunc* pf) {
  int i;
  if (pf == NULL) {
    return (int)invalid_pf("TVMPackedFunc_Call");
  }
  pf->ret_value.v_int64 = 0;
  pf->ret_type_code = (int)kTVMNullptr;
  if (pf->handle == NULL) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionHandleInvalid,
                                "TVMPackedFunc_Call: no function (call TVMPackedFunc_Init* first, and check it)");
  }
  if (pf->arg_error != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(pf->arg_error, "TVMPackedFunc_Call: '%s' not called: adding argument %d failed "
                                "with 0x%x", TVMCrtHandle_FunctionName(pf->handle), pf->num_args,
                                (unsigned)pf->arg_error);
  }
  for (i = 0; i < pf->num_args; i++) {
    if (pf->type_codes[i] == (int)kTVMBytes) {
      pf->args[i].v_handle = &pf->bytes[i];
    }
  }
  return TVMFuncCall(pf->handle, pf->args, pf->type_codes, pf->num_args, &pf->ret_value, &pf->ret_type_code);
}

int TVMPackedFunc_NumArgs(const TVMPackedFunc* pf) { return (pf != NULL) ? pf->num_args : 0; }

int TVMPackedFunc_RetTypeCode(const TVMPackedFunc* pf) {
  return (pf != NULL) ? pf->ret_type_code : (int)kTVMNullptr;
}

/* kTvmErrorNoError when the return value has type code `wanted` (or `also_wanted`, -1 for none). */
static tvm_crt_error_t check_ret(const TVMPackedFunc* pf, const void* out, const char* api, int wanted,
                                 int also_wanted) {
  tvm_crt_error_t err = kTvmErrorNoError;
  if ((pf == NULL) || (out == NULL)) {
    err = TVMCrtError_Set(kTvmErrorPlatformInvalidArgument, "%s: NULL %s", api,
                          (pf == NULL) ? "TVMPackedFunc" : "out");
  } else if ((pf->ret_type_code != wanted) && (pf->ret_type_code != also_wanted)) {
    const TVMFunctionHandle handle = pf->handle; /* a copy: the handle is not const inside a const struct */
    err = TVMCrtError_Set(kTvmErrorFunctionCallWrongReturnType, "%s: '%s' returned %s (type code %d), not %s", api,
                          TVMCrtHandle_FunctionName(handle), type_name(pf->ret_type_code), pf->ret_type_code,
                          type_name(wanted));
  } else {
    /* the wanted type */
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetInt(const TVMPackedFunc* pf, int64_t* out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetInt", (int)kTVMArgInt, -1);
  if (err == kTvmErrorNoError) {
    *out = pf->ret_value.v_int64;
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetFloat(const TVMPackedFunc* pf, double* out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetFloat", (int)kTVMArgFloat, -1);
  if (err == kTvmErrorNoError) {
    *out = pf->ret_value.v_float64;
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetHandle(const TVMPackedFunc* pf, void** out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetHandle", (int)kTVMOpaqueHandle, -1);
  if (err == kTvmErrorNoError) {
    *out = pf->ret_value.v_handle;
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetTensor(const TVMPackedFunc* pf, DLTensor** out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetTensor", (int)kTVMDLTensorHandle,
                                        (int)kTVMNDArrayHandle);
  if (err == kTvmErrorNoError) {
    *out = (DLTensor*)pf->ret_value.v_handle; /* TVM ABI: the handle of these type codes is a DLTensor* */
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetString(const TVMPackedFunc* pf, const char** out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetString", (int)kTVMStr, -1);
  if (err == kTvmErrorNoError) {
    *out = pf->ret_value.v_str;
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetBytes(const TVMPackedFunc* pf, const TVMByteArray** out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetBytes", (int)kTVMBytes, -1);
  if (err == kTvmErrorNoError) {
    *out = (const TVMByteArray*)pf->ret_value.v_handle; /* TVM ABI: kTVMBytes carries a TVMByteArray* */
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetModule(const TVMPackedFunc* pf, TVMModuleHandle* out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetModule", (int)kTVMModuleHandle, -1);
  if (err == kTvmErrorNoError) {
    *out = pf->ret_value.v_handle;
  }
  return err;
}

tvm_crt_error_t TVMPackedFunc_GetRetFunction(const TVMPackedFunc* pf, TVMFunctionHandle* out) {
  const tvm_crt_error_t err = check_ret(pf, out, "TVMPackedFunc_GetRetFunction", (int)kTVMPackedFuncHandle, -1);
  if (err == kTvmErrorNoError) {
    *out = pf->ret_value.v_handle;
  }
  return err;
}
