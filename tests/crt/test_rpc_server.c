/*
 * test_rpc_server.c -- MicroTVMRpcServerInit/Loop and the MinRPC server, driven by a host side built from
 * the same framing and session code. Requests are hand-assembled following docs/architecture.md §5.3 and
 * replies are checked byte for byte: every RPC code, every argument and return type, every syscall, copies (in
 * place, streamed, corrupt), the allocation checks, session events; then fault injection: a valid
 * exchange cut at every byte and with every byte flipped never crashes the server, never produces a
 * wrong answer, and the next request is answered correctly.
 *
 * A system library (TVMSystemLibEntryPoint below) provides test functions as module functions, so the
 * tiny crt_config (whose global registry is full with the built-ins) runs every case too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/rpc_common/framing.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#include "minrpc_server.h"

#define MAX_PACKET TVM_CRT_MAX_PACKET_SIZE_BYTES

/* ============================================================================================== */
/* The system library of the test                                                                 */

/* echo(i, v...): returns argument i as it was received (type code and value). */
static int fn_echo(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* resource) {
  (void)resource;
  if (num_args < 1 || type_codes[0] != kTVMArgInt || args[0].v_int64 < 0 || args[0].v_int64 >= num_args) {
    TVMAPISetLastError("echo: bad index");
    return -1;
  }
  *ret = args[args[0].v_int64];
  *ret_code = type_codes[args[0].v_int64];
  return 0;
}

/* make_array(n): a new float32 NDArray of n elements 0, 1, 2, ... */
static int fn_make_array(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code,
                         void* resource) {
  TVMArrayHandle array = NULL;
  int64_t shape[1];
  int64_t i;
  (void)resource;
  if (num_args != 1 || type_codes[0] != kTVMArgInt) {
    TVMAPISetLastError("make_array: expects (n)");
    return -1;
  }
  shape[0] = args[0].v_int64;
  if (TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &array) != 0) {
    return -1;
  }
  for (i = 0; i < shape[0]; ++i) {
    float x = (float)i;
    memcpy((uint8_t*)array->data + 4 * i, &x, 4);
  }
  ret->v_handle = array;
  *ret_code = kTVMNDArrayHandle;
  return 0;
}

/* bad_return(): returns an object handle, which the link cannot carry. */
static int fn_bad_return(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code,
                         void* resource) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  (void)resource;
  ret->v_handle = NULL;
  *ret_code = kTVMObjectHandle;
  return 0;
}

/* log_it(s): logs s through the CRT's logging path. */
static int fn_log_it(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* resource) {
  (void)resource;
  if (num_args != 1 || type_codes[0] != kTVMStr) {
    return -1;
  }
  TVMPlatformLog(TVM_CRT_LOG_LEVEL_INFO, args[0].v_str, strlen(args[0].v_str));
  ret->v_int64 = 0;
  *ret_code = kTVMArgInt;
  return 0;
}

static const char kNames[] = "\004\000echo\000make_array\000bad_return\000log_it\000";
static const TVMBackendPackedCFunc kFuncs[] = {fn_echo, fn_make_array, fn_bad_return, fn_log_it};
static const TVMFuncRegistry kRegistry = {kNames, kFuncs};
static const TVMModule kModule = {&kRegistry};

const TVMModule* TVMSystemLibEntryPoint(void) { return &kModule; }

/* ============================================================================================== */
/* The host side: a session of our own, bytes passed by hand                                      */

typedef struct {
  uint8_t data[1 << 16];
  size_t len;
} Bytes;

static Bytes g_from_device;
static Bytes g_to_device;
static int g_device_write_fails;

#define MAX_REPLIES 8
typedef struct {
  TVMFramer framer;
  TVMSession session;
  TVMUnframer unframer;
  int replies;
  uint8_t reply[MAX_REPLIES][4096];
  size_t reply_len[MAX_REPLIES];
  int logs;
  char log[256];
  uint8_t cur[4096];
  size_t cur_len;
  TVMSessionMessageType cur_type;
  int terminated;
} Host;

static Host g_host;
static microtvm_rpc_server_t g_server;

static tvm_crt_ssize_t device_write(void* context, const uint8_t* data, size_t n) {
  Bytes* b = (Bytes*)context;
  if (g_device_write_fails) {
    return -1;
  }
  assert_true(b->len + n <= sizeof(b->data));
  memcpy(&b->data[b->len], data, n);
  b->len += n;
  return (tvm_crt_ssize_t)n;
}

static tvm_crt_ssize_t host_write(void* context, const uint8_t* data, size_t n) {
  return device_write(context, data, n);
}

static tvm_crt_error_t host_start(void* context, TVMSessionMessageType type, uint32_t size) {
  Host* h = (Host*)context;
  h->cur_type = type;
  h->cur_len = 0;
  assert_true(size <= sizeof(h->cur));
  return kTvmErrorNoError;
}

static tvm_crt_error_t host_data(void* context, const uint8_t* data, size_t n) {
  Host* h = (Host*)context;
  memcpy(&h->cur[h->cur_len], data, n);
  h->cur_len += n;
  return kTvmErrorNoError;
}

static tvm_crt_error_t host_end(void* context, TVMSessionMessageType type, tvm_crt_error_t verdict) {
  Host* h = (Host*)context;
  assert_int_equal(verdict, kTvmErrorNoError); /* the device's output is always well formed */
  if (type == kTVMSessionMessageLog) {
    size_t n = h->cur_len < sizeof(h->log) - 1 ? h->cur_len : sizeof(h->log) - 1;
    memcpy(h->log, h->cur, n);
    h->log[n] = '\0';
    h->logs++;
  } else {
    assert_true(h->replies < MAX_REPLIES);
    memcpy(h->reply[h->replies], h->cur, h->cur_len);
    h->reply_len[h->replies] = h->cur_len;
    h->replies++;
  }
  return kTvmErrorNoError;
}

static void host_event(void* context, TVMSessionEvent event) {
  if (event == kTVMSessionEventTerminated) {
    ((Host*)context)->terminated++;
  }
}

/* Device output -> host. */
static void pump_device_output(void) {
  size_t consumed = 0;
  assert_int_equal(TVMUnframer_Write(&g_host.unframer, g_from_device.data, g_from_device.len, &consumed),
                   kTvmErrorNoError);
  g_from_device.len = 0;
}

/* Bytes -> device, `step` at a time; returns the last Loop result. */
static tvm_crt_error_t feed_device(const uint8_t* data, size_t len, size_t step) {
  size_t i = 0;
  tvm_crt_error_t err = kTvmErrorNoError;
  while (i < len) {
    size_t n = (len - i < step) ? len - i : step;
    uint8_t* p = (uint8_t*)&data[i];
    size_t left = n;
    err = MicroTVMRpcServerLoop(g_server, &p, &left);
    if (err != kTvmErrorNoError) {
      return err;
    }
    assert_int_equal(left, 0);
    i += n;
  }
  return err;
}

static void clear_replies(void) {
  g_host.replies = 0;
  g_host.logs = 0;
}

/* Boot the device and open a session from the host. */
static int setup(void** state) {
  TVMSessionHandler h;
  TVMUnframerHandler uh;
  (void)state;
  memset(&g_host, 0, sizeof(g_host));
  g_from_device.len = 0;
  g_to_device.len = 0;
  g_device_write_fails = 0;
  g_server = MicroTVMRpcServerInit(device_write, &g_from_device);
  h.message_start = host_start;
  h.message_data = host_data;
  h.message_end = host_end;
  h.event = host_event;
  h.context = &g_host;
  TVMFramer_Init(&g_host.framer, host_write, &g_to_device);
  TVMSession_Init(&g_host.session, &g_host.framer, 0x11, &h);
  TVMSession_GetUnframerHandler(&g_host.session, &uh);
  TVMUnframer_Init(&g_host.unframer, &uh, 1 << 16);
  pump_device_output(); /* the boot terminate */
  assert_int_equal(g_host.terminated, 1);
  assert_int_equal(TVMSession_StartSession(&g_host.session), kTvmErrorNoError);
  assert_int_equal(feed_device(g_to_device.data, g_to_device.len, 4096), kTvmErrorNoError);
  g_to_device.len = 0;
  pump_device_output();
  assert_true(TVMSession_IsEstablished(&g_host.session));
  clear_replies();
  return 0;
}

static int teardown(void** state) {
  (void)state;
  /* a terminate frees what the test left allocated (checked by ASan's leak detector) */
  assert_int_equal(TVMSession_Terminate(&g_host.session), kTvmErrorNoError);
  (void)feed_device(g_to_device.data, g_to_device.len, 4096);
  g_to_device.len = 0;
  return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Request assembly (docs/architecture.md §5.3)                                                                */

typedef struct {
  uint8_t b[8192];
  size_t n;
} Req;

static void put(Req* r, const void* data, size_t n) {
  assert_true(r->n + n <= sizeof(r->b));
  memcpy(&r->b[r->n], data, n);
  r->n += n;
}
static void put_u64(Req* r, uint64_t v) {
  int i;
  for (i = 0; i < 8; ++i) {
    uint8_t x = (uint8_t)(v >> (8 * i));
    put(r, &x, 1);
  }
}
static void put_i32(Req* r, int32_t v) {
  uint32_t u = (uint32_t)v;
  int i;
  for (i = 0; i < 4; ++i) {
    uint8_t x = (uint8_t)(u >> (8 * i));
    put(r, &x, 1);
  }
}
static void put_u8(Req* r, uint8_t v) { put(r, &v, 1); }
static void begin(Req* r, int32_t code) {
  r->n = 0;
  put_u64(r, 0);
  put_i32(r, code);
}
static void end(Req* r) {
  uint64_t nbytes = r->n - 8;
  int i;
  for (i = 0; i < 8; ++i) {
    r->b[i] = (uint8_t)(nbytes >> (8 * i));
  }
}
/* Bare tensor header: data, device (cpu 0), ndim, dtype float32, shape, byte_offset. */
static void put_tensor(Req* r, uint64_t data, int32_t ndim, const int64_t* shape, uint64_t byte_offset) {
  int32_t i;
  put_u64(r, data);
  put_i32(r, kDLCPU);
  put_i32(r, 0);
  put_i32(r, ndim);
  put_u8(r, kDLFloat);
  put_u8(r, 32);
  put_u8(r, 1);
  put_u8(r, 0);
  for (i = 0; i < ndim; ++i) {
    put_u64(r, (uint64_t)shape[i]);
  }
  put_u64(r, byte_offset);
}
static void put_str(Req* r, const char* s) {
  put_u64(r, strlen(s));
  put(r, s, strlen(s));
}

/* ---------------------------------------------------------------------------------------------- */
/* Exchanges and reply checks                                                                       */

/* Send one normal message (whole); return the number of replies that came back. */
static int send_request(const Req* r) {
  clear_replies();
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, r->b, r->n), kTvmErrorNoError);
  assert_int_equal(feed_device(g_to_device.data, g_to_device.len, 1 << 16), kTvmErrorNoError);
  g_to_device.len = 0;
  pump_device_output();
  return g_host.replies;
}

static uint64_t rd_u64(const uint8_t* p) {
  uint64_t v = 0;
  int i;
  for (i = 7; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}
static int32_t rd_i32(const uint8_t* p) { return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24)); }

/* The single reply: checks the u64 length prefix; returns the body after it. */
static const uint8_t* only_reply(size_t* len) {
  assert_int_equal(g_host.replies, 1);
  assert_true(g_host.reply_len[0] >= 12);
  assert_int_equal(rd_u64(g_host.reply[0]), g_host.reply_len[0] - 8);
  *len = g_host.reply_len[0] - 8;
  return &g_host.reply[0][8];
}

static void expect_exception(const char* needle) {
  size_t len;
  const uint8_t* p = only_reply(&len);
  uint64_t slen;
  char text[512];
  assert_int_equal(rd_i32(p), 5);      /* kException */
  assert_int_equal(rd_i32(p + 4), 1);  /* one value */
  assert_int_equal(rd_i32(p + 8), 11); /* a str */
  slen = rd_u64(p + 12);
  assert_int_equal(len, 20 + slen);
  assert_true(slen < sizeof(text));
  memcpy(text, p + 20, slen);
  text[slen] = '\0';
  if (strstr(text, needle) == NULL) {
    fail_msg("exception text \"%s\" does not contain \"%s\"", text, needle);
  }
}

static void expect_return_void(void) {
  static const uint8_t kVoid[] = {12, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0};
  assert_int_equal(g_host.replies, 1);
  assert_int_equal(g_host.reply_len[0], sizeof(kVoid));
  assert_memory_equal(g_host.reply[0], kVoid, sizeof(kVoid));
}

/* A syscall's Return with one handle. */
static uint64_t expect_return_handle(void) {
  size_t len;
  const uint8_t* p = only_reply(&len);
  assert_int_equal(len, 20);
  assert_int_equal(rd_i32(p), 4);
  assert_int_equal(rd_i32(p + 4), 1);
  assert_int_equal(rd_i32(p + 8), 3);
  return rd_u64(p + 12);
}

/* A CallFunc Return: [int tc, value] -- returns a pointer to the value bytes, checks both codes. */
static const uint8_t* expect_call_return(int32_t wire_code, int64_t callee_code, size_t* value_len) {
  size_t len;
  const uint8_t* p = only_reply(&len);
  assert_int_equal(rd_i32(p), 4);
  assert_int_equal(rd_i32(p + 4), 2);
  assert_int_equal(rd_i32(p + 8), 0);
  assert_int_equal(rd_i32(p + 12), wire_code);
  assert_int_equal((int64_t)rd_u64(p + 16), callee_code);
  *value_len = len - 24;
  return p + 24;
}

static uint64_t get_global(const char* name) {
  Req r;
  begin(&r, 9);
  put_i32(&r, 1);
  put_i32(&r, kTVMStr);
  put_str(&r, name);
  end(&r);
  send_request(&r);
  return expect_return_handle();
}

/* CallFunc(handle) with no arguments, returning the value bytes of [tc, value]. */
static void call0(uint64_t handle) {
  Req r;
  begin(&r, 3);
  put_u64(&r, handle);
  put_i32(&r, 0);
  end(&r);
  send_request(&r);
}

static uint64_t module_function(const char* name) {
  Req r;
  size_t vlen;
  const uint8_t* v;
  uint64_t mod;
  call0(get_global("runtime.SystemLib"));
  v = expect_call_return(kTVMOpaqueHandle, kTVMModuleHandle, &vlen);
  assert_int_equal(vlen, 8);
  mod = rd_u64(v);
  begin(&r, 3);
  put_u64(&r, get_global("tvm.rpc.server.ModuleGetFunction"));
  put_i32(&r, 2);
  put_i32(&r, kTVMModuleHandle);
  put_i32(&r, kTVMStr);
  put_u64(&r, mod);
  put_str(&r, name);
  end(&r);
  send_request(&r);
  v = expect_call_return(kTVMOpaqueHandle, kTVMPackedFuncHandle, &vlen);
  assert_int_equal(vlen, 8);
  return rd_u64(v);
}

static uint64_t alloc_data(uint64_t nbytes, uint64_t alignment) {
  Req r;
  begin(&r, 13);
  put_i32(&r, 4);
  put_i32(&r, kDLDevice);
  put_i32(&r, kTVMArgInt);
  put_i32(&r, kTVMArgInt);
  put_i32(&r, kTVMDataType);
  put_i32(&r, kDLCPU);
  put_i32(&r, 0);
  put_u64(&r, nbytes);
  put_u64(&r, alignment);
  put_u8(&r, kDLFloat);
  put_u8(&r, 32);
  put_u8(&r, 1);
  put_u8(&r, 0);
  put_i32(&r, 0);
  end(&r);
  send_request(&r);
  return expect_return_handle();
}

static void free_data(uint64_t handle) {
  Req r;
  begin(&r, 14);
  put_i32(&r, 2);
  put_i32(&r, kDLDevice);
  put_i32(&r, kTVMOpaqueHandle);
  put_i32(&r, kDLCPU);
  put_i32(&r, 0);
  put_u64(&r, handle);
  end(&r);
  send_request(&r);
}

static void copy_to(Req* r, uint64_t data, uint64_t offset, const uint8_t* bytes, uint64_t n) {
  int64_t shape[1];
  shape[0] = (int64_t)(n / 4);
  begin(r, 7);
  put_tensor(r, data, 1, shape, offset);
  put_u64(r, n);
  put(r, bytes, (size_t)n);
  end(r);
}

static void copy_from(Req* r, uint64_t data, uint64_t offset, uint64_t n) {
  int64_t shape[1];
  shape[0] = (int64_t)(n / 4);
  begin(r, 6);
  put_tensor(r, data, 1, shape, offset);
  put_u64(r, n);
  end(r);
}

/* ============================================================================================== */
/* Tests                                                                                            */

static void test_init_server(void** state) {
  static const uint8_t kExpected[] = {12, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0};
  Req r;
  (void)state;
  /* the exact request bytes: u64 nbytes 21, i32 2, u64 5, "0.8.0", i32 0 */
  static const uint8_t kRequest[] = {21, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0,
                                     '0', '.', '8', '.', '0', 0, 0, 0, 0};
  r.n = sizeof(kRequest);
  memcpy(r.b, kRequest, sizeof(kRequest));
  send_request(&r);
  assert_int_equal(g_host.reply_len[0], sizeof(kExpected));
  assert_memory_equal(g_host.reply[0], kExpected, sizeof(kExpected));
  /* another version is refused with text naming both */
  begin(&r, 2);
  put_str(&r, "9.9.9");
  put_i32(&r, 0);
  end(&r);
  send_request(&r);
  expect_exception("9.9.9");
}

static void test_get_global_func(void** state) {
  uint64_t h;
  (void)state;
  h = get_global("tvm.rpc.server.GetCRTMaxPacketSize");
  assert_int_equal(h >> 16, 0x8000 | TVM_CRT_MAX_REGISTERED_MODULES); /* module index = the global registry */
  assert_true((h & 0x8000) != 0);
  assert_int_equal(get_global("no.such.function"), 0); /* unknown names: the null handle */
}

static void test_call_max_packet_size(void** state) {
  size_t vlen;
  const uint8_t* v;
  (void)state;
  call0(get_global("tvm.rpc.server.GetCRTMaxPacketSize"));
  v = expect_call_return(kTVMArgInt, kTVMArgInt, &vlen);
  assert_int_equal(vlen, 8);
  assert_int_equal(rd_u64(v), MAX_PACKET - 11);
  /* the whole reply: u64 32, i32 4, i32 2, i32 0, i32 0, i64 0, i64 max-11 */
  assert_int_equal(g_host.reply_len[0], 40);
  assert_int_equal(rd_u64(g_host.reply[0]), 32);
}

static void test_call_invalid_handles(void** state) {
  Req r;
  (void)state;
  call0(0x12345678U);
  expect_exception("invalid function handle");
  call0(0); /* NULL */
  expect_exception("invalid function handle");
  call0(((uint64_t)(0x8000 | TVM_CRT_MAX_REGISTERED_MODULES) << 16) | 0xFFFF); /* index out of range */
  expect_exception("names no function");
  /* a handle wider than a pointer (only meaningful on 32-bit devices) or a truncated handle */
  begin(&r, 3);
  put_i32(&r, 0);
  end(&r);
  send_request(&r);
  expect_exception("CallFunc");
}

/* echo(i, value) for every argument type the host can send; the value comes back as sent. */
static void test_call_every_argument_and_return_type(void** state) {
  const uint64_t echo = module_function("echo");
  uint64_t data = alloc_data(64, 64);
  Req r;
  size_t vlen;
  const uint8_t* v;
  int64_t shape[2] = {4, 4};
  (void)state;
  /* int */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMArgInt);
  put_u64(&r, 1); put_u64(&r, (uint64_t)-42); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMArgInt, kTVMArgInt, &vlen);
  assert_int_equal(vlen, 8);
  assert_int_equal((int64_t)rd_u64(v), -42);
  /* uint */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kDLUInt);
  put_u64(&r, 1); put_u64(&r, 0xFFFFFFFFFFFFFFF0ULL); end(&r);
  send_request(&r);
  v = expect_call_return(kDLUInt, kDLUInt, &vlen);
  assert_true(rd_u64(v) == 0xFFFFFFFFFFFFFFF0ULL);
  /* float: the 8 bytes of a double, unchanged */
  {
    double d = 3.25, back;
    uint64_t bits;
    memcpy(&bits, &d, 8);
    begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMArgFloat);
    put_u64(&r, 1); put_u64(&r, bits); end(&r);
    send_request(&r);
    v = expect_call_return(kTVMArgFloat, kTVMArgFloat, &vlen);
    bits = rd_u64(v);
    memcpy(&back, &bits, 8);
    assert_true(back == 3.25);
  }
  /* opaque handle */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMOpaqueHandle);
  put_u64(&r, 1); put_u64(&r, 0xABCD00); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMOpaqueHandle, kTVMOpaqueHandle, &vlen);
  assert_int_equal(rd_u64(v), 0xABCD00);
  /* null: no value bytes */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMNullptr);
  put_u64(&r, 1); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMNullptr, kTVMNullptr, &vlen);
  assert_int_equal(vlen, 0);
  /* DataType: 4 bytes + 4 of padding */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMDataType);
  put_u64(&r, 1); put_u8(&r, kDLInt); put_u8(&r, 8); put_u8(&r, 4); put_u8(&r, 0); put_i32(&r, 0); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMDataType, kTVMDataType, &vlen);
  assert_int_equal(vlen, 8);
  assert_int_equal(v[0], kDLInt);
  assert_int_equal(v[1], 8);
  assert_int_equal(v[2], 4);
  /* Device */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kDLDevice);
  put_u64(&r, 1); put_i32(&r, kDLExtDev); put_i32(&r, 3); end(&r);
  send_request(&r);
  v = expect_call_return(kDLDevice, kDLDevice, &vlen);
  assert_int_equal(vlen, 8);
  assert_int_equal(rd_i32(v), kDLExtDev);
  assert_int_equal(rd_i32(v + 4), 3);
  /* str, terminated in place */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 3); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMStr);
  put_i32(&r, kTVMStr); put_u64(&r, 1); put_str(&r, "hello"); put_str(&r, "x"); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMStr, kTVMStr, &vlen);
  assert_int_equal(rd_u64(v), 5);
  assert_memory_equal(v + 8, "hello", 5);
  /* empty str */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMStr);
  put_u64(&r, 1); put_str(&r, ""); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMStr, kTVMStr, &vlen);
  assert_int_equal(rd_u64(v), 0);
  /* bytes, with NULs and FFs */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMBytes);
  put_u64(&r, 1); put_u64(&r, 4); put(&r, "\000\377a\000", 4); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMBytes, kTVMBytes, &vlen);
  assert_int_equal(rd_u64(v), 4);
  assert_memory_equal(v + 8, "\000\377a\000", 4);
  /* DLTensor inside an allocation: comes back as a tensor header */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMDLTensorHandle);
  put_u64(&r, 1); put_tensor(&r, data, 2, shape, 0); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMDLTensorHandle, kTVMDLTensorHandle, &vlen);
  assert_int_equal(vlen, 32 + 16);
  assert_int_equal(rd_u64(v), data);
  assert_int_equal(rd_i32(v + 16), 2);
  /* module / packed-func handles are accepted as arguments (checked by their users) */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMPackedFuncHandle);
  put_u64(&r, 1); put_u64(&r, echo); end(&r);
  send_request(&r);
  v = expect_call_return(kTVMOpaqueHandle, kTVMPackedFuncHandle, &vlen);
  assert_int_equal(rd_u64(v), echo);
  /* a function failing: its error text comes back */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMArgInt); put_u64(&r, 7); end(&r);
  send_request(&r);
  expect_exception("echo: bad index");
}

static void test_call_rejects_bad_arguments(void** state) {
  const uint64_t echo = module_function("echo");
  Req r;
  int i;
  int64_t shape[1] = {16};
  (void)state;
  /* object and NDArray handles cannot cross the link */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMObjectHandle); put_u64(&r, 0); end(&r);
  send_request(&r);
  expect_exception("type code 8");
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMNDArrayHandle); put_u64(&r, 0); end(&r);
  send_request(&r);
  expect_exception("type code 13");
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, 99); end(&r);
  send_request(&r);
  expect_exception("type code 99");
  /* too many arguments */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, TVM_CRT_MAX_ARGS + 1);
  for (i = 0; i < TVM_CRT_MAX_ARGS + 1; ++i) { put_i32(&r, kTVMArgInt); }
  for (i = 0; i < TVM_CRT_MAX_ARGS + 1; ++i) { put_u64(&r, 0); }
  end(&r);
  send_request(&r);
  expect_exception("TVM_CRT_MAX_ARGS");
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, -1); end(&r);
  send_request(&r);
  expect_exception("arguments");
  /* the message ends inside a value / inside the type codes / a string longer than the message */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMArgInt); put_u64(&r, 0);
  put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("ends inside argument 1");
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); end(&r);
  send_request(&r);
  expect_exception("type codes");
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMStr); put_u64(&r, 1000); put(&r, "abc", 3); end(&r);
  send_request(&r);
  expect_exception("runs past the end");
  /* trailing bytes after a complete request */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMArgInt); put_u64(&r, 0); put_u8(&r, 0); end(&r);
  send_request(&r);
  expect_exception("unexpected bytes");
  /* tensors: outside any allocation, too many dims, negative dim */
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMDLTensorHandle);
  put_u64(&r, 1); put_tensor(&r, (uint64_t)(uintptr_t)&r, 1, shape, 0); end(&r);
  send_request(&r);
  expect_exception("not inside memory allocated over RPC");
  {
    int64_t big[TVM_CRT_MAX_NDIM + 1];
    for (i = 0; i < TVM_CRT_MAX_NDIM + 1; ++i) { big[i] = 1; }
    begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMDLTensorHandle);
    put_tensor(&r, 0, TVM_CRT_MAX_NDIM + 1, big, 0); end(&r);
    send_request(&r);
    expect_exception("TVM_CRT_MAX_NDIM");
  }
  {
    /* regressions found by fuzz_minrpc: an empty tensor must still point into an allocation, and a dtype
     * of 0 bits is refused (random_fill once did pointer arithmetic on such a tensor's byte_offset) */
    int64_t empty[1] = {0};
    size_t at;
    uint64_t data = alloc_data(16, 16);
    begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMDLTensorHandle);
    put_tensor(&r, (uint64_t)(uintptr_t)&r, 1, empty, 0); end(&r);
    send_request(&r);
    expect_exception("not inside memory allocated over RPC");
    begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMDLTensorHandle);
    put_tensor(&r, data, 1, empty, (uint64_t)-10); end(&r);
    send_request(&r);
    expect_exception("not a device address");
    begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMDLTensorHandle);
    at = r.n;
    put_tensor(&r, data, 1, shape, 0); end(&r);
    r.b[at + 21] = 0; /* dtype bits */
    send_request(&r);
    expect_exception("0 bits");
    /* an empty tensor at the very end of an allocation is fine */
    begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMDLTensorHandle);
    put_u64(&r, 0); put_tensor(&r, data, 1, empty, 16); end(&r);
    send_request(&r);
    {
      size_t vlen;
      (void)expect_call_return(kTVMArgInt, kTVMArgInt, &vlen);
    }
    free_data(data);
    expect_return_void();
  }
  {
    int64_t neg[1] = {-4};
    begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMDLTensorHandle);
    put_tensor(&r, 0, 1, neg, 0); end(&r);
    send_request(&r);
    expect_exception("negative");
  }
}

static void test_unsupported_return_and_ndarray_return(void** state) {
  Req r;
  size_t vlen;
  const uint8_t* v;
  uint64_t array_handle, data;
  int64_t shape[1] = {4};
  (void)state;
  call0(module_function("bad_return"));
  expect_exception("type code 8");
  /* an NDArray: [int 13, DLTensor, handle]; the host can then read it and free it */
  begin(&r, 3); put_u64(&r, module_function("make_array")); put_i32(&r, 1); put_i32(&r, kTVMArgInt); put_u64(&r, 4);
  end(&r);
  send_request(&r);
  {
    size_t len;
    const uint8_t* p = only_reply(&len);
    assert_int_equal(rd_i32(p), 4);
    assert_int_equal(rd_i32(p + 4), 3);
    assert_int_equal(rd_i32(p + 8), kTVMArgInt);
    assert_int_equal(rd_i32(p + 12), kTVMDLTensorHandle);
    assert_int_equal(rd_i32(p + 16), kTVMOpaqueHandle);
    assert_int_equal(rd_u64(p + 20), kTVMNDArrayHandle);
    data = rd_u64(p + 28);
    assert_int_equal(rd_i32(p + 28 + 16), 1);          /* ndim */
    assert_int_equal(rd_u64(p + 28 + 24), 4);          /* shape[0] */
    array_handle = rd_u64(p + 28 + 40);
    assert_int_equal(len, 28 + 40 + 8);
  }
  copy_from(&r, data, 0, 16);
  send_request(&r);
  {
    size_t len;
    const uint8_t* p = only_reply(&len);
    float x;
    assert_int_equal(rd_i32(p), 8);
    memcpy(&x, p + 4 + 12, 4);
    assert_true(x == 3.0f);
  }
  begin(&r, 10); put_i32(&r, 2); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kTVMArgInt);
  put_u64(&r, array_handle); put_u64(&r, kTVMNDArrayHandle); end(&r);
  send_request(&r);
  expect_return_void();
  send_request(&r); /* twice: no longer known */
  expect_exception("not an NDArray");
  copy_from(&r, data, 0, 16); /* freed memory is out of reach */
  send_request(&r);
  expect_exception("not inside memory allocated over RPC");
  (void)shape;
  (void)vlen;
  (void)v;
}

static void test_copies(void** state) {
  enum { N = 64 };
  uint8_t bytes[N];
  uint64_t data;
  Req r;
  int i;
  (void)state;
  for (i = 0; i < N; ++i) {
    bytes[i] = (uint8_t)(0xF0 + i); /* many FF/FD/FE on the wire */
  }
  data = alloc_data(N, 64);
  assert_int_equal(data % 64, 0);
  copy_to(&r, data, 0, bytes, N);
  send_request(&r);
  expect_return_void();
  assert_memory_equal((const void*)(uintptr_t)data, bytes, N); /* it landed in place */
  copy_from(&r, data, 0, N);
  send_request(&r);
  {
    size_t len;
    const uint8_t* p = only_reply(&len);
    assert_int_equal(len, 4 + N);     /* u64 (4 + n) · i32 8 · n raw bytes */
    assert_int_equal(rd_i32(p), 8);
    assert_memory_equal(p + 4, bytes, N);
  }
  /* partial copies stepping byte_offset */
  copy_to(&r, data, 60, bytes, 4);
  send_request(&r);
  expect_return_void();
  copy_from(&r, data, 16, 8);
  send_request(&r);
  {
    size_t len;
    const uint8_t* p = only_reply(&len);
    assert_int_equal(len, 12);
    assert_memory_equal(p + 4, &bytes[16], 8);
  }
  /* out of range: one byte past the end, a huge offset, an unknown pointer */
  copy_to(&r, data, 61, bytes, 4);
  send_request(&r);
  expect_exception("not inside memory allocated over RPC");
  copy_from(&r, data, 0xFFFFFFFFFFFFFF00ULL, 8);
  send_request(&r);
  expect_exception("CopyFromRemote");
  copy_from(&r, (uint64_t)(uintptr_t)bytes, 0, 8);
  send_request(&r);
  expect_exception("not inside memory allocated over RPC");
  /* nbytes disagreeing with the payload */
  copy_to(&r, data, 0, bytes, 8);
  r.b[8 + 4 + 32 + 8] = 9; /* nbytes field (after prefix and a 1-d tensor header): 9 instead of 8 */
  send_request(&r);
  expect_exception("nbytes");
  /* free: afterwards the handle is gone */
  free_data(data);
  expect_return_void();
  free_data(data);
  expect_exception("not memory allocated over RPC");
  copy_to(&r, data, 0, bytes, 4);
  send_request(&r);
  expect_exception("not inside memory allocated over RPC");
}

/* The payload streams into the tensor before the CRC arrives; a corrupt payload fails the call. */
static void test_copy_streams_and_crc_failure(void** state) {
  enum { N = 128 };
  uint8_t bytes[N];
  uint64_t data;
  Req r;
  size_t i;
  (void)state;
  for (i = 0; i < N; ++i) {
    bytes[i] = (uint8_t)(i * 7);
  }
  data = alloc_data(N, 16);
  memset((void*)(uintptr_t)data, 0, N);
  copy_to(&r, data, 0, bytes, N);
  clear_replies();
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, r.b, r.n), kTvmErrorNoError);
  /* everything but the 2 CRC bytes (they contain no FF for this payload? check) */
  {
    size_t wire = g_to_device.len;
    size_t crc_bytes = 2;
    if (g_to_device.data[wire - 1] == 0xFF) crc_bytes++;
    if (g_to_device.data[wire - crc_bytes - 1] == 0xFF && g_to_device.data[wire - crc_bytes - 2] == 0xFF) {
      /* the low CRC byte was FF (escaped) */
      crc_bytes++;
    }
    assert_int_equal(feed_device(g_to_device.data, wire - crc_bytes, 7), kTvmErrorNoError);
    pump_device_output();
    assert_int_equal(g_host.replies, 0);                                  /* no verdict yet ... */
    assert_memory_equal((const void*)(uintptr_t)data, bytes, N);          /* ... but the data is in place */
    assert_int_equal(feed_device(&g_to_device.data[wire - crc_bytes], crc_bytes, 1), kTvmErrorNoError);
    g_to_device.len = 0;
    pump_device_output();
    expect_return_void();
  }
  /* flip a payload byte on the wire: the reply is an Exception, never success */
  copy_to(&r, data, 0, bytes, N);
  clear_replies();
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, r.b, r.n), kTvmErrorNoError);
  g_to_device.data[g_to_device.len - 20] ^= 0x01;
  assert_int_equal(feed_device(g_to_device.data, g_to_device.len, 5), kTvmErrorNoError);
  g_to_device.len = 0;
  pump_device_output();
  expect_exception("framing check");
  free_data(data);
  expect_return_void();
}

static void test_device_syscalls(void** state) {
  Req r;
  size_t len;
  const uint8_t* p;
  (void)state;
  /* DevSetDevice */
  begin(&r, 11); put_i32(&r, 1); put_i32(&r, kDLDevice); put_i32(&r, kDLCPU); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_return_void();
  begin(&r, 11); put_i32(&r, 1); put_i32(&r, kDLDevice); put_i32(&r, 2); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("DevSetDevice");
  begin(&r, 11); put_i32(&r, 1); put_i32(&r, kTVMArgInt); put_u64(&r, 1); end(&r);
  send_request(&r);
  expect_exception("argument 0 has type code 0, expected 6");
  /* DevGetAttr(kExist) */
  begin(&r, 12); put_i32(&r, 2); put_i32(&r, kDLDevice); put_i32(&r, kTVMArgInt); put_i32(&r, kDLCPU); put_i32(&r, 0);
  put_u64(&r, 0); end(&r);
  send_request(&r);
  p = only_reply(&len);
  assert_int_equal(len, 20);
  assert_int_equal(rd_i32(p), 4);
  assert_int_equal(rd_i32(p + 8), kTVMArgInt);
  assert_int_equal(rd_u64(p + 12), 1);
  begin(&r, 12); put_i32(&r, 2); put_i32(&r, kDLDevice); put_i32(&r, kTVMArgInt); put_i32(&r, kDLCPU); put_i32(&r, 0);
  put_u64(&r, 5); end(&r);
  send_request(&r);
  expect_exception("attribute 5");
  /* DevAllocData with the wrong argument count */
  begin(&r, 13); put_i32(&r, 1); put_i32(&r, kDLDevice); put_i32(&r, kDLCPU); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("expects 4 arguments");
}

static void test_syscalls_allocation_checks(void** state) {
  Req r;
  uint64_t a, b;
  int64_t shape[2] = {2, 4};
  int i;
  uint64_t handles[TVM_CRT_MAX_NDARRAYS];
  (void)state;
  /* bad alignment, negative size */
  begin(&r, 13); put_i32(&r, 4); put_i32(&r, kDLDevice); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMArgInt);
  put_i32(&r, kTVMDataType); put_i32(&r, kDLCPU); put_i32(&r, 0); put_u64(&r, 32); put_u64(&r, 3);
  put_u8(&r, 2); put_u8(&r, 32); put_u8(&r, 1); put_u8(&r, 0); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("alignment 3");
  begin(&r, 13); put_i32(&r, 4); put_i32(&r, kDLDevice); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMArgInt);
  put_i32(&r, kTVMDataType); put_i32(&r, kDLCPU); put_i32(&r, 0); put_u64(&r, (uint64_t)-5); put_u64(&r, 16);
  put_u8(&r, 2); put_u8(&r, 32); put_u8(&r, 1); put_u8(&r, 0); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("negative");
  /* the table is bounded by TVM_CRT_MAX_NDARRAYS */
  for (i = 0; i < TVM_CRT_MAX_NDARRAYS; ++i) {
    handles[i] = alloc_data(8, 8);
  }
  begin(&r, 13); put_i32(&r, 4); put_i32(&r, kDLDevice); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMArgInt);
  put_i32(&r, kTVMDataType); put_i32(&r, kDLCPU); put_i32(&r, 0); put_u64(&r, 8); put_u64(&r, 8);
  put_u8(&r, 2); put_u8(&r, 32); put_u8(&r, 1); put_u8(&r, 0); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("TVM_CRT_MAX_NDARRAYS");
  for (i = 0; i < TVM_CRT_MAX_NDARRAYS; ++i) {
    free_data(handles[i]);
    expect_return_void();
  }
  /* DevAllocDataWithScope: null and "global" scopes; others refused */
  begin(&r, 17); put_i32(&r, 2); put_i32(&r, kTVMDLTensorHandle); put_i32(&r, kTVMNullptr);
  put_tensor(&r, 0, 2, shape, 0); end(&r);
  send_request(&r);
  a = expect_return_handle();
  begin(&r, 17); put_i32(&r, 2); put_i32(&r, kTVMDLTensorHandle); put_i32(&r, kTVMStr);
  put_tensor(&r, 0, 2, shape, 0); put_str(&r, "global"); end(&r);
  send_request(&r);
  b = expect_return_handle();
  begin(&r, 17); put_i32(&r, 2); put_i32(&r, kTVMDLTensorHandle); put_i32(&r, kTVMStr);
  put_tensor(&r, 0, 2, shape, 0); put_str(&r, "shared"); end(&r);
  send_request(&r);
  expect_exception("shared");
  /* CopyAmongRemote a -> b (32 bytes each) */
  memset((void*)(uintptr_t)a, 0x5A, 32);
  memset((void*)(uintptr_t)b, 0x00, 32);
  begin(&r, 16); put_i32(&r, 3); put_i32(&r, kTVMDLTensorHandle); put_i32(&r, kTVMDLTensorHandle);
  put_i32(&r, kTVMOpaqueHandle); put_tensor(&r, a, 2, shape, 0); put_tensor(&r, b, 2, shape, 0); put_u64(&r, 0);
  end(&r);
  send_request(&r);
  expect_return_void();
  assert_memory_equal((const void*)(uintptr_t)a, (const void*)(uintptr_t)b, 32);
  begin(&r, 16); put_i32(&r, 3); put_i32(&r, kTVMDLTensorHandle); put_i32(&r, kTVMDLTensorHandle);
  put_i32(&r, kTVMOpaqueHandle); put_tensor(&r, a, 2, shape, 0); put_tensor(&r, b, 2, shape, 4); put_u64(&r, 0);
  end(&r);
  send_request(&r);
  expect_exception("CopyAmongRemote (destination)");
  /* streams: only the null stream exists */
  begin(&r, 15); put_i32(&r, 2); put_i32(&r, kDLDevice); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kDLCPU);
  put_i32(&r, 0); put_u64(&r, 0); end(&r);
  send_request(&r);
  expect_return_void();
  begin(&r, 15); put_i32(&r, 2); put_i32(&r, kDLDevice); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kDLCPU);
  put_i32(&r, 0); put_u64(&r, 77); end(&r);
  send_request(&r);
  expect_exception("stream");
  begin(&r, 18); put_i32(&r, 1); put_i32(&r, kDLDevice); put_i32(&r, kDLCPU); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("streams are not supported");
  begin(&r, 19); put_i32(&r, 2); put_i32(&r, kDLDevice); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kDLCPU);
  put_i32(&r, 0); put_u64(&r, 0); end(&r);
  send_request(&r);
  expect_return_void();
  begin(&r, 20); put_i32(&r, 2); put_i32(&r, kDLDevice); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kDLCPU);
  put_i32(&r, 0); put_u64(&r, 0); end(&r);
  send_request(&r);
  expect_return_void();
  /* FreeHandle of a packed func / module (static: only checked) and of an unsupported kind */
  begin(&r, 10); put_i32(&r, 2); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kTVMArgInt);
  put_u64(&r, get_global("runtime.SystemLib")); put_u64(&r, kTVMPackedFuncHandle); end(&r);
  send_request(&r);
  expect_return_void();
  begin(&r, 10); put_i32(&r, 2); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kTVMArgInt);
  put_u64(&r, 0x1234); put_u64(&r, kTVMPackedFuncHandle); end(&r);
  send_request(&r);
  expect_exception("invalid function handle");
  begin(&r, 10); put_i32(&r, 2); put_i32(&r, kTVMOpaqueHandle); put_i32(&r, kTVMArgInt);
  put_u64(&r, 0x1234); put_u64(&r, kTVMDataType); end(&r);
  send_request(&r);
  expect_exception("type code 5");
  free_data(a);
  expect_return_void();
  free_data(b);
  expect_return_void();
}

static void test_codes_the_device_does_not_serve(void** state) {
  Req r;
  (void)state;
  begin(&r, 99); end(&r);
  send_request(&r);
  expect_exception("unknown RPC code 99");
  begin(&r, 0); end(&r);
  send_request(&r);
  expect_exception("unknown RPC code 0");
  begin(&r, 4); put_i32(&r, 0); end(&r);
  send_request(&r);
  expect_exception("is a reply");
  begin(&r, -7); end(&r);
  send_request(&r);
  expect_exception("unknown RPC code -7");
  /* wrong length field, too short, empty */
  begin(&r, 9); put_i32(&r, 0); end(&r);
  r.b[0] += 1;
  send_request(&r);
  expect_exception("length field");
  r.n = 4;
  memset(r.b, 0, 4);
  send_request(&r);
  expect_exception("shorter than its 8-byte length field");
  r.n = 10;
  memset(r.b, 0, 10);
  r.b[0] = 2;
  send_request(&r);
  expect_exception("has no code");
  r.n = 8;
  memset(r.b, 0, 8);
  assert_int_equal(send_request(&r), 0); /* nbytes 0: ignored, as MinRPC does */
}

static void test_oversized_message(void** state) {
  Req r;
  size_t body = MAX_PACKET - 3; /* the largest session body */
  (void)state;
  begin(&r, 3);
  while (r.n < body) {
    put_u8(&r, 0);
  }
  end(&r);
  send_request(&r); /* fits exactly: parsed (and refused for its content) */
  expect_exception("CallFunc");
  /* one byte more than a session payload may hold: the frame is dropped and reported in a log */
  put_u8(&r, 0);
  end(&r);
  assert_int_equal(send_request(&r), 0);
  assert_int_equal(g_host.logs, 1);
  assert_non_null(strstr(g_host.log, "dropped"));
}

static void test_logs_reach_the_host(void** state) {
  Req r;
  size_t vlen;
  char long_text[MAX_PACKET + 100];
  (void)state;
  begin(&r, 3); put_u64(&r, module_function("log_it")); put_i32(&r, 1); put_i32(&r, kTVMStr); put_str(&r, "hi there");
  end(&r);
  send_request(&r);
  (void)expect_call_return(kTVMArgInt, kTVMArgInt, &vlen);
  assert_int_equal(g_host.logs, 1);
  assert_string_equal(g_host.log, "hi there");
  /* a log message from the host is read and ignored: no reply, no log back */
  clear_replies();
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageLog, (const uint8_t*)"host says hi", 12),
                   kTvmErrorNoError);
  assert_int_equal(feed_device(g_to_device.data, g_to_device.len, 5), kTvmErrorNoError);
  g_to_device.len = 0;
  pump_device_output();
  assert_int_equal(g_host.replies + g_host.logs, 0);
  /* a log longer than a packet is cut to fit */
  memset(long_text, 'x', sizeof(long_text) - 1);
  long_text[sizeof(long_text) - 1] = '\0';
  clear_replies();
  TVMPlatformLog(TVM_CRT_LOG_LEVEL_WARN, long_text, strlen(long_text));
  pump_device_output();
  assert_int_equal(g_host.logs, 1);
}

static void test_shutdown(void** state) {
  Req r;
  uint8_t* p;
  size_t left;
  (void)state;
  begin(&r, 1); end(&r);
  clear_replies();
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, r.b, r.n), kTvmErrorNoError);
  /* a second request right behind it is left unconsumed */
  begin(&r, 9); put_i32(&r, 0); end(&r);
  {
    size_t first = g_to_device.len;
    assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, r.b, r.n), kTvmErrorNoError);
    p = g_to_device.data;
    left = g_to_device.len;
    assert_int_equal(MicroTVMRpcServerLoop(g_server, &p, &left), kTvmErrorPlatformShutdown);
    assert_int_equal(left, g_to_device.len - first);
  }
  pump_device_output();
  assert_int_equal(g_host.replies, 0); /* Shutdown gets no reply */
  assert_int_equal(MicroTVMRpcServerLoop(g_server, &p, &left), kTvmErrorPlatformShutdown);
  g_to_device.len = 0;
  /* restart for teardown */
  (void)setup(NULL);
}

/* Terminate (and a new session) frees what the host allocated. */
static void test_session_events_free_allocations(void** state) {
  uint64_t data = alloc_data(16, 16);
  Req r;
  (void)state;
  assert_int_equal(TVMSession_Terminate(&g_host.session), kTvmErrorNoError);
  assert_int_equal(TVMSession_StartSession(&g_host.session), kTvmErrorNoError);
  assert_int_equal(feed_device(g_to_device.data, g_to_device.len, 4096), kTvmErrorNoError);
  g_to_device.len = 0;
  pump_device_output();
  assert_true(TVMSession_IsEstablished(&g_host.session));
  copy_from(&r, data, 0, 4);
  send_request(&r);
  expect_exception("not inside memory allocated over RPC");
}

static void test_write_failure_is_reported(void** state) {
  Req r;
  (void)state;
  begin(&r, 9); put_i32(&r, 1); put_i32(&r, kTVMStr); put_str(&r, "runtime.SystemLib"); end(&r);
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, r.b, r.n), kTvmErrorNoError);
  g_device_write_fails = 1;
  assert_int_equal(feed_device(g_to_device.data, g_to_device.len, 4096), kTvmErrorWriteStreamShortWrite);
  g_device_write_fails = 0;
  g_to_device.len = 0;
  g_from_device.len = 0;
  /* the server carries on: the next reply is preceded by FE and parses */
  send_request(&r);
  (void)expect_return_handle();
}

/* ---------------------------------------------------------------------------------------------- */
/* Fault injection                                                                                  */

/* Feed `bad` (a damaged exchange), then `good` twice (the host's retry: a damaged packet ending in a
 * dangling escape byte can swallow the next packet's start). The last reply must equal `expected`, and
 * any other reply may only be an Exception or `expected` itself -- never a wrong success. */
static void check_recovery(const uint8_t* bad, size_t bad_len, const uint8_t* good, size_t good_len,
                           const uint8_t* expected, size_t expected_len) {
  int i;
  clear_replies();
  assert_int_equal(feed_device(bad, bad_len, 3), kTvmErrorNoError);
  assert_int_equal(feed_device(good, good_len, 64), kTvmErrorNoError);
  assert_int_equal(feed_device(good, good_len, 64), kTvmErrorNoError);
  pump_device_output();
  assert_true(g_host.replies >= 1);
  for (i = 0; i < g_host.replies; ++i) {
    const int last = (i == g_host.replies - 1);
    const int is_expected = (g_host.reply_len[i] == expected_len) &&
                            (memcmp(g_host.reply[i], expected, expected_len) == 0);
    const int is_exception = (g_host.reply_len[i] >= 12) && (rd_i32(&g_host.reply[i][8]) == 5);
    if (last ? !is_expected : !(is_expected || is_exception)) {
      fail_msg("reply %d of %d is wrong (%lu bytes, code %d)", i, g_host.replies,
               (unsigned long)g_host.reply_len[i], (int)rd_i32(&g_host.reply[i][8]));
    }
  }
}

static void fault_inject(const Req* request) {
  static uint8_t wire[2 * MAX_PACKET + 64];
  static uint8_t bad[2 * MAX_PACKET + 64];
  static uint8_t expected[4096];
  size_t wire_len, expected_len, k;
  int bit;
  /* the reference exchange */
  send_request(request);
  assert_int_equal(g_host.replies, 1);
  expected_len = g_host.reply_len[0];
  memcpy(expected, g_host.reply[0], expected_len);
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, request->b, request->n),
                   kTvmErrorNoError);
  wire_len = g_to_device.len;
  assert_true(wire_len <= sizeof(wire));
  memcpy(wire, g_to_device.data, wire_len);
  g_to_device.len = 0;
  /* cut at every byte: the partial packet is abandoned when the next FF FD arrives */
  for (k = 0; k < wire_len; ++k) {
    check_recovery(wire, k, wire, wire_len, expected, expected_len);
  }
  /* every byte flipped, several ways */
  for (k = 0; k < wire_len; ++k) {
    for (bit = 0; bit < 8; bit += 3) {
      memcpy(bad, wire, wire_len);
      bad[k] ^= (uint8_t)(1U << bit);
      check_recovery(bad, wire_len, wire, wire_len, expected, expected_len);
    }
    memcpy(bad, wire, wire_len);
    bad[k] = 0xFF;
    check_recovery(bad, wire_len, wire, wire_len, expected, expected_len);
  }
  /* duplicated: every copy answered identically */
  memcpy(bad, wire, wire_len);
  check_recovery(bad, wire_len, wire, wire_len, expected, expected_len);
  assert_int_equal(g_host.replies, 3);
}

static void test_fault_injection_call(void** state) {
  Req r;
  (void)state;
  begin(&r, 3);
  put_u64(&r, get_global("tvm.rpc.server.GetCRTMaxPacketSize"));
  put_i32(&r, 0);
  end(&r);
  fault_inject(&r);
  begin(&r, 9); put_i32(&r, 1); put_i32(&r, kTVMStr); put_str(&r, "runtime.SystemLib"); end(&r);
  fault_inject(&r);
}

static void test_fault_injection_copies(void** state) {
  uint8_t bytes[48];
  uint64_t data = alloc_data(sizeof(bytes), 16);
  Req r;
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(bytes); ++i) {
    bytes[i] = (uint8_t)(0xFF - i);
  }
  copy_to(&r, data, 0, bytes, sizeof(bytes));
  fault_inject(&r);
  assert_memory_equal((const void*)(uintptr_t)data, bytes, sizeof(bytes));
  copy_from(&r, data, 0, sizeof(bytes));
  fault_inject(&r);
  free_data(data);
  expect_return_void();
}

/* ---------------------------------------------------------------------------------------------- */
/* Stack use of MicroTVMRpcServerLoop (plain builds only: sanitizers move and pad stack frames)     */

#if !defined(__SANITIZE_ADDRESS__)
#define PAINT_BYTES 32768
#define STACK_BUDGET_BYTES 8192
static uintptr_t g_area; /* address of paint_stack's (dead) array: scanned as raw memory afterwards */

static __attribute__((noinline)) void paint_stack(void) {
  uint8_t area[PAINT_BYTES];
  memset(area, 0xA5, sizeof(area));
  g_area = (uintptr_t)area;
  __asm__ volatile("" : : "r"(area) : "memory");
}

static __attribute__((noinline)) tvm_crt_error_t loop_once(uint8_t* data, size_t len) {
  uint8_t* p = data;
  size_t n = len;
  return MicroTVMRpcServerLoop(g_server, &p, &n);
}

/* Bytes below loop_once's caller that the call dirtied (approximate: within a few dozen bytes). */
static size_t stack_used_by(const Req* r) {
  size_t i = 0;
  assert_int_equal(TVMSession_SendMessage(&g_host.session, kTVMSessionMessageNormal, r->b, r->n), kTvmErrorNoError);
  paint_stack();
  assert_int_equal(loop_once(g_to_device.data, g_to_device.len), kTvmErrorNoError);
  while (i < PAINT_BYTES && ((volatile const uint8_t*)g_area)[i] == 0xA5) {
    ++i;
  }
  g_to_device.len = 0;
  clear_replies();
  pump_device_output();
  return PAINT_BYTES - i;
}

static void test_stack_use(void** state) {
  Req r;
  size_t worst = 0, used;
  uint8_t bytes[32] = {0};
  uint64_t data = alloc_data(32, 16);
  const uint64_t echo = module_function("echo");
  (void)state;
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 2); put_i32(&r, kTVMArgInt); put_i32(&r, kTVMStr);
  put_u64(&r, 1); put_str(&r, "stack"); end(&r);
  used = stack_used_by(&r); worst = used > worst ? used : worst;
  begin(&r, 3); put_u64(&r, echo); put_i32(&r, 1); put_i32(&r, kTVMArgInt); put_u64(&r, 9); end(&r);
  used = stack_used_by(&r); worst = used > worst ? used : worst; /* the callee's error path */
  call0(0x1234); /* warm */
  begin(&r, 3); put_u64(&r, 0x1234); put_i32(&r, 0); end(&r);
  used = stack_used_by(&r); worst = used > worst ? used : worst; /* invalid handle: formatted error */
  copy_to(&r, data, 0, bytes, sizeof(bytes));
  used = stack_used_by(&r); worst = used > worst ? used : worst;
  copy_from(&r, data, 0, sizeof(bytes));
  used = stack_used_by(&r); worst = used > worst ? used : worst;
  copy_from(&r, data, 4, sizeof(bytes)); /* out of range: formatted error */
  used = stack_used_by(&r); worst = used > worst ? used : worst;
  print_message("MicroTVMRpcServerLoop stack use (incl. callee and vsnprintf): %lu bytes\n", (unsigned long)worst);
  assert_true(worst > 64); /* the measurement saw the call */
  assert_true(worst < STACK_BUDGET_BYTES);
  free_data(data);
  expect_return_void();
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_init_server, setup, teardown),
      cmocka_unit_test_setup_teardown(test_get_global_func, setup, teardown),
      cmocka_unit_test_setup_teardown(test_call_max_packet_size, setup, teardown),
      cmocka_unit_test_setup_teardown(test_call_invalid_handles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_call_every_argument_and_return_type, setup, teardown),
      cmocka_unit_test_setup_teardown(test_call_rejects_bad_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unsupported_return_and_ndarray_return, setup, teardown),
      cmocka_unit_test_setup_teardown(test_copies, setup, teardown),
      cmocka_unit_test_setup_teardown(test_copy_streams_and_crc_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_syscalls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_syscalls_allocation_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_codes_the_device_does_not_serve, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oversized_message, setup, teardown),
      cmocka_unit_test_setup_teardown(test_logs_reach_the_host, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shutdown, setup, teardown),
      cmocka_unit_test_setup_teardown(test_session_events_free_allocations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_failure_is_reported, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fault_injection_call, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fault_injection_copies, setup, teardown),
#if !defined(__SANITIZE_ADDRESS__)
      cmocka_unit_test_setup_teardown(test_stack_use, setup, teardown),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
