/*
 * test_rpc_session.c -- the session layer: the vectors of tests/vectors/session.json (as initiator and
 * as responder), the nonce rule, handshakes between two in-memory peers (normal, simultaneous inits,
 * equal nonces), terminate, log messages in any state, stale sessions, malformed packets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <tvm/runtime/crt/rpc_common/framing.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#include "rpc_vectors.h"

enum { V_INIT = 0, V_REPLY = 1, V_HELLO = 2, V_TERMINATE = 3, V_LOG = 4 };

/* One end of the link: output captured, input from the other end. */
typedef struct {
  uint8_t out[8192];
  size_t out_len;
  TVMFramer framer;
  TVMSession session;
  TVMUnframer unframer;
  /* what the handler saw */
  int starts, ends, established, terminated;
  TVMSessionMessageType last_type;
  uint32_t last_size;
  tvm_crt_error_t last_verdict;
  uint8_t body[4096];
  size_t body_len;
  size_t body_len_at_end;
  int refuse;
} Peer;

static tvm_crt_ssize_t peer_write(void* context, const uint8_t* data, size_t n) {
  Peer* p = (Peer*)context;
  assert_true(p->out_len + n <= sizeof(p->out));
  memcpy(&p->out[p->out_len], data, n);
  p->out_len += n;
  return (tvm_crt_ssize_t)n;
}

static tvm_crt_error_t on_start(void* context, TVMSessionMessageType type, uint32_t size) {
  Peer* p = (Peer*)context;
  p->starts++;
  p->last_type = type;
  p->last_size = size;
  p->body_len = 0;
  return p->refuse ? kTvmErrorSessionInvalidMessage : kTvmErrorNoError;
}

static tvm_crt_error_t on_data(void* context, const uint8_t* data, size_t n) {
  Peer* p = (Peer*)context;
  assert_true(p->body_len + n <= sizeof(p->body));
  memcpy(&p->body[p->body_len], data, n);
  p->body_len += n;
  return kTvmErrorNoError;
}

static tvm_crt_error_t on_end(void* context, TVMSessionMessageType type, tvm_crt_error_t verdict) {
  Peer* p = (Peer*)context;
  assert_int_equal(type, p->last_type);
  p->ends++;
  p->last_verdict = verdict;
  p->body_len_at_end = p->body_len;
  return kTvmErrorNoError;
}

static void on_event(void* context, TVMSessionEvent event) {
  Peer* p = (Peer*)context;
  if (event == kTVMSessionEventEstablished) {
    p->established++;
  } else {
    p->terminated++;
  }
}

static void peer_init(Peer* p, uint8_t initial_nonce) {
  TVMSessionHandler h;
  TVMUnframerHandler uh;
  memset(p, 0, sizeof(*p));
  h.message_start = on_start;
  h.message_data = on_data;
  h.message_end = on_end;
  h.event = on_event;
  h.context = p;
  TVMFramer_Init(&p->framer, peer_write, p);
  TVMSession_Init(&p->session, &p->framer, initial_nonce, &h);
  TVMSession_GetUnframerHandler(&p->session, &uh);
  TVMUnframer_Init(&p->unframer, &uh, 4096);
}

static void receive(Peer* p, const uint8_t* data, size_t len, size_t step) {
  size_t i = 0;
  while (i < len) {
    size_t n = (len - i < step) ? len - i : step;
    size_t consumed = 0;
    assert_int_equal(TVMUnframer_Write(&p->unframer, &data[i], n, &consumed), kTvmErrorNoError);
    assert_int_equal(consumed, n);
    i += n;
  }
}

/* Move bytes both ways until both sides are quiet. */
static void pump(Peer* a, Peer* b) {
  int rounds = 0;
  while ((a->out_len > 0 || b->out_len > 0) && rounds < 20) {
    uint8_t tmp[8192];
    size_t n = a->out_len;
    memcpy(tmp, a->out, n);
    a->out_len = 0;
    receive(b, tmp, n, 3);
    n = b->out_len;
    memcpy(tmp, b->out, n);
    b->out_len = 0;
    receive(a, tmp, n, 5);
    rounds++;
  }
  assert_true(rounds < 20);
}

/* Expect `out` to be exactly the vector's wire, after an FE if `reset_prefix`. */
static void expect_output(Peer* p, int reset_prefix, const SessionVector* v) {
  size_t off = reset_prefix ? 1U : 0U;
  assert_int_equal(p->out_len, v->wire_len + off);
  if (reset_prefix) {
    assert_int_equal(p->out[0], FRAMING_RESET_PREFIX);
  }
  assert_memory_equal(&p->out[off], v->wire, v->wire_len);
  p->out_len = 0;
}

static uint8_t nonce_before(uint8_t target) {
  int n;
  for (n = 0; n < 256; ++n) {
    if (TVMSession_NextNonce((uint8_t)n) == target) {
      return (uint8_t)n;
    }
  }
  fail_msg("no nonce precedes 0x%02x", target);
  return 0;
}

/* ---------------------------------------------------------------------------------------------- */

static void test_nonce_rule(void** state) {
  uint8_t n = 1;
  int i;
  (void)state;
  for (i = 0; i < NUM_NONCE_SEQUENCE; ++i) {
    assert_int_equal(n, kNonceSequence[i]);
    n = TVMSession_NextNonce(n);
  }
  for (i = 0; i < 256; ++i) {
    assert_int_not_equal(TVMSession_NextNonce((uint8_t)i), 0);
  }
}

static void test_initiator_vectors(void** state) {
  Peer p;
  (void)state;
  peer_init(&p, nonce_before(SESSION_INITIATOR_NONCE));
  assert_int_equal(TVMSession_StartSession(&p.session), kTvmErrorNoError);
  expect_output(&p, 1, &kSessionVectors[V_INIT]);
  assert_false(TVMSession_IsEstablished(&p.session));
  /* normal messages are refused until the reply comes */
  assert_int_equal(TVMSession_SendMessage(&p.session, kTVMSessionMessageNormal, (const uint8_t*)"x", 1),
                   kTvmErrorSessionInvalidState);
  receive(&p, kSessionVectors[V_REPLY].wire, kSessionVectors[V_REPLY].wire_len, 1);
  assert_true(TVMSession_IsEstablished(&p.session));
  assert_int_equal(p.session.session_id, kSessionVectors[V_REPLY].session_id);
  assert_int_equal(p.established, 1);
  assert_int_equal(p.out_len, 0);
  assert_int_equal(TVMSession_SendMessage(&p.session, kTVMSessionMessageNormal, kSessionVectors[V_HELLO].body,
                                          kSessionVectors[V_HELLO].body_len),
                   kTvmErrorNoError);
  expect_output(&p, 0, &kSessionVectors[V_HELLO]);
}

static void test_responder_vectors(void** state) {
  Peer p;
  size_t step;
  (void)state;
  for (step = 1; step <= 64; step += 63) { /* byte at a time and whole */
    peer_init(&p, nonce_before(SESSION_RESPONDER_NONCE));
    receive(&p, kSessionVectors[V_INIT].wire, kSessionVectors[V_INIT].wire_len, step);
    expect_output(&p, 1, &kSessionVectors[V_REPLY]);
    assert_true(TVMSession_IsEstablished(&p.session));
    assert_int_equal(p.established, 1);
    receive(&p, kSessionVectors[V_HELLO].wire, kSessionVectors[V_HELLO].wire_len, step);
    assert_int_equal(p.ends, 1);
    assert_int_equal(p.last_type, kTVMSessionMessageNormal);
    assert_int_equal(p.last_verdict, kTvmErrorNoError);
    assert_int_equal(p.body_len, 5);
    assert_memory_equal(p.body, "hello", 5);
  }
}

/* The body streams: with the CRC still missing, every body byte is already there. */
static void test_body_streams_before_verdict(void** state) {
  Peer p;
  const SessionVector* hello = &kSessionVectors[V_HELLO];
  (void)state;
  peer_init(&p, nonce_before(SESSION_RESPONDER_NONCE));
  receive(&p, kSessionVectors[V_INIT].wire, kSessionVectors[V_INIT].wire_len, 100);
  receive(&p, hello->wire, hello->wire_len - 2U, 1);
  assert_int_equal(p.body_len, 5);
  assert_int_equal(p.ends, 0);
  receive(&p, &hello->wire[hello->wire_len - 2U], 2, 1);
  assert_int_equal(p.ends, 1);
}

static void test_terminate_and_log_vectors(void** state) {
  Peer p;
  (void)state;
  peer_init(&p, 7);
  assert_int_equal(TVMSession_Initialize(&p.session), kTvmErrorNoError);
  expect_output(&p, 1, &kSessionVectors[V_TERMINATE]);
  assert_int_equal(TVMSession_Terminate(&p.session), kTvmErrorNoError);
  expect_output(&p, 0, &kSessionVectors[V_TERMINATE]);
  assert_int_equal(TVMSession_SendMessage(&p.session, kTVMSessionMessageLog, kSessionVectors[V_LOG].body,
                                          kSessionVectors[V_LOG].body_len),
                   kTvmErrorNoError);
  expect_output(&p, 0, &kSessionVectors[V_LOG]);
  /* handshake messages cannot be sent through the generic API */
  assert_int_equal(TVMSession_SendMessage(&p.session, kTVMSessionMessageStartInit, NULL, 0),
                   kTvmErrorSessionInvalidMessage);
}

static void test_pair_handshake_and_traffic(void** state) {
  Peer a, b;
  (void)state;
  peer_init(&a, 10);
  peer_init(&b, 200);
  assert_int_equal(TVMSession_Initialize(&b.session), kTvmErrorNoError); /* device boot */
  assert_int_equal(TVMSession_StartSession(&a.session), kTvmErrorNoError);
  pump(&a, &b);
  assert_true(TVMSession_IsEstablished(&a.session));
  assert_true(TVMSession_IsEstablished(&b.session));
  assert_int_equal(a.session.session_id, b.session.session_id);
  assert_int_equal(a.session.session_id & 0xFF, a.session.nonce);
  assert_int_equal(a.terminated, 1); /* b's boot terminate */
  assert_int_equal(TVMSession_SendMessage(&a.session, kTVMSessionMessageNormal, (const uint8_t*)"ping", 4),
                   kTvmErrorNoError);
  pump(&a, &b);
  assert_int_equal(b.ends, 1);
  assert_memory_equal(b.body, "ping", 4);
  assert_int_equal(TVMSession_SendMessage(&b.session, kTVMSessionMessageNormal, (const uint8_t*)"pong!", 5),
                   kTvmErrorNoError);
  pump(&a, &b);
  assert_int_equal(a.ends, 1);
  assert_memory_equal(a.body, "pong!", 5);
}

static void simultaneous(uint8_t nonce_a, uint8_t nonce_b) {
  Peer a, b;
  uint8_t winner;
  peer_init(&a, nonce_before(nonce_a));
  peer_init(&b, nonce_before(nonce_b));
  assert_int_equal(TVMSession_StartSession(&a.session), kTvmErrorNoError);
  assert_int_equal(TVMSession_StartSession(&b.session), kTvmErrorNoError);
  assert_int_equal(a.session.nonce, nonce_a);
  assert_int_equal(b.session.nonce, nonce_b);
  pump(&a, &b);
  winner = (nonce_a < nonce_b) ? nonce_a : nonce_b;
  assert_true(TVMSession_IsEstablished(&a.session));
  assert_true(TVMSession_IsEstablished(&b.session));
  assert_int_equal(a.session.session_id, b.session.session_id);
  assert_int_equal(a.session.session_id & 0xFF, winner);
  assert_int_equal(a.established, 1);
  assert_int_equal(b.established, 1);
}

static void test_simultaneous_inits_lower_nonce_wins(void** state) {
  (void)state;
  simultaneous(0x21, 0x84);
  simultaneous(0x84, 0x21);
  simultaneous(0x01, 0xE8);
}

static void test_equal_nonces_both_ignored_then_retry(void** state) {
  Peer a, b;
  (void)state;
  peer_init(&a, nonce_before(0x42));
  peer_init(&b, nonce_before(0x42));
  assert_int_equal(TVMSession_StartSession(&a.session), kTvmErrorNoError);
  assert_int_equal(TVMSession_StartSession(&b.session), kTvmErrorNoError);
  pump(&a, &b);
  assert_false(TVMSession_IsEstablished(&a.session));
  assert_false(TVMSession_IsEstablished(&b.session));
  assert_int_equal(TVMSession_StartSession(&a.session), kTvmErrorNoError); /* retry with the next nonce */
  pump(&a, &b);
  assert_true(TVMSession_IsEstablished(&a.session));
  assert_true(TVMSession_IsEstablished(&b.session));
}

static void test_terminate_ends_session(void** state) {
  Peer a, b;
  (void)state;
  peer_init(&a, 3);
  peer_init(&b, 99);
  assert_int_equal(TVMSession_StartSession(&a.session), kTvmErrorNoError);
  pump(&a, &b);
  assert_true(TVMSession_IsEstablished(&a.session));
  assert_int_equal(TVMSession_Terminate(&b.session), kTvmErrorNoError);
  pump(&a, &b);
  assert_false(TVMSession_IsEstablished(&a.session));
  assert_int_equal(a.terminated, 1);
  assert_int_equal(TVMSession_SendMessage(&a.session, kTVMSessionMessageNormal, (const uint8_t*)"x", 1),
                   kTvmErrorSessionInvalidState);
}

/* A checked normal message for a session we do not have is answered with terminate. */
static void test_stale_session_gets_terminate(void** state) {
  Peer p;
  (void)state;
  peer_init(&p, 5);
  p.framer.state = kTVMFramerStateIdle; /* no FE prefix, to compare bytes */
  receive(&p, kSessionVectors[V_HELLO].wire, kSessionVectors[V_HELLO].wire_len, 1);
  assert_int_equal(p.starts, 0);
  expect_output(&p, 0, &kSessionVectors[V_TERMINATE]);
  /* established, but with another id */
  peer_init(&p, nonce_before(SESSION_RESPONDER_NONCE));
  receive(&p, kSessionVectors[V_INIT].wire, kSessionVectors[V_INIT].wire_len, 64);
  p.out_len = 0;
  p.session.session_id ^= 0x0100;
  receive(&p, kSessionVectors[V_HELLO].wire, kSessionVectors[V_HELLO].wire_len, 64);
  assert_int_equal(p.starts, 0);
  expect_output(&p, 0, &kSessionVectors[V_TERMINATE]);
  assert_false(TVMSession_IsEstablished(&p.session));
}

static void test_log_in_any_state(void** state) {
  Peer p;
  (void)state;
  peer_init(&p, 5);
  receive(&p, kSessionVectors[V_LOG].wire, kSessionVectors[V_LOG].wire_len, 1);
  assert_int_equal(p.ends, 1);
  assert_int_equal(p.last_type, kTVMSessionMessageLog);
  assert_int_equal(p.last_size, 2);
  assert_memory_equal(p.body, "hi", 2);
  assert_int_equal(p.out_len, 0); /* logs are never answered */
}

static void test_reinit_replaces_session(void** state) {
  Peer a, b;
  uint16_t first;
  (void)state;
  peer_init(&a, 3);
  peer_init(&b, 99);
  assert_int_equal(TVMSession_StartSession(&a.session), kTvmErrorNoError);
  pump(&a, &b);
  first = b.session.session_id;
  assert_int_equal(TVMSession_StartSession(&a.session), kTvmErrorNoError);
  pump(&a, &b);
  assert_true(TVMSession_IsEstablished(&b.session));
  assert_int_equal(b.established, 2);
  assert_int_not_equal(b.session.session_id, first);
  assert_int_equal(a.session.session_id, b.session.session_id);
}

/* Builds a framed session payload (id, type, body) into out; returns its length. */
static size_t frame(uint8_t* out, uint16_t id, uint8_t type, const uint8_t* body, size_t body_len) {
  uint8_t payload[64];
  Peer tmp;
  payload[0] = (uint8_t)(id & 0xFF);
  payload[1] = (uint8_t)(id >> 8);
  payload[2] = type;
  memcpy(&payload[3], body, body_len);
  peer_init(&tmp, 1);
  tmp.framer.state = kTVMFramerStateIdle;
  assert_int_equal(TVMFramer_Write(&tmp.framer, payload, body_len + 3U), kTvmErrorNoError);
  memcpy(out, tmp.out, tmp.out_len);
  return tmp.out_len;
}

static void test_malformed_control_messages(void** state) {
  static const uint8_t v1[1] = {1};
  static const uint8_t v9[1] = {9};
  uint8_t wire[128];
  size_t n;
  Peer p;
  (void)state;
  peer_init(&p, 5);
  p.session.log_dropped_packets = 1;
  p.framer.state = kTVMFramerStateIdle;
  /* nonce 0 */
  n = frame(wire, 0x0000, kTVMSessionMessageStartInit, v1, 1);
  receive(&p, wire, n, 1);
  assert_false(TVMSession_IsEstablished(&p.session));
  assert_true(p.out_len > 0); /* reported as a log message (type 3 at payload offset 2) */
  assert_int_equal(p.out[8], kTVMSessionMessageLog);
  p.out_len = 0;
  /* unknown version */
  n = frame(wire, 0x0082, kTVMSessionMessageStartInit, v9, 1);
  receive(&p, wire, n, 1);
  assert_false(TVMSession_IsEstablished(&p.session));
  p.out_len = 0;
  /* unknown message type */
  n = frame(wire, 0x0082, 0x42, v1, 1);
  receive(&p, wire, n, 1);
  assert_false(TVMSession_IsEstablished(&p.session));
  assert_int_equal(p.out[8], kTVMSessionMessageLog);
  p.out_len = 0;
  /* payload shorter than the header */
  {
    static const uint8_t two[2] = {0x82, 0x00};
    Peer tmp;
    peer_init(&tmp, 1);
    tmp.framer.state = kTVMFramerStateIdle;
    assert_int_equal(TVMFramer_Write(&tmp.framer, two, 2), kTvmErrorNoError);
    receive(&p, tmp.out, tmp.out_len, 1);
    assert_int_equal(p.starts, 0);
  }
  /* a valid init with a broken CRC */
  memcpy(wire, kSessionVectors[V_INIT].wire, kSessionVectors[V_INIT].wire_len);
  wire[kSessionVectors[V_INIT].wire_len - 1] ^= 0x80;
  p.out_len = 0;
  receive(&p, wire, kSessionVectors[V_INIT].wire_len, 1);
  assert_false(TVMSession_IsEstablished(&p.session));
  assert_int_equal(p.out[8], kTVMSessionMessageLog);
  /* ... and intact: accepted */
  p.out_len = 0;
  receive(&p, kSessionVectors[V_INIT].wire, kSessionVectors[V_INIT].wire_len, 1);
  assert_true(TVMSession_IsEstablished(&p.session));
  assert_true(p.session.dropped_packets >= 5);
}

static void test_foreign_reply_ignored(void** state) {
  Peer p;
  (void)state;
  peer_init(&p, nonce_before(0x22));
  assert_int_equal(TVMSession_StartSession(&p.session), kTvmErrorNoError);
  /* the vector's reply is for initiator nonce 0x82, not ours (0x22) */
  receive(&p, kSessionVectors[V_REPLY].wire, kSessionVectors[V_REPLY].wire_len, 1);
  assert_false(TVMSession_IsEstablished(&p.session));
  assert_int_equal(p.session.state, kTVMSessionStateStartSent);
}

static void test_refused_message_not_ended(void** state) {
  Peer p;
  (void)state;
  peer_init(&p, 5);
  p.refuse = 1;
  receive(&p, kSessionVectors[V_LOG].wire, kSessionVectors[V_LOG].wire_len, 1);
  assert_int_equal(p.starts, 1);
  assert_int_equal(p.ends, 0);
  assert_int_equal(p.body_len, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nonce_rule),
      cmocka_unit_test(test_initiator_vectors),
      cmocka_unit_test(test_responder_vectors),
      cmocka_unit_test(test_body_streams_before_verdict),
      cmocka_unit_test(test_terminate_and_log_vectors),
      cmocka_unit_test(test_pair_handshake_and_traffic),
      cmocka_unit_test(test_simultaneous_inits_lower_nonce_wins),
      cmocka_unit_test(test_equal_nonces_both_ignored_then_retry),
      cmocka_unit_test(test_terminate_ends_session),
      cmocka_unit_test(test_stale_session_gets_terminate),
      cmocka_unit_test(test_log_in_any_state),
      cmocka_unit_test(test_reinit_replaces_session),
      cmocka_unit_test(test_malformed_control_messages),
      cmocka_unit_test(test_foreign_reply_ignored),
      cmocka_unit_test(test_refused_message_not_ended),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
