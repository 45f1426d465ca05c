/*
 * aot_executor_app.c -- TVMAotExecutor_Run (library aot_executor) on a generated model and on broken
 * descriptors: each failure returns its error code and names the problem in TVMGetLastError().
 * Linked with the CRT's common, aot_executor and host libraries. Exit status 0 = all good.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_executor.h>
#include <tvm/runtime/crt/tvm_micro_runtime.h>

#include "tvmgen_hw_user.h"
#include "test_data.h"

#if defined(__GNUC__) || defined(__clang__)
#define APP_ALIGNED __attribute__((aligned(16)))
#else
#define APP_ALIGNED
#endif

static int g_failures;

#define CHECK(cond, what)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      ++g_failures;                                                                         \
      printf("FAIL %s:%d: %s (%s) last error: %s\n", __FILE__, __LINE__, what, #cond,       \
             TVMGetLastError());                                                            \
    }                                                                                       \
  } while (0)

static uint8_t g_workspace[TVMGEN_HW_USER_WORKSPACE_SIZE + 16U] APP_ALIGNED;

int main(void) {
  int8_t input[TVMGEN_HW_USER_SERVING_DEFAULT_DENSE_INPUT_0_SIZE];
  int8_t output[TVMGEN_HW_USER_STATEFULPARTITIONEDCALL_0_SIZE];
  struct tvmgen_hw_user_inputs inputs = {input};
  struct tvmgen_hw_user_outputs outputs = {output};
  void* workspaces[1] = {g_workspace};
  TVMContext context;
  TVMModel broken;
  tvm_crt_error_t err;

  memcpy(input, hw_inputs[0], sizeof(input));
  TVMSetWorkspaces(&context, workspaces);
  err = TVMAotExecutor_Run(&tvmgen_hw_user_model, &inputs, &outputs, &context);
  CHECK(err == kTvmErrorNoError, "run");
  CHECK(memcmp(output, hw_expected[0], sizeof(output)) == 0, "output");

  err = TVMAotExecutor_Run(&tvmgen_hw_user_model, &inputs, &outputs, NULL);
  CHECK(err == kTvmErrorExecutorModuleBadContext, "no context");
  CHECK(strstr(TVMGetLastError(), "model 'hw_user' takes its workspace from the context") != NULL, "text");

  workspaces[0] = &g_workspace[8];
  err = TVMAotExecutor_Run(&tvmgen_hw_user_model, &inputs, &outputs, &context);
  CHECK(err == kTvmErrorExecutorModuleBadContext, "misaligned workspace");
  CHECK(strstr(TVMGetLastError(), "workspace 0 is not 16-byte aligned") != NULL, "text");
  workspaces[0] = g_workspace;

  err = TVMAotExecutor_Run(NULL, &inputs, &outputs, &context);
  CHECK(err == kTvmErrorExecutorModuleBadContext && strstr(TVMGetLastError(), "model is NULL") != NULL, "NULL");

  memcpy(&broken, &tvmgen_hw_user_model, sizeof(broken));
  broken.version = TVM_MICRO_MODEL_VERSION + 1U;
  err = TVMAotExecutor_Run(&broken, &inputs, &outputs, &context);
  CHECK(err == kTvmErrorExecutorModuleBadContext && strstr(TVMGetLastError(), "version 2") != NULL, "version");

  memcpy(&broken, &tvmgen_hw_user_model, sizeof(broken));
  broken.entrypoint = NULL;
  err = TVMAotExecutor_Run(&broken, &inputs, &outputs, &context);
  CHECK(err == kTvmErrorExecutorModuleBadContext && strstr(TVMGetLastError(), "no entry point") != NULL, "entry");

  err = TVMAotExecutor_Run(&tvmgen_hw_user_model, NULL, &outputs, &context);
  CHECK(err == kTvmErrorFunctionCallInvalidArg, "NULL inputs");

  printf("%s (%d failures)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  return g_failures == 0 ? 0 : 1;
}
