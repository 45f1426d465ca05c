/*
 * quant_app.c -- an application that needs nothing but the generated model header and the stable runtime
 * API to feed real-valued features to an int8 model (issue 13 item 1).
 *
 * The model is mlperf_tiny/kws_ref_model.tflite compiled as `qapp` with --unpacked-api --interface-api c.
 * Every fact about its tensors comes from tvmgen_qapp.h: element counts, the C element type, the dtype's
 * bits and signedness, the quantization scale and zero point. The app:
 *   1. makes NUM_ELEMENTS float features x[i] = ((i * 37) % 101 - 50) * 0.75f (exact in float);
 *   2. quantizes them as TFLite does: q = round(x / scale) + zero_point (round half away from zero),
 *      clamped to the dtype's range;
 *   3. runs the model with TVMExecute;
 *   4. dequantizes each output, y = scale * (q - zero_point), and prints
 *        in <q ...>            the quantized inputs
 *        out <q> <bits>        per output element: its value and the IEEE-754 bits of y (hex)
 *        status <TVMExecute's return code>
 *   (Integers only: the bits stand for the floats, so a printf without float support will do.)
 * Built with QUANT_APP_BOARD, it runs on the QEMU boards' firmware (UART0 is stdout).
 */
#include <stdint.h>
#include <stdio.h>
#include <tvm/runtime/crt/tvm_micro_runtime.h>

#include "tvmgen_qapp.h"

#ifdef QUANT_APP_BOARD
#include "utvm_board.h"
#endif

#define IN_(x) TVMGEN_QAPP_INPUT_1_##x
#define OUT_(x) TVMGEN_QAPP_IDENTITY_##x

#if !IN_(QUANTIZED) || !OUT_(QUANTIZED)
#error "quant_app.c needs a model with per-tensor quantized input and output"
#endif

typedef IN_(C_TYPE) in_t;
typedef OUT_(C_TYPE) out_t;

static in_t g_input[IN_(NUM_ELEMENTS)] __attribute__((aligned(16)));
static out_t g_output[OUT_(NUM_ELEMENTS)] __attribute__((aligned(16)));

/* The range of an integer dtype given by its DLPack code (0 int, 1 uint) and bits (at most 32 here). */
static int64_t q_min(int code, int bits) {
  return code == 0 ? -((int64_t)1 << (bits - 1)) : 0;
}

static int64_t q_max(int code, int bits) {
  return code == 0 ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
}

/* round(t) with halves away from zero, without libm; exact for |t| < 2^23 (t - trunc(t) is exact). */
static int64_t round_half_away(float t) {
  int64_t r = (int64_t)t;
  float frac = t - (float)r;
  if (frac >= 0.5f) {
    ++r;
  } else if (frac <= -0.5f) {
    --r;
  }
  return r;
}

static in_t quantize(float x) {
  int64_t q = round_half_away(x / IN_(SCALE)) + IN_(ZERO_POINT);
  int64_t lo = q_min(IN_(DTYPE_CODE), IN_(DTYPE_BITS));
  int64_t hi = q_max(IN_(DTYPE_CODE), IN_(DTYPE_BITS));
  return (in_t)(q < lo ? lo : (q > hi ? hi : q));
}

static uint32_t float_bits(float f) {
  union {
    float f;
    uint32_t u;
  } v;
  v.f = f;
  return v.u;
}

int main(void) {
  struct tvmgen_qapp_inputs inputs = {g_input};
  struct tvmgen_qapp_outputs outputs = {g_output};
  int32_t rc;
  long i;
#ifdef QUANT_APP_BOARD
  utvm_uart_init();
#endif
  printf("in");
  for (i = 0; i < (long)IN_(NUM_ELEMENTS); ++i) {
    float x = (float)((i * 37) % 101 - 50) * 0.75f;
    g_input[i] = quantize(x);
    printf(" %ld", (long)g_input[i]);
  }
  printf("\n");
  rc = TVMExecute(&tvmgen_qapp_model, &inputs, &outputs, NULL);
  for (i = 0; i < (long)OUT_(NUM_ELEMENTS); ++i) {
    float y = OUT_(SCALE) * (float)((int32_t)g_output[i] - (int32_t)OUT_(ZERO_POINT));
    printf("out %ld %08lx\n", (long)g_output[i], (unsigned long)float_bits(y));
  }
  printf("status %ld\n", (long)rc);
  return rc == 0 ? 0 : 1;
}
