/*
 * params_app.c -- one firmware, several parameter blobs (--params external): the model `pa` (C interface)
 * runs on the weights of blob A, found at run time in the linker section `utvm_params` (GNU ld's
 * __start_/__stop_ symbols give its address and size), then on blob B (other weights for the same code, a
 * const array), and back; blobs that do not fit are refused with their own error code and change nothing.
 * tests/capi/test_params_external*.py write params_data.h (the blobs and the inputs) and compare what this
 * prints with the reference interpreter:
 *
 *   run <tag> <set> <status> <outputs...>     the model run on input set <set> with the context's blob
 *   set <what> <status>                       TVMSetParameters(&context, &tvmgen_pa_params_info, blob, size)
 *   end
 *
 * Built with PARAMS_APP_BOARD, it runs on the QEMU boards' firmware (UART0 is stdout).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/crt/tvm_micro_runtime.h>

#include "params_data.h"
#include "tvmgen_pa.h"

#ifdef PARAMS_APP_BOARD
#include "utvm_board.h"
#endif

#if TVMGEN_PA_NUM_INPUTS != 1 || TVMGEN_PA_NUM_OUTPUTS != 1
#error "params_app.c needs a model with one input and one output"
#endif

typedef TVMGEN_PA_INPUT_C_TYPE in_t;
typedef TVMGEN_PA_OUTPUT_C_TYPE out_t;

/* The linker's bounds of the section blob A lives in: its address and size are known at run time only. */
extern const uint8_t __start_utvm_params[];
extern const uint8_t __stop_utvm_params[];

static in_t g_input[TVMGEN_PA_INPUT_NUM_ELEMENTS];
static out_t g_output[TVMGEN_PA_OUTPUT_NUM_ELEMENTS];
/* RAM for damaged copies of blob B (16 bytes more: a copy that starts off the blob alignment). */
static uint8_t g_copy[PARAMS_B_SIZE + 16U] __attribute__((aligned(16)));

static void run(const char* tag, const TVMContext* context) {
  struct tvmgen_pa_inputs inputs;
  struct tvmgen_pa_outputs outputs;
  long set;
  long i;
  inputs.TVMGEN_PA_INPUT_FIELD = g_input;
  outputs.TVMGEN_PA_OUTPUT_FIELD = g_output;
  for (set = 0; set < (long)PARAMS_NUM_SETS; ++set) {
    int32_t rc;
    memcpy(g_input, params_inputs[set], sizeof(g_input));
    memset(g_output, 0, sizeof(g_output));
    rc = TVMExecute(&tvmgen_pa_model, &inputs, &outputs, context);
    printf("run %s %ld %ld", tag, set, (long)rc);
    for (i = 0; i < (long)TVMGEN_PA_OUTPUT_NUM_ELEMENTS; ++i) {
      printf(" %ld", (long)g_output[i]);
    }
    printf("\n");
  }
}

static void set(TVMContext* context, const char* what, const void* blob, size_t size) {
  printf("set %s %ld\n", what, (long)TVMSetParameters(context, &tvmgen_pa_params_info, blob, size));
}

int main(void) {
  TVMContext context = {.workspace = NULL};
  const size_t flash_size = (size_t)(__stop_utvm_params - __start_utvm_params);

#ifdef PARAMS_APP_BOARD
  utvm_uart_init();
#endif
  run("none", &context); /* no blob yet: kTvmErrorParamsMissing */
  set(&context, "A", __start_utvm_params, flash_size);
  run("A", &context);
  set(&context, "B", params_b, PARAMS_B_SIZE);
  run("B", &context);

  set(&context, "other", params_other, PARAMS_OTHER_SIZE);
  set(&context, "truncated", params_b, PARAMS_B_SIZE - 1U);
  memcpy(g_copy, params_b, PARAMS_B_SIZE);
  g_copy[PARAMS_FLIP_BYTE] ^= (uint8_t)(1U << PARAMS_FLIP_BIT);
  set(&context, "flipped", g_copy, PARAMS_B_SIZE);
  memcpy(g_copy, params_b, PARAMS_B_SIZE);
  g_copy[0] = (uint8_t)'X';
  set(&context, "magic", g_copy, PARAMS_B_SIZE);
  memcpy(g_copy + 4, params_b, PARAMS_B_SIZE);
  set(&context, "misaligned", g_copy + 4, PARAMS_B_SIZE);
  run("after_refusals", &context); /* still blob B */

  set(&context, "A_again", __start_utvm_params, flash_size);
  run("A_again", &context);
  printf("end\n");
  return 0;
}
