/*
 * test_system_lib_default.c -- a firmware without a system library: libcommon's weak
 * TVMSystemLibEntryPoint (returning NULL) is linked, and runtime.SystemLib must say so clearly. Also
 * checks that the API refuses to work before TVMInitializeRuntime (this must run first in the process).
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

static void before_initialization(void** state) {
  TVMFunctionHandle f = (TVMFunctionHandle)1;
  (void)state;
  assert_int_equal(TVMFuncGetGlobal("runtime.SystemLib", &f), kTvmErrorPlatformCheckFailure);
  assert_null(f);
  assert_non_null(strstr(TVMGetLastError(), "TVMInitializeRuntime"));
  assert_int_equal(TVMFuncRegisterGlobal("x", (TVMFunctionHandle)1, 0), kTvmErrorPlatformCheckFailure);
}

static void weak_default_means_no_system_lib(void** state) {
  TVMFunctionHandle f = NULL;
  TVMValue ret;
  int ret_code = -1;
  (void)state;
  assert_null(TVMSystemLibEntryPoint());
  assert_int_equal(TVMInitializeRuntime(), kTvmErrorNoError);
  assert_int_equal(TVMFuncGetGlobal("runtime.SystemLib", &f), 0);
  assert_int_equal(TVMFuncCall(f, NULL, NULL, 0, &ret, &ret_code), kTvmErrorSystemLibMissing);
  assert_int_equal(ret_code, kTVMNullptr);
  assert_non_null(strstr(TVMGetLastError(), "runtime.SystemLib: this firmware has no system library"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(before_initialization),
      cmocka_unit_test(weak_default_means_no_system_lib),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
