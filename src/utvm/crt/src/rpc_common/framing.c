/*
 * framing.c -- framer and unframer of the link (see tvm/runtime/crt/rpc_common/framing.h).
 */
#include <string.h>
#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

/* --- framer helpers --- */
static tvm_crt_error_t framer_flush(TVMFramer* framer);
static tvm_crt_error_t framer_put_raw(TVMFramer* framer, const uint8_t* data, size_t size, int update_crc);
static tvm_crt_error_t framer_put_escaped(TVMFramer* framer, const uint8_t* data, size_t size, int update_crc);
static tvm_crt_error_t framer_fail(TVMFramer* framer, tvm_crt_error_t err);
/* --- unframer helpers --- */
static tvm_crt_error_t unframer_end(TVMUnframer* unframer, tvm_crt_error_t verdict);
static void unframer_begin(TVMUnframer* unframer);
static tvm_crt_error_t unframer_data_byte(TVMUnframer* unframer, uint8_t byte);
static void unframer_deliver(TVMUnframer* unframer, const uint8_t* data, size_t size);
static tvm_crt_error_t unframer_escape_pair(TVMUnframer* unframer, uint8_t second);

/* ================================================================================================ */
/* Framer                                                                                             */

void TVMFramer_Init(TVMFramer* framer, TVMWriteFunc write_func, void* write_context) {
  framer->stream.write = write_func;
  framer->stream.context = write_context;
  TVMFramer_Reset(framer);
}

void TVMFramer_Reset(TVMFramer* framer) {
  framer->state = (uint8_t)kTVMFramerStateReset;
  framer->crc = (uint16_t)TVM_CRC16_INITIAL;
  framer->payload_remaining = 0U;
  framer->buffered = 0U;
}

static tvm_crt_error_t framer_flush(TVMFramer* framer) {
  tvm_crt_error_t err = TVMWriteStream_WriteAll(&framer->stream, framer->buffer, framer->buffered);
  framer->buffered = 0U;
  return err;
}

/* A write failed mid-packet: the peer sees a truncated packet, which its unframer drops when the next
 * FF FD arrives. Start over from the reset state so that next packet is preceded by FE. */
static tvm_crt_error_t framer_fail(TVMFramer* framer, tvm_crt_error_t err) {
  TVMFramer_Reset(framer);
  return err;
}

static tvm_crt_error_t framer_put_raw(TVMFramer* framer, const uint8_t* data, size_t size, int update_crc) {
  size_t i;
  for (i = 0U; i < size; ++i) {
    if (framer->buffered == sizeof(framer->buffer)) {
      tvm_crt_error_t err = framer_flush(framer);
      if (err != kTvmErrorNoError) {
        return err;
      }
    }
    framer->buffer[framer->buffered] = data[i];
    framer->buffered++;
  }
  if (update_crc != 0) {
    framer->crc = TVMCrc16_Update(framer->crc, data, size);
  }
  return kTvmErrorNoError;
}

/* Escape data into the staging buffer, CRC-ing the bytes as they will appear on the wire. Runs of
 * non-FF bytes are copied in one piece. */
static tvm_crt_error_t framer_put_escaped(TVMFramer* framer, const uint8_t* data, size_t size, int update_crc) {
  static const uint8_t kEscapedFF[2] = {TVM_FRAMING_ESCAPE, TVM_FRAMING_ESCAPE};
  size_t i = 0U;
  while (i < size) {
    size_t space = sizeof(framer->buffer) - framer->buffered;
    if (space < 2U) {
      tvm_crt_error_t err = framer_flush(framer);
      if (err != kTvmErrorNoError) {
        return err;
      }
      space = sizeof(framer->buffer);
    }
    if (data[i] == TVM_FRAMING_ESCAPE) {
      framer->buffer[framer->buffered] = TVM_FRAMING_ESCAPE;
      framer->buffer[framer->buffered + 1U] = TVM_FRAMING_ESCAPE;
      framer->buffered += 2U;
      if (update_crc != 0) {
        framer->crc = TVMCrc16_Update(framer->crc, kEscapedFF, sizeof(kEscapedFF));
      }
      i++;
    } else {
      size_t run = 0U;
      while ((run < space) && ((i + run) < size) && (data[i + run] != TVM_FRAMING_ESCAPE)) {
        run++;
      }
      (void)memcpy(&framer->buffer[framer->buffered], &data[i], run);
      framer->buffered += run;
      if (update_crc != 0) {
        framer->crc = TVMCrc16_Update(framer->crc, &data[i], run);
      }
      i += run;
    }
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMFramer_StartPacket(TVMFramer* framer, uint32_t payload_size_bytes) {
  static const uint8_t kReset[1] = {TVM_FRAMING_NOP};
  static const uint8_t kStart[2] = {TVM_FRAMING_ESCAPE, TVM_FRAMING_START};
  uint8_t length[4];
  tvm_crt_error_t err;
  if (framer->state == (uint8_t)kTVMFramerStateInPacket) {
    return kTvmErrorFramingInvalidState;
  }
  if (framer->state == (uint8_t)kTVMFramerStateReset) {
    err = framer_put_raw(framer, kReset, sizeof(kReset), 0);
    if (err != kTvmErrorNoError) {
      return framer_fail(framer, err);
    }
  }
  framer->crc = (uint16_t)TVM_CRC16_INITIAL;
  err = framer_put_raw(framer, kStart, sizeof(kStart), 1);
  if (err != kTvmErrorNoError) {
    return framer_fail(framer, err);
  }
  length[0] = (uint8_t)(payload_size_bytes & 0xFFU);
  length[1] = (uint8_t)((payload_size_bytes >> 8) & 0xFFU);
  length[2] = (uint8_t)((payload_size_bytes >> 16) & 0xFFU);
  length[3] = (uint8_t)((payload_size_bytes >> 24) & 0xFFU);
  err = framer_put_escaped(framer, length, sizeof(length), 1);
  if (err != kTvmErrorNoError) {
    return framer_fail(framer, err);
  }
  framer->payload_remaining = payload_size_bytes;
  framer->state = (uint8_t)kTVMFramerStateInPacket;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMFramer_WritePayloadChunk(TVMFramer* framer, const uint8_t* data, size_t size_bytes) {
  tvm_crt_error_t err;
  if (framer->state != (uint8_t)kTVMFramerStateInPacket) {
    return kTvmErrorFramingInvalidState;
  }
  if (size_bytes > (size_t)framer->payload_remaining) {
    return kTvmErrorFramingPayloadOverflow;
  }
  err = framer_put_escaped(framer, data, size_bytes, 1);
  if (err != kTvmErrorNoError) {
    return framer_fail(framer, err);
  }
  framer->payload_remaining -= (uint32_t)size_bytes;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMFramer_FinishPacket(TVMFramer* framer) {
  uint8_t crc[2];
  tvm_crt_error_t err;
  if (framer->state != (uint8_t)kTVMFramerStateInPacket) {
    return kTvmErrorFramingInvalidState;
  }
  if (framer->payload_remaining != 0U) {
    return kTvmErrorFramingPayloadIncomplete;
  }
  crc[0] = (uint8_t)(framer->crc & 0xFFU);
  crc[1] = (uint8_t)(framer->crc >> 8);
  err = framer_put_escaped(framer, crc, sizeof(crc), 0);
  if (err == kTvmErrorNoError) {
    err = framer_flush(framer);
  }
  if (err != kTvmErrorNoError) {
    return framer_fail(framer, err);
  }
  framer->state = (uint8_t)kTVMFramerStateIdle;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMFramer_Write(TVMFramer* framer, const uint8_t* payload, size_t payload_size_bytes) {
  tvm_crt_error_t err;
  if (payload_size_bytes > (size_t)UINT32_MAX) {
    return kTvmErrorFramingPacketTooLong;
  }
  err = TVMFramer_StartPacket(framer, (uint32_t)payload_size_bytes);
  if (err == kTvmErrorNoError) {
    err = TVMFramer_WritePayloadChunk(framer, payload, payload_size_bytes);
  }
  if (err == kTvmErrorNoError) {
    err = TVMFramer_FinishPacket(framer);
  }
  return err;
}

/* ================================================================================================ */
/* Unframer                                                                                           */

void TVMUnframer_Init(TVMUnframer* unframer, const TVMUnframerHandler* handler, uint32_t max_payload_size_bytes) {
  (void)memset(unframer, 0, sizeof(*unframer));
  unframer->handler = *handler;
  unframer->max_payload_size_bytes = max_payload_size_bytes;
  TVMUnframer_Reset(unframer);
}

void TVMUnframer_Reset(TVMUnframer* unframer) {
  unframer->state = (uint8_t)kTVMUnframerFindStart;
  unframer->escape_pending = 0U;
  unframer->delivering = 0U;
  unframer->too_long = 0U;
  unframer->field_pos = 0U;
  unframer->crc = (uint16_t)TVM_CRC16_INITIAL;
  unframer->payload_remaining = 0U;
}

/* Close the current packet: count it, tell the handler, wait for the next FF FD. */
static tvm_crt_error_t unframer_end(TVMUnframer* unframer, tvm_crt_error_t verdict) {
  TVMUnframerStats* stats = &unframer->stats;
  switch (verdict) {
    case kTvmErrorNoError:
      stats->packets_ok++;
      break;
    case kTvmErrorFramingCrcMismatch:
      stats->crc_errors++;
      break;
    case kTvmErrorFramingInvalidEscape:
      stats->invalid_escapes++;
      break;
    case kTvmErrorFramingPayloadIncomplete:
      stats->restarts++;
      break;
    default:
      stats->too_long++;
      break;
  }
  unframer->state = (uint8_t)kTVMUnframerFindStart;
  unframer->delivering = 0U;
  unframer->too_long = 0U;
  unframer->field_pos = 0U;
  return unframer->handler.packet_end(unframer->handler.context, verdict);
}

static void unframer_begin(TVMUnframer* unframer) {
  static const uint8_t kStart[2] = {TVM_FRAMING_ESCAPE, TVM_FRAMING_START};
  unframer->state = (uint8_t)kTVMUnframerLength;
  unframer->field_pos = 0U;
  unframer->delivering = 0U;
  unframer->too_long = 0U;
  unframer->payload_remaining = 0U;
  unframer->crc = TVMCrc16_Update((uint16_t)TVM_CRC16_INITIAL, kStart, sizeof(kStart));
}

static void unframer_deliver(TVMUnframer* unframer, const uint8_t* data, size_t size) {
  if (unframer->delivering != 0U) {
    if (unframer->handler.payload(unframer->handler.context, data, size) != kTvmErrorNoError) {
      unframer->delivering = 0U;
    }
  }
}

/* One decoded (unescaped) byte of the length, payload or CRC field. Its raw bytes are already CRC-ed. */
static tvm_crt_error_t unframer_data_byte(TVMUnframer* unframer, uint8_t byte) {
  switch (unframer->state) {
    case kTVMUnframerLength: {
      uint32_t length;
      unframer->field[unframer->field_pos] = byte;
      unframer->field_pos++;
      if (unframer->field_pos < 4U) {
        return kTvmErrorNoError;
      }
      length = (uint32_t)unframer->field[0] | ((uint32_t)unframer->field[1] << 8) |
               ((uint32_t)unframer->field[2] << 16) | ((uint32_t)unframer->field[3] << 24);
      unframer->field_pos = 0U;
      unframer->payload_remaining = length;
      unframer->state = (uint8_t)((length == 0U) ? kTVMUnframerCrc : kTVMUnframerPayload);
      if (length > unframer->max_payload_size_bytes) {
        /* Skip the packet's bytes (escape-aware, so escaped data in it cannot fake a packet start) and
         * report it when it ends -- or when a new FF FD cuts it short. */
        unframer->too_long = 1U;
        unframer->delivering = 0U;
        return kTvmErrorNoError;
      }
      unframer->delivering =
          (unframer->handler.packet_start(unframer->handler.context, length) == kTvmErrorNoError) ? 1U : 0U;
      return kTvmErrorNoError;
    }
    case kTVMUnframerPayload:
      unframer_deliver(unframer, &byte, 1U);
      unframer->payload_remaining--;
      if (unframer->payload_remaining == 0U) {
        unframer->state = (uint8_t)kTVMUnframerCrc;
      }
      return kTvmErrorNoError;
    case kTVMUnframerCrc: {
      uint16_t received;
      unframer->field[unframer->field_pos] = byte;
      unframer->field_pos++;
      if (unframer->field_pos < 2U) {
        return kTvmErrorNoError;
      }
      received = (uint16_t)((uint16_t)unframer->field[0] | (uint16_t)((uint16_t)unframer->field[1] << 8));
      if (unframer->too_long != 0U) {
        return unframer_end(unframer, kTvmErrorFramingPacketTooLong);
      }
      return unframer_end(unframer, (received == unframer->crc) ? kTvmErrorNoError : kTvmErrorFramingCrcMismatch);
    }
    default:
      return kTvmErrorNoError; /* outside a packet: noise, ignored */
  }
}

/* The second byte of an FF xx pair. */
static tvm_crt_error_t unframer_escape_pair(TVMUnframer* unframer, uint8_t second) {
  const uint8_t pair[2] = {TVM_FRAMING_ESCAPE, second};
  int counted = 0; /* inside length or payload: the pair is part of the CRC */
  tvm_crt_error_t err = kTvmErrorNoError;
  if ((unframer->state == (uint8_t)kTVMUnframerLength) || (unframer->state == (uint8_t)kTVMUnframerPayload)) {
    counted = 1;
  }
  switch (second) {
    case TVM_FRAMING_ESCAPE:
      if (counted != 0) {
        unframer->crc = TVMCrc16_Update(unframer->crc, pair, sizeof(pair));
      }
      return unframer_data_byte(unframer, TVM_FRAMING_ESCAPE);
    case TVM_FRAMING_NOP:
      if (counted != 0) {
        unframer->crc = TVMCrc16_Update(unframer->crc, pair, sizeof(pair));
      }
      return kTvmErrorNoError;
    case TVM_FRAMING_START:
      if (unframer->state != (uint8_t)kTVMUnframerFindStart) {
        err = unframer_end(unframer, (unframer->too_long != 0U) ? kTvmErrorFramingPacketTooLong
                                                                : kTvmErrorFramingPayloadIncomplete);
      }
      unframer_begin(unframer);
      return err;
    default:
      if (unframer->state != (uint8_t)kTVMUnframerFindStart) {
        return unframer_end(unframer, (unframer->too_long != 0U) ? kTvmErrorFramingPacketTooLong
                                                                 : kTvmErrorFramingInvalidEscape);
      }
      return kTvmErrorNoError;
  }
}

tvm_crt_error_t TVMUnframer_Write(TVMUnframer* unframer, const uint8_t* data, size_t size_bytes,
                                  size_t* bytes_consumed) {
  size_t i = 0U;
  tvm_crt_error_t err = kTvmErrorNoError;
  while ((i < size_bytes) && (err == kTvmErrorNoError)) {
    uint8_t byte = data[i];
    if ((unframer->escape_pending != 0U) && (byte == TVM_FRAMING_ESCAPE) &&
        (unframer->state == (uint8_t)kTVMUnframerFindStart)) {
      /* Between packets there is no data to escape: of FF FF FD, the last two bytes start a packet (a
       * truncated packet's dangling FF must not hide the next packet's start). */
      i++;
    } else if (unframer->escape_pending != 0U) {
      unframer->escape_pending = 0U;
      i++;
      err = unframer_escape_pair(unframer, byte);
    } else if (byte == TVM_FRAMING_ESCAPE) {
      unframer->escape_pending = 1U;
      i++;
    } else if (unframer->state == (uint8_t)kTVMUnframerPayload) {
      /* Fast path: a run of plain payload bytes goes to the handler in one piece. */
      size_t run = 0U;
      while (((i + run) < size_bytes) && (run < (size_t)unframer->payload_remaining) &&
             (data[i + run] != TVM_FRAMING_ESCAPE)) {
        run++;
      }
      unframer->crc = TVMCrc16_Update(unframer->crc, &data[i], run);
      unframer_deliver(unframer, &data[i], run);
      unframer->payload_remaining -= (uint32_t)run;
      if (unframer->payload_remaining == 0U) {
        unframer->state = (uint8_t)kTVMUnframerCrc;
      }
      i += run;
    } else {
      if (unframer->state == (uint8_t)kTVMUnframerLength) {
        unframer->crc = TVMCrc16_Update(unframer->crc, &byte, 1U);
      }
      i++;
      err = unframer_data_byte(unframer, byte);
    }
  }
  if (bytes_consumed != NULL) {
    *bytes_consumed = i;
  }
  return err;
}
