/*
 * tvm/runtime/crt/rpc_common/session.h -- the session layer of the link (docs/architecture.md §5.2).
 * Depends on framing.h and error_codes.h.
 *
 * Every framed payload is a session message: u16 session id (LE; low byte the initiator's nonce, high
 * byte the responder's), u8 type, body. Types: start-init (body: version 0x01), start-reply (version),
 * terminate (id 0, no body), log (id 0, text), normal (exactly one RPC packet).
 *
 * Theory of operation. A session starts Reset. Whoever wants a session (normally the host) sends
 * start-init with a fresh nonce and moves to StartSent; the peer, in any state, answers start-reply with
 * the full id and both sides are Established. A start-init meeting our own pending one: the numerically
 * lower initiator nonce wins, the other is ignored (equal nonces: both are abandoned and whichever side
 * sends start-init next gets the session).
 * Terminate returns to Reset (the sender has lost all state) -- except that a start-init we sent stays
 * pending, since the peer may have reset before answering it. Normal messages flow only
 * in Established and only with the established id; a checked (good-CRC) normal message with any other
 * id is answered with terminate, so a peer talking to a stale session learns it at once. Log messages
 * are valid in every state. Nonces are never 0; the next nonce is ((n << 5) | (n >> 5)) + 1 mod 256,
 * skipping 0. The device sends terminate at boot (TVMSession_Initialize) so a waiting host notices the
 * reset. Received messages stream: the body of a normal or log message is handed to the handler as it
 * arrives, with the framing layer's CRC verdict at the end.
 *
 * The struct is allocated by the caller; it points to the caller's TVMFramer and owns nothing.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_SESSION_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_SESSION_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Session message types (the u8 after the session id). Values are wire format. */
typedef enum {
  kTVMSessionMessageStartInit = 0x00,
  kTVMSessionMessageStartReply = 0x01,
  kTVMSessionMessageTerminate = 0x02,
  kTVMSessionMessageLog = 0x03,
  kTVMSessionMessageNormal = 0x10
} TVMSessionMessageType;

/*! \brief Bytes of session header in front of every body: u16 id + u8 type. */
#define TVM_SESSION_HEADER_BYTES 3U
/*! \brief Session protocol version carried by start-init and start-reply. */
#define TVM_SESSION_VERSION 0x01U
/*! \brief The invalid nonce. */
#define TVM_SESSION_INVALID_NONCE 0x00U

typedef enum {
  kTVMSessionStateReset = 0,      /*!< No session. */
  kTVMSessionStateStartSent = 1,  /*!< We sent start-init and wait for start-reply. */
  kTVMSessionStateEstablished = 2 /*!< Normal messages may flow. */
} TVMSessionState;

typedef enum {
  kTVMSessionEventEstablished = 0, /*!< A session (new or replacing the old one) was established. */
  kTVMSessionEventTerminated = 1   /*!< The peer sent terminate. */
} TVMSessionEvent;

/*! \brief What the session tells its user. Only normal messages of the established session and log
 * messages reach message_start/data/end. Callbacks may send messages (they run between packets),
 * except from message_start/message_data (a received packet is still being read). */
typedef struct TVMSessionHandler {
  /*! \brief A message of `type` with body_size_bytes of body began. An error drops the rest of it. */
  tvm_crt_error_t (*message_start)(void* context, TVMSessionMessageType type, uint32_t body_size_bytes);
  /*! \brief Body bytes as they arrive (unverified until message_end). An error drops the rest. */
  tvm_crt_error_t (*message_data)(void* context, const uint8_t* data, size_t size_bytes);
  /*! \brief The message ended; verdict as TVMUnframerHandler.packet_end. Not called if message_start or
   * message_data failed. A returned error stops TVMUnframer_Write right after this packet. */
  tvm_crt_error_t (*message_end)(void* context, TVMSessionMessageType type, tvm_crt_error_t verdict);
  /*! \brief Session established or terminated (may be NULL). */
  void (*event)(void* context, TVMSessionEvent event);
  /*! \brief Passed to every callback. Not owned. */
  void* context;
} TVMSessionHandler;

/*! \brief Receive progress of the current packet (private to session.c). */
typedef enum {
  kTVMSessionRxIdle = 0,    /*!< Between packets. */
  kTVMSessionRxHeader = 1,  /*!< Collecting the 3 header bytes. */
  kTVMSessionRxForward = 2, /*!< Body goes to the handler. */
  kTVMSessionRxControl = 3, /*!< Start-init/-reply/terminate: first body byte kept. */
  kTVMSessionRxStale = 4,   /*!< Normal message for another session: answered with terminate if intact. */
  kTVMSessionRxIgnore = 5   /*!< Dropped (unknown type, handler refused, too short). */
} TVMSessionRxMode;

typedef struct TVMSession {
  /*! \brief Where messages are sent. Not owned. */
  TVMFramer* framer;
  TVMSessionHandler handler;
  /*! \brief A TVMSessionState. */
  uint8_t state;
  /*! \brief Our current nonce (never 0 once used). */
  uint8_t nonce;
  /*! \brief The established session id (0 when none). */
  uint16_t session_id;
  /*! \brief When nonzero, dropped or refused packets are reported to the peer as log messages. */
  uint8_t log_dropped_packets;
  /* Receive state of the current packet. */
  uint8_t rx_mode;
  uint8_t rx_type;
  uint8_t rx_header_len;
  uint8_t rx_header[TVM_SESSION_HEADER_BYTES];
  uint8_t rx_control_len;
  uint8_t rx_control_byte;
  uint32_t rx_body_size;
  /*! \brief Packets dropped by the session layer (bad header, wrong session, unknown type). */
  uint32_t dropped_packets;
} TVMSession;

/*! \brief Initialize a session sending through framer; initial_nonce seeds the nonce sequence
 * (e.g. from TVMPlatformGenerateRandom). handler is copied. Sends nothing. */
void TVMSession_Init(TVMSession* session, TVMFramer* framer, uint8_t initial_nonce, const TVMSessionHandler* handler);

/*! \brief Boot: reset the framer (next packet preceded by FE), forget any session, send terminate. */
tvm_crt_error_t TVMSession_Initialize(TVMSession* session);

/*! \brief Become the initiator: pick a new nonce, send start-init, wait (StartSent) for the reply. */
tvm_crt_error_t TVMSession_StartSession(TVMSession* session);

/*! \brief Send terminate and return to Reset. */
tvm_crt_error_t TVMSession_Terminate(TVMSession* session);

/*! \brief Begin sending a message of `type` with body_size_bytes of body. Normal messages need an
 * established session (kTvmErrorSessionInvalidState otherwise); log and terminate go with id 0.
 * kTvmErrorFramingInvalidState if another message is being sent. */
tvm_crt_error_t TVMSession_StartMessage(TVMSession* session, TVMSessionMessageType type, uint32_t body_size_bytes);
/*! \brief Body bytes of the message begun by StartMessage. */
tvm_crt_error_t TVMSession_WriteBody(TVMSession* session, const uint8_t* data, size_t size_bytes);
/*! \brief End the message (all body bytes must have been written). */
tvm_crt_error_t TVMSession_FinishMessage(TVMSession* session);
/*! \brief StartMessage + WriteBody + FinishMessage of a whole body. */
tvm_crt_error_t TVMSession_SendMessage(TVMSession* session, TVMSessionMessageType type, const uint8_t* body,
                                       size_t body_size_bytes);

/*! \brief Nonzero when normal messages can be sent. */
int TVMSession_IsEstablished(const TVMSession* session);

/*! \brief The nonce after `nonce`: ((n << 5) | (n >> 5)) + 1 mod 256, skipping 0. */
uint8_t TVMSession_NextNonce(uint8_t nonce);

/*! \brief Fill *handler with callbacks that feed received packets to this session; pass it to
 * TVMUnframer_Init. */
void TVMSession_GetUnframerHandler(TVMSession* session, TVMUnframerHandler* handler);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_RPC_COMMON_SESSION_H_ */
