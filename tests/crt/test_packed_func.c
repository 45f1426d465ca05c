/*
 * test_packed_func.c -- the C-side PackedFunc helpers (tvm/runtime/crt/packed_func.h): lookup of globals,
 * module functions and returned handles; every argument type reaching the callee as TVMFuncCall passes it;
 * every typed getter on its own type and refusing each other one (kTvmErrorFunctionCallWrongReturnType);
 * argument overflow and NULL arguments remembered until Call; callee errors passed through. Linked with
 * libcommon, libmemory and the host port; works with any crt_config (it adapts to TVM_CRT_MAX_ARGS).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/packed_func.h>
#include <tvm/runtime/crt/platform.h>

/* ---- functions to call ------------------------------------------------------------------------------ */
static int g_calls = 0;
static int g_seen_num_args = -1;
static int g_seen_codes[TVM_CRT_MAX_ARGS];
static void* g_seen_resource = (void*)1;
static TVMByteArray g_seen_bytes;

/* pf.sum: the sum of its int arguments; anything else is refused. */
static int pf_sum(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  int64_t sum = 0;
  int i;
  (void)resource;
  g_calls++;
  g_seen_num_args = n;
  for (i = 0; i < n; i++) {
    g_seen_codes[i] = codes[i];
    if (codes[i] != kTVMArgInt) {
      TVMAPISetLastError("pf.sum: every argument must be an int");
      return (int)kTvmErrorFunctionCallWrongArgType;
    }
    sum += args[i].v_int64;
  }
  ret->v_int64 = sum;
  *ret_code = kTVMArgInt;
  return 0;
}

/* pf.echo: returns its first argument as it came (value and type code); records what it saw. */
static int pf_echo(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  int i;
  (void)resource;
  g_calls++;
  g_seen_num_args = n;
  for (i = 0; i < n; i++) {
    g_seen_codes[i] = codes[i];
  }
  if (n < 1) {
    return 0; /* returns nothing */
  }
  if (codes[0] == kTVMBytes) {
    g_seen_bytes = *(const TVMByteArray*)args[0].v_handle;
  }
  *ret = args[0];
  *ret_code = codes[0];
  return 0;
}

/* pf.fail: fails with a message of its own. */
static int pf_fail(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n; (void)ret; (void)ret_code; (void)resource;
  g_calls++;
  TVMAPISetLastError("pf.fail: sensor 3 is offline");
  return (int)kTvmErrorFunctionCallInvalidArg;
}

/* pf.get: returns the function handle of pf.sum. */
static int pf_get(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n; (void)resource;
  if (TVMFuncGetGlobal("pf.sum", &ret->v_handle) != 0) {
    return -1;
  }
  *ret_code = kTVMPackedFuncHandle;
  return 0;
}

/* A module with one function, which reports its resource handle. */
static int mod_where(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n;
  g_seen_resource = resource;
  ret->v_int64 = 7;
  *ret_code = kTVMArgInt;
  return 0;
}
static const char kModNames[] = "\x01\x00" "where\0";
static const TVMBackendPackedCFunc kModFuncs[] = {mod_where};
static const TVMFuncRegistry kModRegistry = {kModNames, kModFuncs};
static const TVMModule kModule = {&kModRegistry};

static void register_global(const char* name, TVMBackendPackedCFunc func) {
  TVMFunctionHandle handle = NULL;
  memcpy(&handle, &func, sizeof(handle));
  assert_int_equal(TVMFuncRegisterGlobal(name, handle, 0), 0);
}

static int setup(void** state) {
  (void)state;
  if ((TVMPlatformInitialize() != kTvmErrorNoError) || (TVMInitializeRuntime() != kTvmErrorNoError)) {
    return -1;
  }
  register_global("pf.sum", pf_sum);
  register_global("pf.echo", pf_echo);
  register_global("pf.fail", pf_fail);
  register_global("pf.get", pf_get);
  g_calls = 0;
  g_seen_num_args = -1;
  return 0;
}

static void assert_last_error_has(const char* text) {
  if (strstr(TVMGetLastError(), text) == NULL) {
    fail_msg("TVMGetLastError() is '%s', expected it to contain '%s'", TVMGetLastError(), text);
  }
}

/* ---- lookup --------------------------------------------------------------------------------------- */
static void lookup_of_globals(void** state) {
  TVMPackedFunc f;
  TVMFunctionHandle expected = NULL;
  (void)state;
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.sum"), kTvmErrorNoError);
  assert_int_equal(TVMFuncGetGlobal("pf.sum", &expected), 0);
  assert_ptr_equal(f.handle, expected);
  assert_int_equal(TVMPackedFunc_NumArgs(&f), 0);
  assert_int_equal(TVMPackedFunc_RetTypeCode(&f), kTVMNullptr);

  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.nowhere"), kTvmErrorFunctionNameNotFound);
  assert_null(f.handle);
  assert_last_error_has("no global function named 'pf.nowhere'");
  assert_int_equal(TVMPackedFunc_Call(&f), kTvmErrorFunctionHandleInvalid);
  assert_last_error_has("TVMPackedFunc_Init");
  assert_int_equal(g_calls, 0);

  assert_int_equal(TVMPackedFunc_InitGlobal(&f, NULL), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPackedFunc_InitGlobal(NULL, "pf.sum"), kTvmErrorPlatformInvalidArgument);
  assert_last_error_has("NULL TVMPackedFunc");
}

static void lookup_of_module_functions_and_handles(void** state) {
  TVMPackedFunc f;
  TVMModuleHandle mod = NULL;
  TVMFunctionHandle sum = NULL;
  int64_t value = 0;
  (void)state;
  assert_int_equal(TVMModCreateFromCModule(&kModule, &mod), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_InitModuleFunction(&f, mod, "where"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_ptr_equal(g_seen_resource, &kModule); /* called as a module function */
  assert_int_equal(TVMPackedFunc_GetRetInt(&f, &value), kTvmErrorNoError);
  assert_int_equal(value, 7);
  assert_int_equal(TVMPackedFunc_InitModuleFunction(&f, mod, "elsewhere"), kTvmErrorFunctionNameNotFound);
  assert_last_error_has("no function named 'elsewhere'");
  assert_int_equal(TVMPackedFunc_InitModuleFunction(&f, (TVMModuleHandle)(uintptr_t)0x12345, "where"),
                   kTvmErrorModuleHandleInvalid);

  /* A function handle returned by another function. */
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.get"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetFunction(&f, &sum), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_InitHandle(&f, sum), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddInt(&f, 40), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddInt(&f, 2), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetInt(&f, &value), kTvmErrorNoError);
  assert_int_equal(value, 42);
  assert_int_equal(TVMPackedFunc_InitHandle(&f, NULL), kTvmErrorFunctionHandleInvalid);
  assert_int_equal(TVMPackedFunc_InitHandle(&f, (TVMFunctionHandle)(uintptr_t)0x1234), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), kTvmErrorFunctionHandleInvalid); /* TVMFuncCall checks it */
  assert_last_error_has("invalid function handle 0x1234");
}

/* ---- arguments and return values ------------------------------------------------------------------ */
static void every_argument_type_round_trips(void** state) {
  TVMPackedFunc f;
  int64_t i64 = 0;
  double f64 = 0.0;
  void* handle = NULL;
  DLTensor* tensor_out = NULL;
  const char* text = NULL;
  const TVMByteArray* bytes = NULL;
  TVMModuleHandle mod = NULL;
  TVMModuleHandle mod_out = NULL;
  TVMFunctionHandle func = NULL;
  TVMFunctionHandle func_out = NULL;
  int64_t shape[1] = {3};
  float data[3] = {1.0f, 2.0f, 3.0f};
  DLTensor tensor;
  int marker = 0;
  static const char kPayload[] = {'a', '\0', 'b'};
  (void)state;
  memset(&tensor, 0, sizeof(tensor));
  tensor.data = data;
  tensor.ndim = 1;
  tensor.shape = shape;
  tensor.dtype.code = kDLFloat;
  tensor.dtype.bits = 32;
  tensor.dtype.lanes = 1;
  tensor.device.device_type = kDLCPU;
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.echo"), kTvmErrorNoError);

  assert_int_equal(TVMPackedFunc_AddInt(&f, -5000000000LL), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(g_seen_codes[0], kTVMArgInt);
  assert_int_equal(TVMPackedFunc_GetRetInt(&f, &i64), kTvmErrorNoError);
  assert_true(i64 == -5000000000LL);

  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddFloat(&f, 2.5), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_RetTypeCode(&f), kTVMArgFloat);
  assert_int_equal(TVMPackedFunc_GetRetFloat(&f, &f64), kTvmErrorNoError);
  assert_true(f64 == 2.5);

  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddHandle(&f, &marker), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetHandle(&f, &handle), kTvmErrorNoError);
  assert_ptr_equal(handle, &marker);

  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddTensor(&f, &tensor), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(g_seen_codes[0], kTVMDLTensorHandle);
  assert_int_equal(TVMPackedFunc_GetRetTensor(&f, &tensor_out), kTvmErrorNoError);
  assert_ptr_equal(tensor_out, &tensor);

  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddString(&f, "hello"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetString(&f, &text), kTvmErrorNoError);
  assert_string_equal(text, "hello");

  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddBytes(&f, kPayload, sizeof(kPayload)), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(g_seen_codes[0], kTVMBytes);
  assert_ptr_equal(g_seen_bytes.data, kPayload); /* the callee got a TVMByteArray over the caller's bytes */
  assert_int_equal(g_seen_bytes.size, 3);
  assert_int_equal(TVMPackedFunc_GetRetBytes(&f, &bytes), kTvmErrorNoError);
  assert_ptr_equal(bytes->data, kPayload);
  assert_int_equal(bytes->size, 3);

  assert_int_equal(TVMModCreateFromCModule(&kModule, &mod), kTvmErrorNoError);
  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddModule(&f, mod), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetModule(&f, &mod_out), kTvmErrorNoError);
  assert_ptr_equal(mod_out, mod);

  assert_int_equal(TVMFuncGetGlobal("pf.sum", &func), 0);
  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddFunction(&f, func), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetFunction(&f, &func_out), kTvmErrorNoError);
  assert_ptr_equal(func_out, func);

  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddNull(&f), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(g_seen_codes[0], kTVMNullptr);
  assert_int_equal(TVMPackedFunc_RetTypeCode(&f), kTVMNullptr);
}

static void mixed_arguments_keep_their_order(void** state) {
  TVMPackedFunc f;
  TVMPackedFunc copy;
  int64_t sum = 0;
  static const char kPayload[] = "xyz";
  (void)state;
  if (TVM_CRT_MAX_ARGS < 3) {
    skip();
  }
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.echo"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddBytes(&f, kPayload, 3), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddString(&f, "s"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddFloat(&f, 1.0), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_NumArgs(&f), 3);
  /* A copy calls with its own byte array (the pointer is set at each call). */
  memcpy(&copy, &f, sizeof(copy));
  memset(&f, 0xee, sizeof(f));
  assert_int_equal(TVMPackedFunc_Call(&copy), 0);
  assert_int_equal(g_seen_num_args, 3);
  assert_int_equal(g_seen_codes[0], kTVMBytes);
  assert_int_equal(g_seen_codes[1], kTVMStr);
  assert_int_equal(g_seen_codes[2], kTVMArgFloat);
  assert_ptr_equal(g_seen_bytes.data, kPayload);
  /* The arguments stay for another call. */
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.sum"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddInt(&f, 1), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetInt(&f, &sum), kTvmErrorNoError);
  assert_int_equal(sum, 1);
  assert_int_equal(g_calls, 3);
}

/* Each getter on a value of each other type: kTvmErrorFunctionCallWrongReturnType, `out` untouched. */
static void every_getter_refuses_other_types(void** state) {
  TVMPackedFunc f;
  int marker = 0;
  int kind;
  (void)state;
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.echo"), kTvmErrorNoError);
  for (kind = 0; kind < 9; kind++) {
    int64_t i64 = 11;
    double f64 = 11.0;
    void* handle = &marker;
    DLTensor* tensor = (DLTensor*)(void*)&marker;
    const char* text = "untouched";
    const TVMByteArray* bytes = (const TVMByteArray*)(void*)&marker;
    TVMModuleHandle mod = &marker;
    TVMFunctionHandle func = &marker;
    int64_t shape[1] = {1};
    DLTensor t;
    memset(&t, 0, sizeof(t));
    t.shape = shape;
    t.ndim = 1;
    TVMPackedFunc_ClearArgs(&f);
    switch (kind) { /* the type returned, in the getters' order below; 8: nothing */
      case 0: assert_int_equal(TVMPackedFunc_AddInt(&f, 1), 0); break;
      case 1: assert_int_equal(TVMPackedFunc_AddFloat(&f, 1.0), 0); break;
      case 2: assert_int_equal(TVMPackedFunc_AddHandle(&f, &t), 0); break;
      case 3: assert_int_equal(TVMPackedFunc_AddTensor(&f, &t), 0); break;
      case 4: assert_int_equal(TVMPackedFunc_AddString(&f, "s"), 0); break;
      case 5: assert_int_equal(TVMPackedFunc_AddBytes(&f, "b", 1), 0); break;
      case 6: assert_int_equal(TVMPackedFunc_AddModule(&f, (TVMModuleHandle)(uintptr_t)0x80000000U), 0); break;
      case 7: assert_int_equal(TVMPackedFunc_AddFunction(&f, (TVMFunctionHandle)(uintptr_t)0x80008000U), 0); break;
      default: break;
    }
    assert_int_equal(TVMPackedFunc_Call(&f), 0);
#define CHECK_GETTER(k, call, unchanged)                                   \
  if (kind != (k)) {                                                       \
    assert_int_equal((call), kTvmErrorFunctionCallWrongReturnType);       \
    assert_true(unchanged);                                                \
    assert_last_error_has("'pf.echo' returned");                         \
  } else {                                                                 \
    assert_int_equal((call), kTvmErrorNoError);                           \
  }
    CHECK_GETTER(0, TVMPackedFunc_GetRetInt(&f, &i64), i64 == 11)
    CHECK_GETTER(1, TVMPackedFunc_GetRetFloat(&f, &f64), f64 == 11.0)
    CHECK_GETTER(2, TVMPackedFunc_GetRetHandle(&f, &handle), handle == &marker)
    CHECK_GETTER(3, TVMPackedFunc_GetRetTensor(&f, &tensor), tensor == (DLTensor*)(void*)&marker)
    CHECK_GETTER(4, TVMPackedFunc_GetRetString(&f, &text), strcmp(text, "untouched") == 0)
    CHECK_GETTER(5, TVMPackedFunc_GetRetBytes(&f, &bytes), bytes == (const TVMByteArray*)(void*)&marker)
    CHECK_GETTER(6, TVMPackedFunc_GetRetModule(&f, &mod), mod == &marker)
    CHECK_GETTER(7, TVMPackedFunc_GetRetFunction(&f, &func), func == &marker)
#undef CHECK_GETTER
  }
  /* The message names what came back and what was asked for. */
  assert_int_equal(TVMPackedFunc_AddString(&f, "s"), 0);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  {
    int64_t i64 = 0;
    assert_int_equal(TVMPackedFunc_GetRetInt(&f, &i64), kTvmErrorFunctionCallWrongReturnType);
  }
  assert_last_error_has("TVMPackedFunc_GetRetInt: 'pf.echo' returned str (type code 11), not int");
  /* Nothing returned yet: null. */
  {
    double f64 = 0.0;
    assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.sum"), kTvmErrorNoError);
    assert_int_equal(TVMPackedFunc_GetRetFloat(&f, &f64), kTvmErrorFunctionCallWrongReturnType);
    assert_last_error_has("returned null (type code 4), not float");
    assert_int_equal(TVMPackedFunc_GetRetFloat(&f, NULL), kTvmErrorPlatformInvalidArgument);
    assert_int_equal(TVMPackedFunc_GetRetFloat(NULL, &f64), kTvmErrorPlatformInvalidArgument);
  }
  /* An NDArray handle is a tensor too. */
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.echo"), kTvmErrorNoError);
  f.ret_type_code = kTVMNDArrayHandle;
  {
    DLTensor* tensor = NULL;
    assert_int_equal(TVMPackedFunc_GetRetTensor(&f, &tensor), kTvmErrorNoError);
  }
}

/* ---- argument errors ------------------------------------------------------------------------------ */
static void too_many_arguments_stop_the_call(void** state) {
  TVMPackedFunc f;
  int64_t sum = 0;
  int i;
  (void)state;
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.sum"), kTvmErrorNoError);
  for (i = 0; i < TVM_CRT_MAX_ARGS; i++) {
    assert_int_equal(TVMPackedFunc_AddInt(&f, 1), kTvmErrorNoError);
  }
  assert_int_equal(TVMPackedFunc_AddInt(&f, 1), kTvmErrorFunctionCallNumArguments);
  assert_last_error_has("(TVM_CRT_MAX_ARGS)");
  assert_int_equal(TVMPackedFunc_NumArgs(&f), TVM_CRT_MAX_ARGS);
  assert_int_equal(TVMPackedFunc_AddInt(&f, 1), kTvmErrorFunctionCallNumArguments);
  assert_int_equal(TVMPackedFunc_Call(&f), kTvmErrorFunctionCallNumArguments);
  assert_last_error_has("'pf.sum' not called");
  assert_int_equal(g_calls, 0);
  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddInt(&f, 5), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetInt(&f, &sum), kTvmErrorNoError);
  assert_int_equal(sum, 5);
  assert_int_equal(g_calls, 1);
}

static void null_pointer_arguments_are_refused(void** state) {
  TVMPackedFunc f;
  (void)state;
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.echo"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddTensor(&f, NULL), kTvmErrorFunctionCallInvalidArg);
  assert_last_error_has("argument 0 of 'pf.echo' is a NULL DLTensor*");
  assert_int_equal(TVMPackedFunc_AddString(&f, NULL), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMPackedFunc_AddBytes(&f, NULL, 3), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMPackedFunc_AddModule(&f, NULL), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMPackedFunc_AddFunction(&f, NULL), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(TVMPackedFunc_NumArgs(&f), 0);
  /* The first failure is the one Call reports. */
  assert_int_equal(TVMPackedFunc_Call(&f), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(g_calls, 0);
  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddBytes(&f, NULL, 0), kTvmErrorNoError); /* empty bytes */
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(g_seen_bytes.size, 0);
  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddHandle(&f, NULL), kTvmErrorNoError); /* an opaque handle may be NULL */
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  /* A NULL TVMPackedFunc anywhere. */
  assert_int_equal(TVMPackedFunc_AddInt(NULL, 1), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPackedFunc_AddBytes(NULL, "x", 1), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPackedFunc_Call(NULL), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPackedFunc_InitHandle(NULL, f.handle), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPackedFunc_InitModuleFunction(NULL, NULL, "x"), kTvmErrorPlatformInvalidArgument);
  TVMPackedFunc_ClearArgs(NULL);
  assert_int_equal(TVMPackedFunc_NumArgs(NULL), 0);
  assert_int_equal(TVMPackedFunc_RetTypeCode(NULL), kTVMNullptr);
}

/* ---- callee errors -------------------------------------------------------------------------------- */
static void callee_errors_pass_through(void** state) {
  TVMPackedFunc f;
  int64_t value = 0;
  (void)state;
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.fail"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), kTvmErrorFunctionCallInvalidArg);
  assert_string_equal(TVMGetLastError(), "pf.fail: sensor 3 is offline");
  assert_int_equal(TVMPackedFunc_RetTypeCode(&f), kTVMNullptr);
  assert_int_equal(TVMPackedFunc_InitGlobal(&f, "pf.sum"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_AddString(&f, "not an int"), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), kTvmErrorFunctionCallWrongArgType);
  assert_string_equal(TVMGetLastError(), "pf.sum: every argument must be an int");
  /* A failed call leaves no return value behind from an earlier one. */
  TVMPackedFunc_ClearArgs(&f);
  assert_int_equal(TVMPackedFunc_AddInt(&f, 3), kTvmErrorNoError);
  assert_int_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_AddString(&f, "x"), kTvmErrorNoError);
  assert_int_not_equal(TVMPackedFunc_Call(&f), 0);
  assert_int_equal(TVMPackedFunc_GetRetInt(&f, &value), kTvmErrorFunctionCallWrongReturnType);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(lookup_of_globals, setup),
      cmocka_unit_test_setup(lookup_of_module_functions_and_handles, setup),
      cmocka_unit_test_setup(every_argument_type_round_trips, setup),
      cmocka_unit_test_setup(mixed_arguments_keep_their_order, setup),
      cmocka_unit_test_setup(every_getter_refuses_other_types, setup),
      cmocka_unit_test_setup(too_many_arguments_stop_the_call, setup),
      cmocka_unit_test_setup(null_pointer_arguments_are_refused, setup),
      cmocka_unit_test_setup(callee_errors_pass_through, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
