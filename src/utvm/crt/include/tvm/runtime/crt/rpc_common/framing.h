/*
 * tvm/runtime/crt/rpc_common/framing.h -- the framing layer of the link (docs/architecture.md §5.1).
 * Depends on crc16.h, write_stream.h, error_codes.h and crt_config.h.
 *
 * Wire format of one packet: FF FD, u32 payload length (LE), payload, u16 CRC (LE). Length, payload and
 * CRC are escaped: a data byte FF is sent FF FF. FF FE is a no-op; FF FD inside a packet abandons it and
 * starts a new one; any other FF xx is an invalid escape. The first packet after a framer reset is
 * preceded by one raw FE. The CRC (crc16.h) covers every raw wire byte from FF FD through the payload:
 * escapes as sent, and FF FE pairs met while reading the length or the payload. Between packets any
 * FF FD starts a packet, even right after another FF (a truncated packet's dangling escape byte must
 * not hide the next start); inside a packet FF FF is a data byte.
 *
 * TVMFramer encodes: StartPacket(n), any number of WritePayloadChunk() adding up to n, FinishPacket().
 * Output goes through a TVMWriteStream in pieces of at most TVM_CRT_FRAMER_BUFFER_SIZE_BYTES.
 *
 * TVMUnframer decodes a byte stream with no packet buffer: payload bytes are handed to the handler as
 * they arrive and the CRC verdict comes at the end, so a large payload can land in place (the consumer
 * must be ready to discard what it received when the verdict is bad). Both structs are allocated by the
 * caller and hold no pointers to memory they own.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_FRAMING_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_FRAMING_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/rpc_common/write_stream.h>

#include <tvm/runtime/crt/config.h>

#ifdef __cplusplus
extern "C" {
#endif

/* TVM_CRT_FRAMER_BUFFER_SIZE_BYTES (the output staging buffer) comes from config.h. */

/*! \brief Escape byte and the second bytes of the control sequences. */
#define TVM_FRAMING_ESCAPE 0xFFU
#define TVM_FRAMING_START 0xFDU
#define TVM_FRAMING_NOP 0xFEU

/*! \brief Bytes of framing around a payload before escaping: FF FD, u32 length, u16 CRC. */
#define TVM_FRAMING_OVERHEAD_BYTES 8U

/* ------------------------------------------------------------------------------------------------ */
/* Framer                                                                                             */

typedef enum {
  kTVMFramerStateReset = 0,    /*!< Next packet is preceded by a raw FE. */
  kTVMFramerStateIdle = 1,     /*!< Between packets. */
  kTVMFramerStateInPacket = 2  /*!< StartPacket done, FinishPacket pending. */
} TVMFramerState;

typedef struct TVMFramer {
  /*! \brief Where the encoded bytes go. */
  TVMWriteStream stream;
  /*! \brief A TVMFramerState. */
  uint8_t state;
  /*! \brief Running CRC of the current packet. */
  uint16_t crc;
  /*! \brief Payload bytes still to be written in the current packet. */
  uint32_t payload_remaining;
  /*! \brief Bytes waiting in buffer. */
  size_t buffered;
  /*! \brief Output staging buffer. */
  uint8_t buffer[TVM_CRT_FRAMER_BUFFER_SIZE_BYTES];
} TVMFramer;

/*! \brief Initialize a framer writing through write_func(write_context, ...); starts in the reset state. */
void TVMFramer_Init(TVMFramer* framer, TVMWriteFunc write_func, void* write_context);

/*! \brief Forget any packet in progress; the next packet is preceded by a raw FE. */
void TVMFramer_Reset(TVMFramer* framer);

/*! \brief Begin a packet of payload_size_bytes. kTvmErrorFramingInvalidState while a packet is open. */
tvm_crt_error_t TVMFramer_StartPacket(TVMFramer* framer, uint32_t payload_size_bytes);

/*! \brief Add payload bytes; kTvmErrorFramingPayloadOverflow past the size given to StartPacket. */
tvm_crt_error_t TVMFramer_WritePayloadChunk(TVMFramer* framer, const uint8_t* data, size_t size_bytes);

/*! \brief Write the CRC and flush; kTvmErrorFramingPayloadIncomplete if payload bytes are missing. */
tvm_crt_error_t TVMFramer_FinishPacket(TVMFramer* framer);

/*! \brief StartPacket + WritePayloadChunk + FinishPacket of one whole payload. */
tvm_crt_error_t TVMFramer_Write(TVMFramer* framer, const uint8_t* payload, size_t payload_size_bytes);

/* ------------------------------------------------------------------------------------------------ */
/* Unframer                                                                                           */

/*! \brief What the unframer tells its consumer. For every FF FD seen, packet_end is called exactly once,
 * whether or not packet_start was (a packet whose length exceeds the maximum never gets packet_start).
 * packet_start/payload returning an error make the unframer skip the rest of that packet's payload.
 * packet_end returning an error makes TVMUnframer_Write stop right after that packet and return it. */
typedef struct TVMUnframerHandler {
  /*! \brief A packet with a valid length header began. */
  tvm_crt_error_t (*packet_start)(void* context, uint32_t payload_size_bytes);
  /*! \brief Payload bytes, in order, as they arrive (unverified until packet_end). */
  tvm_crt_error_t (*payload)(void* context, const uint8_t* data, size_t size_bytes);
  /*! \brief The packet ended. verdict: kTvmErrorNoError (CRC good), kTvmErrorFramingCrcMismatch,
   * kTvmErrorFramingInvalidEscape, kTvmErrorFramingPayloadIncomplete (a new FF FD cut it short) or
   * kTvmErrorFramingPacketTooLong (length above the maximum; its bytes were skipped, nothing was
   * delivered, and this comes where it ends or is cut short). */
  tvm_crt_error_t (*packet_end)(void* context, tvm_crt_error_t verdict);
  /*! \brief Passed to every callback. Not owned. */
  void* context;
} TVMUnframerHandler;

/*! \brief Counters of what the unframer saw (wrap around at 2^32). */
typedef struct TVMUnframerStats {
  uint32_t packets_ok;        /*!< Packets ending with a good CRC. */
  uint32_t crc_errors;        /*!< Packets ending with a bad CRC. */
  uint32_t invalid_escapes;   /*!< Packets dropped for an invalid escape. */
  uint32_t restarts;          /*!< Packets cut short by a new FF FD. */
  uint32_t too_long;          /*!< Packets dropped for a length above the maximum. */
} TVMUnframerStats;

typedef enum {
  kTVMUnframerFindStart = 0,
  kTVMUnframerLength = 1,
  kTVMUnframerPayload = 2,
  kTVMUnframerCrc = 3
} TVMUnframerState;

typedef struct TVMUnframer {
  TVMUnframerHandler handler;
  /*! \brief Largest accepted payload (bytes). */
  uint32_t max_payload_size_bytes;
  /*! \brief A TVMUnframerState. */
  uint8_t state;
  /*! \brief Nonzero when the previous byte was an unpaired FF. */
  uint8_t escape_pending;
  /*! \brief Nonzero while payload bytes go to the handler. */
  uint8_t delivering;
  /*! \brief Nonzero while skipping a packet whose length exceeds the maximum. */
  uint8_t too_long;
  /*! \brief Bytes of the length or CRC field collected so far. */
  uint8_t field_pos;
  uint8_t field[4];
  /*! \brief CRC of the raw bytes of the current packet so far. */
  uint16_t crc;
  /*! \brief Payload bytes still expected. */
  uint32_t payload_remaining;
  TVMUnframerStats stats;
} TVMUnframer;

/*! \brief Initialize an unframer; packets longer than max_payload_size_bytes are dropped. */
void TVMUnframer_Init(TVMUnframer* unframer, const TVMUnframerHandler* handler, uint32_t max_payload_size_bytes);

/*! \brief Abandon any packet in progress without telling the handler; wait for the next FF FD. */
void TVMUnframer_Reset(TVMUnframer* unframer);

/*! \brief Feed bytes from the link. Consumes all of them (*bytes_consumed = size_bytes) and returns
 * kTvmErrorNoError, unless a packet_end callback returns an error: then stops right after that packet,
 * sets *bytes_consumed to the bytes used so far and returns the error. Malformed input never makes this
 * fail; it is counted in unframer->stats and reported through packet_end. */
tvm_crt_error_t TVMUnframer_Write(TVMUnframer* unframer, const uint8_t* data, size_t size_bytes,
                                  size_t* bytes_consumed);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_RPC_COMMON_FRAMING_H_ */
