/* Runs the signal kernels' fixed C (src/utvm/crt/src/kernels/signal) on vectors from test_signal_kernels.py.
 *
 * "signal_kernels.h" is written by the pytest: every signal helper exactly as the code generator emits it (the
 * runtime files verbatim, each FFT template instantiated for int16, int32 and float). This program reads
 * requests from the file named by argv[1] and prints one line of results per request:
 *
 *   msb32 N x...            signal_msb32 of each x (uint32)
 *   sqrt64 N x...           signal_sqrt64 of each x (uint64)
 *   log32 SCALE N x...      signal_log32(x, SCALE) of each x (uint32)
 *   wdf L lut... N x...     signal_wdf(x, lut) of each x, with an int16 LUT of L entries
 *   shrink N x...           signal_pcan_shrink of each x (uint32)
 *   rfft T NFFT NST order... stages... tw... stw... x...    T = i16, i32, f32: signal_rfft_T of one row of
 *   irfft T NFFT NST order... stages... tw... stw... x...   NFFT (rfft) or NFFT + 2 (irfft) values
 *
 * The FFT tables are the ones the kernel bakes in (ncfft = NFFT / 2 leaf indices, 2 * NST stage entries,
 * 2 * ncfft twiddle and 2 * (ncfft / 2) super-twiddle values). Every buffer is heap-allocated with its exact
 * size, so AddressSanitizer reports any access outside it.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signal_kernels.h"

static FILE* g_in;

static void fail(const char* what) {
  fprintf(stderr, "test_signal_kernels: %s\n", what);
  exit(2);
}

static int64_t read_i64(void) {
  int64_t v;
  if (fscanf(g_in, "%" SCNd64, &v) != 1) {
    fail("expected an integer");
  }
  return v;
}

static uint64_t read_u64(void) {
  uint64_t v;
  if (fscanf(g_in, "%" SCNu64, &v) != 1) {
    fail("expected an unsigned integer");
  }
  return v;
}

static double read_f64(void) {
  double v;
  if (fscanf(g_in, "%lf", &v) != 1) {
    fail("expected a number");
  }
  return v;
}

static void* alloc(size_t count, size_t size) {
  void* p = calloc(count == 0u ? 1u : count, size);
  if (p == NULL) {
    fail("out of memory");
  }
  return p;
}

static int32_t* read_i32_array(int32_t n) {
  int32_t* a = (int32_t*)alloc((size_t)n, sizeof(int32_t));
  int32_t i;
  for (i = 0; i < n; ++i) {
    a[i] = (int32_t)read_i64();
  }
  return a;
}

static void scalar_request(const char* op) {
  int32_t n;
  int32_t i;
  uint32_t scale = 0u;
  int16_t* lut = NULL;
  if (strcmp(op, "log32") == 0) {
    scale = (uint32_t)read_u64();
  } else if (strcmp(op, "wdf") == 0) {
    const int32_t len = (int32_t)read_i64();
    lut = (int16_t*)alloc((size_t)len, sizeof(int16_t));
    for (i = 0; i < len; ++i) {
      lut[i] = (int16_t)read_i64();
    }
  }
  n = (int32_t)read_i64();
  for (i = 0; i < n; ++i) {
    const uint64_t x = read_u64();
    uint64_t r;
    if (strcmp(op, "msb32") == 0) {
      r = signal_msb32((uint32_t)x);
    } else if (strcmp(op, "sqrt64") == 0) {
      r = signal_sqrt64(x);
    } else if (strcmp(op, "log32") == 0) {
      r = signal_log32((uint32_t)x, scale);
    } else if (strcmp(op, "wdf") == 0) {
      r = (uint64_t)(int64_t)signal_wdf((uint32_t)x, lut) & 0xFFFFFFFFu;
    } else if (strcmp(op, "shrink") == 0) {
      r = signal_pcan_shrink((uint32_t)x);
    } else {
      fail("unknown request");
      return;
    }
    printf("%s%" PRIu64, i == 0 ? "" : " ", r);
  }
  printf("\n");
  free(lut);
}

/* One element type's FFT request: read the tables and the row as T, run, print. */
#define FFT_REQUEST(SFX, T, READ, PRINT)                                                                  \
  static void fft_request_##SFX(int inverse) {                                                          \
    const int32_t nfft = (int32_t)read_i64();                                                           \
    const int32_t nst = (int32_t)read_i64();                                                            \
    const int32_t ncfft = nfft / 2;                                                                     \
    const int32_t n_in = inverse ? nfft + 2 : nfft;                                                     \
    const int32_t n_out = inverse ? nfft : nfft + 2;                                                    \
    int32_t* order = read_i32_array(ncfft);                                                             \
    int32_t* stages = read_i32_array(2 * nst);                                                          \
    T* tw = (T*)alloc((size_t)(2 * ncfft), sizeof(T));                                                  \
    T* stw = (T*)alloc((size_t)(2 * (ncfft / 2)), sizeof(T));                                           \
    T* x = (T*)alloc((size_t)n_in, sizeof(T));                                                          \
    T* y = (T*)alloc((size_t)n_out, sizeof(T));                                                         \
    T* tmp = (T*)alloc((size_t)nfft, sizeof(T));                                                        \
    int32_t i;                                                                                          \
    for (i = 0; i < 2 * ncfft; ++i) {                                                                   \
      tw[i] = (T)READ();                                                                                \
    }                                                                                                   \
    for (i = 0; i < 2 * (ncfft / 2); ++i) {                                                             \
      stw[i] = (T)READ();                                                                               \
    }                                                                                                   \
    for (i = 0; i < n_in; ++i) {                                                                        \
      x[i] = (T)READ();                                                                                 \
    }                                                                                                   \
    if (inverse) {                                                                                      \
      signal_irfft_##SFX(x, y, tmp, ncfft, order, stages, nst, tw, stw);                                \
    } else {                                                                                            \
      signal_rfft_##SFX(x, y, tmp, ncfft, order, stages, nst, tw, stw);                                 \
    }                                                                                                   \
    for (i = 0; i < n_out; ++i) {                                                                       \
      printf(i == 0 ? PRINT : " " PRINT, y[i]);                                                         \
    }                                                                                                   \
    printf("\n");                                                                                       \
    free(order);                                                                                        \
    free(stages);                                                                                       \
    free(tw);                                                                                           \
    free(stw);                                                                                          \
    free(x);                                                                                            \
    free(y);                                                                                            \
    free(tmp);                                                                                          \
  }

FFT_REQUEST(i16, int16_t, read_i64, "%d")
FFT_REQUEST(i32, int32_t, read_i64, "%" PRId32)
FFT_REQUEST(f32, float, read_f64, "%.9g")

int main(int argc, char** argv) {
  char op[16];
  char type[8];
  if (argc != 2) {
    fail("usage: test_signal_kernels REQUESTS");
  }
  g_in = fopen(argv[1], "r");
  if (g_in == NULL) {
    fail("cannot open the requests");
  }
  while (fscanf(g_in, "%15s", op) == 1) {
    if (strcmp(op, "rfft") == 0 || strcmp(op, "irfft") == 0) {
      const int inverse = op[0] == 'i';
      if (fscanf(g_in, "%7s", type) != 1) {
        fail("expected an element type");
      }
      if (strcmp(type, "i16") == 0) {
        fft_request_i16(inverse);
      } else if (strcmp(type, "i32") == 0) {
        fft_request_i32(inverse);
      } else if (strcmp(type, "f32") == 0) {
        fft_request_f32(inverse);
      } else {
        fail("unknown element type");
      }
    } else {
      scalar_request(op);
    }
  }
  fclose(g_in);
  return 0;
}
