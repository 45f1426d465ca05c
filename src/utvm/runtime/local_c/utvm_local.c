/*
 * utvm_local.c -- C globals of the local runtime (the CRT built as a shared library for the host Python
 * process, utvm.runtime.local). They exercise the C API from the C side:
 *
 *   utvm.local.call_global(name, args...)  look `name` up with TVMFuncGetGlobal and TVMFuncCall it
 *   utvm.local.call_packed(func, args...)  TVMFuncCall a function handle received as an argument
 *   utvm.local.accumulate(func|name, n)    sum of func(i) for i in [0, n), each an int64
 *   utvm.local.add_int(a, b)               a + b; checks its argument count and types
 *   utvm.local.echo(x)                     returns its one argument, whatever its type
 *   utvm.local.tensor_sum(t)               sum of a compact DLTensor's elements (int8/int32/float32/float64)
 *   utvm.local.tensor_scale(t, k)          multiplies a compact float32 DLTensor by k in place
 *   utvm.local.fail(message)               fails with `message` (kTvmErrorFunctionCallInvalidArg)
 *   testing.add_one(a, b)                  b = a + 1 for compact float32 tensors of one shape: the same
 *                                          contract as the host device's test function, so the same
 *                                          Python code runs against the local and the rpc backends
 *   utvm.local.test_module()               a module handle of a small const-registry module whose
 *                                          functions are add_one(x) and is_self() (1 if resource_handle
 *                                          is that module's TVMModule*)
 *
 * A failing callee's error text (TVMGetLastError) is passed up unchanged, so an exception raised in a
 * Python callback reaches the Python caller with its message. UTVMLocalRegisterGlobals() registers them
 * all; Python calls it once, after TVMInitializeRuntime().
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/module.h>

/*! \brief Register every utvm.local.* global; returns 0 or the first registration error. */
int UTVMLocalRegisterGlobals(void);

static int check_num_args(const char* fname, int num_args, int min_args, int max_args);
static int check_type(const char* fname, const int* type_codes, int index, int expected,
                      const char* expected_name);
static int call_with(const char* fname, TVMFunctionHandle func, TVMValue* args, int* type_codes,
                     int num_args, TVMValue* out_ret_value, int* out_ret_tcode);
static int resolve_callee(const char* fname, const TVMValue* arg, int type_code,
                          TVMFunctionHandle* out);
static int tensor_num_elements(const char* fname, const DLTensor* t, int64_t* out);
static int check_float_tensor(const char* fname, const TVMValue* args, const int* type_codes, int index,
                              int64_t* out_count);

static int check_num_args(const char* fname, int num_args, int min_args, int max_args) {
  if (num_args < min_args || (max_args >= 0 && num_args > max_args)) {
    if (min_args == max_args) {
      TVMAPISetLastErrorf("%s: expected %d argument%s, got %d", fname, min_args,
                          (min_args == 1) ? "" : "s", num_args);
    } else {
      TVMAPISetLastErrorf("%s: expected at least %d arguments, got %d", fname, min_args, num_args);
    }
    return (int)kTvmErrorFunctionCallNumArguments;
  }
  return 0;
}

static int check_type(const char* fname, const int* type_codes, int index, int expected,
                      const char* expected_name) {
  if (type_codes[index] != expected) {
    TVMAPISetLastErrorf("%s: argument %d has type code %d, expected %s (type code %d)", fname, index,
                        type_codes[index], expected_name, expected);
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  return 0;
}

static int call_with(const char* fname, TVMFunctionHandle func, TVMValue* args, int* type_codes,
                     int num_args, TVMValue* out_ret_value, int* out_ret_tcode) {
  int err;
  (void)fname;
  *out_ret_tcode = (int)kTVMNullptr;
  out_ret_value->v_handle = NULL;
  err = TVMFuncCall(func, args, type_codes, num_args, out_ret_value, out_ret_tcode);
  /* On failure the callee's message is already in TVMGetLastError(): keep it, pass the code up. */
  return err;
}

static int resolve_callee(const char* fname, const TVMValue* arg, int type_code,
                          TVMFunctionHandle* out) {
  if (type_code == (int)kTVMPackedFuncHandle) {
    *out = arg->v_handle;
    return 0;
  }
  if (type_code == (int)kTVMStr) {
    if (TVMFuncGetGlobal(arg->v_str, out) != 0) {
      TVMAPISetLastErrorf("%s: no global function named '%s'", fname, arg->v_str);
      return (int)kTvmErrorFunctionNameNotFound;
    }
    return 0;
  }
  TVMAPISetLastErrorf("%s: argument 0 has type code %d, expected a function or its name", fname,
                      type_code);
  return (int)kTvmErrorFunctionCallWrongArgType;
}

static int tensor_num_elements(const char* fname, const DLTensor* t, int64_t* out) {
  int64_t n = 1;
  int32_t i;
  if (t == NULL) {
    TVMAPISetLastErrorf("%s: argument 0 is a NULL DLTensor", fname);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  if (t->strides != NULL) {
    TVMAPISetLastErrorf("%s: only compact tensors are supported (strides must be NULL)", fname);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  for (i = 0; i < t->ndim; ++i) {
    n *= t->shape[i];
  }
  *out = n;
  return 0;
}

static int call_global(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                       int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.call_global";
  TVMFunctionHandle func = NULL;
  int err = check_num_args(kName, num_args, 1, -1);
  (void)resource_handle;
  if (err == 0) {
    err = check_type(kName, type_codes, 0, (int)kTVMStr, "str");
  }
  if (err == 0) {
    err = resolve_callee(kName, &args[0], type_codes[0], &func);
  }
  if (err == 0) {
    err = call_with(kName, func, &args[1], &type_codes[1], num_args - 1, out_ret_value, out_ret_tcode);
  }
  return err;
}

static int call_packed(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                       int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.call_packed";
  int err = check_num_args(kName, num_args, 1, -1);
  (void)resource_handle;
  if (err == 0) {
    err = check_type(kName, type_codes, 0, (int)kTVMPackedFuncHandle, "a PackedFunc");
  }
  if (err == 0) {
    err = call_with(kName, args[0].v_handle, &args[1], &type_codes[1], num_args - 1, out_ret_value,
                    out_ret_tcode);
  }
  return err;
}

static int accumulate(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                      int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.accumulate";
  TVMFunctionHandle func = NULL;
  int64_t total = 0;
  int64_t i;
  int err = check_num_args(kName, num_args, 2, 2);
  (void)resource_handle;
  if (err == 0) {
    err = resolve_callee(kName, &args[0], type_codes[0], &func);
  }
  if (err == 0) {
    err = check_type(kName, type_codes, 1, (int)kTVMArgInt, "int");
  }
  for (i = 0; (err == 0) && (i < args[1].v_int64); ++i) {
    TVMValue arg;
    int arg_code = (int)kTVMArgInt;
    TVMValue ret;
    int ret_code = (int)kTVMNullptr;
    arg.v_int64 = i;
    err = call_with(kName, func, &arg, &arg_code, 1, &ret, &ret_code);
    if ((err == 0) && (ret_code != (int)kTVMArgInt)) {
      TVMAPISetLastErrorf("%s: the callee returned type code %d for %lld, expected int", kName, ret_code,
                          (long long)i);
      err = (int)kTvmErrorFunctionCallWrongArgType;
    }
    if (err == 0) {
      total += ret.v_int64;
    }
  }
  if (err == 0) {
    out_ret_value->v_int64 = total;
    *out_ret_tcode = (int)kTVMArgInt;
  }
  return err;
}

static int add_int(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                   int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.add_int";
  int err = check_num_args(kName, num_args, 2, 2);
  (void)resource_handle;
  if (err == 0) {
    err = check_type(kName, type_codes, 0, (int)kTVMArgInt, "int");
  }
  if (err == 0) {
    err = check_type(kName, type_codes, 1, (int)kTVMArgInt, "int");
  }
  if (err == 0) {
    out_ret_value->v_int64 = args[0].v_int64 + args[1].v_int64;
    *out_ret_tcode = (int)kTVMArgInt;
  }
  return err;
}

static int echo(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                int* out_ret_tcode, void* resource_handle) {
  int err = check_num_args("utvm.local.echo", num_args, 1, 1);
  (void)resource_handle;
  if (err == 0) {
    *out_ret_value = args[0];
    *out_ret_tcode = type_codes[0];
  }
  return err;
}

static int tensor_sum(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                      int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.tensor_sum";
  const DLTensor* t = NULL;
  int64_t n = 0;
  int64_t i;
  double sum = 0.0;
  int err = check_num_args(kName, num_args, 1, 1);
  (void)resource_handle;
  if (err == 0) {
    err = check_type(kName, type_codes, 0, (int)kTVMDLTensorHandle, "a DLTensor");
  }
  if (err == 0) {
    t = (const DLTensor*)args[0].v_handle;
    err = tensor_num_elements(kName, t, &n);
  }
  if (err == 0) {
    const uint8_t* base = (const uint8_t*)t->data + t->byte_offset;
    if ((t->dtype.code == kDLFloat) && (t->dtype.bits == 32U) && (t->dtype.lanes == 1U)) {
      for (i = 0; i < n; ++i) {
        sum += (double)((const float*)(const void*)base)[i];
      }
    } else if ((t->dtype.code == kDLFloat) && (t->dtype.bits == 64U) && (t->dtype.lanes == 1U)) {
      for (i = 0; i < n; ++i) {
        sum += ((const double*)(const void*)base)[i];
      }
    } else if ((t->dtype.code == kDLInt) && (t->dtype.bits == 32U) && (t->dtype.lanes == 1U)) {
      for (i = 0; i < n; ++i) {
        sum += (double)((const int32_t*)(const void*)base)[i];
      }
    } else if ((t->dtype.code == kDLInt) && (t->dtype.bits == 8U) && (t->dtype.lanes == 1U)) {
      for (i = 0; i < n; ++i) {
        sum += (double)((const int8_t*)(const void*)base)[i];
      }
    } else {
      TVMAPISetLastErrorf("%s: unsupported dtype (code %u, bits %u, lanes %u); expected int8, int32, "
                          "float32 or float64", kName, (unsigned)t->dtype.code, (unsigned)t->dtype.bits,
                          (unsigned)t->dtype.lanes);
      err = (int)kTvmErrorFunctionCallInvalidArg;
    }
  }
  if (err == 0) {
    out_ret_value->v_float64 = sum;
    *out_ret_tcode = (int)kTVMArgFloat;
  }
  return err;
}

static int tensor_scale(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                        int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.tensor_scale";
  DLTensor* t = NULL;
  int64_t n = 0;
  int64_t i;
  int err = check_num_args(kName, num_args, 2, 2);
  (void)resource_handle;
  (void)out_ret_value;
  if (err == 0) {
    err = check_type(kName, type_codes, 0, (int)kTVMDLTensorHandle, "a DLTensor");
  }
  if (err == 0) {
    err = check_type(kName, type_codes, 1, (int)kTVMArgFloat, "float");
  }
  if (err == 0) {
    t = (DLTensor*)args[0].v_handle;
    err = tensor_num_elements(kName, t, &n);
  }
  if ((err == 0) &&
      !((t->dtype.code == kDLFloat) && (t->dtype.bits == 32U) && (t->dtype.lanes == 1U))) {
    TVMAPISetLastErrorf("%s: argument 0 must be float32 (got code %u, bits %u, lanes %u)", kName,
                        (unsigned)t->dtype.code, (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes);
    err = (int)kTvmErrorFunctionCallInvalidArg;
  }
  if (err == 0) {
    float* data = (float*)(void*)((uint8_t*)t->data + t->byte_offset);
    for (i = 0; i < n; ++i) {
      data[i] = (float)((double)data[i] * args[1].v_float64);
    }
    *out_ret_tcode = (int)kTVMNullptr;
  }
  return err;
}

static int fail(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.fail";
  int err = check_num_args(kName, num_args, 1, 1);
  (void)resource_handle;
  (void)out_ret_value;
  (void)out_ret_tcode;
  if (err == 0) {
    err = check_type(kName, type_codes, 0, (int)kTVMStr, "str");
  }
  if (err == 0) {
    TVMAPISetLastError(args[0].v_str);
    err = (int)kTvmErrorFunctionCallInvalidArg;
  }
  return err;
}

static int check_float_tensor(const char* fname, const TVMValue* args, const int* type_codes, int index,
                              int64_t* out_count) {
  const DLTensor* t;
  int err = check_type(fname, type_codes, index, (int)kTVMDLTensorHandle, "a DLTensor");
  if (err != 0) {
    return err;
  }
  t = (const DLTensor*)args[index].v_handle;
  if ((t == NULL) || (t->dtype.code != (uint8_t)kDLFloat) || (t->dtype.bits != 32U) || (t->dtype.lanes != 1U)) {
    TVMAPISetLastErrorf("%s: argument %d must be a float32 tensor", fname, index);
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  return tensor_num_elements(fname, t, out_count);
}

static int testing_add_one(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                           int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "testing.add_one";
  const DLTensor* a = NULL;
  const DLTensor* b = NULL;
  int64_t count_a = 0;
  int64_t count_b = 0;
  int64_t i;
  int32_t d;
  int err = check_num_args(kName, num_args, 2, 2);
  (void)resource_handle;
  if (err == 0) {
    err = check_float_tensor(kName, args, type_codes, 0, &count_a);
  }
  if (err == 0) {
    err = check_float_tensor(kName, args, type_codes, 1, &count_b);
  }
  if (err == 0) {
    a = (const DLTensor*)args[0].v_handle;
    b = (const DLTensor*)args[1].v_handle;
    if (a->ndim != b->ndim) {
      TVMAPISetLastErrorf("%s: a has %d dims but b has %d", kName, (int)a->ndim, (int)b->ndim);
      err = (int)kTvmErrorFunctionCallInvalidArg;
    }
  }
  for (d = 0; (err == 0) && (d < a->ndim); ++d) {
    if (a->shape[d] != b->shape[d]) {
      TVMAPISetLastErrorf("%s: dimension %d differs: a has %ld, b has %ld", kName, (int)d, (long)a->shape[d],
                          (long)b->shape[d]);
      err = (int)kTvmErrorFunctionCallInvalidArg;
    }
  }
  if (err == 0) {
    const float* src = (const float*)(const void*)((const uint8_t*)a->data + a->byte_offset);
    float* dst = (float*)(void*)((uint8_t*)b->data + b->byte_offset);
    for (i = 0; i < count_a; ++i) {
      dst[i] = src[i] + 1.0f;
    }
    out_ret_value->v_handle = NULL;
    *out_ret_tcode = (int)kTVMNullptr;
  }
  return err;
}

static int module_add_one(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                          int* out_ret_tcode, void* resource_handle) {
  static const char* const kName = "utvm.local.test_module:add_one";
  int err = check_num_args(kName, num_args, 1, 1);
  (void)resource_handle;
  if (err == 0) {
    err = check_type(kName, type_codes, 0, (int)kTVMArgInt, "int");
  }
  if (err == 0) {
    out_ret_value->v_int64 = args[0].v_int64 + 1;
    *out_ret_tcode = (int)kTVMArgInt;
  }
  return err;
}

static int module_is_self(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                          int* out_ret_tcode, void* resource_handle);

/* names: u16 LE count, NUL-terminated names, one more NUL (the literal's own terminator). */
static const TVMBackendPackedCFunc kTestModuleFuncs[] = {module_add_one, module_is_self};
static const TVMFuncRegistry kTestModuleRegistry = {"\x02" "\x00" "add_one\0" "is_self\0",
                                                    kTestModuleFuncs};
static const TVMModule kTestModule = {&kTestModuleRegistry};

static int module_is_self(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                          int* out_ret_tcode, void* resource_handle) {
  int err = check_num_args("utvm.local.test_module:is_self", num_args, 0, 0);
  (void)args;
  (void)type_codes;
  if (err == 0) {
    out_ret_value->v_int64 = (resource_handle == (const void*)&kTestModule) ? 1 : 0;
    *out_ret_tcode = (int)kTVMArgInt;
  }
  return err;
}

static int test_module(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                       int* out_ret_tcode, void* resource_handle) {
  TVMModuleHandle handle = NULL;
  int err = check_num_args("utvm.local.test_module", num_args, 0, 0);
  (void)args;
  (void)type_codes;
  (void)resource_handle;
  if (err == 0) {
    err = (int)TVMModCreateFromCModule(&kTestModule, &handle);
  }
  if (err == 0) {
    out_ret_value->v_handle = handle;
    *out_ret_tcode = (int)kTVMModuleHandle;
  }
  return err;
}

/* A function pointer travels through TVMFuncRegisterGlobal as a TVMFunctionHandle; ISO C has no cast
 * between function and object pointers, so the conversion goes through a union. */
typedef union {
  TVMBackendPackedCFunc func;
  TVMFunctionHandle handle;
} func_as_handle_t;

static int register_one(const char* name, TVMBackendPackedCFunc func) {
  func_as_handle_t u;
  u.handle = NULL;
  u.func = func;
  return TVMFuncRegisterGlobal(name, u.handle, 1);
}

int UTVMLocalRegisterGlobals(void) {
  static const struct {
    const char* name;
    TVMBackendPackedCFunc func;
  } kGlobals[] = {
      {"utvm.local.call_global", call_global},   {"utvm.local.call_packed", call_packed},
      {"utvm.local.accumulate", accumulate},     {"utvm.local.add_int", add_int},
      {"utvm.local.echo", echo},                 {"utvm.local.tensor_sum", tensor_sum},
      {"utvm.local.tensor_scale", tensor_scale}, {"utvm.local.fail", fail},
      {"utvm.local.test_module", test_module},   {"testing.add_one", testing_add_one},
  };
  size_t i;
  for (i = 0; i < sizeof(kGlobals) / sizeof(kGlobals[0]); ++i) {
    int err = register_one(kGlobals[i].name, kGlobals[i].func);
    if (err != 0) {
      return err;
    }
  }
  return 0;
}
