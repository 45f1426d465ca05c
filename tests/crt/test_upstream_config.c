/*
 * test_upstream_config.c -- what the settings of an upstream microTVM crt_config.h do in the utvm CRT, built
 * with tests/crt/configs/upstream (TVM_CRT_DEBUG 0) and with the same file at TVM_CRT_DEBUG 1
 * (tests/crt/test_upstream_config_full.py):
 * - the page size (TVM_CRT_PAGE_BYTES, _LOG, _BITS) and the CRT's memory pool (TVM_CRT_LOG_VIRT_MEM_SIZE,
 *   TVM_CRT_VIRT_MEM_SIZE, TVM_CRT_MAX_PAGES) of the page allocator and of the host port's memory;
 * - the string bounds: module function names (TVM_CRT_MAX_STRLEN_FUNCTION_NAME, TVM_CRT_STRLEN_NAME) and
 *   model names (TVM_CRT_MAX_STRLEN_PARAM_NAME), refused past them naming the utvm limit;
 * - TVM_CRT_DEBUG: a debug build finds a broken page table, poisons freed pages, refuses a module with a
 *   missing function and a corrupt mutable registry, and logs registrations; a release build does none of it.
 * main() first prints the configuration as `config name=value ...` for the Python side to check.
 * Linked with libcommon, libmemory and the host port; it defines TVMPlatformLog to count log messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/func_registry.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/page_allocator.h>
#include <tvm/runtime/crt/platform.h>

#if TVM_CRT_MEMORY_POOL_BYTES == 0 || TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES == 0 || TVM_CRT_MAX_MODEL_NAME_BYTES == 0
#error "test_upstream_config.c needs a crt_config.h with a memory pool and both name bounds (configs/upstream)"
#endif

#define POOL_PAGES ((uint32_t)(TVM_CRT_MEMORY_POOL_BYTES >> TVM_CRT_PAGE_BITS))

/* ---- a log sink that counts ------------------------------------------------------------------------ */
static int g_debug_logs = 0;
static char g_last_log[256];

void TVMPlatformLog(int level, const char* message, size_t length) {
  (void)length;
  if (level == TVM_CRT_LOG_LEVEL_DEBUG) {
    g_debug_logs++;
  }
  (void)snprintf(g_last_log, sizeof(g_last_log), "%s", message);
}

static int noop(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)args; (void)codes; (void)n; (void)ret; (void)ret_code; (void)resource;
  return 0;
}

static int setup(void** state) {
  (void)state;
  g_debug_logs = 0;
  return ((TVMPlatformInitialize() == kTvmErrorNoError) && (TVMInitializeRuntime() == kTvmErrorNoError)) ? 0 : -1;
}

static void assert_last_error_has(const char* text) {
  if (strstr(TVMGetLastError(), text) == NULL) {
    fail_msg("TVMGetLastError() is '%s', expected it to contain '%s'", TVMGetLastError(), text);
  }
}

/* ---- memory ------------------------------------------------------------------------------------------ */
static void static_pool_has_the_configured_pages(void** state) {
  TVMPageAllocator alloc;
  void* all = NULL;
  void* one = NULL;
  (void)state;
  assert_int_equal(TVMPageAllocator_CreateStatic(&alloc), kTvmErrorNoError);
  assert_int_equal(alloc.num_pages, POOL_PAGES);
  assert_int_equal(TVMPageAllocator_LargestFreeRun(&alloc), POOL_PAGES);
  assert_int_equal(TVMPageAllocator_Allocate(&alloc, (size_t)TVM_CRT_MEMORY_POOL_BYTES, &all), kTvmErrorNoError);
  assert_int_equal((uintptr_t)all % TVM_CRT_ALLOC_ALIGNMENT_BYTES, 0);
  memset(all, 0x5a, (size_t)TVM_CRT_MEMORY_POOL_BYTES); /* the whole pool is there to write */
  assert_int_equal(TVMPageAllocator_Allocate(&alloc, 1U, &one), kTvmErrorPlatformNoMemory);
  assert_int_equal(TVMPageAllocator_Free(&alloc, all), kTvmErrorNoError);
  assert_int_equal(TVMPageAllocator_Allocate(&alloc, TVM_CRT_PAGE_SIZE_BYTES + 1U, &one), kTvmErrorNoError);
  assert_int_equal(alloc.num_free_pages, POOL_PAGES - 2U); /* a byte past a page takes a second one */
  assert_int_equal(TVMPageAllocator_Check(&alloc, NULL), kTvmErrorNoError);
}

static void host_port_allocates_from_the_pool(void** state) {
  DLDevice cpu = {kDLCPU, 0};
  void* p = NULL;
  void* q = NULL;
  (void)state;
  assert_int_equal(TVMPlatformMemoryAllocate((size_t)TVM_CRT_MEMORY_POOL_BYTES + 1U, cpu, &p),
                   kTvmErrorPlatformNoMemory);
  assert_null(p);
  assert_int_equal(TVMPlatformMemoryAllocate((size_t)TVM_CRT_MEMORY_POOL_BYTES / 2U, cpu, &p), kTvmErrorNoError);
  assert_int_equal((uintptr_t)p % TVM_CRT_ALLOC_ALIGNMENT_BYTES, 0);
  assert_int_equal(TVMPlatformMemoryAllocate((size_t)TVM_CRT_MEMORY_POOL_BYTES / 2U + 1U, cpu, &q),
                   kTvmErrorPlatformNoMemory);
  assert_int_equal(TVMPlatformMemoryFree(p, cpu), kTvmErrorNoError);
  assert_int_equal(TVMPlatformMemoryFree(p, cpu), kTvmErrorPlatformInvalidArgument); /* freed already */
  assert_int_equal(TVMPlatformMemoryFree(NULL, cpu), kTvmErrorNoError);
}

/* The table check finds an overwritten page table in every build; a debug build runs it by itself. */
static void broken_page_table_is_found(void** state) {
  static uint8_t buffer[64 * 1024 + 4096];
  TVMPageAllocator alloc;
  void* a = NULL;
  void* b = NULL;
  uint32_t bad = 0U;
  uint32_t saved;
  (void)state;
  assert_int_equal(TVMPageAllocator_Create(&alloc, buffer, sizeof(buffer)), kTvmErrorNoError);
  assert_true(alloc.num_pages >= 8U);
  assert_int_equal(TVMPageAllocator_Allocate(&alloc, 3U * TVM_CRT_PAGE_SIZE_BYTES, &a), kTvmErrorNoError);
  saved = alloc.page_table[1];
  alloc.page_table[1] = 0U; /* a stray write cuts the run short */
  assert_int_equal(TVMPageAllocator_Check(&alloc, &bad), kTvmErrorPlatformCheckFailure);
  assert_int_equal(bad, 1U);
#if TVM_CRT_DEBUG
  assert_int_equal(TVMPageAllocator_Allocate(&alloc, 1U, &b), kTvmErrorPlatformCheckFailure);
  assert_null(b);
  assert_int_equal(TVMPageAllocator_Free(&alloc, a), kTvmErrorPlatformCheckFailure);
#else
  assert_int_equal(TVMPageAllocator_Allocate(&alloc, 1U, &b), kTvmErrorNoError); /* not looked at */
#endif
  alloc.page_table[1] = saved;
  assert_int_equal(TVMPageAllocator_Check(&alloc, NULL), kTvmErrorNoError);
  alloc.num_free_pages++;
  assert_int_equal(TVMPageAllocator_Check(&alloc, &bad), kTvmErrorPlatformCheckFailure);
  assert_int_equal(bad, alloc.num_pages); /* the count, not a page */
  alloc.num_free_pages--;
  assert_int_equal(TVMPageAllocator_Free(&alloc, a), kTvmErrorNoError);
  /* Freed pages: poisoned in a debug build, left alone in a release build. */
  assert_int_equal(((const uint8_t*)a)[0], TVM_CRT_DEBUG ? TVM_CRT_DEBUG_FREED_BYTE : 0x00U);
  assert_int_equal(TVMPageAllocator_Check(NULL, &bad), kTvmErrorPlatformInvalidArgument);
}

/* ---- names -------------------------------------------------------------------------------------------- */
static char g_long_name[TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES + 8];
static char g_names[4 + TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES + 8];
static TVMBackendPackedCFunc g_funcs[1] = {noop};
static TVMFuncRegistry g_registry = {g_names, g_funcs};
static TVMModule g_module = {&g_registry};

static void module_function_names_are_bounded(void** state) {
  TVMModuleHandle mod = NULL;
  TVMFunctionHandle f = NULL;
  const size_t longest = (size_t)TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES - 1U;
  (void)state;
  /* A module whose one function has the longest name the bound allows. */
  memset(g_long_name, 'f', longest);
  g_long_name[longest] = '\0';
  memset(g_names, 0, sizeof(g_names));
  g_names[0] = 1;
  memcpy(&g_names[2], g_long_name, longest + 1U);
  assert_int_equal(TVMModCreateFromCModule(&g_module, &mod), kTvmErrorNoError);
  assert_int_equal(TVMModGetFunction(mod, g_long_name, 0, &f), 0);
  assert_non_null(f);
  g_long_name[longest] = 'f';
  g_long_name[longest + 1U] = '\0';
  assert_int_equal(TVMModGetFunction(mod, g_long_name, 0, &f), kTvmErrorPlatformInvalidArgument);
  assert_null(f);
  assert_last_error_has("TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES");
  assert_int_equal(TVMModGetFunction(mod, "f", 0, &f), kTvmErrorFunctionNameNotFound);
}

static void model_names_are_bounded(void** state) {
  char name[TVM_CRT_MAX_MODEL_NAME_BYTES + 1];
  TVMFunctionHandle system_lib = NULL;
  TVMValue arg;
  TVMValue ret;
  int code = kTVMStr;
  int ret_code = 0;
  (void)state;
  assert_int_equal(TVMFuncGetGlobal("runtime.SystemLib", &system_lib), 0);
  memset(name, 'm', sizeof(name) - 1U);
  name[sizeof(name) - 1U] = '\0'; /* TVM_CRT_MAX_MODEL_NAME_BYTES characters: one too many */
  arg.v_str = name;
  assert_int_equal(TVMFuncCall(system_lib, &arg, &code, 1, &ret, &ret_code), kTvmErrorFunctionCallInvalidArg);
  assert_last_error_has("TVM_CRT_MAX_MODEL_NAME_BYTES");
  name[sizeof(name) - 2U] = '\0'; /* within the bound: looked up, and absent */
  assert_int_equal(TVMFuncCall(system_lib, &arg, &code, 1, &ret, &ret_code), kTvmErrorSystemLibMissing);
  assert_last_error_has("no model named");
}

/* ---- the debug build's checks of modules and registries, and its logs ---------------------------------- */
static const char kHoleNames[] = "\x02\x00" "ok\0" "hole\0";
static const TVMBackendPackedCFunc kHoleFuncs[] = {noop, NULL};
static const TVMFuncRegistry kHoleRegistry = {kHoleNames, kHoleFuncs};
static const TVMModule kHoleModule = {&kHoleRegistry};

static void module_with_a_missing_function(void** state) {
  TVMModuleHandle mod = NULL;
  (void)state;
#if TVM_CRT_DEBUG
  assert_int_equal(TVMModCreateFromCModule(&kHoleModule, &mod), kTvmErrorPlatformCheckFailure);
  assert_null(mod);
  assert_last_error_has("module function 1 of 2 ('hole') has no function");
#else
  assert_int_equal(TVMModCreateFromCModule(&kHoleModule, &mod), kTvmErrorNoError);
#endif
}

static void corrupt_mutable_registry(void** state) {
  uint8_t buffer[128];
  TVMMutableFuncRegistry reg;
  (void)state;
  assert_int_equal(TVMMutableFuncRegistry_Create(&reg, buffer, sizeof(buffer)), kTvmErrorNoError);
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "a", noop, 0), kTvmErrorNoError);
  buffer[0] = 9; /* the count says 9 names */
#if TVM_CRT_DEBUG
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "b", noop, 0), kTvmErrorPlatformCheckFailure);
  buffer[0] = 1;
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "b", noop, 0), kTvmErrorNoError);
#else
  buffer[0] = 1;
  assert_int_equal(TVMMutableFuncRegistry_Set(&reg, "b", noop, 0), kTvmErrorNoError);
#endif
  assert_int_equal(TVMFuncRegistry_GetNumFuncs(&reg.registry), 2);
}

static void registrations_are_logged_in_a_debug_build(void** state) {
  TVMBackendPackedCFunc func = noop;
  TVMFunctionHandle handle = NULL;
  (void)state;
  memcpy(&handle, &func, sizeof(handle));
  g_debug_logs = 0;
  assert_int_equal(TVMFuncRegisterGlobal("demo.logged", handle, 0), 0);
#if TVM_CRT_DEBUG
  assert_int_equal(g_debug_logs, 1);
  assert_string_equal(g_last_log, "TVMFuncRegisterGlobal: 'demo.logged'");
#else
  assert_int_equal(g_debug_logs, 0);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(static_pool_has_the_configured_pages, setup),
      cmocka_unit_test_setup(host_port_allocates_from_the_pool, setup),
      cmocka_unit_test_setup(broken_page_table_is_found, setup),
      cmocka_unit_test_setup(module_function_names_are_bounded, setup),
      cmocka_unit_test_setup(model_names_are_bounded, setup),
      cmocka_unit_test_setup(module_with_a_missing_function, setup),
      cmocka_unit_test_setup(corrupt_mutable_registry, setup),
      cmocka_unit_test_setup(registrations_are_logged_in_a_debug_build, setup),
  };
  printf("config upstream=%d debug=%d log_level=%d page_bytes=%lu pool_bytes=%lu module_function_name=%d "
         "model_name=%d max_args=%d function_name=%d align=%d\n",
         UTVM_CRT_CONFIG_IS_UPSTREAM, TVM_CRT_DEBUG, TVM_CRT_LOG_LEVEL, (unsigned long)TVM_CRT_PAGE_SIZE_BYTES,
         (unsigned long)TVM_CRT_MEMORY_POOL_BYTES, TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES,
         TVM_CRT_MAX_MODEL_NAME_BYTES, TVM_CRT_MAX_ARGS, TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES,
         TVM_CRT_ALLOC_ALIGNMENT_BYTES);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
