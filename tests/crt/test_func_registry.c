/*
 * test_func_registry.c -- TVMFuncRegistry (const, flash-style) and TVMMutableFuncRegistry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/func_registry.h>

static int fn_a(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {
  (void)a; (void)t; (void)n; (void)r; (void)rt; (void)h;
  return 1;
}
static int fn_b(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {
  (void)a; (void)t; (void)n; (void)r; (void)rt; (void)h;
  return 2;
}
static int fn_c(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {
  (void)a; (void)t; (void)n; (void)r; (void)rt; (void)h;
  return 3;
}

/* A registry exactly as generated code writes it: const, so it can live in flash. */
static const char kConstNames[] = "\x03\x00" "add\0" "multiply\0" "tvmgen_default_run\0";
static const TVMBackendPackedCFunc kConstFuncs[] = {fn_a, fn_b, fn_c};
static const TVMFuncRegistry kConstRegistry = {kConstNames, kConstFuncs};

static void const_lookup(void** state) {
  tvm_function_index_t idx = 99;
  TVMBackendPackedCFunc f = NULL;
  (void)state;
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(&kConstRegistry), 3);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "add", &idx), kTvmErrorNoError);
  assert_int_equal(idx, 0);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "multiply", &idx), kTvmErrorNoError);
  assert_int_equal(idx, 1);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "tvmgen_default_run", &idx), kTvmErrorNoError);
  assert_int_equal(idx, 2);
  assert_int_equal(TVMFuncRegistry_GetByIndex(&kConstRegistry, 2, &f), kTvmErrorNoError);
  assert_ptr_equal(f, fn_c);
  assert_int_equal(f(NULL, NULL, 0, NULL, NULL, NULL), 3);
}

static void const_lookup_misses(void** state) {
  tvm_function_index_t idx = 77;
  TVMBackendPackedCFunc f = fn_a;
  (void)state;
  /* prefixes, extensions, the empty name and case variants are not matches */
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "ad", &idx), kTvmErrorFunctionNameNotFound);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "addx", &idx), kTvmErrorFunctionNameNotFound);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "", &idx), kTvmErrorFunctionNameNotFound);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "ADD", &idx), kTvmErrorFunctionNameNotFound);
  assert_int_equal(idx, 77);
  assert_int_equal(TVMFuncRegistry_GetByIndex(&kConstRegistry, 3, &f), kTvmErrorFunctionIndexInvalid);
  assert_int_equal(TVMFuncRegistry_GetByIndex(&kConstRegistry, 0xffff, &f), kTvmErrorFunctionIndexInvalid);
  assert_ptr_equal(f, fn_a);
  assert_int_equal(TVMFuncRegistry_Lookup(NULL, "add", &idx), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, NULL, &idx), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMFuncRegistry_Lookup(&kConstRegistry, "add", NULL), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMFuncRegistry_GetByIndex(&kConstRegistry, 0, NULL), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(NULL), 0);
}

static void const_count_is_u16_le(void** state) {
  /* 258 one-letter-ish names: the count's high byte matters. */
  static char names[2 + 258 * 4 + 1];
  static TVMBackendPackedCFunc funcs[258];
  TVMFuncRegistry reg;
  size_t off = 2;
  int i;
  tvm_function_index_t idx = 0;
  (void)state;
  names[0] = (char)(258 & 0xff);
  names[1] = (char)(258 >> 8);
  for (i = 0; i < 258; i++) {
    off += (size_t)sprintf(&names[off], "f%02x", i & 0xff) + 1U;
    funcs[i] = (i == 257) ? fn_b : fn_a;
  }
  names[off] = '\0';
  reg.names = names;
  reg.funcs = funcs;
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(&reg), 258);
  /* "f01" occurs at 1 and 257: the first wins; index 257 is reachable by GetByIndex. */
  assert_int_equal(TVMFuncRegistry_Lookup(&reg, "f01", &idx), kTvmErrorNoError);
  assert_int_equal(idx, 1);
  assert_int_equal(TVMFuncRegistry_Lookup(&reg, "fff", &idx), kTvmErrorNoError);
  assert_int_equal(idx, 255);
}

static void mutable_layout_is_the_names_blob(void** state) {
  uint8_t buffer[256];
  TVMMutableFuncRegistry reg;
  static const char kExpected[] = "\x02\x00" "ab\0" "c\0";  /* + implicit final NUL */
  (void)state;
  memset(buffer, 0xa5, sizeof(buffer));
  assert_int_equal(TVMMutableFuncRegistry_Create(&reg, buffer, sizeof(buffer)), kTvmErrorNoError);
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(&reg.registry), 0);
  assert_memory_equal(reg.registry.names, "\0\0\0", 3);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "ab", fn_a, 0), kTvmErrorNoError);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "c", fn_b, 0), kTvmErrorNoError);
  assert_ptr_equal(reg.registry.names, (const char*)buffer);
  assert_memory_equal(buffer, kExpected, sizeof(kExpected)); /* sizeof includes the final NUL */
  /* pointers sit at the back of the buffer, in index order */
  assert_true((const uint8_t*)reg.registry.funcs + 2 * sizeof(TVMBackendPackedCFunc) <= buffer + sizeof(buffer));
  assert_true((const uint8_t*)reg.registry.funcs + 3 * sizeof(TVMBackendPackedCFunc) > buffer + sizeof(buffer));
  assert_ptr_equal(reg.registry.funcs[0], fn_a);
  assert_ptr_equal(reg.registry.funcs[1], fn_b);
  assert_true(reg.max_functions >= 2);
}

static void mutable_set_lookup_override(void** state) {
  uint8_t buffer[200];
  TVMMutableFuncRegistry reg;
  tvm_function_index_t idx = 0;
  TVMBackendPackedCFunc f = NULL;
  (void)state;
  assert_int_equal(TVMMutableFuncRegistry_Create(&reg, buffer, sizeof(buffer)), kTvmErrorNoError);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "first", fn_a, 0), kTvmErrorNoError);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "second", fn_b, 0), kTvmErrorNoError);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "first", fn_c, 0), kTvmErrorFunctionAlreadyDefined);
  assert_int_equal(TVMFuncRegistry_Lookup(&reg.registry, "first", &idx), kTvmErrorNoError);
  assert_int_equal(TVMFuncRegistry_GetByIndex(&reg.registry, idx, &f), kTvmErrorNoError);
  assert_ptr_equal(f, fn_a); /* unchanged after the refused set */
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "first", fn_c, 1), kTvmErrorNoError);
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(&reg.registry), 2);
  assert_int_equal(TVMFuncRegistry_Lookup(&reg.registry, "first", &idx), kTvmErrorNoError);
  assert_int_equal(idx, 0); /* an override keeps the index */
  assert_int_equal(TVMFuncRegistry_GetByIndex(&reg.registry, 0, &f), kTvmErrorNoError);
  assert_ptr_equal(f, fn_c);
  assert_int_equal(TVMFuncRegistry_GetByIndex(&reg.registry, 1, &f), kTvmErrorNoError);
  assert_ptr_equal(f, fn_b);
}

static void mutable_rejects_bad_names(void** state) {
  uint8_t buffer[512];
  char long_name[TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES + 1];
  TVMMutableFuncRegistry reg;
  tvm_function_index_t idx = 0;
  (void)state;
  assert_int_equal(TVMMutableFuncRegistry_Create(&reg, buffer, sizeof(buffer)), kTvmErrorNoError);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "", fn_a, 0), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, NULL, fn_a, 0), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "x", NULL, 0), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMMutableFuncRegistry_Set(NULL, "x", fn_a, 0), kTvmErrorPlatformInvalidArgument);
  /* TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES includes the NUL: MAX - 1 characters fit, MAX do not. */
  memset(long_name, 'n', sizeof(long_name));
  long_name[TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES] = '\0';
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, long_name, fn_a, 0), kTvmErrorPlatformInvalidArgument);
  long_name[TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES - 1] = '\0';
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, long_name, fn_a, 0), kTvmErrorNoError);
  assert_int_equal(TVMFuncRegistry_Lookup(&reg.registry, long_name, &idx), kTvmErrorNoError);
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(&reg.registry), 1);
}

/* Fill a registry until it is full; every function stays reachable, nothing is written outside the
 * buffer (guard bytes around it), and the full registry is unchanged by the refused Set. */
static void fill_until_full(size_t size, size_t offset) {
  static uint8_t storage[1024 + 64];
  uint8_t* buffer = &storage[32 + offset];
  TVMMutableFuncRegistry reg;
  char name[16];
  int n = 0;
  int i;
  tvm_crt_error_t err = kTvmErrorNoError;
  memset(storage, 0xee, sizeof(storage));
  assert_int_equal(TVMMutableFuncRegistry_Create(&reg, buffer, size), kTvmErrorNoError);
  while (err == kTvmErrorNoError) {
    snprintf(name, sizeof(name), "fn%d", n);
    err = TVMMutableFuncRegistry_Set(&reg, name, (n % 2) ? fn_a : fn_b, 0);
    if (err == kTvmErrorNoError) {
      n++;
    }
  }
  assert_int_equal(err, kTvmErrorFunctionRegistryFull);
  assert_true(n > 0);
  assert_true((size_t)n <= reg.max_functions);
  /* Full is sticky and harmless. */
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "another", fn_c, 0), kTvmErrorFunctionRegistryFull);
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(&reg.registry), n);
  for (i = 0; i < n; i++) {
    tvm_function_index_t idx = 0;
    TVMBackendPackedCFunc f = NULL;
    snprintf(name, sizeof(name), "fn%d", i);
    assert_int_equal(TVMFuncRegistry_Lookup(&reg.registry, name, &idx), kTvmErrorNoError);
    assert_int_equal(idx, i);
    assert_int_equal(TVMFuncRegistry_GetByIndex(&reg.registry, idx, &f), kTvmErrorNoError);
    assert_ptr_equal(f, (i % 2) ? fn_a : fn_b);
  }
  /* Overriding still works when full (no new space needed). */
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "fn0", fn_c, 1), kTvmErrorNoError);
  for (i = 0; i < 32 + (int)offset; i++) {
    assert_int_equal(storage[i], 0xee);
  }
  for (i = (int)(32 + offset + size); i < (int)sizeof(storage); i++) {
    assert_int_equal(storage[i], 0xee);
  }
}

static void mutable_full_is_an_error(void** state) {
  size_t offset;
  (void)state;
  for (offset = 0; offset < 8; offset++) { /* any buffer alignment */
    fill_until_full(100, offset);
    fill_until_full(1024, offset);
    fill_until_full(64 + offset * 3, offset);
  }
}

static void mutable_buffer_too_small(void** state) {
  uint8_t buffer[64];
  TVMMutableFuncRegistry reg;
  (void)state;
  assert_int_equal(TVMMutableFuncRegistry_Create(&reg, buffer, 2), kTvmErrorBufferTooSmall);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "x", fn_a, 0), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMMutableFuncRegistry_Create(&reg, NULL, 64), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMMutableFuncRegistry_Create(NULL, buffer, 64), kTvmErrorPlatformInvalidArgument);
  /* The smallest buffer that works holds one 1-character name (alignment slack may allow a bit more),
   * and not a second function. */
  {
    size_t size;
    for (size = 1; size < sizeof(buffer); size++) {
      if (TVMMutableFuncRegistry_Create(&reg, buffer, size) == kTvmErrorNoError) {
        break;
      }
    }
    assert_true(size < sizeof(buffer));
    assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "x", fn_a, 0), kTvmErrorNoError);
    assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "y", fn_a, 0), kTvmErrorFunctionRegistryFull);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(const_lookup),
      cmocka_unit_test(const_lookup_misses),
      cmocka_unit_test(const_count_is_u16_le),
      cmocka_unit_test(mutable_layout_is_the_names_blob),
      cmocka_unit_test(mutable_set_lookup_override),
      cmocka_unit_test(mutable_rejects_bad_names),
      cmocka_unit_test(mutable_full_is_an_error),
      cmocka_unit_test(mutable_buffer_too_small),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
