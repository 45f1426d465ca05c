/*
 * time_evaluator.c -- runtime.RPCTimeEvaluator (docs/architecture.md §5.4).
 *
 * runtime.RPCTimeEvaluator(module, name, device_type, device_id, number, repeat, min_repeat_ms
 *                          [, limit_zero_time_iterations = 100, cooldown_interval_ms = 0,
 *                          repeats_to_cooldown = 1, ...ignored])
 * module may be null (type code kTVMNullptr) to time a global function. Returns a function handle
 * (module index TVM_CRT_MAX_REGISTERED_MODULES + 1, function index = evaluator slot) whose call passes
 * its arguments to the timed function and returns `repeat` little-endian doubles, each the mean seconds
 * per call of one repeat, as kTVMBytes: ret->v_handle points at a static TVMByteArray over a static
 * buffer of 8 * TVM_CRT_MAX_TIME_EVALUATOR_REPEAT bytes, valid until the next evaluator call.
 *
 * A call: one warm-up call; then for each repeat, measure `number` calls between
 * TVMPlatformBeforeMeasurement + TVMPlatformTimerStart and TVMPlatformTimerStop +
 * TVMPlatformAfterMeasurement; while that took less than min_repeat_ms, grow `number` (to the larger of
 * min_repeat_ms / time-per-call + 1 and 1.618 * number) and measure again, giving up after
 * limit_zero_time_iterations measurements that read zero time. The grown `number` carries over to later
 * repeats of the same call. The platform has no sleep hook, so cooldown_interval_ms is accepted and
 * ignored. Errors of the timed function or the timer stop the call and are reported with their text.
 * Evaluators are freed with TVMFuncFree; at most TVM_CRT_MAX_TIME_EVALUATORS live at once.
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/platform.h>

#include "crt_internal.h"

#define DEFAULT_LIMIT_ZERO_TIME_ITERATIONS 100
#define NUMBER_LIMIT 0x3fffffffL

typedef struct {
  uint8_t live;
  TVMFunctionHandle target;
  long number;
  long repeat;
  long min_repeat_ms;
  long limit_zero_time_iterations;
} TimeEvaluator;

static TimeEvaluator g_evaluators[TVM_CRT_MAX_TIME_EVALUATORS];
static TVMByteArray g_result_bytes;

static int int_arg(const TVMValue* args, const int* type_codes, int num_args, int index, const char* what,
                   long default_value, long* out);
static void store_double_le(uint8_t* out, double value);
static int measure(const TimeEvaluator* ev, long number, TVMValue* args, int* type_codes, int num_args,
                   double* out_seconds);

static int int_arg(const TVMValue* args, const int* type_codes, int num_args, int index, const char* what,
                   long default_value, long* out) {
  int rc = 0;
  if (index >= num_args) {
    *out = default_value;
  } else if ((type_codes[index] != (int)kTVMArgInt) && (type_codes[index] != (int)kDLUInt)) {
    rc = (int)TVMCrtError_Set(kTvmErrorFunctionCallWrongArgType,
                              "runtime.RPCTimeEvaluator: argument %d (%s) has type code %d, expected an int",
                              index, what, type_codes[index]);
  } else if ((args[index].v_int64 < -0x7fffffffL) || (args[index].v_int64 > 0x7fffffffL)) {
    rc = (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                              "runtime.RPCTimeEvaluator: argument %d (%s) is out of range", index, what);
  } else {
    *out = (long)args[index].v_int64;
  }
  return rc;
}

static void store_double_le(uint8_t* out, double value) {
  uint64_t bits = 0U;
  uint32_t i;
  (void)memcpy((void*)&bits, (const void*)&value, sizeof(bits));
  for (i = 0U; i < 8U; i++) {
    const uint32_t shift = 8U * i;
    out[i] = (uint8_t)((bits >> shift) & 0xffU);
  }
}

void TVMCrtTimeEvaluator_Reset(void) {
  (void)memset((void*)g_evaluators, 0, sizeof(g_evaluators));
  g_result_bytes.data = NULL;
  g_result_bytes.size = 0U;
}

int TVMCrtTimeEvaluator_IsLive(uint32_t slot) {
  return ((slot < (uint32_t)TVM_CRT_MAX_TIME_EVALUATORS) && (g_evaluators[slot].live != 0U)) ? 1 : 0;
}

tvm_crt_error_t TVMCrtTimeEvaluator_Free(uint32_t slot) {
  tvm_crt_error_t err = kTvmErrorTimeEvaluatorBadHandle;
  if (TVMCrtTimeEvaluator_IsLive(slot) != 0) {
    g_evaluators[slot].live = 0U;
    err = kTvmErrorNoError;
  }
  return err;
}

int TVMCrtTimeEvaluator_Create(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                               int* ret_type_code, void* resource_handle) {
  static const char* const kNames[7] = {"module", "name", "device_type", "device_id",
                                        "number", "repeat", "min_repeat_ms"};
  TimeEvaluator ev;
  long ignored = 0;
  uint32_t slot;
  int rc = 0;
  int i;
  (void)resource_handle;
  (void)memset((void*)&ev, 0, sizeof(ev));
  if (num_args < 7) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallNumArguments,
                                "runtime.RPCTimeEvaluator: expects at least 7 arguments (module, name, "
                                "device_type, device_id, number, repeat, min_repeat_ms), got %d",
                                num_args);
  }
  if ((type_codes[0] != (int)kTVMModuleHandle) && (type_codes[0] != (int)kTVMNullptr)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallWrongArgType,
                                "runtime.RPCTimeEvaluator: argument 0 (module) has type code %d, expected a "
                                "module handle or null",
                                type_codes[0]);
  }
  if ((type_codes[1] != (int)kTVMStr) || (args[1].v_str == NULL)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallWrongArgType,
                                "runtime.RPCTimeEvaluator: argument 1 (name) has type code %d, expected a string",
                                type_codes[1]);
  }
  for (i = 2; (i < 4) && (rc == 0); i++) {
    rc = int_arg(args, type_codes, num_args, i, kNames[i], 0, &ignored); /* one timer for every device */
  }
  if (rc == 0) {
    rc = int_arg(args, type_codes, num_args, 4, kNames[4], 1, &ev.number);
  }
  if (rc == 0) {
    rc = int_arg(args, type_codes, num_args, 5, kNames[5], 1, &ev.repeat);
  }
  if (rc == 0) {
    rc = int_arg(args, type_codes, num_args, 6, kNames[6], 0, &ev.min_repeat_ms);
  }
  if (rc == 0) {
    rc = int_arg(args, type_codes, num_args, 7, "limit_zero_time_iterations", DEFAULT_LIMIT_ZERO_TIME_ITERATIONS,
                 &ev.limit_zero_time_iterations);
  }
  if (rc == 0) {
    rc = int_arg(args, type_codes, num_args, 8, "cooldown_interval_ms", 0, &ignored);
  }
  if (rc == 0) {
    rc = int_arg(args, type_codes, num_args, 9, "repeats_to_cooldown", 1, &ignored);
  }
  if (rc != 0) {
    return rc;
  }
  if ((ev.number < 1) || (ev.number > NUMBER_LIMIT)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "runtime.RPCTimeEvaluator: number must be >= 1, got %ld", ev.number);
  }
  if ((ev.repeat < 1) || (ev.repeat > (long)TVM_CRT_MAX_TIME_EVALUATOR_REPEAT)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "runtime.RPCTimeEvaluator: repeat must be 1..%ld "
                                "(TVM_CRT_MAX_TIME_EVALUATOR_REPEAT), got %ld",
                                (long)TVM_CRT_MAX_TIME_EVALUATOR_REPEAT, ev.repeat);
  }
  if ((ev.min_repeat_ms < 0) || (ev.limit_zero_time_iterations < 0)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "runtime.RPCTimeEvaluator: min_repeat_ms and limit_zero_time_iterations must "
                                "be >= 0, got %ld and %ld",
                                ev.min_repeat_ms, ev.limit_zero_time_iterations);
  }
  if (type_codes[0] == (int)kTVMNullptr) {
    rc = TVMFuncGetGlobal(args[1].v_str, &ev.target);
  } else {
    rc = TVMModGetFunction(args[0].v_handle, args[1].v_str, 0, &ev.target);
  }
  if (rc != 0) {
    TVMAPISetLastErrorf("runtime.RPCTimeEvaluator: %s", TVMGetLastError());
    return rc;
  }
  for (slot = 0U; slot < (uint32_t)TVM_CRT_MAX_TIME_EVALUATORS; slot++) {
    if (g_evaluators[slot].live == 0U) {
      break;
    }
  }
  if (slot == (uint32_t)TVM_CRT_MAX_TIME_EVALUATORS) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionRegistryFull,
                                "runtime.RPCTimeEvaluator: all TVM_CRT_MAX_TIME_EVALUATORS=%ld evaluators are "
                                "live; free one with TVMFuncFree",
                                (long)TVM_CRT_MAX_TIME_EVALUATORS);
  }
  ev.live = 1U;
  g_evaluators[slot] = ev;
  ret_val->v_handle = TVMCrtHandle_EncodeFunction(TVM_CRT_TIME_EVALUATOR_MODULE_INDEX, slot);
  *ret_type_code = (int)kTVMPackedFuncHandle;
  return 0;
}

/* One measurement of `number` calls. The timer is always stopped and AfterMeasurement always called
 * once BeforeMeasurement succeeded. */
static int measure(const TimeEvaluator* ev, long number, TVMValue* args, int* type_codes, int num_args,
                   double* out_seconds) {
  TVMValue ret;
  int ret_code = 0;
  long j;
  int rc = 0;
  TVMFunctionHandle target = ev->target;
  tvm_crt_error_t err = TVMPlatformBeforeMeasurement();
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err, "time evaluator: TVMPlatformBeforeMeasurement failed (0x%x)", (unsigned)err);
  }
  err = TVMPlatformTimerStart();
  if (err != kTvmErrorNoError) {
    (void)TVMPlatformAfterMeasurement();
    return (int)TVMCrtError_Set(err, "time evaluator: TVMPlatformTimerStart failed (0x%x)", (unsigned)err);
  }
  for (j = 0; (j < number) && (rc == 0); j++) {
    rc = TVMFuncCall(target, args, type_codes, num_args, &ret, &ret_code);
  }
  err = TVMPlatformTimerStop(out_seconds);
  (void)TVMPlatformAfterMeasurement();
  if (rc != 0) {
    TVMAPISetLastErrorf("time evaluator: %s failed: %s", TVMCrtHandle_FunctionName(target), TVMGetLastError());
  } else if (err != kTvmErrorNoError) {
    rc = (int)TVMCrtError_Set(err, "time evaluator: TVMPlatformTimerStop failed (0x%x)", (unsigned)err);
  } else {
    /* measured */
  }
  return rc;
}

int TVMCrtTimeEvaluator_Call(uint32_t slot, TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                             int* ret_type_code) {
  /* The result bytes, pointed at by g_result_bytes until the next call. */
  static uint8_t result[8U * (size_t)TVM_CRT_MAX_TIME_EVALUATOR_REPEAT];
  const TimeEvaluator ev = g_evaluators[slot]; /* a copy: the timed function may free evaluators */
  TVMFunctionHandle target = ev.target;
  TVMValue warm_ret;
  int warm_code = 0;
  long number = ev.number;
  long r;
  int rc = TVMFuncCall(target, args, type_codes, num_args, &warm_ret, &warm_code);
  if (rc != 0) {
    TVMAPISetLastErrorf("time evaluator: warm-up call of %s failed: %s", TVMCrtHandle_FunctionName(target),
                        TVMGetLastError());
    return rc;
  }
  for (r = 0; r < ev.repeat; r++) {
    double seconds = 0.0;
    long zero_times = 0;
    int again = 1;
    while (again != 0) {
      if (seconds > 0.0) {
        const double per_call_ms = (seconds * 1000.0) / (double)number;
        double wanted = ((double)ev.min_repeat_ms / per_call_ms) + 1.0;
        const double grown = (double)number * 1.618;
        if (grown > wanted) {
          wanted = grown;
        }
        number = (wanted >= (double)NUMBER_LIMIT) ? NUMBER_LIMIT : (long)wanted;
      }
      rc = measure(&ev, number, args, type_codes, num_args, &seconds);
      if (rc != 0) {
        return rc;
      }
      if (seconds <= 0.0) {
        seconds = 0.0;
        zero_times++;
      }
      again = 0;
      if (((seconds * 1000.0) < (double)ev.min_repeat_ms) && (zero_times < ev.limit_zero_time_iterations) &&
          (number < NUMBER_LIMIT)) {
        again = 1;
      }
    }
    store_double_le(&result[8U * (size_t)r], seconds / (double)number);
  }
  g_result_bytes.data = (const char*)result;
  g_result_bytes.size = 8U * (size_t)ev.repeat;
  ret_val->v_handle = &g_result_bytes;
  *ret_type_code = (int)kTVMBytes;
  return 0;
}
