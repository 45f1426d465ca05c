/*
 * fuzz_minrpc.c -- libFuzzer target: the MinRPC request parser and executor (TVMMinRpcServer) with the
 * real CRT runtime, on arbitrary request bodies (SECURITY.md invariants 1-5).
 *
 * Input: messages [u8 flags][u16 len LE][len bytes], each the body of one session message. flags bits
 * 0-1: framing verdict (0 good, 1 bad CRC, 2 cut short by a restart); bit 2: feed in two pieces. Before a
 * message is fed, every 8-byte little-endian placeholder 0xA1A1A1A1A1A1A1Ak (k = 0..3) becomes the address
 * of RPC allocation k (made at the start of each run), and 0xB1B1B1B1B1B1B1Bk the handle of test function
 * k, so the fuzzer reaches the paths behind the handle and range checks.
 * Checked: each reply is well formed (start(size) then exactly size bytes, u64 length = size - 8, code
 * Return/Exception/CopyAck) and at most one reply per message; memory is only touched inside
 * allocations (ASan: allocations are heap blocks with redzones); the platform never aborts.
 * The platform hooks live here: memory capped (64 KiB per block), a fake timer.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/platform.h>

#include "minrpc_server.h"

#define CHECK(cond)   \
  do {                \
    if (!(cond)) {    \
      abort();        \
    }                 \
  } while (0)

/* ---------------------------------------------------------------------------------------------- */
/* Platform hooks                                                                                   */

#define MAX_BLOCK (64 * 1024)

void TVMPlatformAbort(tvm_crt_error_t code) {
  (void)code;
  abort(); /* the server must never get here: a crash for the fuzzer */
}
size_t TVMPlatformFormatMessage(char* out, size_t size, const char* fmt, va_list args) {
  int n = vsnprintf(out, size, fmt, args);
  if (n < 0) {
    out[0] = '\0';
    return 0;
  }
  return ((size_t)n >= size) ? size - 1 : (size_t)n;
}
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  if (num_bytes > MAX_BLOCK) {
    return kTvmErrorPlatformNoMemory;
  }
  *out_ptr = malloc(num_bytes == 0 ? 1 : num_bytes);
  return (*out_ptr == NULL) ? kTvmErrorPlatformNoMemory : kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  free(ptr);
  return kTvmErrorNoError;
}
static double g_clock;
tvm_crt_error_t TVMPlatformTimerStart(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMPlatformTimerStop(double* elapsed) {
  g_clock += 1e-3;
  *elapsed = 1e-3;
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    buffer[i] = (uint8_t)(i * 31 + 7);
  }
  return kTvmErrorNoError;
}
tvm_crt_error_t TVMPlatformBeforeMeasurement(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMPlatformAfterMeasurement(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMPlatformInitialize(void) { return kTvmErrorNoError; }

/* ---------------------------------------------------------------------------------------------- */
/* Test functions                                                                                   */

static int fn_echo(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  (void)res;
  if (n < 1 || codes[0] != kTVMArgInt || args[0].v_int64 < 0 || args[0].v_int64 >= n) {
    TVMAPISetLastError("echo: bad index");
    return -1;
  }
  *ret = args[args[0].v_int64];
  *ret_code = codes[args[0].v_int64];
  if (*ret_code == kTVMNDArrayHandle) { /* cannot arrive; keep the promise of the return path */
    return -1;
  }
  return 0;
}
static int fn_make_array(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  TVMArrayHandle a = NULL;
  int64_t shape[1];
  (void)res;
  if (n != 1 || codes[0] != kTVMArgInt || args[0].v_int64 < 0 || args[0].v_int64 > 1024) {
    TVMAPISetLastError("make_array: expects (n <= 1024)");
    return -1;
  }
  shape[0] = args[0].v_int64;
  if (TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &a) != 0) {
    return -1;
  }
  memset(a->data, 0x3C, (size_t)(shape[0] * 4));
  ret->v_handle = a;
  *ret_code = kTVMNDArrayHandle;
  return 0;
}
/* ret_type(tc): a zero value under type code tc, for the codes whose zero value is harmless. */
static int fn_ret_type(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  static const int kSafe[] = {0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 14, 15, 99};
  (void)res;
  if (n != 1 || codes[0] != kTVMArgInt) {
    return -1;
  }
  ret->v_int64 = 0;
  *ret_code = kSafe[(uint64_t)args[0].v_int64 % (sizeof(kSafe) / sizeof(kSafe[0]))];
  return 0;
}
static int fn_stub(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)ret_code;
  (void)res;
  TVMAPISetLastError("stubbed out in the fuzzer (unbounded run time)");
  return -1;
}

static TVMFunctionHandle as_handle(TVMBackendPackedCFunc f) {
  TVMFunctionHandle h;
  memcpy(&h, &f, sizeof(h));
  return h;
}

/* ---------------------------------------------------------------------------------------------- */
/* Reply checking writer                                                                            */

static struct {
  int in_reply;
  int replies;
  uint32_t size;
  uint32_t got;
  uint8_t head[12];
} g_reply;

static tvm_crt_error_t w_start(void* ctx, uint32_t size) {
  (void)ctx;
  CHECK(!g_reply.in_reply);
  CHECK(size >= 12);
  g_reply.in_reply = 1;
  g_reply.size = size;
  g_reply.got = 0;
  g_reply.replies++;
  return kTvmErrorNoError;
}
static tvm_crt_error_t w_write(void* ctx, const uint8_t* data, size_t n) {
  size_t i;
  (void)ctx;
  CHECK(g_reply.in_reply);
  CHECK(n <= g_reply.size - g_reply.got);
  for (i = 0; i < n && g_reply.got + i < 12; ++i) {
    g_reply.head[g_reply.got + i] = data[i];
  }
  g_reply.got += (uint32_t)n;
  return kTvmErrorNoError;
}
static tvm_crt_error_t w_finish(void* ctx) {
  uint64_t nbytes = 0;
  int32_t code;
  int i;
  (void)ctx;
  CHECK(g_reply.in_reply && g_reply.got == g_reply.size);
  for (i = 7; i >= 0; --i) {
    nbytes = (nbytes << 8) | g_reply.head[i];
  }
  CHECK(nbytes == g_reply.size - 8);
  code = (int32_t)((uint32_t)g_reply.head[8] | ((uint32_t)g_reply.head[9] << 8) | ((uint32_t)g_reply.head[10] << 16) |
                   ((uint32_t)g_reply.head[11] << 24));
  CHECK(code == kTVMMinRpcReturn || code == kTVMMinRpcException || code == kTVMMinRpcCopyAck);
  g_reply.in_reply = 0;
  return kTvmErrorNoError;
}
static void w_log(void* ctx, const char* text, size_t n) {
  (void)ctx;
  CHECK(!g_reply.in_reply);
  CHECK(strlen(text) == n);
}

/* ---------------------------------------------------------------------------------------------- */

static TVMMinRpcServer g_server;
static uint8_t g_buffer[TVM_CRT_MAX_PACKET_SIZE_BYTES];
static int g_started;
static uint64_t g_alloc[4];
static uint64_t g_funcs[4];

static void put_u64(uint8_t* p, uint64_t v) {
  int i;
  for (i = 0; i < 8; ++i) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}

/* Run one message through the server; returns the number of replies. */
static int run_message(uint8_t* body, size_t len, int verdict_kind, int split) {
  tvm_crt_error_t verdict = verdict_kind == 1   ? kTvmErrorFramingCrcMismatch
                            : verdict_kind == 2 ? kTvmErrorFramingPayloadIncomplete
                                                : kTvmErrorNoError;
  int before = g_reply.replies;
  tvm_crt_error_t err;
  if (TVMMinRpcServer_MessageStart(&g_server, (uint32_t)len) != kTvmErrorNoError) {
    return 0; /* after Shutdown */
  }
  if (split && len > 1) {
    CHECK(TVMMinRpcServer_MessageData(&g_server, body, len / 2) == kTvmErrorNoError);
    CHECK(TVMMinRpcServer_MessageData(&g_server, &body[len / 2], len - len / 2) == kTvmErrorNoError);
  } else if (len > 0) {
    CHECK(TVMMinRpcServer_MessageData(&g_server, body, len) == kTvmErrorNoError);
  }
  err = TVMMinRpcServer_MessageEnd(&g_server, verdict);
  CHECK(err == kTvmErrorNoError || err == kTvmErrorPlatformShutdown);
  CHECK(!g_reply.in_reply);
  CHECK(g_reply.replies - before <= 1);
  return g_reply.replies - before;
}

/* DevAllocData(cpu, nbytes, 16, float32) -> handle, through the server itself. */
static uint64_t make_allocation(uint64_t nbytes) {
  static uint8_t body[64];
  size_t n = 0;
  int i;
  memset(body, 0, sizeof(body));
  n = 8;
  body[n] = 13; n += 4;                 /* code */
  body[n] = 4; n += 4;                  /* 4 args */
  body[n] = kDLDevice; n += 4;
  body[n] = kTVMArgInt; n += 4;
  body[n] = kTVMArgInt; n += 4;
  body[n] = kTVMDataType; n += 4;
  body[n] = kDLCPU; n += 8;             /* device cpu 0 */
  put_u64(&body[n], nbytes); n += 8;
  put_u64(&body[n], 16); n += 8;
  body[n] = kDLFloat; body[n + 1] = 32; body[n + 2] = 1; n += 8;
  uint8_t was_free[TVM_CRT_MAX_NDARRAYS];
  for (i = 0; i < TVM_CRT_MAX_NDARRAYS; ++i) {
    was_free[i] = (g_server.allocations[i].kind == kTVMMinRpcAllocFree);
  }
  put_u64(body, n - 8);
  CHECK(run_message(body, n, 0, 0) == 1);
  for (i = 0; i < TVM_CRT_MAX_NDARRAYS; ++i) {
    if (was_free[i] && g_server.allocations[i].kind != kTVMMinRpcAllocFree) {
      return (uint64_t)g_server.allocations[i].data;
    }
  }
  abort(); /* the allocation failed */
}

static void start_run(void) {
  TVMMinRpcReplyWriter w;
  static const struct {
    const char* name;
    TVMBackendPackedCFunc f;
  } kFunctions[] = {{"fuzz.echo", fn_echo}, {"fuzz.make_array", fn_make_array}, {"fuzz.ret_type", fn_ret_type}};
  size_t i;
  if (g_started) {
    TVMMinRpcServer_FreeAll(&g_server); /* before the runtime reset, so NDArrays are freed properly */
  }
  g_started = 1;
  CHECK(TVMInitializeRuntime() == kTvmErrorNoError);
  CHECK(TVMFuncRegisterGlobal("runtime.RPCTimeEvaluator", as_handle(fn_stub), 1) == 0);
  for (i = 0; i < 3; ++i) {
    void* h = NULL;
    CHECK(TVMFuncRegisterGlobal(kFunctions[i].name, as_handle(kFunctions[i].f), 1) == 0);
    CHECK(TVMFuncGetGlobal(kFunctions[i].name, &h) == 0);
    g_funcs[i] = (uint64_t)(uintptr_t)h;
  }
  {
    void* h = NULL;
    CHECK(TVMFuncGetGlobal("tvm.contrib.random.random_fill", &h) == 0);
    g_funcs[3] = (uint64_t)(uintptr_t)h;
  }
  w.start = w_start;
  w.write = w_write;
  w.finish = w_finish;
  w.log = w_log;
  w.context = NULL;
  TVMMinRpcServer_Init(&g_server, g_buffer, sizeof(g_buffer), &w);
  memset(&g_reply, 0, sizeof(g_reply));
  g_alloc[0] = make_allocation(64);
  g_alloc[1] = make_allocation(16);
  g_alloc[2] = make_allocation(1);
  g_alloc[3] = make_allocation(0);
}

/* Replace placeholders with real addresses and handles. */
static void substitute(uint8_t* body, size_t len) {
  size_t i;
  for (i = 0; i + 8 <= len; ++i) {
    int j, match_a = 1, match_b = 1;
    for (j = 0; j < 7; ++j) {
      match_a &= (body[i + j] == 0xA1);
      match_b &= (body[i + j] == 0xB1);
    }
    if (match_a && (body[i + 7] & 0xF0) == 0xA0) {
      put_u64(&body[i], g_alloc[body[i + 7] & 3]);
      i += 7;
    } else if (match_b && (body[i + 7] & 0xF0) == 0xB0) {
      put_u64(&body[i], g_funcs[body[i + 7] & 3]);
      i += 7;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint8_t body[TVM_CRT_MAX_PACKET_SIZE_BYTES + 16];
  size_t pos = 0;
  start_run();
  while (pos + 3 <= size) {
    uint8_t flags = data[pos];
    size_t len = (size_t)data[pos + 1] | ((size_t)data[pos + 2] << 8);
    pos += 3;
    if (len > size - pos) {
      len = size - pos;
    }
    if (len > TVM_CRT_MAX_PACKET_SIZE_BYTES - 3) {
      len = TVM_CRT_MAX_PACKET_SIZE_BYTES - 3; /* what the session can deliver */
    }
    memcpy(body, &data[pos], len);
    pos += len;
    substitute(body, len);
    (void)run_message(body, len, flags & 3, (flags >> 2) & 1);
  }
  return 0;
}
