/*
 * test_host_platform.c -- the POSIX port (src/utvm/crt/host/platform.c): every TVMPlatform* hook.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/platform.h>

static size_t format(char* buf, size_t size, const char* fmt, ...) {
  va_list args;
  size_t n;
  va_start(args, fmt);
  n = TVMPlatformFormatMessage(buf, size, fmt, args);
  va_end(args);
  return n;
}

static void format_message_truncates(void** state) {
  char buf[8];
  (void)state;
  memset(buf, 'x', sizeof(buf));
  assert_int_equal(format(buf, sizeof(buf), "%d-%s", 12, "ab"), 5);
  assert_string_equal(buf, "12-ab");
  assert_int_equal(format(buf, sizeof(buf), "%s", "0123456789"), 7);
  assert_string_equal(buf, "0123456");
  assert_int_equal(format(buf, 1, "%s", "abc"), 0);
  assert_int_equal(buf[0], '\0');
}

static void memory_is_aligned_and_usable(void** state) {
  DLDevice cpu = {kDLCPU, 0};
  void* p[5];
  const size_t sizes[5] = {0, 1, 13, 4096, 100000};
  int i;
  (void)state;
  for (i = 0; i < 5; i++) {
    assert_int_equal(TVMPlatformMemoryAllocate(sizes[i], cpu, &p[i]), kTvmErrorNoError);
    assert_non_null(p[i]);
    assert_int_equal((uintptr_t)p[i] % TVM_CRT_ALLOC_ALIGNMENT_BYTES, 0);
    memset(p[i], 0xab, sizes[i]);
  }
  assert_true(p[0] != p[1]);
  for (i = 0; i < 5; i++) {
    assert_int_equal(TVMPlatformMemoryFree(p[i], cpu), kTvmErrorNoError);
  }
  assert_int_equal(TVMPlatformMemoryAllocate(SIZE_MAX / 2, cpu, &p[0]), kTvmErrorPlatformNoMemory);
  assert_null(p[0]);
}

static void timer_measures_and_checks_state(void** state) {
  double t = -1.0;
  volatile unsigned long spin = 0;
  unsigned long i;
  (void)state;
  assert_int_equal(TVMPlatformInitialize(), kTvmErrorNoError);
  assert_int_equal(TVMPlatformTimerStop(&t), kTvmErrorPlatformTimerBadState);
  assert_int_equal(TVMPlatformTimerStart(), kTvmErrorNoError);
  assert_int_equal(TVMPlatformTimerStart(), kTvmErrorPlatformTimerBadState);
  for (i = 0; i < 2000000UL; i++) {
    spin += i;
  }
  assert_int_equal(TVMPlatformTimerStop(&t), kTvmErrorNoError);
  assert_true(t > 0.0 && t < 10.0);
  assert_int_equal(TVMPlatformTimerStop(&t), kTvmErrorPlatformTimerBadState);
  assert_int_equal(TVMPlatformBeforeMeasurement(), kTvmErrorNoError);
  assert_int_equal(TVMPlatformAfterMeasurement(), kTvmErrorNoError);
}

static void random_bytes_vary(void** state) {
  uint8_t a[64], b[64];
  int i, zeros = 0;
  (void)state;
  memset(a, 0, sizeof(a));
  memset(b, 0, sizeof(b));
  assert_int_equal(TVMPlatformGenerateRandom(a, sizeof(a)), kTvmErrorNoError);
  assert_int_equal(TVMPlatformGenerateRandom(b, sizeof(b)), kTvmErrorNoError);
  assert_memory_not_equal(a, b, sizeof(a));
  for (i = 0; i < 64; i++) {
    zeros += a[i] == 0;
  }
  assert_true(zeros < 16);
  assert_int_equal(TVMPlatformGenerateRandom(a, 0), kTvmErrorNoError);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(format_message_truncates),
      cmocka_unit_test(memory_is_aligned_and_usable),
      cmocka_unit_test(timer_measures_and_checks_state),
      cmocka_unit_test(random_bytes_vary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
