/*
 * fuzz_unframer.c -- libFuzzer target: TVMUnframer on arbitrary bytes (SECURITY.md invariants 1-2).
 *
 * Input: byte 0 picks the maximum payload size (1..4096 by steps of 16), byte 1 the feeding piece size;
 * the rest is the stream. Checked on every call: payload only flows between packet_start and packet_end,
 * never more than announced, never a packet above the maximum; a good verdict means exactly the
 * announced bytes arrived, and re-framing them decodes to the same payload. ASan/UBSan check memory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

#define CHECK(cond)   \
  do {                \
    if (!(cond)) {    \
      abort();        \
    }                 \
  } while (0)

typedef struct {
  int in_packet;
  uint32_t announced;
  uint32_t received;
  uint32_t max;
  uint8_t payload[4096];
  int ended_ok;
} State;

static tvm_crt_error_t on_start(void* ctx, uint32_t size) {
  State* s = (State*)ctx;
  CHECK(!s->in_packet);
  CHECK(size <= s->max);
  s->in_packet = 1;
  s->announced = size;
  s->received = 0;
  return kTvmErrorNoError;
}

static tvm_crt_error_t on_payload(void* ctx, const uint8_t* data, size_t n) {
  State* s = (State*)ctx;
  CHECK(s->in_packet);
  CHECK(n > 0 && n <= s->announced - s->received);
  memcpy(&s->payload[s->received], data, n);
  s->received += (uint32_t)n;
  return kTvmErrorNoError;
}

static tvm_crt_error_t on_end(void* ctx, tvm_crt_error_t verdict) {
  State* s = (State*)ctx;
  if (verdict == kTvmErrorNoError) {
    CHECK(s->in_packet && s->received == s->announced);
    s->ended_ok++;
  } else {
    CHECK(verdict == kTvmErrorFramingCrcMismatch || verdict == kTvmErrorFramingInvalidEscape ||
          verdict == kTvmErrorFramingPayloadIncomplete || verdict == kTvmErrorFramingPacketTooLong);
  }
  s->in_packet = 0;
  return kTvmErrorNoError;
}

/* Framer output sink for the re-framing check. */
typedef struct {
  uint8_t data[2 * 4096 + 32];
  size_t len;
} Sink;

static tvm_crt_ssize_t sink_write(void* ctx, const uint8_t* data, size_t n) {
  Sink* s = (Sink*)ctx;
  CHECK(s->len + n <= sizeof(s->data));
  memcpy(&s->data[s->len], data, n);
  s->len += n;
  return (tvm_crt_ssize_t)n;
}

typedef struct {
  State outer;
  uint8_t last_payload[4096];
  uint32_t last_len;
  int have_last;
} Harness;

static tvm_crt_error_t h_start(void* ctx, uint32_t size) { return on_start(&((Harness*)ctx)->outer, size); }
static tvm_crt_error_t h_payload(void* ctx, const uint8_t* d, size_t n) {
  return on_payload(&((Harness*)ctx)->outer, d, n);
}
static tvm_crt_error_t h_end(void* ctx, tvm_crt_error_t verdict) {
  Harness* h = (Harness*)ctx;
  if (verdict == kTvmErrorNoError && h->outer.in_packet) {
    memcpy(h->last_payload, h->outer.payload, h->outer.received);
    h->last_len = h->outer.received;
    h->have_last = 1;
  }
  return on_end(&h->outer, verdict);
}

/* Decode `wire` and require exactly one good packet equal to payload[0:len]. */
static void check_reframe(const uint8_t* payload, uint32_t len, uint32_t max) {
  static Sink sink;
  static State st;
  TVMFramer f;
  TVMUnframer u;
  TVMUnframerHandler h;
  size_t consumed = 0;
  sink.len = 0;
  TVMFramer_Init(&f, sink_write, &sink);
  CHECK(TVMFramer_Write(&f, payload, len) == kTvmErrorNoError);
  memset(&st, 0, sizeof(st));
  st.max = max;
  h.packet_start = on_start;
  h.payload = on_payload;
  h.packet_end = on_end;
  h.context = &st;
  TVMUnframer_Init(&u, &h, max);
  CHECK(TVMUnframer_Write(&u, sink.data, sink.len, &consumed) == kTvmErrorNoError);
  CHECK(consumed == sink.len);
  CHECK(st.ended_ok == 1);
  CHECK(st.received == len && memcmp(st.payload, payload, len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness harness;
  TVMUnframer u;
  TVMUnframerHandler h;
  uint32_t max;
  size_t step, i;
  if (size < 2) {
    return 0;
  }
  max = 1U + 16U * (uint32_t)data[0];
  step = 1U + (size_t)data[1];
  memset(&harness, 0, sizeof(harness));
  harness.outer.max = max;
  h.packet_start = h_start;
  h.payload = h_payload;
  h.packet_end = h_end;
  h.context = &harness;
  TVMUnframer_Init(&u, &h, max);
  for (i = 2; i < size; i += step) {
    size_t n = (size - i < step) ? size - i : step;
    size_t consumed = 0;
    CHECK(TVMUnframer_Write(&u, &data[i], n, &consumed) == kTvmErrorNoError);
    CHECK(consumed == n);
    if (harness.have_last) {
      harness.have_last = 0;
      check_reframe(harness.last_payload, harness.last_len, max);
    }
  }
  return 0;
}
