/*
 * clamp_scale.c -- a user operator for tests/cli/test_custom_ops.py (twin: clamp_scale.py).
 *
 * int8 -> int8, option bytes {lo (int8), hi (int8), mul (uint8), shift (uint8)}:
 *   y = clamp(floor((x - zp_in) * mul / 2^shift) + zp_out, lo, hi)
 * Returns 42 when lo > hi (so a test can see an operator's error stop the run).
 *
 * scale_clamp_f32: float32 -> float32 (an ONNX op type), options {a, lo, hi} as three little-endian
 * float32: y = min(max(x * a, lo), hi).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/crt/utvm_custom_op.h>

int32_t clamp_scale(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
                    int32_t num_outputs, const uint8_t* options, int32_t options_size);
int32_t scale_clamp_f32(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
                        int32_t num_outputs, const uint8_t* options, int32_t options_size);

int32_t clamp_scale(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
                    int32_t num_outputs, const uint8_t* options, int32_t options_size) {
  const int8_t* x;
  int8_t* y;
  int32_t lo;
  int32_t hi;
  int32_t mul;
  int32_t shift;
  int64_t n = 1;
  int64_t i;
  int32_t d;
  if (num_inputs != 1 || num_outputs != 1 || options == NULL || options_size != 4) {
    return 1;
  }
  if (inputs[0].dtype_code != UTVM_CUSTOM_INT || inputs[0].dtype_bits != 8U ||
      outputs[0].dtype_code != UTVM_CUSTOM_INT || outputs[0].dtype_bits != 8U) {
    return 2;
  }
  lo = (int32_t)(int8_t)options[0];
  hi = (int32_t)(int8_t)options[1];
  mul = (int32_t)options[2];
  shift = (int32_t)options[3];
  if (lo > hi) {
    return 42;
  }
  for (d = 0; d < inputs[0].ndim; ++d) {
    n *= inputs[0].shape[d];
  }
  x = (const int8_t*)inputs[0].data;
  y = (int8_t*)outputs[0].data;
  for (i = 0; i < n; ++i) {
    const int32_t v = ((int32_t)x[i] - inputs[0].zero_point) * mul;
    /* floor division by 2^shift, without right-shifting a negative number */
    const int32_t q = v >= 0 ? (v >> shift) : -((-v + (1 << shift) - 1) >> shift);
    int32_t r = q + outputs[0].zero_point;
    r = r < lo ? lo : (r > hi ? hi : r);
    y[i] = (int8_t)r;
  }
  return 0;
}

int32_t scale_clamp_f32(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
                        int32_t num_outputs, const uint8_t* options, int32_t options_size) {
  float p[3]; /* a, lo, hi (the host and the Cortex-M are little-endian) */
  const float* x;
  float* y;
  int64_t n = 1;
  int64_t i;
  int32_t d;
  if (num_inputs != 1 || num_outputs != 1 || options == NULL || options_size != (int32_t)sizeof(p)) {
    return 1;
  }
  if (inputs[0].dtype_code != UTVM_CUSTOM_FLOAT || inputs[0].dtype_bits != 32U) {
    return 2;
  }
  (void)memcpy(p, options, sizeof(p));
  for (d = 0; d < inputs[0].ndim; ++d) {
    n *= inputs[0].shape[d];
  }
  x = (const float*)inputs[0].data;
  y = (float*)outputs[0].data;
  for (i = 0; i < n; ++i) {
    const float v = x[i] * p[0];
    y[i] = v < p[1] ? p[1] : (v > p[2] ? p[2] : v);
  }
  return 0;
}
