/*
 * fuzz_session.c -- libFuzzer target: TVMSession (behind a TVMUnframer) on arbitrary traffic.
 *
 * Input: records [u8 flags][u8 len][len bytes]. flags bit 0: wrap the bytes in a valid frame (so the
 * fuzzer reaches the session layer past the CRC); bit 1: first stamp the established session id into the
 * first two bytes; bit 2: break the frame's CRC; bit 3: become initiator (StartSession) first; bit 4: send
 * a normal message ourselves afterwards. Unframed records go to the unframer raw.
 * Checked: message bodies flow only between message_start and message_end and never exceed the announced
 * size; normal messages reach the handler only in an established session; an established id has two
 * nonzero nonces; everything the session writes decodes as good frames carrying well-formed session
 * messages. ASan/UBSan check memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/framing.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#define CHECK(cond)   \
  do {                \
    if (!(cond)) {    \
      abort();        \
    }                 \
  } while (0)

typedef struct {
  uint8_t data[1 << 16];
  size_t len;
} Out;

static Out g_out;
static TVMSession g_session;
static int g_in_message;
static uint32_t g_announced, g_received;

static tvm_crt_ssize_t out_write(void* ctx, const uint8_t* data, size_t n) {
  Out* o = (Out*)ctx;
  if (o->len + n > sizeof(o->data)) {
    o->len = 0; /* checked output is consumed as we go; keep bounded */
  }
  memcpy(&o->data[o->len], data, n);
  o->len += n;
  return (tvm_crt_ssize_t)n;
}

static tvm_crt_error_t on_start(void* ctx, TVMSessionMessageType type, uint32_t size) {
  (void)ctx;
  CHECK(!g_in_message);
  CHECK(type == kTVMSessionMessageNormal || type == kTVMSessionMessageLog);
  if (type == kTVMSessionMessageNormal) {
    CHECK(TVMSession_IsEstablished(&g_session));
  }
  g_in_message = 1;
  g_announced = size;
  g_received = 0;
  return kTvmErrorNoError;
}

static tvm_crt_error_t on_data(void* ctx, const uint8_t* data, size_t n) {
  (void)ctx;
  (void)data;
  CHECK(g_in_message);
  CHECK(n <= g_announced - g_received);
  g_received += (uint32_t)n;
  return kTvmErrorNoError;
}

static tvm_crt_error_t on_end(void* ctx, TVMSessionMessageType type, tvm_crt_error_t verdict) {
  (void)ctx;
  (void)type;
  CHECK(g_in_message);
  if (verdict == kTvmErrorNoError) {
    CHECK(g_received == g_announced);
  }
  g_in_message = 0;
  return kTvmErrorNoError;
}

static void on_event(void* ctx, TVMSessionEvent event) {
  (void)ctx;
  if (event == kTVMSessionEventEstablished) {
    CHECK(TVMSession_IsEstablished(&g_session));
    CHECK((g_session.session_id & 0xFF) != 0 && (g_session.session_id >> 8) != 0);
  }
}

/* --- checking our own output --- */
static int g_check_ok;
static uint32_t g_check_size, g_check_got;
static uint8_t g_check_header[3];

static tvm_crt_error_t chk_start(void* ctx, uint32_t size) {
  (void)ctx;
  CHECK(size >= TVM_SESSION_HEADER_BYTES);
  g_check_size = size;
  g_check_got = 0;
  return kTvmErrorNoError;
}
static tvm_crt_error_t chk_payload(void* ctx, const uint8_t* d, size_t n) {
  size_t i;
  (void)ctx;
  for (i = 0; i < n; ++i) {
    if (g_check_got + i < 3) {
      g_check_header[g_check_got + i] = d[i];
    }
  }
  g_check_got += (uint32_t)n;
  return kTvmErrorNoError;
}
static tvm_crt_error_t chk_end(void* ctx, tvm_crt_error_t verdict) {
  uint8_t type = g_check_header[2];
  (void)ctx;
  CHECK(verdict == kTvmErrorNoError);
  CHECK(g_check_got == g_check_size);
  CHECK(type == kTVMSessionMessageStartInit || type == kTVMSessionMessageStartReply ||
        type == kTVMSessionMessageTerminate || type == kTVMSessionMessageLog || type == kTVMSessionMessageNormal);
  if (type == kTVMSessionMessageTerminate || type == kTVMSessionMessageLog) {
    CHECK(g_check_header[0] == 0 && g_check_header[1] == 0);
  }
  g_check_ok++;
  return kTvmErrorNoError;
}

static void check_output(void) {
  TVMUnframer u;
  TVMUnframerHandler h;
  size_t consumed = 0;
  h.packet_start = chk_start;
  h.payload = chk_payload;
  h.packet_end = chk_end;
  h.context = NULL;
  TVMUnframer_Init(&u, &h, 1 << 16);
  CHECK(TVMUnframer_Write(&u, g_out.data, g_out.len, &consumed) == kTvmErrorNoError);
  CHECK(u.escape_pending == 0 && u.state == kTVMUnframerFindStart); /* no partial packet left */
  g_out.len = 0;
}

/* Frame `payload` (session payload) into a valid wire packet. */
static size_t make_frame(uint8_t* wire, size_t cap, const uint8_t* payload, size_t n, int break_crc) {
  static Out tmp;
  TVMFramer f;
  tmp.len = 0;
  TVMFramer_Init(&f, out_write, &tmp);
  f.state = kTVMFramerStateIdle;
  CHECK(TVMFramer_Write(&f, payload, n) == kTvmErrorNoError);
  CHECK(tmp.len <= cap);
  memcpy(wire, tmp.data, tmp.len);
  if (break_crc) {
    wire[tmp.len - 1] ^= 0x5A;
  }
  return tmp.len;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static TVMFramer framer;
  static TVMUnframer unframer;
  TVMSessionHandler sh;
  TVMUnframerHandler uh;
  size_t pos = 0;
  g_out.len = 0;
  g_in_message = 0;
  sh.message_start = on_start;
  sh.message_data = on_data;
  sh.message_end = on_end;
  sh.event = on_event;
  sh.context = NULL;
  TVMFramer_Init(&framer, out_write, &g_out);
  TVMSession_Init(&g_session, &framer, (size > 0) ? data[0] : 1, &sh);
  g_session.log_dropped_packets = 1;
  TVMSession_GetUnframerHandler(&g_session, &uh);
  TVMUnframer_Init(&unframer, &uh, 512);
  CHECK(TVMSession_Initialize(&g_session) == kTvmErrorNoError);
  check_output();
  while (pos + 2 <= size) {
    uint8_t flags = data[pos];
    size_t n = data[pos + 1];
    uint8_t payload[256];
    uint8_t wire[600];
    size_t wire_len, consumed = 0;
    pos += 2;
    if (n > size - pos) {
      n = size - pos;
    }
    memcpy(payload, &data[pos], n);
    pos += n;
    if (flags & 8) {
      CHECK(TVMSession_StartSession(&g_session) == kTvmErrorNoError);
    }
    if ((flags & 2) && n >= 2) {
      payload[0] = (uint8_t)(g_session.session_id & 0xFF);
      payload[1] = (uint8_t)(g_session.session_id >> 8);
    }
    if (flags & 1) {
      wire_len = make_frame(wire, sizeof(wire), payload, n, flags & 4);
    } else {
      memcpy(wire, payload, n);
      wire_len = n;
    }
    CHECK(TVMUnframer_Write(&unframer, wire, wire_len, &consumed) == kTvmErrorNoError);
    CHECK(consumed == wire_len);
    if ((flags & 16) && TVMSession_IsEstablished(&g_session)) {
      CHECK(TVMSession_SendMessage(&g_session, kTVMSessionMessageNormal, payload, n) == kTvmErrorNoError);
    }
    check_output();
  }
  return 0;
}
