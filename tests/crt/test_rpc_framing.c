/*
 * test_rpc_framing.c -- crc16, TVMFramer and TVMUnframer against the shared vectors (tests/vectors,
 * through the generated rpc_vectors.h) and against hand-made malformed input: every vector whole, one
 * byte at a time and with trailing bytes; NOP, restart, invalid escape, too long, bad CRC, short writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

#include "rpc_vectors.h"

/* ---------------------------------------------------------------------------------------------- */
/* A write function capturing into a buffer; can write at most `max_per_call` bytes per call and fail. */

typedef struct {
  uint8_t data[16384];
  size_t len;
  size_t max_per_call; /* 0 = unlimited */
  int calls;
  int fail_at_call;    /* 1-based call number that fails (returns fail_value); 0 = never */
  tvm_crt_ssize_t fail_value;
} Capture;

static tvm_crt_ssize_t capture_write(void* context, const uint8_t* data, size_t num_bytes) {
  Capture* c = (Capture*)context;
  size_t n = num_bytes;
  c->calls++;
  if ((c->fail_at_call != 0) && (c->calls == c->fail_at_call)) {
    return c->fail_value;
  }
  if ((c->max_per_call != 0U) && (n > c->max_per_call)) {
    n = c->max_per_call;
  }
  assert_true(c->len + n <= sizeof(c->data));
  memcpy(&c->data[c->len], data, n);
  c->len += n;
  return (tvm_crt_ssize_t)n;
}

/* ---------------------------------------------------------------------------------------------- */
/* An unframer handler recording what it is told. */

#define MAX_PACKETS 32
typedef struct {
  int starts;
  int ends;
  int payload_calls;
  uint32_t announced[MAX_PACKETS];
  tvm_crt_error_t verdicts[MAX_PACKETS];
  size_t len_at_end[MAX_PACKETS]; /* payload bytes delivered when packet_end came */
  uint8_t data[16384];
  size_t len;
  size_t packet_begin;            /* offset of the current packet's payload in data */
  int refuse_start;
  tvm_crt_error_t end_return;
} Recorder;

static tvm_crt_error_t rec_start(void* context, uint32_t size) {
  Recorder* r = (Recorder*)context;
  assert_true(r->starts < MAX_PACKETS);
  r->announced[r->starts] = size;
  r->starts++;
  r->packet_begin = r->len;
  return r->refuse_start ? kTvmErrorSessionInvalidMessage : kTvmErrorNoError;
}

static tvm_crt_error_t rec_payload(void* context, const uint8_t* data, size_t size) {
  Recorder* r = (Recorder*)context;
  assert_true(size > 0U);
  assert_true(r->len + size <= sizeof(r->data));
  memcpy(&r->data[r->len], data, size);
  r->len += size;
  r->payload_calls++;
  return kTvmErrorNoError;
}

static tvm_crt_error_t rec_end(void* context, tvm_crt_error_t verdict) {
  Recorder* r = (Recorder*)context;
  assert_true(r->ends < MAX_PACKETS);
  r->verdicts[r->ends] = verdict;
  r->len_at_end[r->ends] = r->len - r->packet_begin;
  r->ends++;
  return r->end_return;
}

static void unframer_for(TVMUnframer* u, Recorder* r, uint32_t max) {
  TVMUnframerHandler h;
  memset(r, 0, sizeof(*r));
  h.packet_start = rec_start;
  h.payload = rec_payload;
  h.packet_end = rec_end;
  h.context = r;
  TVMUnframer_Init(u, &h, max);
}

static void feed(TVMUnframer* u, const uint8_t* data, size_t len, size_t step) {
  size_t i = 0;
  while (i < len) {
    size_t n = (len - i < step) ? len - i : step;
    size_t consumed = 0;
    assert_int_equal(TVMUnframer_Write(u, &data[i], n, &consumed), kTvmErrorNoError);
    assert_int_equal(consumed, n);
    i += n;
  }
}

/* ---------------------------------------------------------------------------------------------- */
/* crc16 */

static void test_crc16_vectors(void** state) {
  size_t i, split;
  (void)state;
  for (i = 0; i < NUM_CRC_VECTORS; ++i) {
    const CrcVector* v = &kCrcVectors[i];
    assert_int_equal(TVMCrc16_Update(TVM_CRC16_INITIAL, v->data, v->len), v->crc);
    for (split = 0; split <= v->len; ++split) { /* in two pieces at every split point */
      uint16_t c = TVMCrc16_Update(TVM_CRC16_INITIAL, v->data, split);
      assert_int_equal(TVMCrc16_Update(c, &v->data[split], v->len - split), v->crc);
    }
  }
}

/* The framing CRC equals the CRC of the wire through the payload (docs/architecture.md §5.1). */
static void test_crc16_covers_wire_through_payload(void** state) {
  size_t i;
  (void)state;
  for (i = 0; i < NUM_FRAMING_VECTORS; ++i) {
    const FramingVector* v = &kFramingVectors[i];
    /* the CRC field is 2 to 4 bytes on the wire (each FF escaped); try where it would begin */
    size_t tail;
    int found = 0;
    for (tail = 2; tail <= 4 && !found; ++tail) {
      uint16_t crc = TVMCrc16_Update(TVM_CRC16_INITIAL, v->wire, v->wire_len - tail);
      uint8_t field[4];
      size_t n = 0;
      uint8_t lo = (uint8_t)(crc & 0xFF), hi = (uint8_t)(crc >> 8);
      field[n++] = lo;
      if (lo == 0xFF) field[n++] = 0xFF;
      field[n++] = hi;
      if (hi == 0xFF) field[n++] = 0xFF;
      found = (n == tail) && (memcmp(field, &v->wire[v->wire_len - tail], n) == 0);
    }
    assert_true(found);
  }
}

/* ---------------------------------------------------------------------------------------------- */
/* Framer */

static void test_framer_vectors(void** state) {
  size_t i;
  (void)state;
  for (i = 0; i < NUM_FRAMING_VECTORS; ++i) {
    const FramingVector* v = &kFramingVectors[i];
    Capture cap;
    TVMFramer f;
    memset(&cap, 0, sizeof(cap));
    TVMFramer_Init(&f, capture_write, &cap);
    /* first packet after reset: one raw FE, then the vector */
    assert_int_equal(TVMFramer_Write(&f, v->payload, v->payload_len), kTvmErrorNoError);
    assert_int_equal(cap.len, v->wire_len + 1U);
    assert_int_equal(cap.data[0], FRAMING_RESET_PREFIX);
    assert_memory_equal(&cap.data[1], v->wire, v->wire_len);
    /* second packet: exactly the vector */
    cap.len = 0;
    assert_int_equal(TVMFramer_Write(&f, v->payload, v->payload_len), kTvmErrorNoError);
    assert_int_equal(cap.len, v->wire_len);
    assert_memory_equal(cap.data, v->wire, v->wire_len);
  }
}

/* Payload written a byte at a time, through a write function taking one byte per call: same bytes. */
static void test_framer_chunked_and_short_writes(void** state) {
  size_t i, j;
  (void)state;
  for (i = 0; i < NUM_FRAMING_VECTORS; ++i) {
    const FramingVector* v = &kFramingVectors[i];
    Capture cap;
    TVMFramer f;
    memset(&cap, 0, sizeof(cap));
    cap.max_per_call = 1;
    TVMFramer_Init(&f, capture_write, &cap);
    assert_int_equal(TVMFramer_StartPacket(&f, (uint32_t)v->payload_len), kTvmErrorNoError);
    for (j = 0; j < v->payload_len; ++j) {
      assert_int_equal(TVMFramer_WritePayloadChunk(&f, &v->payload[j], 1), kTvmErrorNoError);
    }
    assert_int_equal(TVMFramer_FinishPacket(&f), kTvmErrorNoError);
    assert_int_equal(cap.len, v->wire_len + 1U);
    assert_memory_equal(&cap.data[1], v->wire, v->wire_len);
  }
}

static void test_framer_misuse(void** state) {
  static const uint8_t payload[4] = {1, 2, 3, 4};
  Capture cap;
  TVMFramer f;
  (void)state;
  memset(&cap, 0, sizeof(cap));
  TVMFramer_Init(&f, capture_write, &cap);
  assert_int_equal(TVMFramer_WritePayloadChunk(&f, payload, 1), kTvmErrorFramingInvalidState);
  assert_int_equal(TVMFramer_FinishPacket(&f), kTvmErrorFramingInvalidState);
  assert_int_equal(TVMFramer_StartPacket(&f, 3), kTvmErrorNoError);
  assert_int_equal(TVMFramer_StartPacket(&f, 3), kTvmErrorFramingInvalidState);
  assert_int_equal(TVMFramer_WritePayloadChunk(&f, payload, 4), kTvmErrorFramingPayloadOverflow);
  assert_int_equal(TVMFramer_WritePayloadChunk(&f, payload, 2), kTvmErrorNoError);
  assert_int_equal(TVMFramer_FinishPacket(&f), kTvmErrorFramingPayloadIncomplete);
  assert_int_equal(TVMFramer_WritePayloadChunk(&f, payload, 1), kTvmErrorNoError);
  assert_int_equal(TVMFramer_FinishPacket(&f), kTvmErrorNoError);
}

static void test_framer_write_errors(void** state) {
  static const uint8_t payload[3] = {0x6f, 0x6e, 0x65};
  Capture cap;
  TVMFramer f;
  (void)state;
  /* a write function that fails */
  memset(&cap, 0, sizeof(cap));
  cap.fail_at_call = 1;
  cap.fail_value = -1;
  TVMFramer_Init(&f, capture_write, &cap);
  assert_int_equal(TVMFramer_Write(&f, payload, 3), kTvmErrorWriteStreamShortWrite);
  /* ... then works again: the framer starts over from reset (FE prefix) */
  assert_int_equal(TVMFramer_Write(&f, payload, 3), kTvmErrorNoError);
  assert_int_equal(cap.data[0], FRAMING_RESET_PREFIX);
  assert_memory_equal(&cap.data[1], kFramingVectors[0].wire, kFramingVectors[0].wire_len);
  /* one that writes nothing */
  memset(&cap, 0, sizeof(cap));
  cap.fail_at_call = 1;
  cap.fail_value = 0;
  TVMFramer_Init(&f, capture_write, &cap);
  assert_int_equal(TVMFramer_Write(&f, payload, 3), kTvmErrorWriteStreamShortWrite);
  /* one that claims to have written more than it was given */
  memset(&cap, 0, sizeof(cap));
  cap.fail_at_call = 1;
  cap.fail_value = 1000;
  TVMFramer_Init(&f, capture_write, &cap);
  assert_int_equal(TVMFramer_Write(&f, payload, 3), kTvmErrorWriteStreamLongWrite);
}

/* ---------------------------------------------------------------------------------------------- */
/* Unframer */

static void check_one_packet(const Recorder* r, const FramingVector* v) {
  assert_int_equal(r->starts, 1);
  assert_int_equal(r->ends, 1);
  assert_int_equal(r->announced[0], v->payload_len);
  assert_int_equal(r->verdicts[0], kTvmErrorNoError);
  assert_int_equal(r->len, v->payload_len);
  assert_int_equal(r->len_at_end[0], v->payload_len);
  if (v->payload_len > 0U) {
    assert_memory_equal(r->data, v->payload, v->payload_len);
  }
}

/* h11's tr(): whole, byte at a time, with trailing bytes. */
static void test_unframer_vectors(void** state) {
  size_t i, step;
  (void)state;
  for (i = 0; i < NUM_FRAMING_VECTORS; ++i) {
    const FramingVector* v = &kFramingVectors[i];
    for (step = 1; step <= v->wire_len; step = (step == 1) ? v->wire_len : v->wire_len + 1U) {
      TVMUnframer u;
      Recorder r;
      unframer_for(&u, &r, 4096);
      feed(&u, v->wire, v->wire_len, step);
      check_one_packet(&r, v);
      assert_int_equal(u.stats.packets_ok, 1);
    }
    { /* trailing bytes: the start of the next packet; then the rest of it */
      TVMUnframer u;
      Recorder r;
      uint8_t buf[1024];
      unframer_for(&u, &r, 4096);
      assert_true(2U * v->wire_len + 1U <= sizeof(buf));
      buf[0] = FRAMING_RESET_PREFIX;
      memcpy(&buf[1], v->wire, v->wire_len);
      memcpy(&buf[1 + v->wire_len], v->wire, v->wire_len);
      feed(&u, buf, v->wire_len + 4U, v->wire_len + 4U);
      assert_int_equal(r.ends, 1);
      assert_int_equal(r.verdicts[0], kTvmErrorNoError);
      feed(&u, &buf[v->wire_len + 4U], v->wire_len - 3U, 1);
      assert_int_equal(r.ends, 2);
      assert_int_equal(r.verdicts[1], kTvmErrorNoError);
      assert_int_equal(r.len, 2U * v->payload_len);
    }
  }
}

/* Payload bytes reach the consumer before the CRC arrives. */
static void test_unframer_streams_payload(void** state) {
  const FramingVector* v = &kFramingVectors[4]; /* length_with_ff: 255 bytes */
  TVMUnframer u;
  Recorder r;
  (void)state;
  assert_true(v->payload_len > 200U);
  unframer_for(&u, &r, 4096);
  feed(&u, v->wire, v->wire_len - 2U, 1); /* everything but the CRC */
  assert_int_equal(r.len, v->payload_len);
  assert_int_equal(r.ends, 0);
  feed(&u, &v->wire[v->wire_len - 2U], 2, 1);
  assert_int_equal(r.ends, 1);
  assert_int_equal(r.verdicts[0], kTvmErrorNoError);
  assert_true(r.payload_calls > 1);
}

static void test_unframer_noise_between_packets(void** state) {
  const FramingVector* v = &kFramingVectors[0];
  static const uint8_t noise[] = {0x00, 0x12, 0xFE, 0xFF, 0xFE, 0xFF, 0xFF, 0x41, 0xFF, 0x01, 0x99};
  uint8_t buf[256];
  TVMUnframer u;
  Recorder r;
  (void)state;
  memcpy(buf, noise, sizeof(noise));
  memcpy(&buf[sizeof(noise)], v->wire, v->wire_len);
  unframer_for(&u, &r, 4096);
  feed(&u, buf, sizeof(noise) + v->wire_len, 1);
  check_one_packet(&r, v);
}

/* FF FE inside a packet is ignored but counted in the CRC (docs/architecture.md §5.1). */
static void test_unframer_nop_inside_packet(void** state) {
  static const uint8_t head[] = {0xFF, 0xFD, 0x03, 0x00, 0xFF, 0xFE, 0x00, 0x00, 0x6F, 0xFF, 0xFE, 0x6E, 0x65};
  uint8_t wire[32];
  uint16_t crc = TVMCrc16_Update(TVM_CRC16_INITIAL, head, sizeof(head));
  TVMUnframer u;
  Recorder r;
  (void)state;
  assert_true((crc & 0xFF) != 0xFF && (crc >> 8) != 0xFF);
  memcpy(wire, head, sizeof(head));
  wire[sizeof(head)] = (uint8_t)(crc & 0xFF);
  wire[sizeof(head) + 1] = (uint8_t)(crc >> 8);
  unframer_for(&u, &r, 4096);
  feed(&u, wire, sizeof(head) + 2U, 1);
  assert_int_equal(r.ends, 1);
  assert_int_equal(r.verdicts[0], kTvmErrorNoError);
  assert_int_equal(r.len, 3);
  assert_memory_equal(r.data, "one", 3);
  /* the original CRC (without the NOPs) no longer matches */
  unframer_for(&u, &r, 4096);
  wire[sizeof(head)] = 0x58;
  wire[sizeof(head) + 1] = 0xF4;
  feed(&u, wire, sizeof(head) + 2U, sizeof(head) + 2U);
  assert_int_equal(r.verdicts[0], kTvmErrorFramingCrcMismatch);
  assert_int_equal(u.stats.crc_errors, 1);
}

/* FF FD inside a packet drops it and starts a new one. */
static void test_unframer_restart(void** state) {
  static const uint8_t partial[] = {0xFF, 0xFD, 0x05, 0x00, 0x00, 0x00, 0x61, 0x62};
  const FramingVector* v = &kFramingVectors[0];
  uint8_t buf[64];
  TVMUnframer u;
  Recorder r;
  (void)state;
  memcpy(buf, partial, sizeof(partial));
  memcpy(&buf[sizeof(partial)], v->wire, v->wire_len);
  unframer_for(&u, &r, 4096);
  feed(&u, buf, sizeof(partial) + v->wire_len, 1);
  assert_int_equal(r.starts, 2);
  assert_int_equal(r.ends, 2);
  assert_int_equal(r.verdicts[0], kTvmErrorFramingPayloadIncomplete);
  assert_int_equal(r.verdicts[1], kTvmErrorNoError);
  assert_int_equal(r.len_at_end[1], 3);
  assert_memory_equal(&r.data[2], "one", 3);
  assert_int_equal(u.stats.restarts, 1);
  /* restart inside the length field and inside the CRC field */
  {
    static const uint8_t in_length[] = {0xFF, 0xFD, 0x03, 0x00};
    static const uint8_t in_crc[] = {0xFF, 0xFD, 0x03, 0x00, 0x00, 0x00, 0x6F, 0x6E, 0x65, 0x58};
    unframer_for(&u, &r, 4096);
    feed(&u, in_length, sizeof(in_length), 1);
    feed(&u, in_crc, sizeof(in_crc), 1);
    feed(&u, v->wire, v->wire_len, 1);
    assert_int_equal(r.ends, 3);
    assert_int_equal(r.verdicts[0], kTvmErrorFramingPayloadIncomplete);
    assert_int_equal(r.verdicts[1], kTvmErrorFramingPayloadIncomplete);
    assert_int_equal(r.verdicts[2], kTvmErrorNoError);
  }
}

static void test_unframer_invalid_escape(void** state) {
  static const uint8_t bad[] = {0xFF, 0xFD, 0x03, 0x00, 0x00, 0x00, 0x6F, 0xFF, 0x01, 0x65, 0x58, 0xF4};
  const FramingVector* v = &kFramingVectors[0];
  uint8_t buf[64];
  TVMUnframer u;
  Recorder r;
  (void)state;
  memcpy(buf, bad, sizeof(bad));
  memcpy(&buf[sizeof(bad)], v->wire, v->wire_len);
  unframer_for(&u, &r, 4096);
  feed(&u, buf, sizeof(bad) + v->wire_len, sizeof(bad) + v->wire_len);
  assert_int_equal(r.ends, 2);
  assert_int_equal(r.verdicts[0], kTvmErrorFramingInvalidEscape);
  assert_int_equal(r.verdicts[1], kTvmErrorNoError);
  assert_int_equal(u.stats.invalid_escapes, 1);
  assert_int_equal(u.stats.packets_ok, 1);
}

static void test_unframer_too_long(void** state) {
  const FramingVector* v = &kFramingVectors[4]; /* 255-byte payload */
  const FramingVector* one = &kFramingVectors[0];
  TVMUnframer u;
  Recorder r;
  (void)state;
  unframer_for(&u, &r, (uint32_t)v->payload_len - 1U);
  feed(&u, v->wire, v->wire_len, 7);
  feed(&u, one->wire, one->wire_len, 1);
  assert_int_equal(r.starts, 1); /* only `one` was started */
  assert_int_equal(r.ends, 2);
  assert_int_equal(r.verdicts[0], kTvmErrorFramingPacketTooLong);
  assert_int_equal(r.verdicts[1], kTvmErrorNoError);
  assert_int_equal(u.stats.too_long, 1);
  assert_int_equal(r.len, 3);
  /* exactly the maximum is accepted */
  unframer_for(&u, &r, (uint32_t)v->payload_len);
  feed(&u, v->wire, v->wire_len, 7);
  check_one_packet(&r, v);
}

/* A truncated packet ending in a dangling escape byte, then a packet: FF FF FD between packets starts
 * one. Inside a too-long packet (skipped) an escaped FF FD is data, not a start. */
static void test_unframer_dangling_escape_and_skipped_data(void** state) {
  static const uint8_t dangling[] = {0xFF, 0xFD, 0x09, 0x00, 0x00, 0x00, 0x61, 0xFF};
  static const uint8_t long_with_fffd[] = {0xFF, 0xFD, 0x08, 0x00, 0x00, 0x00, 0x01, 0x02, 0xFF,
                                           0xFF, 0xFD, 0x05, 0x00, 0x00, 0x00, 0x07, 0x08, 0x09, 0x00, 0x00};
  const FramingVector* v = &kFramingVectors[0];
  TVMUnframer u;
  Recorder r;
  (void)state;
  /* the dangling FF swallows the next FF as data inside the truncated packet: FD is then data, so the
   * next start is lost ... */
  unframer_for(&u, &r, 4096);
  feed(&u, dangling, sizeof(dangling), 1);
  feed(&u, v->wire, v->wire_len, 1);
  /* ... but once that packet has ended (here: bad CRC), FF FF FD outside a packet starts one */
  feed(&u, (const uint8_t*)"\xFF", 1, 1);
  feed(&u, v->wire, v->wire_len, 1);
  assert_int_equal(r.verdicts[r.ends - 1], kTvmErrorNoError);
  assert_int_equal(r.len_at_end[r.ends - 1], 3);
  /* skipped packet (8 > max 4) containing escaped FF then FD 05 00 ... : no false start */
  unframer_for(&u, &r, 4);
  feed(&u, long_with_fffd, sizeof(long_with_fffd), 1);
  assert_int_equal(r.starts, 0);
  assert_int_equal(r.ends, 1);
  assert_int_equal(r.verdicts[0], kTvmErrorFramingPacketTooLong);
  feed(&u, v->wire, v->wire_len, 1);
  assert_int_equal(r.starts, 1);
  assert_int_equal(r.verdicts[1], kTvmErrorNoError);
}

static void test_unframer_bad_crc(void** state) {
  size_t i, k;
  (void)state;
  for (i = 0; i < NUM_FRAMING_VECTORS; ++i) {
    const FramingVector* v = &kFramingVectors[i];
    for (k = 1; k <= 2; ++k) {
      uint8_t wire[1024];
      TVMUnframer u;
      Recorder r;
      memcpy(wire, v->wire, v->wire_len);
      wire[v->wire_len - k] ^= 0x01;
      unframer_for(&u, &r, 4096);
      feed(&u, wire, v->wire_len, 1);
      assert_int_equal(r.ends, 1);
      assert_int_equal(r.verdicts[0], kTvmErrorFramingCrcMismatch);
    }
  }
}

/* A refused packet_start: the payload is skipped but the end still comes; an error from packet_end
 * stops Write right after that packet. */
static void test_unframer_handler_control(void** state) {
  const FramingVector* v = &kFramingVectors[0];
  uint8_t buf[64];
  size_t consumed = 0;
  TVMUnframer u;
  Recorder r;
  (void)state;
  unframer_for(&u, &r, 4096);
  r.refuse_start = 1;
  feed(&u, v->wire, v->wire_len, 1);
  assert_int_equal(r.len, 0);
  assert_int_equal(r.ends, 1);
  assert_int_equal(r.verdicts[0], kTvmErrorNoError);

  unframer_for(&u, &r, 4096);
  r.end_return = kTvmErrorPlatformShutdown;
  memcpy(buf, v->wire, v->wire_len);
  memcpy(&buf[v->wire_len], v->wire, v->wire_len);
  assert_int_equal(TVMUnframer_Write(&u, buf, 2U * v->wire_len, &consumed), kTvmErrorPlatformShutdown);
  assert_int_equal(consumed, v->wire_len);
  assert_int_equal(r.ends, 1);
}

/* Framer -> unframer round trip over many payloads, fed in irregular pieces. */
static void test_round_trip(void** state) {
  uint32_t seed = 12345U;
  int trial;
  (void)state;
  for (trial = 0; trial < 200; ++trial) {
    uint8_t payload[3000];
    size_t len, i, pos = 0;
    Capture cap;
    TVMFramer f;
    TVMUnframer u;
    Recorder r;
    seed = seed * 1103515245U + 12345U;
    len = (seed >> 8) % sizeof(payload);
    for (i = 0; i < len; ++i) {
      seed = seed * 1103515245U + 12345U;
      /* plenty of FF and FD/FE to exercise escaping */
      payload[i] = ((seed >> 16) % 4U == 0U) ? (uint8_t)(0xFCU + ((seed >> 20) % 4U)) : (uint8_t)(seed >> 24);
    }
    memset(&cap, 0, sizeof(cap));
    TVMFramer_Init(&f, capture_write, &cap);
    assert_int_equal(TVMFramer_Write(&f, payload, len), kTvmErrorNoError);
    unframer_for(&u, &r, 4096);
    while (pos < cap.len) {
      size_t n;
      seed = seed * 1103515245U + 12345U;
      n = 1U + (seed >> 10) % 97U;
      if (n > cap.len - pos) {
        n = cap.len - pos;
      }
      feed(&u, &cap.data[pos], n, n);
      pos += n;
    }
    assert_int_equal(r.ends, 1);
    assert_int_equal(r.verdicts[0], kTvmErrorNoError);
    assert_int_equal(r.len, len);
    if (len > 0U) {
      assert_memory_equal(r.data, payload, len);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc16_vectors),
      cmocka_unit_test(test_crc16_covers_wire_through_payload),
      cmocka_unit_test(test_framer_vectors),
      cmocka_unit_test(test_framer_chunked_and_short_writes),
      cmocka_unit_test(test_framer_misuse),
      cmocka_unit_test(test_framer_write_errors),
      cmocka_unit_test(test_unframer_vectors),
      cmocka_unit_test(test_unframer_streams_payload),
      cmocka_unit_test(test_unframer_noise_between_packets),
      cmocka_unit_test(test_unframer_nop_inside_packet),
      cmocka_unit_test(test_unframer_restart),
      cmocka_unit_test(test_unframer_invalid_escape),
      cmocka_unit_test(test_unframer_too_long),
      cmocka_unit_test(test_unframer_dangling_escape_and_skipped_data),
      cmocka_unit_test(test_unframer_bad_crc),
      cmocka_unit_test(test_unframer_handler_control),
      cmocka_unit_test(test_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
