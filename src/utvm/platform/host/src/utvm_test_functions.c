/*
 * utvm_test_functions.c -- testing.add_one / fail / log / sleep_ms (see utvm_test_functions.h).
 * Every argument is checked; a bad one fails the call with a message naming the function and argument.
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/logging.h>

#include "utvm_test_functions.h"

#define SLEEP_MS_MAX 600000

static int add_one(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                   void* resource_handle);
static int fail(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                void* resource_handle);
static int log_message(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                       void* resource_handle);
static int sleep_ms(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                    void* resource_handle);
static int check_float_tensor(const char* name, int index, const TVMValue* args, const int* type_codes,
                              uint64_t* out_count);
static int one_string(const char* name, const TVMValue* args, const int* type_codes, int num_args);

/* A float32 tensor argument, compact; *out_count = number of elements. */
static int check_float_tensor(const char* name, int index, const TVMValue* args, const int* type_codes,
                              uint64_t* out_count) {
  const DLTensor* t;
  uint64_t count = 1U;
  int32_t i;
  if ((type_codes[index] != (int)kTVMDLTensorHandle) && (type_codes[index] != (int)kTVMNDArrayHandle)) {
    TVMAPISetLastErrorf("%s: argument %d must be a tensor, got type code %d", name, index, type_codes[index]);
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  t = (const DLTensor*)args[index].v_handle;
  if ((t == NULL) || (t->dtype.code != (uint8_t)kDLFloat) || (t->dtype.bits != 32U) || (t->dtype.lanes != 1U)) {
    TVMAPISetLastErrorf("%s: argument %d must be a float32 tensor, got dtype code %d bits %d lanes %d", name, index,
                        (t == NULL) ? -1 : (int)t->dtype.code, (t == NULL) ? -1 : (int)t->dtype.bits,
                        (t == NULL) ? -1 : (int)t->dtype.lanes);
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  if (t->strides != NULL) {
    TVMAPISetLastErrorf("%s: argument %d must be compact (strides NULL)", name, index);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  for (i = 0; i < t->ndim; ++i) {
    if ((t->shape[i] < 0) || ((t->shape[i] > 0) && (count > (UINT64_MAX / (uint64_t)t->shape[i])))) {
      TVMAPISetLastErrorf("%s: argument %d has a bad dimension %d", name, index, (int)i);
      return (int)kTvmErrorFunctionCallInvalidArg;
    }
    count *= (uint64_t)t->shape[i];
  }
  *out_count = count;
  return 0;
}

static int add_one(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                   void* resource_handle) {
  const DLTensor* a;
  const DLTensor* b;
  const uint8_t* src;
  uint8_t* dst;
  uint64_t count_a = 0U;
  uint64_t count_b = 0U;
  uint64_t i;
  int32_t d;
  int rc;
  (void)resource_handle;
  if (num_args != 2) {
    TVMAPISetLastErrorf("testing.add_one: expects 2 arguments (a, b), got %d", num_args);
    return (int)kTvmErrorFunctionCallNumArguments;
  }
  rc = check_float_tensor("testing.add_one", 0, args, type_codes, &count_a);
  if (rc == 0) {
    rc = check_float_tensor("testing.add_one", 1, args, type_codes, &count_b);
  }
  if (rc != 0) {
    return rc;
  }
  a = (const DLTensor*)args[0].v_handle;
  b = (const DLTensor*)args[1].v_handle;
  if (a->ndim != b->ndim) {
    TVMAPISetLastErrorf("testing.add_one: a has %d dims but b has %d", (int)a->ndim, (int)b->ndim);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  for (d = 0; d < a->ndim; ++d) {
    if (a->shape[d] != b->shape[d]) {
      TVMAPISetLastErrorf("testing.add_one: dimension %d differs: a has %ld, b has %ld", (int)d, (long)a->shape[d],
                          (long)b->shape[d]);
      return (int)kTvmErrorFunctionCallInvalidArg;
    }
  }
  src = (const uint8_t*)a->data + a->byte_offset;
  dst = (uint8_t*)b->data + b->byte_offset;
  for (i = 0U; i < count_a; ++i) {
    float x;
    (void)memcpy(&x, &src[i * 4U], sizeof(x)); /* no alignment assumed */
    x += 1.0f;
    (void)memcpy(&dst[i * 4U], &x, sizeof(x));
  }
  ret_value->v_handle = NULL;
  *ret_type_code = (int)kTVMNullptr;
  return 0;
}

static int one_string(const char* name, const TVMValue* args, const int* type_codes, int num_args) {
  if ((num_args != 1) || (type_codes[0] != (int)kTVMStr) || (args[0].v_str == NULL)) {
    TVMAPISetLastErrorf("%s: expects one string argument, got %d argument(s), first type code %d", name, num_args,
                        (num_args > 0) ? type_codes[0] : -1);
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  return 0;
}

static int fail(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                void* resource_handle) {
  int rc = one_string("testing.fail", args, type_codes, num_args);
  (void)ret_value;
  (void)ret_type_code;
  (void)resource_handle;
  if (rc != 0) {
    return rc;
  }
  TVMAPISetLastError(args[0].v_str);
  return (int)kTvmErrorFunctionCallInvalidArg;
}

static int log_message(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                       void* resource_handle) {
  int rc = one_string("testing.log", args, type_codes, num_args);
  (void)resource_handle;
  if (rc != 0) {
    return rc;
  }
  TVMPlatformLog(TVM_CRT_LOG_LEVEL_INFO, args[0].v_str, strlen(args[0].v_str));
  ret_value->v_int64 = 0;
  *ret_type_code = (int)kTVMArgInt;
  return 0;
}

static int sleep_ms(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value, int* ret_type_code,
                    void* resource_handle) {
  (void)resource_handle;
  if ((num_args != 1) || (type_codes[0] != (int)kTVMArgInt)) {
    TVMAPISetLastErrorf("testing.sleep_ms: expects one int argument (milliseconds), got %d argument(s)", num_args);
    return (int)kTvmErrorFunctionCallWrongArgType;
  }
  if ((args[0].v_int64 < 0) || (args[0].v_int64 > SLEEP_MS_MAX)) {
    TVMAPISetLastErrorf("testing.sleep_ms: %ld ms is outside 0..%d", (long)args[0].v_int64, SLEEP_MS_MAX);
    return (int)kTvmErrorFunctionCallInvalidArg;
  }
  UTVMPlatformSleepMs((uint32_t)args[0].v_int64);
  ret_value->v_int64 = args[0].v_int64;
  *ret_type_code = (int)kTVMArgInt;
  return 0;
}

tvm_crt_error_t UTVMTestFunctions_Register(void) {
  static const struct {
    const char* name;
    TVMBackendPackedCFunc func;
  } kFunctions[] = {
      {"testing.add_one", &add_one},
      {"testing.fail", &fail},
      {"testing.log", &log_message},
      {"testing.sleep_ms", &sleep_ms},
  };
  size_t i;
  for (i = 0U; i < (sizeof(kFunctions) / sizeof(kFunctions[0])); ++i) {
    TVMFunctionHandle handle = NULL;
    /* TVMFuncRegisterGlobal takes the function as a TVMFunctionHandle (TVM's ABI): copy its bytes. */
    (void)memcpy((void*)&handle, (const void*)&kFunctions[i].func, sizeof(handle));
    if (TVMFuncRegisterGlobal(kFunctions[i].name, handle, 1) != 0) {
      return kTvmErrorFunctionRegistryFull;
    }
  }
  return kTvmErrorNoError;
}
