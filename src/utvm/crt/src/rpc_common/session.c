/*
 * session.c -- the session layer (see tvm/runtime/crt/rpc_common/session.h for the theory of operation).
 *
 * Receive path: unframer -> session_packet_start / session_payload / session_packet_end (this file) ->
 * the user's TVMSessionHandler. Send path: TVMSession_StartMessage/WriteBody/FinishMessage -> framer.
 */
#include <string.h>
#include <tvm/runtime/crt/rpc_common/session.h>

static tvm_crt_error_t session_packet_start(void* context, uint32_t payload_size_bytes);
static tvm_crt_error_t session_payload(void* context, const uint8_t* data, size_t size_bytes);
static tvm_crt_error_t session_packet_end(void* context, tvm_crt_error_t verdict);
static void session_header_complete(TVMSession* session);
static tvm_crt_error_t session_control(TVMSession* session);
static tvm_crt_error_t session_send_with_id(TVMSession* session, uint16_t id, TVMSessionMessageType type,
                                            const uint8_t* body, size_t body_size);
static void session_report_drop(TVMSession* session, const char* reason, tvm_crt_error_t code);
static void session_event(TVMSession* session, TVMSessionEvent event);
static uint8_t session_fresh_nonce(TVMSession* session);

/* ================================================================================================ */
/* Setup and sending                                                                                  */

uint8_t TVMSession_NextNonce(uint8_t nonce) {
  uint8_t next = (uint8_t)((uint8_t)((uint8_t)(nonce << 5) | (uint8_t)(nonce >> 5)) + 1U);
  if (next == TVM_SESSION_INVALID_NONCE) {
    next = 1U;
  }
  return next;
}

static uint8_t session_fresh_nonce(TVMSession* session) {
  session->nonce = TVMSession_NextNonce(session->nonce);
  return session->nonce;
}

void TVMSession_Init(TVMSession* session, TVMFramer* framer, uint8_t initial_nonce, const TVMSessionHandler* handler) {
  (void)memset(session, 0, sizeof(*session));
  session->framer = framer;
  session->handler = *handler;
  session->nonce = initial_nonce;
  session->state = (uint8_t)kTVMSessionStateReset;
  session->rx_mode = (uint8_t)kTVMSessionRxIdle;
}

int TVMSession_IsEstablished(const TVMSession* session) {
  return (session->state == (uint8_t)kTVMSessionStateEstablished) ? 1 : 0;
}

static void session_event(TVMSession* session, TVMSessionEvent event) {
  if (session->handler.event != NULL) {
    session->handler.event(session->handler.context, event);
  }
}

static tvm_crt_error_t session_start_with_id(TVMSession* session, uint16_t id, TVMSessionMessageType type,
                                             uint32_t body_size) {
  uint8_t header[TVM_SESSION_HEADER_BYTES];
  tvm_crt_error_t err;
  if (body_size > (UINT32_MAX - TVM_SESSION_HEADER_BYTES)) {
    return kTvmErrorFramingPacketTooLong;
  }
  header[0] = (uint8_t)(id & 0xFFU);
  header[1] = (uint8_t)(id >> 8);
  header[2] = (uint8_t)type;
  err = TVMFramer_StartPacket(session->framer, body_size + TVM_SESSION_HEADER_BYTES);
  if (err == kTvmErrorNoError) {
    err = TVMFramer_WritePayloadChunk(session->framer, header, sizeof(header));
  }
  return err;
}

static tvm_crt_error_t session_send_with_id(TVMSession* session, uint16_t id, TVMSessionMessageType type,
                                            const uint8_t* body, size_t body_size) {
  tvm_crt_error_t err;
  if (body_size > (size_t)(UINT32_MAX - TVM_SESSION_HEADER_BYTES)) {
    return kTvmErrorFramingPacketTooLong;
  }
  err = session_start_with_id(session, id, type, (uint32_t)body_size);
  if ((err == kTvmErrorNoError) && (body_size > 0U)) {
    err = TVMFramer_WritePayloadChunk(session->framer, body, body_size);
  }
  if (err == kTvmErrorNoError) {
    err = TVMFramer_FinishPacket(session->framer);
  }
  return err;
}

tvm_crt_error_t TVMSession_StartMessage(TVMSession* session, TVMSessionMessageType type, uint32_t body_size_bytes) {
  uint16_t id = 0U;
  switch (type) {
    case kTVMSessionMessageNormal:
      if (session->state != (uint8_t)kTVMSessionStateEstablished) {
        return kTvmErrorSessionInvalidState;
      }
      id = session->session_id;
      break;
    case kTVMSessionMessageLog:
    case kTVMSessionMessageTerminate:
      break;
    default:
      return kTvmErrorSessionInvalidMessage; /* handshake messages are the session's own business */
  }
  return session_start_with_id(session, id, type, body_size_bytes);
}

tvm_crt_error_t TVMSession_WriteBody(TVMSession* session, const uint8_t* data, size_t size_bytes) {
  return TVMFramer_WritePayloadChunk(session->framer, data, size_bytes);
}

tvm_crt_error_t TVMSession_FinishMessage(TVMSession* session) {
  return TVMFramer_FinishPacket(session->framer);
}

tvm_crt_error_t TVMSession_SendMessage(TVMSession* session, TVMSessionMessageType type, const uint8_t* body,
                                       size_t body_size_bytes) {
  tvm_crt_error_t err;
  if (body_size_bytes > (size_t)(UINT32_MAX - TVM_SESSION_HEADER_BYTES)) {
    return kTvmErrorFramingPacketTooLong;
  }
  err = TVMSession_StartMessage(session, type, (uint32_t)body_size_bytes);
  if ((err == kTvmErrorNoError) && (body_size_bytes > 0U)) {
    err = TVMSession_WriteBody(session, body, body_size_bytes);
  }
  if (err == kTvmErrorNoError) {
    err = TVMSession_FinishMessage(session);
  }
  return err;
}

tvm_crt_error_t TVMSession_Terminate(TVMSession* session) {
  session->state = (uint8_t)kTVMSessionStateReset;
  session->session_id = 0U;
  return session_send_with_id(session, 0U, kTVMSessionMessageTerminate, NULL, 0U);
}

tvm_crt_error_t TVMSession_Initialize(TVMSession* session) {
  TVMFramer_Reset(session->framer);
  session->rx_mode = (uint8_t)kTVMSessionRxIdle;
  return TVMSession_Terminate(session);
}

tvm_crt_error_t TVMSession_StartSession(TVMSession* session) {
  static const uint8_t kVersion[1] = {TVM_SESSION_VERSION};
  uint8_t nonce = session_fresh_nonce(session);
  session->state = (uint8_t)kTVMSessionStateStartSent;
  session->session_id = 0U;
  return session_send_with_id(session, (uint16_t)nonce, kTVMSessionMessageStartInit, kVersion, sizeof(kVersion));
}

/* ================================================================================================ */
/* Receiving                                                                                          */

void TVMSession_GetUnframerHandler(TVMSession* session, TVMUnframerHandler* handler) {
  handler->packet_start = session_packet_start;
  handler->payload = session_payload;
  handler->packet_end = session_packet_end;
  handler->context = session;
}

static tvm_crt_error_t session_packet_start(void* context, uint32_t payload_size_bytes) {
  TVMSession* session = (TVMSession*)context;
  session->rx_header_len = 0U;
  session->rx_control_len = 0U;
  if (payload_size_bytes < TVM_SESSION_HEADER_BYTES) {
    session->rx_mode = (uint8_t)kTVMSessionRxIgnore;
    session->rx_body_size = 0U;
    return kTvmErrorNoError; /* keep reading so the verdict comes to packet_end */
  }
  session->rx_mode = (uint8_t)kTVMSessionRxHeader;
  session->rx_body_size = payload_size_bytes - TVM_SESSION_HEADER_BYTES;
  return kTvmErrorNoError;
}

/* The 3 header bytes are in: decide where the body goes. */
static void session_header_complete(TVMSession* session) {
  uint16_t id = (uint16_t)((uint16_t)session->rx_header[0] | (uint16_t)((uint16_t)session->rx_header[1] << 8));
  session->rx_type = session->rx_header[2];
  switch (session->rx_type) {
    case kTVMSessionMessageNormal:
    case kTVMSessionMessageLog:
      if ((session->rx_type == (uint8_t)kTVMSessionMessageNormal) &&
          ((session->state != (uint8_t)kTVMSessionStateEstablished) || (id != session->session_id))) {
        session->rx_mode = (uint8_t)kTVMSessionRxStale;
      } else if (session->handler.message_start(session->handler.context, (TVMSessionMessageType)session->rx_type,
                                         session->rx_body_size) == kTvmErrorNoError) {
        session->rx_mode = (uint8_t)kTVMSessionRxForward;
      } else {
        session->rx_mode = (uint8_t)kTVMSessionRxIgnore;
      }
      return;
    case kTVMSessionMessageStartInit:
    case kTVMSessionMessageStartReply:
    case kTVMSessionMessageTerminate:
      session->rx_mode = (uint8_t)kTVMSessionRxControl;
      return;
    default:
      session->rx_mode = (uint8_t)kTVMSessionRxIgnore;
      return;
  }
}

static tvm_crt_error_t session_payload(void* context, const uint8_t* data, size_t size_bytes) {
  TVMSession* session = (TVMSession*)context;
  size_t used = 0U;
  while ((session->rx_mode == (uint8_t)kTVMSessionRxHeader) && (used < size_bytes)) {
    session->rx_header[session->rx_header_len] = data[used];
    session->rx_header_len++;
    used++;
    if (session->rx_header_len == TVM_SESSION_HEADER_BYTES) {
      session_header_complete(session);
    }
  }
  if (used == size_bytes) {
    return kTvmErrorNoError;
  }
  switch (session->rx_mode) {
    case kTVMSessionRxForward:
      if (session->handler.message_data(session->handler.context, &data[used], size_bytes - used) !=
          kTvmErrorNoError) {
        session->rx_mode = (uint8_t)kTVMSessionRxIgnore;
      }
      break;
    case kTVMSessionRxControl:
      if (session->rx_control_len == 0U) {
        session->rx_control_byte = data[used];
        session->rx_control_len = 1U;
      }
      break;
    default:
      break; /* stale / ignored bodies are only read to reach the verdict */
  }
  return kTvmErrorNoError;
}

/* A start-init, start-reply or terminate arrived intact. */
static tvm_crt_error_t session_control(TVMSession* session) {
  uint16_t id = (uint16_t)((uint16_t)session->rx_header[0] | (uint16_t)((uint16_t)session->rx_header[1] << 8));
  uint8_t initiator_nonce = (uint8_t)(id & 0xFFU);
  uint8_t responder_nonce = (uint8_t)(id >> 8);
  int version_ok = 0;
  if ((session->rx_control_len == 1U) && (session->rx_control_byte == TVM_SESSION_VERSION)) {
    version_ok = 1;
  }
  switch (session->rx_type) {
    case kTVMSessionMessageStartInit: {
      static const uint8_t kVersion[1] = {TVM_SESSION_VERSION};
      tvm_crt_error_t err;
      if ((initiator_nonce == TVM_SESSION_INVALID_NONCE) || (version_ok == 0)) {
        session_report_drop(session, "session: bad start-init (nonce 0 or unsupported version)",
                            kTvmErrorSessionInvalidMessage);
        return kTvmErrorNoError;
      }
      if (session->state == (uint8_t)kTVMSessionStateStartSent) {
        if (initiator_nonce == session->nonce) {
          /* Simultaneous inits with equal nonces: both sides abandon theirs; the next start-init wins. */
          session->state = (uint8_t)kTVMSessionStateReset;
          return kTvmErrorNoError;
        }
        if (initiator_nonce > session->nonce) {
          return kTvmErrorNoError; /* simultaneous inits: ours has the lower nonce and wins */
        }
      }
      id = (uint16_t)((uint16_t)initiator_nonce | (uint16_t)((uint16_t)session_fresh_nonce(session) << 8));
      session->state = (uint8_t)kTVMSessionStateReset;
      err = session_send_with_id(session, id, kTVMSessionMessageStartReply, kVersion, sizeof(kVersion));
      if (err != kTvmErrorNoError) {
        return err;
      }
      session->session_id = id;
      session->state = (uint8_t)kTVMSessionStateEstablished;
      session_event(session, kTVMSessionEventEstablished);
      return kTvmErrorNoError;
    }
    case kTVMSessionMessageStartReply:
      if ((session->state == (uint8_t)kTVMSessionStateStartSent) && (initiator_nonce == session->nonce) &&
          (responder_nonce != TVM_SESSION_INVALID_NONCE) && (version_ok != 0)) {
        session->session_id = id;
        session->state = (uint8_t)kTVMSessionStateEstablished;
        session_event(session, kTVMSessionEventEstablished);
      } else {
        session->dropped_packets++; /* a late or foreign reply: not ours */
      }
      return kTvmErrorNoError;
    default: /* terminate */
      /* A start-init of ours stays pending: the peer may have reset before or after receiving it, and
       * if after, its reply is still coming (if before, the initiator's retry covers it). */
      if (session->state != (uint8_t)kTVMSessionStateStartSent) {
        session->state = (uint8_t)kTVMSessionStateReset;
        session->session_id = 0U;
      }
      session_event(session, kTVMSessionEventTerminated);
      return kTvmErrorNoError;
  }
}

static tvm_crt_error_t session_packet_end(void* context, tvm_crt_error_t verdict) {
  TVMSession* session = (TVMSession*)context;
  uint8_t mode = session->rx_mode;
  session->rx_mode = (uint8_t)kTVMSessionRxIdle;
  if (mode == (uint8_t)kTVMSessionRxForward) {
    return session->handler.message_end(session->handler.context, (TVMSessionMessageType)session->rx_type, verdict);
  }
  if (verdict != kTvmErrorNoError) {
    session_report_drop(session, "session: dropped a malformed packet, framing error 0x", verdict);
    return kTvmErrorNoError;
  }
  switch (mode) {
    case kTVMSessionRxControl:
      return session_control(session);
    case kTVMSessionRxStale:
      session->dropped_packets++;
      /* Tell the peer its session is gone; a failed write is for the next send to report. */
      (void)TVMSession_Terminate(session);
      return kTvmErrorNoError;
    case kTVMSessionRxHeader:
    case kTVMSessionRxIgnore:
      session_report_drop(session, "session: dropped a packet (short header, unknown type or refused), type 0x",
                          (tvm_crt_error_t)session->rx_type);
      return kTvmErrorNoError;
    default:
      return kTvmErrorNoError;
  }
}

/* Count a dropped packet and, if enabled, tell the peer with a log message "<reason><hex code>". */
static void session_report_drop(TVMSession* session, const char* reason, tvm_crt_error_t code) {
  static const char kHex[] = "0123456789abcdef";
  char text[96];
  size_t len = 0U;
  int shift;
  session->dropped_packets++;
  if (session->log_dropped_packets == 0U) {
    return;
  }
  len = strlen(reason);
  if (len > (sizeof(text) - 4U)) {
    len = sizeof(text) - 4U;
  }
  (void)memcpy(text, reason, len);
  for (shift = 12; shift >= 0; shift -= 4) {
    text[len] = kHex[((uint32_t)code >> (uint32_t)shift) & 0xFU];
    len++;
  }
  /* Best effort: a log that cannot be sent (peer gone) is not worth another error. */
  (void)session_send_with_id(session, 0U, kTVMSessionMessageLog, (const uint8_t*)text, len);
}
