/*
 * test_crt_runtime.c -- the C runtime API: handles, TVMFuncCall, global registry, modules, built-in
 * globals, errors, NDArrays, workspaces, parallel launch, logging. Linked with libcommon, libmemory and
 * the host port; this file provides a system library (switchable off) and a capturing log sink.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/ndarray.h>

#define MAX_MODULES TVM_CRT_MAX_REGISTERED_MODULES
#define FN_HANDLE(m, f) ((uintptr_t)((((uint32_t)(m) | 0x8000U) << 16) | ((uint32_t)(f) | 0x8000U)))
#define MOD_HANDLE(m) ((uintptr_t)(((uint32_t)(m) | 0x8000U) << 16))

/* ---- a system library ---------------------------------------------------------------------------- */
static void* g_last_resource = (void*)1;
static int g_calls = 0;

static int mod_fn(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  g_last_resource = resource;
  g_calls++;
  ret->v_int64 = (n > 0 && codes[0] == kTVMArgInt) ? args[0].v_int64 * 2 : 42;
  *ret_code = kTVMArgInt;
  return 0;
}
static int mod_fail(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n; (void)ret; (void)ret_code; (void)resource;
  TVMAPISetLastError("mod_fail: bad input tensor 'x'");
  return -1;
}
static int mod_fail_silent(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n; (void)ret; (void)ret_code; (void)resource;
  return 5;
}
static const char kModNames[] = "\x03\x00" "mod_fn\0" "mod_fail\0" "mod_fail_silent\0";
static const TVMBackendPackedCFunc kModFuncs[] = {mod_fn, mod_fail, mod_fail_silent};
static const TVMFuncRegistry kModRegistry = {kModNames, kModFuncs};
static const TVMModule kSystemLib = {&kModRegistry};
static int g_have_system_lib = 1;

const TVMModule* TVMSystemLibEntryPoint(void) { return g_have_system_lib ? &kSystemLib : NULL; }

/* ---- a capturing log sink ------------------------------------------------------------------------ */
static char g_log[1024];
static int g_log_level = -1;
static size_t g_log_length = 0;
static int g_log_count = 0;

void TVMPlatformLog(int level, const char* message, size_t length) {
  g_log_level = level;
  g_log_length = length;
  g_log_count++;
  snprintf(g_log, sizeof(g_log), "%s", message);
}

/* ---- helpers -------------------------------------------------------------------------------------- */
static int global_fn(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n;
  g_last_resource = resource;
  ret->v_int64 = 7;
  *ret_code = kTVMArgInt;
  return 0;
}
static int global_fn2(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n; (void)resource;
  ret->v_int64 = 8;
  *ret_code = kTVMArgInt;
  return 0;
}

static TVMFunctionHandle as_handle(TVMBackendPackedCFunc f) {
  TVMFunctionHandle h;
  memcpy(&h, &f, sizeof(h));
  return h;
}

static TVMFunctionHandle get_global(const char* name) {
  TVMFunctionHandle h = NULL;
  assert_int_equal(TVMFuncGetGlobal(name, &h), 0);
  assert_non_null(h);
  return h;
}

static int call(TVMFunctionHandle h, TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code) {
  return TVMFuncCall(h, args, codes, n, ret, ret_code);
}

static TVMModuleHandle system_lib(void) {
  TVMValue ret;
  int code = -1;
  assert_int_equal(call(get_global("runtime.SystemLib"), NULL, NULL, 0, &ret, &code), 0);
  assert_int_equal(code, kTVMModuleHandle);
  return ret.v_handle;
}

/* The last error contains `needle`; with a small TVM_CRT_MAX_ERROR_MESSAGE_LENGTH the message may be
 * truncated in the middle of the needle, but must then end with a prefix of it. */
static void assert_error_contains(const char* needle) {
  const char* msg = TVMGetLastError();
  const size_t len = strlen(msg);
  size_t p;
  if (strstr(msg, needle) != NULL) {
    return;
  }
  if (len == TVM_CRT_MAX_ERROR_MESSAGE_LENGTH - 1) {
    for (p = 0; p < len; p++) {
      if (strncmp(&msg[p], needle, len - p) == 0) {
        return;
      }
    }
  }
  fail_msg("last error '%s' does not contain '%s'", msg, needle);
}

static int setup(void** state) {
  (void)state;
  g_have_system_lib = 1;
  g_last_resource = (void*)1;
  g_calls = 0;
  return TVMInitializeRuntime() == kTvmErrorNoError ? 0 : -1;
}

/* ---- handles ------------------------------------------------------------------------------------- */
static void global_handle_encoding(void** state) {
  (void)state;
  /* Built-ins are registered in a fixed order: SystemLib, ModuleGetFunction, RPCTimeEvaluator, random_fill */
  assert_int_equal((uintptr_t)get_global("runtime.SystemLib"), FN_HANDLE(MAX_MODULES, 0));
  assert_int_equal((uintptr_t)get_global("tvm.rpc.server.ModuleGetFunction"), FN_HANDLE(MAX_MODULES, 1));
  assert_int_equal((uintptr_t)get_global("runtime.RPCTimeEvaluator"), FN_HANDLE(MAX_MODULES, 2));
  assert_int_equal((uintptr_t)get_global("tvm.contrib.random.random_fill"), FN_HANDLE(MAX_MODULES, 3));
#if TVM_CRT_MAX_REGISTERED_MODULES == 2
  /* docs/architecture.md §5.3 */
  assert_int_equal((uintptr_t)get_global("tvm.contrib.random.random_fill"), 0x80028003U);
#endif
  assert_int_equal(TVMFuncRegisterGlobal("test.global", as_handle(global_fn), 0), 0);
  assert_int_equal((uintptr_t)get_global("test.global"), FN_HANDLE(MAX_MODULES, 4));
}

static void module_handles(void** state) {
  TVMModuleHandle mod;
  TVMFunctionHandle f = NULL;
  (void)state;
  mod = system_lib();
  assert_int_equal((uintptr_t)mod, MOD_HANDLE(0));
  assert_ptr_equal(system_lib(), mod); /* registered once */
  assert_int_equal(TVMModGetFunction(mod, "mod_fail", 0, &f), 0);
  assert_int_equal((uintptr_t)f, FN_HANDLE(0, 1));
  assert_int_equal(TVMModGetFunction(mod, "mod_fail_silent", 1, &f), 0);
  assert_int_equal((uintptr_t)f, FN_HANDLE(0, 2));
}

static void resource_handle_is_the_module(void** state) {
  TVMModuleHandle mod = NULL;
  TVMFunctionHandle f = NULL;
  TVMValue arg, ret;
  int code = kTVMArgInt;
  int ret_code = -1;
  (void)state;
  mod = system_lib();
  assert_int_equal(TVMModGetFunction(mod, "mod_fn", 0, &f), 0);
  arg.v_int64 = 21;
  assert_int_equal(call(f, &arg, &code, 1, &ret, &ret_code), 0);
  assert_ptr_equal(g_last_resource, &kSystemLib);
  assert_int_equal(ret_code, kTVMArgInt);
  assert_int_equal(ret.v_int64, 42);
  /* NULL ret pointers are allowed */
  assert_int_equal(call(f, &arg, &code, 1, NULL, NULL), 0);
  /* global functions get NULL */
  assert_int_equal(TVMFuncRegisterGlobal("test.global", as_handle(global_fn), 0), 0);
  assert_int_equal(call(get_global("test.global"), NULL, NULL, 0, &ret, &ret_code), 0);
  assert_null(g_last_resource);
  assert_int_equal(ret.v_int64, 7);
}

static void invalid_function_handles(void** state) {
  TVMModuleHandle mod;
  TVMValue ret;
  int ret_code;
  uintptr_t bad[8];
  size_t n = 0, i;
  (void)state;
  mod = system_lib();
  bad[n++] = 0;                                       /* NULL */
  bad[n++] = 0x12345678U;                             /* no valid bits */
  bad[n++] = (uintptr_t)mod;                          /* a module handle is not a function handle */
  bad[n++] = FN_HANDLE(MAX_MODULES, 0x7fff);          /* global index out of range */
  bad[n++] = FN_HANDLE(0, 3);                         /* module function index out of range */
  bad[n++] = FN_HANDLE(MAX_MODULES + 2, 0);           /* no such module index */
  bad[n++] = FN_HANDLE(MAX_MODULES + 1, 0);           /* time evaluator slot that is not live */
#if UINTPTR_MAX > 0xffffffffU
  bad[n++] = ((uintptr_t)1 << 32) | FN_HANDLE(MAX_MODULES, 0); /* bits above 32 */
#endif
  for (i = 0; i < n; i++) {
    const int rc = call((TVMFunctionHandle)bad[i], NULL, NULL, 0, &ret, &ret_code);
    if (rc != kTvmErrorFunctionHandleInvalid && rc != kTvmErrorTimeEvaluatorBadHandle) {
      fail_msg("handle 0x%lx: TVMFuncCall returned %d", (unsigned long)bad[i], rc);
    }
    assert_int_not_equal(TVMFuncFree((TVMFunctionHandle)bad[i]), 0);
  }
#if TVM_CRT_MAX_REGISTERED_MODULES >= 2
  assert_int_equal(call((TVMFunctionHandle)FN_HANDLE(1, 0), NULL, NULL, 0, &ret, &ret_code),
                   kTvmErrorFunctionHandleInvalid); /* module slot 1 is empty */
#endif
  assert_int_equal(call((TVMFunctionHandle)0x12345678U, NULL, NULL, 0, &ret, &ret_code),
                   kTvmErrorFunctionHandleInvalid);
  assert_error_contains("invalid function handle 0x12345678");
  /* bad argument arrays */
  assert_int_equal(call(get_global("runtime.SystemLib"), NULL, NULL, 2, &ret, &ret_code),
                   kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(call(get_global("runtime.SystemLib"), NULL, NULL, -1, &ret, &ret_code),
                   kTvmErrorFunctionCallInvalidArg);
  /* valid handles free fine (and stay valid: functions are static) */
  assert_int_equal(TVMFuncFree(get_global("runtime.SystemLib")), 0);
  assert_int_equal(call(get_global("runtime.SystemLib"), NULL, NULL, 0, &ret, &ret_code), 0);
}

static void invalid_module_handles(void** state) {
  TVMFunctionHandle f = (TVMFunctionHandle)1;
  TVMModuleHandle mod;
  TVMModuleHandle bad[4];
  size_t i;
  (void)state;
  mod = system_lib();
  bad[0] = NULL;
  bad[1] = (TVMModuleHandle)FN_HANDLE(0, 0); /* a function handle */
  bad[2] = (TVMModuleHandle)MOD_HANDLE(MAX_MODULES); /* the global registry is not a module */
  bad[3] = (TVMModuleHandle)(MOD_HANDLE(0) | 1U);
  for (i = 0; i < 4; i++) {
    assert_int_equal(TVMModGetFunction(bad[i], "mod_fn", 0, &f), kTvmErrorModuleHandleInvalid);
    assert_null(f);
    assert_int_equal(TVMModFree(bad[i]), kTvmErrorModuleHandleInvalid);
    f = (TVMFunctionHandle)1;
  }
  assert_error_contains("TVMModFree: invalid module handle");
  assert_int_equal(TVMModFree(mod), 0);
  /* freeing a module keeps it usable (modules are static) */
  assert_int_equal(TVMModGetFunction(mod, "mod_fn", 0, &f), 0);
  assert_int_equal(TVMModImport(mod, mod), kTvmErrorFunctionCallNotImplemented);
  assert_error_contains("TVMModImport");
}

/* ---- errors from calls ----------------------------------------------------------------------------- */
static void callee_errors_propagate(void** state) {
  TVMModuleHandle mod;
  TVMFunctionHandle f = NULL;
  TVMValue ret;
  int ret_code;
  (void)state;
  mod = system_lib();
  assert_int_equal(TVMModGetFunction(mod, "mod_fail", 0, &f), 0);
  assert_int_equal(call(f, NULL, NULL, 0, &ret, &ret_code), -1);
  assert_string_equal(TVMGetLastError(), "mod_fail: bad input tensor 'x'");
  assert_int_equal(TVMModGetFunction(mod, "mod_fail_silent", 0, &f), 0);
  assert_int_equal(call(f, NULL, NULL, 0, &ret, &ret_code), 5);
  assert_error_contains("mod_fail_silent failed with code 5");
}

static void unknown_names(void** state) {
  TVMFunctionHandle f = (TVMFunctionHandle)1;
  (void)state;
  assert_int_equal(TVMFuncGetGlobal("no.such.function", &f), kTvmErrorFunctionNameNotFound);
  assert_null(f);
  assert_error_contains("no global function named 'no.such.function'");
  f = (TVMFunctionHandle)1;
  assert_int_equal(TVMModGetFunction(system_lib(), "nope", 0, &f), kTvmErrorFunctionNameNotFound);
  assert_null(f);
  assert_error_contains("has no function named 'nope'");
  assert_int_equal(TVMFuncGetGlobal(NULL, &f), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMFuncGetGlobal("runtime.SystemLib", NULL), kTvmErrorPlatformInvalidArgument);
}

/* ---- global registry ------------------------------------------------------------------------------- */
static void register_global_override_and_full(void** state) {
  TVMValue ret;
  int ret_code;
  char name[32];
  int n = 0, i, rc = 0;
  (void)state;
  assert_int_equal(TVMFuncRegisterGlobal("test.f", as_handle(global_fn), 0), 0);
  assert_int_equal(TVMFuncRegisterGlobal("test.f", as_handle(global_fn2), 0), kTvmErrorFunctionAlreadyDefined);
  assert_error_contains("'test.f' is already registered");
  assert_int_equal(call(get_global("test.f"), NULL, NULL, 0, &ret, &ret_code), 0);
  assert_int_equal(ret.v_int64, 7);
  assert_int_equal(TVMFuncRegisterGlobal("test.f", as_handle(global_fn2), 1), 0);
  assert_int_equal(call(get_global("test.f"), NULL, NULL, 0, &ret, &ret_code), 0);
  assert_int_equal(ret.v_int64, 8);
  assert_int_equal(TVMFuncRegisterGlobal("", as_handle(global_fn2), 1), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMFuncRegisterGlobal("x", NULL, 1), kTvmErrorPlatformInvalidArgument);
  while (rc == 0) {
    snprintf(name, sizeof(name), "test.fill.%d", n);
    rc = TVMFuncRegisterGlobal(name, as_handle(global_fn), 0);
    if (rc == 0) {
      n++;
    }
    assert_true(n < 10000);
  }
  assert_int_equal(rc, kTvmErrorFunctionRegistryFull);
  assert_error_contains("TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES");
  for (i = 0; i < n; i++) {
    snprintf(name, sizeof(name), "test.fill.%d", i);
    assert_int_equal(call(get_global(name), NULL, NULL, 0, &ret, &ret_code), 0);
  }
  /* the built-ins survive a full registry */
  assert_int_equal(call(get_global("runtime.SystemLib"), NULL, NULL, 0, &ret, &ret_code), 0);
  /* re-initialising resets the registry */
  assert_int_equal(TVMInitializeRuntime(), kTvmErrorNoError);
  assert_int_equal(TVMFuncGetGlobal("test.f", (TVMFunctionHandle*)&ret.v_handle), kTvmErrorFunctionNameNotFound);
}

/* ---- modules --------------------------------------------------------------------------------------- */
static void system_lib_missing(void** state) {
  TVMValue ret;
  int ret_code = -1;
  (void)state;
  g_have_system_lib = 0;
  assert_int_equal(call(get_global("runtime.SystemLib"), NULL, NULL, 0, &ret, &ret_code),
                   kTvmErrorSystemLibMissing);
  assert_error_contains("runtime.SystemLib: this firmware has no system library");
  assert_int_equal(ret_code, kTVMNullptr);
}

static void system_lib_arguments(void** state) {
  TVMValue arg, ret;
  int code = kTVMStr, ret_code = -1;
  (void)state;
  arg.v_str = "";
  assert_int_equal(call(get_global("runtime.SystemLib"), &arg, &code, 1, &ret, &ret_code), 0);
  assert_int_equal(ret_code, kTVMModuleHandle);
  code = kTVMArgInt;
  assert_int_equal(call(get_global("runtime.SystemLib"), &arg, &code, 1, &ret, &ret_code),
                   kTvmErrorFunctionCallNumArguments);
}

static void module_table_full(void** state) {
  static TVMModule others[MAX_MODULES + 1];
  TVMModuleHandle h = NULL, first;
  int i;
  (void)state;
  first = system_lib(); /* slot 0 */
  for (i = 0; i < MAX_MODULES + 1; i++) {
    others[i].registry = &kModRegistry;
  }
  for (i = 1; i < MAX_MODULES; i++) {
    assert_int_equal(TVMModCreateFromCModule(&others[i], &h), kTvmErrorNoError);
    assert_int_equal((uintptr_t)h, MOD_HANDLE(i));
  }
  assert_int_equal(TVMModCreateFromCModule(&others[0], &h), kTvmErrorModuleRegistryFull);
  assert_null(h);
  assert_error_contains("TVM_CRT_MAX_REGISTERED_MODULES");
  /* registering a known module again is not a new slot */
  assert_int_equal(TVMModCreateFromCModule(&kSystemLib, &h), kTvmErrorNoError);
  assert_ptr_equal(h, first);
  assert_int_equal(TVMModCreateFromCModule(NULL, &h), kTvmErrorPlatformInvalidArgument);
}

static void module_get_function_builtin(void** state) {
  TVMValue args[3], ret;
  int codes[3] = {kTVMModuleHandle, kTVMStr, kTVMArgInt};
  int ret_code = -1;
  TVMFunctionHandle mgf;
  (void)state;
  mgf = get_global("tvm.rpc.server.ModuleGetFunction");
  args[0].v_handle = system_lib();
  args[1].v_str = "mod_fail";
  args[2].v_int64 = 1;
  assert_int_equal(call(mgf, args, codes, 3, &ret, &ret_code), 0);
  assert_int_equal(ret_code, kTVMPackedFuncHandle);
  assert_int_equal((uintptr_t)ret.v_handle, FN_HANDLE(0, 1));
  assert_int_equal(call(mgf, args, codes, 2, &ret, &ret_code), 0);
  assert_int_equal((uintptr_t)ret.v_handle, FN_HANDLE(0, 1));
  args[1].v_str = "absent";
  assert_int_equal(call(mgf, args, codes, 2, &ret, &ret_code), 0); /* null handle, not an error */
  assert_int_equal(ret_code, kTVMNullptr);
  assert_null(ret.v_handle);
  assert_int_equal(call(mgf, args, codes, 1, &ret, &ret_code), kTvmErrorFunctionCallNumArguments);
  codes[1] = kTVMArgInt;
  assert_int_equal(call(mgf, args, codes, 2, &ret, &ret_code), kTvmErrorFunctionCallWrongArgType);
  assert_error_contains("argument 1 (name)");
  codes[1] = kTVMStr;
  args[0].v_handle = (void*)FN_HANDLE(0, 0);
  assert_int_equal(call(mgf, args, codes, 2, &ret, &ret_code), kTvmErrorModuleHandleInvalid);
}

/* ---- last error ------------------------------------------------------------------------------------ */
static void error_messages(void** state) {
  char long_msg[TVM_CRT_MAX_ERROR_MESSAGE_LENGTH * 3];
  (void)state;
  TVMAPISetLastErrorf("%s-%d-%c", "abc", 42, 'z');
  assert_string_equal(TVMGetLastError(), "abc-42-z");
  TVMAPISetLastError("inner");
  TVMAPISetLastErrorf("outer: %s", TVMGetLastError()); /* quoting the previous message is safe */
  assert_string_equal(TVMGetLastError(), "outer: inner");
  TVMAPISetLastError(NULL);
  assert_string_equal(TVMGetLastError(), "");
  memset(long_msg, 'm', sizeof(long_msg) - 1);
  long_msg[sizeof(long_msg) - 1] = '\0';
  TVMAPISetLastError(long_msg);
  assert_int_equal(strlen(TVMGetLastError()), TVM_CRT_MAX_ERROR_MESSAGE_LENGTH - 1);
  TVMAPISetLastErrorf("%s%s", long_msg, long_msg);
  assert_int_equal(strlen(TVMGetLastError()), TVM_CRT_MAX_ERROR_MESSAGE_LENGTH - 1);
  assert_int_equal(TVMGetLastError()[0], 'm');
  TVMAPISetLastErrorf("x%sy", TVMGetLastError()); /* quoting a full-length message truncates safely */
  assert_int_equal(strlen(TVMGetLastError()), TVM_CRT_MAX_ERROR_MESSAGE_LENGTH - 1);
  assert_int_equal(TVMGetLastError()[0], 'x');
}

/* ---- random_fill ----------------------------------------------------------------------------------- */
static void random_fill(void** state) {
  float values[64];
  int8_t bytes[256];
  int64_t shape_f[2] = {8, 8};
  int64_t shape_b[1] = {256};
  DLTensor t;
  TVMValue arg, ret;
  int code = kTVMDLTensorHandle, ret_code;
  TVMFunctionHandle rf;
  int i, distinct = 0, nonzero = 0;
  (void)state;
  rf = get_global("tvm.contrib.random.random_fill");
  memset(&t, 0, sizeof(t));
  t.data = values;
  t.device.device_type = kDLCPU;
  t.ndim = 2;
  t.shape = shape_f;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  arg.v_handle = &t;
  for (i = 0; i < 64; i++) {
    values[i] = -1.0f;
  }
  assert_int_equal(call(rf, &arg, &code, 1, &ret, &ret_code), 0);
  for (i = 0; i < 64; i++) {
    assert_true(values[i] >= 0.0f && values[i] < 1.0f);
    distinct += (values[i] != values[0]) ? 1 : 0;
  }
  assert_true(distinct > 0);
  t.data = bytes;
  t.ndim = 1;
  t.shape = shape_b;
  t.dtype.code = kDLInt;
  t.dtype.bits = 8;
  memset(bytes, 0, sizeof(bytes));
  code = kTVMNDArrayHandle;
  assert_int_equal(call(rf, &arg, &code, 1, &ret, &ret_code), 0);
  for (i = 0; i < 256; i++) {
    nonzero += bytes[i] != 0;
  }
  assert_true(nonzero > 200);
  assert_int_equal(call(rf, &arg, &code, 0, &ret, &ret_code), kTvmErrorFunctionCallNumArguments);
  code = kTVMArgInt;
  assert_int_equal(call(rf, &arg, &code, 1, &ret, &ret_code), kTvmErrorFunctionCallWrongArgType);
  code = kTVMDLTensorHandle;
  t.strides = shape_b;
  assert_int_equal(call(rf, &arg, &code, 1, &ret, &ret_code), kTvmErrorFunctionCallInvalidArg);
  assert_error_contains("strided");
  t.strides = NULL;
  t.data = NULL;
  assert_int_equal(call(rf, &arg, &code, 1, &ret, &ret_code), kTvmErrorFunctionCallInvalidArg);
}

/* ---- NDArray --------------------------------------------------------------------------------------- */
static void ndarray_alloc_free(void** state) {
  TVMArrayHandle arrays[TVM_CRT_MAX_NDARRAYS + 1];
  int64_t shape[2] = {2, 3};
  size_t nbytes = 0;
  int i;
  (void)state;
  for (i = 0; i < TVM_CRT_MAX_NDARRAYS; i++) {
    assert_int_equal(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &arrays[i]), 0);
    assert_non_null(arrays[i]->data);
    assert_int_equal((uintptr_t)arrays[i]->data % TVM_CRT_ALLOC_ALIGNMENT_BYTES, 0);
    assert_int_equal(arrays[i]->shape[1], 3);
    assert_null(arrays[i]->strides);
    assert_int_equal(TVMNDArray_DataSizeBytes(arrays[i], &nbytes), kTvmErrorNoError);
    assert_int_equal(nbytes, 24);
    memset(arrays[i]->data, 0x5a, nbytes); /* ASan: the whole data is ours */
  }
  assert_int_equal(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &arrays[i]), kTvmErrorPlatformNoMemory);
  assert_error_contains("TVM_CRT_MAX_NDARRAYS");
  assert_int_equal(TVMArrayFree(arrays[0]), 0);
  assert_int_equal(TVMArrayFree(arrays[0]), kTvmErrorFunctionCallInvalidArg); /* double free */
  assert_int_equal(TVMArrayAlloc(shape, 2, kDLInt, 8, 4, kDLCPU, 0, &arrays[0]), 0);
  assert_int_equal(TVMNDArray_DataSizeBytes(arrays[0], &nbytes), kTvmErrorNoError);
  assert_int_equal(nbytes, 24);
  for (i = 0; i < TVM_CRT_MAX_NDARRAYS; i++) {
    assert_int_equal(TVMArrayFree(arrays[i]), 0);
  }
  assert_int_equal(TVMArrayFree((TVMArrayHandle)shape), kTvmErrorFunctionCallInvalidArg);
}

static void ndarray_bad_input(void** state) {
  TVMArrayHandle a = NULL;
  int64_t shape[TVM_CRT_MAX_NDIM + 1];
  int64_t huge[2] = {INT64_MAX / 2, INT64_MAX / 2};
  int64_t negative[1] = {-1};
  TVMNDArray arr;
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  int i;
  (void)state;
  for (i = 0; i <= TVM_CRT_MAX_NDIM; i++) {
    shape[i] = 1;
  }
  assert_int_equal(TVMArrayAlloc(shape, TVM_CRT_MAX_NDIM + 1, kDLFloat, 32, 1, kDLCPU, 0, &a),
                   kTvmErrorFunctionCallInvalidArg);
  assert_error_contains("TVM_CRT_MAX_NDIM");
  assert_int_equal(TVMArrayAlloc(shape, TVM_CRT_MAX_NDIM, kDLFloat, 32, 1, kDLCPU, 0, &a), 0);
  assert_int_equal(TVMArrayFree(a), 0);
  assert_int_equal(TVMArrayAlloc(huge, 2, kDLFloat, 32, 1, kDLCPU, 0, &a), kTvmErrorFunctionCallInvalidArg);
  assert_null(a);
  assert_int_equal(TVMArrayAlloc(negative, 1, kDLFloat, 32, 1, kDLCPU, 0, &a), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMArrayAlloc(shape, 1, kDLFloat, 0, 1, kDLCPU, 0, &a), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &a), kTvmErrorFunctionCallInvalidArg);
  assert_error_contains("device type 2");
  /* direct NDArray API; an empty tensor still gets a (unique) data pointer */
  shape[0] = 0;
  assert_int_equal(TVMNDArray_Empty(1, shape, f32, cpu, &arr), kTvmErrorNoError);
  assert_non_null(arr.dl.data);
  assert_int_equal(TVMNDArray_Release(&arr), kTvmErrorNoError);
  assert_null(arr.dl.data);
  assert_int_equal(TVMNDArray_Create(-1, shape, f32, cpu, &arr), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMNDArray_Create(1, NULL, f32, cpu, &arr), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMNDArray_Create(0, NULL, f32, cpu, &arr), kTvmErrorNoError); /* a scalar */
}

static void device_data_space(void** state) {
  DLDevice cpu = {kDLCPU, 0};
  DLDevice gpu = {kDLCUDA, 0};
  DLDataType u8 = {kDLUInt, 8, 1};
  void* p = NULL;
  (void)state;
  assert_int_equal(TVMDeviceAllocDataSpace(cpu, 100, TVM_CRT_ALLOC_ALIGNMENT_BYTES, u8, &p), 0);
  assert_non_null(p);
  assert_int_equal((uintptr_t)p % TVM_CRT_ALLOC_ALIGNMENT_BYTES, 0);
  memset(p, 1, 100);
  assert_int_equal(TVMDeviceFreeDataSpace(cpu, p), 0);
  assert_int_equal(TVMDeviceAllocDataSpace(cpu, 100, TVM_CRT_ALLOC_ALIGNMENT_BYTES * 2, u8, &p),
                   kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMDeviceAllocDataSpace(cpu, 100, 3, u8, &p), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMDeviceAllocDataSpace(gpu, 100, 1, u8, &p), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMSynchronize(kDLCPU, 0, NULL), 0);
  assert_int_equal(TVMSynchronize(kDLCUDA, 0, NULL), kTvmErrorFunctionCallInvalidArg);
}

/* ---- backend API ----------------------------------------------------------------------------------- */
static void workspace_lifo(void** state) {
  void *a, *b, *c;
  (void)state;
  a = TVMBackendAllocWorkspace(kDLCPU, 0, 10, kDLFloat, 32);
  b = TVMBackendAllocWorkspace(kDLCPU, 0, 1, kDLInt, 8);
  c = TVMBackendAllocWorkspace(kDLCPU, 0, 0, kDLInt, 8);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  assert_int_equal((uintptr_t)a % TVM_CRT_ALLOC_ALIGNMENT_BYTES, 0);
  assert_int_equal((uintptr_t)b % TVM_CRT_ALLOC_ALIGNMENT_BYTES, 0);
  assert_true((uint8_t*)b >= (uint8_t*)a + 10);
  memset(a, 1, 10);
  memset(b, 2, 1);
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, a), kTvmErrorPlatformStackAllocBadFree);
  assert_error_contains("reverse order");
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, b), kTvmErrorPlatformStackAllocBadFree);
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, c), 0);
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, b), 0);
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, a), kTvmErrorPlatformStackAllocBadFree); /* empty */
}

static void workspace_exhaustion(void** state) {
  void *a, *b;
  (void)state;
  assert_null(TVMBackendAllocWorkspace(kDLCPU, 0, TVM_CRT_WORKSPACE_SIZE_BYTES + 1, kDLInt, 8));
  assert_error_contains("TVM_CRT_WORKSPACE_SIZE_BYTES");
  assert_null(TVMBackendAllocWorkspace(kDLCPU, 0, UINT64_MAX, kDLInt, 8));
  a = TVMBackendAllocWorkspace(kDLCPU, 0, TVM_CRT_WORKSPACE_SIZE_BYTES / 2, kDLInt, 8);
  assert_non_null(a);
  b = TVMBackendAllocWorkspace(kDLCPU, 0, TVM_CRT_WORKSPACE_SIZE_BYTES / 2, kDLInt, 8);
  assert_null(b); /* the header does not fit beside it */
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
  a = TVMBackendAllocWorkspace(kDLCPU, 0, TVM_CRT_WORKSPACE_SIZE_BYTES / 2, kDLInt, 8);
  assert_non_null(a);
  assert_int_equal(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
}

static int g_lambda_task = -1, g_lambda_num_task = -1;
static int lambda(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  g_lambda_task = task_id;
  g_lambda_num_task = penv->num_task;
  *(int*)cdata += 1;
  assert_int_equal(TVMBackendParallelBarrier(task_id, penv), 0);
  return 17;
}

static void parallel_launch_and_env(void** state) {
  int counter = 0;
  TVMFunctionHandle f = NULL;
  (void)state;
  assert_int_equal(TVMBackendParallelLaunch(lambda, &counter, 4), 17);
  assert_int_equal(counter, 1);
  assert_int_equal(g_lambda_task, 0);
  assert_int_equal(g_lambda_num_task, 1);
  assert_int_equal(TVMBackendParallelLaunch(NULL, &counter, 1), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMBackendGetFuncFromEnv(NULL, "runtime.SystemLib", &f), 0);
  assert_ptr_equal(f, get_global("runtime.SystemLib"));
  assert_int_equal(TVMBackendGetFuncFromEnv(NULL, "nope", &f), kTvmErrorFunctionNameNotFound);
  /* a calling module (generated code passes the module of its user operators): its functions first, then
   * the global registry */
  {
    TVMValue ret;
    int code = 0;
    assert_int_equal(TVMBackendGetFuncFromEnv((void*)&kSystemLib, "mod_fn", &f), 0);
    assert_int_equal(TVMFuncCall(f, NULL, NULL, 0, &ret, &code), 0);
    assert_int_equal(ret.v_int64, 42);
    assert_int_equal(TVMBackendGetFuncFromEnv((void*)&kSystemLib, "runtime.SystemLib", &f), 0);
    assert_ptr_equal(f, get_global("runtime.SystemLib"));
    assert_int_equal(TVMBackendGetFuncFromEnv((void*)&kSystemLib, "nope", &f), kTvmErrorFunctionNameNotFound);
  }
}

/* ---- logging --------------------------------------------------------------------------------------- */
static void logging_levels(void** state) {
  int evaluated = 0;
  char long_arg[TVM_CRT_MAX_LOG_MESSAGE_BYTES * 2];
  (void)state;
  g_log_count = 0;
  LOG_ERROR("error %d from %s", 5, "here");
#if TVM_CRT_LOG_LEVEL <= TVM_CRT_LOG_LEVEL_ERROR
  assert_int_equal(g_log_count, 1);
  assert_string_equal(g_log, "error 5 from here");
  assert_int_equal(g_log_level, TVM_CRT_LOG_LEVEL_ERROR);
  assert_int_equal(g_log_length, strlen("error 5 from here"));
#endif
  g_log_count = 0;
  LOG_DEBUG("debug %d", ++evaluated);
#if TVM_CRT_LOG_LEVEL <= TVM_CRT_LOG_LEVEL_DEBUG
  assert_int_equal(g_log_count, 1);
  assert_int_equal(evaluated, 1);
  assert_string_equal(g_log, "debug 1");
#else
  assert_int_equal(g_log_count, 0);
  assert_int_equal(evaluated, 0); /* compiled out: arguments not evaluated */
#endif
  memset(long_arg, 'L', sizeof(long_arg) - 1);
  long_arg[sizeof(long_arg) - 1] = '\0';
  TVMLogf(TVM_CRT_LOG_LEVEL_WARN, "%s", long_arg);
  assert_int_equal(g_log_length, TVM_CRT_MAX_LOG_MESSAGE_BYTES - 1);
  assert_int_equal(strlen(g_log), TVM_CRT_MAX_LOG_MESSAGE_BYTES - 1);
  assert_int_equal(g_log_level, TVM_CRT_LOG_LEVEL_WARN);
}

static void reinitialize_resets_modules(void** state) {
  TVMModuleHandle mod;
  TVMFunctionHandle f = NULL;
  (void)state;
  mod = system_lib();
  assert_int_equal(TVMInitializeRuntime(), kTvmErrorNoError);
  assert_int_equal(TVMModGetFunction(mod, "mod_fn", 0, &f), kTvmErrorModuleHandleInvalid);
  assert_ptr_equal(system_lib(), mod); /* slot 0 again */
  assert_int_equal(TVMModGetFunction(mod, "mod_fn", 0, &f), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(global_handle_encoding, setup),
      cmocka_unit_test_setup(module_handles, setup),
      cmocka_unit_test_setup(resource_handle_is_the_module, setup),
      cmocka_unit_test_setup(invalid_function_handles, setup),
      cmocka_unit_test_setup(invalid_module_handles, setup),
      cmocka_unit_test_setup(callee_errors_propagate, setup),
      cmocka_unit_test_setup(unknown_names, setup),
      cmocka_unit_test_setup(register_global_override_and_full, setup),
      cmocka_unit_test_setup(system_lib_missing, setup),
      cmocka_unit_test_setup(system_lib_arguments, setup),
      cmocka_unit_test_setup(module_table_full, setup),
      cmocka_unit_test_setup(module_get_function_builtin, setup),
      cmocka_unit_test_setup(error_messages, setup),
      cmocka_unit_test_setup(random_fill, setup),
      cmocka_unit_test_setup(ndarray_alloc_free, setup),
      cmocka_unit_test_setup(ndarray_bad_input, setup),
      cmocka_unit_test_setup(device_data_space, setup),
      cmocka_unit_test_setup(workspace_lifo, setup),
      cmocka_unit_test_setup(workspace_exhaustion, setup),
      cmocka_unit_test_setup(parallel_launch_and_env, setup),
      cmocka_unit_test_setup(logging_levels, setup),
      cmocka_unit_test_setup(reinitialize_resets_modules, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
