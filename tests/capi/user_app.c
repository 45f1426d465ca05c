/*
 * user_app.c -- an application of the embedded C interface, as the RFC's user_app.c flows describe.
 *
 * It uses ONLY the generated model headers and the stable runtime header: no DLPack, no TVMValue, no
 * runtime library. Three models are linked into one program (each compiled with its own --model-name):
 *   hw       hello_world_int8, --unpacked-api --interface-api c            (default workspace)
 *   hw_user  hello_world_int8, --unpacked-api --interface-api c --workspace user
 *   add      simple_add_model (two inputs), --unpacked-api --interface-api c
 * test_data.h (written by the test) holds input sets and the reference outputs. Exit status 0 = all good.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/crt/tvm_micro_runtime.h>

#include "tvmgen_add.h"
#include "tvmgen_hw.h"
#include "tvmgen_hw_user.h"
#include "test_data.h"

#if defined(__GNUC__) || defined(__clang__)
#define APP_ALIGNED __attribute__((aligned(16)))
#else
#define APP_ALIGNED
#endif

static int g_failures;

#define CHECK(cond, what)                                                     \
  do {                                                                        \
    if (!(cond)) {                                                            \
      ++g_failures;                                                           \
      printf("FAIL %s:%d: %s (%s)\n", __FILE__, __LINE__, what, #cond);       \
    }                                                                         \
  } while (0)

/* Flow 1 ("Default Model Compilation"): the workspace is generated into the model; no context. */
static void default_workspace(void) {
  int8_t input[TVMGEN_HW_SERVING_DEFAULT_DENSE_INPUT_0_SIZE];
  int8_t output[TVMGEN_HW_STATEFULPARTITIONEDCALL_0_SIZE];
  struct tvmgen_hw_inputs inputs = {input};
  struct tvmgen_hw_outputs outputs = {output};
  int i;
  CHECK(tvmgen_hw_model.num_input_tensors == 1U && tvmgen_hw_model.num_output_tensors == 1U, "hw io counts");
  CHECK(!TVMModelNeedsWorkspace(&tvmgen_hw_model), "hw has a static workspace");
  CHECK(TVMGetWorkspaceSize(&tvmgen_hw_model, 0) == TVMGEN_HW_WORKSPACE_SIZE, "hw workspace size");
  CHECK(TVMGetWorkspaceSize(&tvmgen_hw_model, 1) == 0U, "hw has one workspace pool");
  for (i = 0; i < HW_NUM_SETS; ++i) {
    int32_t err;
    memcpy(input, hw_inputs[i], sizeof(input));
    memset(output, 0x55, sizeof(output));
    err = TVMExecute(&tvmgen_hw_model, &inputs, &outputs, NULL);
    CHECK(err == 0, "TVMExecute(hw)");
    CHECK(memcmp(output, hw_expected[i], sizeof(output)) == 0, "hw output (TVMExecute)");
    memset(output, 0x55, sizeof(output));
    err = tvmgen_hw_run(&inputs, &outputs);
    CHECK(err == 0, "tvmgen_hw_run");
    CHECK(memcmp(output, hw_expected[i], sizeof(output)) == 0, "hw output (tvmgen_hw_run)");
  }
  printf("default workspace: %d input sets, workspace %u bytes inside the model\n", HW_NUM_SETS,
         (unsigned)TVMGEN_HW_WORKSPACE_SIZE);
}

/* Flow 2 ("Custom-Workspace Compilation"): the application owns the workspace, given via TVMContext. */
static uint8_t g_workspace[TVMGEN_HW_USER_WORKSPACE_SIZE] APP_ALIGNED;

static void user_workspace(void) {
  int8_t input[TVMGEN_HW_USER_SERVING_DEFAULT_DENSE_INPUT_0_SIZE];
  int8_t output[TVMGEN_HW_USER_STATEFULPARTITIONEDCALL_0_SIZE];
  struct tvmgen_hw_user_inputs inputs = {input};
  struct tvmgen_hw_user_outputs outputs = {output};
  void* workspaces[1] = {g_workspace};
  TVMContext context;
  int i;
  CHECK(TVMModelNeedsWorkspace(&tvmgen_hw_user_model), "hw_user takes its workspace from the context");
  CHECK(TVMGetWorkspaceSize(&tvmgen_hw_user_model, 0) == sizeof(g_workspace), "hw_user workspace size");
  /* Without a workspace the model refuses to run. */
  memcpy(input, hw_inputs[0], sizeof(input));
  CHECK(TVMExecute(&tvmgen_hw_user_model, &inputs, &outputs, NULL) == (int32_t)TVM_MICRO_ERROR_BAD_CONTEXT,
        "no context -> bad context error");
  context.workspace = NULL;
  CHECK(TVMExecute(&tvmgen_hw_user_model, &inputs, &outputs, &context) == (int32_t)TVM_MICRO_ERROR_BAD_CONTEXT,
        "no workspaces -> bad context error");
  TVMSetWorkspaces(&context, workspaces);
  for (i = 0; i < HW_NUM_SETS; ++i) {
    int32_t err;
    memcpy(input, hw_inputs[i], sizeof(input));
    memset(g_workspace, 0xA5, sizeof(g_workspace)); /* the model must not rely on the workspace's contents */
    err = TVMExecute(&tvmgen_hw_user_model, &inputs, &outputs, &context);
    CHECK(err == 0, "TVMExecute(hw_user)");
    CHECK(memcmp(output, hw_expected[i], sizeof(output)) == 0, "hw_user output");
    err = tvmgen_hw_user_run(&inputs, &outputs, &context);
    CHECK(err == 0 && memcmp(output, hw_expected[i], sizeof(output)) == 0, "tvmgen_hw_user_run");
  }
  printf("user workspace: %d input sets, %u-byte workspace from the application\n", HW_NUM_SETS,
         (unsigned)sizeof(g_workspace));
}

/* Flow 3 ("Multiple Input Model"): inputs named by struct member. */
static int8_t g_a[TVMGEN_ADD_SERVING_DEFAULT_INPUT_1_0_SIZE];
static int8_t g_b[TVMGEN_ADD_SERVING_DEFAULT_INPUT_2_0_SIZE];
static int8_t g_sum[TVMGEN_ADD_PARTITIONEDCALL_0_SIZE];

static void multiple_inputs(void) {
  struct tvmgen_add_inputs inputs = {NULL, NULL};
  struct tvmgen_add_outputs outputs = {g_sum};
  int i;
  inputs.serving_default_input_1_0 = g_a;
  inputs.serving_default_input_2_0 = g_b;
  CHECK(TVMGEN_ADD_NUM_INPUTS == 2 && tvmgen_add_model.num_input_tensors == 2U, "add has two inputs");
  for (i = 0; i < ADD_NUM_SETS; ++i) {
    memcpy(g_a, add_inputs_1[i], sizeof(g_a));
    memcpy(g_b, add_inputs_2[i], sizeof(g_b));
    CHECK(TVMExecute(&tvmgen_add_model, &inputs, &outputs, NULL) == 0, "TVMExecute(add)");
    CHECK(memcmp(g_sum, add_expected[i], sizeof(g_sum)) == 0, "add output");
  }
  printf("multiple inputs: %d input sets of 2 x %u bytes\n", ADD_NUM_SETS, (unsigned)sizeof(g_a));
}

int main(void) {
  default_workspace();
  user_workspace();
  multiple_inputs();
  printf("%s (%d failures)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  return g_failures == 0 ? 0 : 1;
}
