/*
 * test_time_evaluator.c -- runtime.RPCTimeEvaluator against a fake platform: a fake clock that only
 * the timed function advances, counters on the measurement hooks, and injectable timer failures.
 * This file implements every TVMPlatform* hook itself (no host port linked).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/platform.h>

#define FN_HANDLE(m, f) ((uintptr_t)((((uint32_t)(m) | 0x8000U) << 16) | ((uint32_t)(f) | 0x8000U)))
#define TICK (1.0 / 1024.0) /* exact in binary, so the arithmetic below is exact */

/* ---- fake platform ------------------------------------------------------------------------------- */
static double g_clock, g_start;
static int g_running, g_before, g_after, g_fail_timer_start, g_fail_timer_stop;

void TVMPlatformAbort(tvm_crt_error_t code) {
  fprintf(stderr, "abort 0x%x\n", (unsigned)code);
  abort();
}
size_t TVMPlatformFormatMessage(char* out, size_t size, const char* fmt, va_list args) {
  int n = vsnprintf(out, size, fmt, args);
  return (n < 0) ? 0U : ((size_t)n >= size ? size - 1U : (size_t)n);
}
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t n, DLDevice dev, void** out) {
  (void)dev;
  *out = malloc(n ? n : 1);
  return *out ? kTvmErrorNoError : kTvmErrorPlatformNoMemory;
}
tvm_crt_error_t TVMPlatformMemoryFree(void* p, DLDevice dev) {
  (void)dev;
  free(p);
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (g_fail_timer_start || g_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  g_running = 1;
  g_start = g_clock;
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformTimerStop(double* elapsed) {
  if (!g_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  g_running = 0;
  if (g_fail_timer_stop) {
    return kTvmErrorPlatformCheckFailure;
  }
  *elapsed = g_clock - g_start;
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    buffer[i] = (uint8_t)(i * 7U + 1U);
  }
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformBeforeMeasurement(void) {
  g_before++;
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformAfterMeasurement(void) {
  g_after++;
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformInitialize(void) { return kTvmErrorNoError; }

/* ---- the timed function ---------------------------------------------------------------------------- */
static double g_cost;      /* seconds each call adds to the clock */
static int g_calls;        /* calls so far */
static int g_fail_at;      /* fail on this call number (1-based); 0 never */
static int g_bad_args;     /* calls that did not get the forwarded argument */
static void* g_resource;

static int work(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  g_calls++;
  g_resource = resource;
  if (n != 1 || codes[0] != kTVMArgInt || args[0].v_int64 != 123) {
    g_bad_args++;
  }
  if (g_calls == g_fail_at) {
    TVMAPISetLastError("work failed on purpose");
    return -1;
  }
  g_clock += g_cost;
  ret->v_int64 = 1;
  *ret_code = kTVMArgInt;
  return 0;
}
static const char kNames[] = "\x01\x00" "work\0";
static const TVMBackendPackedCFunc kFuncs[] = {work};
static const TVMFuncRegistry kRegistry = {kNames, kFuncs};
static const TVMModule kModule = {&kRegistry};
const TVMModule* TVMSystemLibEntryPoint(void) { return &kModule; }

/* ---- helpers --------------------------------------------------------------------------------------- */
static TVMFunctionHandle get_global(const char* name) {
  TVMFunctionHandle h = NULL;
  assert_int_equal(TVMFuncGetGlobal(name, &h), 0);
  return h;
}

static TVMModuleHandle system_lib(void) {
  TVMValue ret;
  int code;
  assert_int_equal(TVMFuncCall(get_global("runtime.SystemLib"), NULL, NULL, 0, &ret, &code), 0);
  return ret.v_handle;
}

static void assert_error_contains(const char* needle) {
  if (strstr(TVMGetLastError(), needle) == NULL) {
    fail_msg("last error '%s' does not contain '%s'", TVMGetLastError(), needle);
  }
}

/* Create an evaluator: rc of the call; *out the handle. extra[] are args 7.. (n_extra of them). */
static int create(TVMModuleHandle mod, const char* name, long number, long repeat, long min_repeat_ms,
                  const long* extra, int n_extra, TVMFunctionHandle* out) {
  TVMValue args[12], ret;
  int codes[12], ret_code = -1, i, rc;
  const long ints[5] = {kDLCPU, 0, number, repeat, min_repeat_ms};
  args[0].v_handle = mod;
  codes[0] = mod ? kTVMModuleHandle : kTVMNullptr;
  args[1].v_str = name;
  codes[1] = kTVMStr;
  for (i = 0; i < 5; i++) {
    args[2 + i].v_int64 = ints[i];
    codes[2 + i] = kTVMArgInt;
  }
  for (i = 0; i < n_extra; i++) {
    args[7 + i].v_int64 = extra[i];
    codes[7 + i] = kTVMArgInt;
  }
  rc = TVMFuncCall(get_global("runtime.RPCTimeEvaluator"), args, codes, 7 + n_extra, &ret, &ret_code);
  if (rc == 0) {
    assert_int_equal(ret_code, kTVMPackedFuncHandle);
    *out = ret.v_handle;
  }
  return rc;
}

/* Run an evaluator with the forwarded argument 123; returns rc, fills results[] on success. */
static int run(TVMFunctionHandle ev, double* results, size_t max_results, size_t* n_results) {
  TVMValue arg, ret;
  int code = kTVMArgInt, ret_code = -1, rc;
  arg.v_int64 = 123;
  rc = TVMFuncCall(ev, &arg, &code, 1, &ret, &ret_code);
  if (rc == 0) {
    const TVMByteArray* bytes = (const TVMByteArray*)ret.v_handle;
    size_t i, b;
    assert_int_equal(ret_code, kTVMBytes);
    assert_int_equal(bytes->size % 8, 0);
    *n_results = bytes->size / 8;
    assert_true(*n_results <= max_results);
    for (i = 0; i < *n_results; i++) { /* little-endian doubles */
      uint64_t bits = 0;
      for (b = 0; b < 8; b++) {
        bits |= (uint64_t)(uint8_t)bytes->data[8 * i + b] << (8 * b);
      }
      memcpy(&results[i], &bits, 8);
    }
  }
  return rc;
}

static int setup(void** state) {
  (void)state;
  g_clock = 0;
  g_running = g_before = g_after = g_fail_timer_start = g_fail_timer_stop = 0;
  g_cost = TICK;
  g_calls = g_fail_at = g_bad_args = 0;
  g_resource = NULL;
  return TVMInitializeRuntime() == kTvmErrorNoError ? 0 : -1;
}

/* ---- tests ----------------------------------------------------------------------------------------- */
static void fixed_number(void** state) {
  TVMFunctionHandle ev = NULL;
  double r[8];
  size_t n = 0, i;
  (void)state;
  assert_int_equal(create(system_lib(), "work", 2, 3, 0, NULL, 0, &ev), 0);
  assert_int_equal((uintptr_t)ev, FN_HANDLE(TVM_CRT_MAX_REGISTERED_MODULES + 1, 0));
  assert_int_equal(g_calls, 0); /* creating does not call */
  assert_int_equal(run(ev, r, 8, &n), 0);
  assert_int_equal(n, 3);
  assert_int_equal(g_calls, 1 + 3 * 2); /* warm-up, then repeat x number */
  for (i = 0; i < n; i++) {
    assert_true(r[i] == TICK);
  }
  assert_int_equal(g_before, 3);
  assert_int_equal(g_after, 3);
  assert_int_equal(g_bad_args, 0);
  assert_ptr_equal(g_resource, &kModule); /* module functions get their module */
  assert_int_equal(g_running, 0);
}

static void number_grows_to_min_repeat_ms(void** state) {
  TVMFunctionHandle ev = NULL;
  double r[8];
  size_t n = 0;
  (void)state;
  /* 1 call = 0.977 ms < 10 ms -> number = 10 / 0.977 + 1 = 11 (> 1.618): 11 calls = 10.7 ms. */
  assert_int_equal(create(system_lib(), "work", 1, 2, 10, NULL, 0, &ev), 0);
  assert_int_equal(run(ev, r, 8, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(g_calls, 1 + (1 + 11) + 11); /* the grown number carries over to repeat 2 */
  assert_true(r[0] == TICK && r[1] == TICK);
  assert_int_equal(g_before, 3);
  assert_int_equal(g_after, 3);
  /* a second call of the same evaluator starts again from `number` */
  g_calls = 0;
  assert_int_equal(run(ev, r, 8, &n), 0);
  assert_int_equal(g_calls, 1 + (1 + 11) + 11);
}

static void number_grows_by_golden_ratio(void** state) {
  TVMFunctionHandle ev = NULL;
  double r[8];
  size_t n = 0;
  (void)state;
  /* 10 calls = 9.77 ms < 10 -> max(10 / 0.977 + 1 = 11.24, 10 * 1.618 = 16.18) -> 16 calls */
  assert_int_equal(create(system_lib(), "work", 10, 1, 10, NULL, 0, &ev), 0);
  assert_int_equal(run(ev, r, 8, &n), 0);
  assert_int_equal(g_calls, 1 + 10 + 16);
  assert_true(r[0] == TICK);
}

static void zero_time_is_bounded(void** state) {
  TVMFunctionHandle ev = NULL;
  double r[8];
  size_t n = 0;
  const long extra[3] = {3, 0, 1}; /* limit_zero_time_iterations = 3 */
  (void)state;
  g_cost = 0.0;
  assert_int_equal(create(NULL, "test.work", 1, 2, 5, extra, 3, &ev), kTvmErrorFunctionNameNotFound);
  assert_error_contains("test.work");
  {
    TVMFunctionHandle f;
    memcpy(&f, &kFuncs[0], sizeof(f));
    assert_int_equal(TVMFuncRegisterGlobal("test.work", f, 0), 0);
  }
  assert_int_equal(create(NULL, "test.work", 1, 2, 5, extra, 3, &ev), 0);
  assert_int_equal(run(ev, r, 8, &n), 0);
  assert_int_equal(g_calls, 1 + 2 * 3);
  assert_true(r[0] == 0.0 && r[1] == 0.0);
  assert_null(g_resource); /* global functions get NULL */
  /* default limit (100) with the 7 mandatory args only */
  assert_int_equal(TVMFuncFree(ev), 0);
  assert_int_equal(create(NULL, "test.work", 1, 1, 5, NULL, 0, &ev), 0);
  g_calls = 0;
  assert_int_equal(run(ev, r, 8, &n), 0);
  assert_int_equal(g_calls, 1 + 100);
}

static void extra_arguments_are_accepted(void** state) {
  TVMFunctionHandle ev = NULL;
  double r[8];
  size_t n = 0;
  const long extra[5] = {100, 50, 2, 0, 7}; /* + cache_flush_bytes and one more: ignored */
  (void)state;
  assert_int_equal(create(system_lib(), "work", 1, 4, 0, extra, 5, &ev), 0);
  assert_int_equal(run(ev, r, 8, &n), 0);
  assert_int_equal(n, 4);
  assert_int_equal(g_calls, 1 + 4);
}

static void errors_propagate_with_text(void** state) {
  TVMFunctionHandle ev = NULL;
  double r[8];
  size_t n = 0;
  (void)state;
  assert_int_equal(create(system_lib(), "work", 3, 2, 0, NULL, 0, &ev), 0);
  g_fail_at = 1;
  assert_int_equal(run(ev, r, 8, &n), -1);
  assert_error_contains("warm-up");
  assert_error_contains("work failed on purpose");
  assert_int_equal(g_before, 0);
  g_calls = 0;
  g_fail_at = 3; /* inside the first measurement */
  assert_int_equal(run(ev, r, 8, &n), -1);
  assert_error_contains("time evaluator: work failed: work failed on purpose");
  assert_int_equal(g_calls, 3); /* stops at the failure */
  assert_int_equal(g_before, g_after);
  assert_int_equal(g_running, 0); /* the timer was stopped */
  g_fail_at = 0;
  g_fail_timer_start = 1;
  assert_int_equal(run(ev, r, 8, &n), kTvmErrorPlatformTimerBadState);
  assert_error_contains("TVMPlatformTimerStart");
  assert_int_equal(g_before, g_after);
  g_fail_timer_start = 0;
  g_fail_timer_stop = 1;
  assert_int_equal(run(ev, r, 8, &n), kTvmErrorPlatformCheckFailure);
  assert_error_contains("TVMPlatformTimerStop");
  assert_int_equal(g_before, g_after);
  g_fail_timer_stop = 0;
  assert_int_equal(run(ev, r, 8, &n), 0); /* and it still works afterwards */
}

static void bad_arguments(void** state) {
  TVMFunctionHandle ev = NULL;
  TVMValue args[7], ret;
  int codes[7] = {kTVMNullptr, kTVMStr, kTVMArgInt, kTVMArgInt, kTVMArgInt, kTVMArgInt, kTVMArgInt};
  int ret_code, i;
  (void)state;
  args[1].v_str = "runtime.SystemLib";
  for (i = 2; i < 7; i++) {
    args[i].v_int64 = 1;
  }
  assert_int_equal(TVMFuncCall(get_global("runtime.RPCTimeEvaluator"), args, codes, 6, &ret, &ret_code),
                   kTvmErrorFunctionCallNumArguments);
  codes[1] = kTVMArgInt;
  assert_int_equal(TVMFuncCall(get_global("runtime.RPCTimeEvaluator"), args, codes, 7, &ret, &ret_code),
                   kTvmErrorFunctionCallWrongArgType);
  assert_error_contains("argument 1 (name)");
  codes[1] = kTVMStr;
  codes[5] = kTVMStr;
  assert_int_equal(TVMFuncCall(get_global("runtime.RPCTimeEvaluator"), args, codes, 7, &ret, &ret_code),
                   kTvmErrorFunctionCallWrongArgType);
  assert_error_contains("argument 5 (repeat)");
  assert_int_equal(create(system_lib(), "work", 0, 1, 0, NULL, 0, &ev), kTvmErrorFunctionCallInvalidArg);
  assert_error_contains("number must be >= 1");
  assert_int_equal(create(system_lib(), "work", 1, 0, 0, NULL, 0, &ev), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(create(system_lib(), "work", 1, TVM_CRT_MAX_TIME_EVALUATOR_REPEAT + 1, 0, NULL, 0, &ev),
                   kTvmErrorFunctionCallInvalidArg);
  assert_error_contains("TVM_CRT_MAX_TIME_EVALUATOR_REPEAT");
  assert_int_equal(create(system_lib(), "work", 1, 1, -1, NULL, 0, &ev), kTvmErrorFunctionCallInvalidArg);
  assert_int_equal(create(system_lib(), "absent", 1, 1, 0, NULL, 0, &ev), kTvmErrorFunctionNameNotFound);
  assert_error_contains("runtime.RPCTimeEvaluator");
  assert_error_contains("'absent'");
  assert_int_equal(create((TVMModuleHandle)0x1234, "work", 1, 1, 0, NULL, 0, &ev), kTvmErrorModuleHandleInvalid);
  /* the largest repeat fits the static result buffer */
  assert_int_equal(create(system_lib(), "work", 1, TVM_CRT_MAX_TIME_EVALUATOR_REPEAT, 0, NULL, 0, &ev), 0);
  {
    double r[TVM_CRT_MAX_TIME_EVALUATOR_REPEAT];
    size_t n = 0;
    assert_int_equal(run(ev, r, TVM_CRT_MAX_TIME_EVALUATOR_REPEAT, &n), 0);
    assert_int_equal(n, TVM_CRT_MAX_TIME_EVALUATOR_REPEAT);
  }
}

static void slots_and_free(void** state) {
  TVMFunctionHandle evs[TVM_CRT_MAX_TIME_EVALUATORS + 1];
  double r[4];
  size_t n;
  int i;
  (void)state;
  for (i = 0; i < TVM_CRT_MAX_TIME_EVALUATORS; i++) {
    assert_int_equal(create(system_lib(), "work", 1, 1, 0, NULL, 0, &evs[i]), 0);
    assert_int_equal((uintptr_t)evs[i], FN_HANDLE(TVM_CRT_MAX_REGISTERED_MODULES + 1, i));
  }
  assert_int_equal(create(system_lib(), "work", 1, 1, 0, NULL, 0, &evs[i]), kTvmErrorFunctionRegistryFull);
  assert_error_contains("TVM_CRT_MAX_TIME_EVALUATORS");
  assert_int_equal(TVMFuncFree(evs[0]), 0);
  assert_int_equal(run(evs[0], r, 4, &n), kTvmErrorTimeEvaluatorBadHandle);
  assert_int_equal(TVMFuncFree(evs[0]), kTvmErrorTimeEvaluatorBadHandle);
  assert_int_equal(create(system_lib(), "work", 1, 1, 0, NULL, 0, &evs[0]), 0);
  assert_int_equal(run(evs[0], r, 4, &n), 0);
  /* TVMInitializeRuntime frees every evaluator */
  assert_int_equal(TVMInitializeRuntime(), kTvmErrorNoError);
  assert_int_equal(run(evs[0], r, 4, &n), kTvmErrorTimeEvaluatorBadHandle);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(fixed_number, setup),
      cmocka_unit_test_setup(number_grows_to_min_repeat_ms, setup),
      cmocka_unit_test_setup(number_grows_by_golden_ratio, setup),
      cmocka_unit_test_setup(zero_time_is_bounded, setup),
      cmocka_unit_test_setup(extra_arguments_are_accepted, setup),
      cmocka_unit_test_setup(errors_propagate_with_text, setup),
      cmocka_unit_test_setup(bad_arguments, setup),
      cmocka_unit_test_setup(slots_and_free, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
