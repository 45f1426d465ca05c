/*
 * bench_framing.c -- encode/decode throughput of the C framing layer (TVMFramer, TVMUnframer) and of
 * crc16, against memcpy of the same bytes measured in the same run.
 *
 *   bench_framing [payload_bytes [total_megabytes]]     (defaults 2037 and 64)
 *
 * Payloads are pseudo-random bytes (so about 1 in 256 is FF and gets escaped). Prints one JSON object:
 * MB/s (10^6 payload bytes per second) of memcpy, crc16, encode (framer into a sink that only counts)
 * and decode (unframer with a handler that only counts), best of 5 runs each.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t g_sink_bytes;
static tvm_crt_ssize_t count_write(void* ctx, const uint8_t* data, size_t n) {
  (void)ctx;
  (void)data;
  g_sink_bytes += n;
  return (tvm_crt_ssize_t)n;
}

typedef struct {
  uint8_t* data;
  size_t len;
  size_t cap;
} Buf;
static tvm_crt_ssize_t buf_write(void* ctx, const uint8_t* data, size_t n) {
  Buf* b = (Buf*)ctx;
  if (b->len + n > b->cap) {
    return -1;
  }
  memcpy(&b->data[b->len], data, n);
  b->len += n;
  return (tvm_crt_ssize_t)n;
}

static size_t g_payload_bytes;
static int g_ok_packets;
static tvm_crt_error_t on_start(void* c, uint32_t n) {
  (void)c;
  (void)n;
  return kTvmErrorNoError;
}
static tvm_crt_error_t on_payload(void* c, const uint8_t* d, size_t n) {
  (void)c;
  (void)d;
  g_payload_bytes += n;
  return kTvmErrorNoError;
}
static tvm_crt_error_t on_end(void* c, tvm_crt_error_t v) {
  (void)c;
  if (v == kTvmErrorNoError) {
    g_ok_packets++;
  }
  return kTvmErrorNoError;
}

int main(int argc, char** argv) {
  size_t payload = (argc > 1) ? (size_t)strtoul(argv[1], NULL, 10) : 2037U;
  size_t total = ((argc > 2) ? (size_t)strtoul(argv[2], NULL, 10) : 64U) * 1000000U;
  size_t packets, i, p;
  int run;
  uint8_t* src;
  uint8_t* dst;
  Buf wire;
  uint32_t seed = 1U;
  volatile uint16_t crc_sink = 0;
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  TVMFramer framer;
  TVMUnframer unframer;
  TVMUnframerHandler h;
  if (payload == 0U || payload > (1U << 20) || total == 0U) {
    fprintf(stderr, "usage: %s [payload_bytes (1..1048576) [total_megabytes]]\n", argv[0]);
    return 2;
  }
  packets = total / payload;
  if (packets == 0U) {
    packets = 1U;
  }
  src = malloc(payload);
  dst = malloc(payload);
  wire.cap = 2U * payload + 64U;
  wire.data = malloc(wire.cap);
  if (src == NULL || dst == NULL || wire.data == NULL) {
    return 2;
  }
  for (i = 0; i < payload; ++i) {
    seed = seed * 1103515245U + 12345U;
    src[i] = (uint8_t)(seed >> 24);
  }
  /* one encoded packet, decoded `packets` times */
  wire.len = 0;
  TVMFramer_Init(&framer, buf_write, &wire);
  framer.state = kTVMFramerStateIdle;
  if (TVMFramer_Write(&framer, src, payload) != kTvmErrorNoError) {
    return 3;
  }
  h.packet_start = on_start;
  h.payload = on_payload;
  h.packet_end = on_end;
  h.context = NULL;
  for (run = 0; run < 5; ++run) {
    double t;
    t = now();
    for (p = 0; p < packets; ++p) {
      memcpy(dst, src, payload);
      dst[p % payload] ^= 1U; /* keep the copy from being optimized away */
    }
    t = now() - t;
    best[0] = (t < best[0]) ? t : best[0];

    t = now();
    for (p = 0; p < packets; ++p) {
      crc_sink ^= TVMCrc16_Update(TVM_CRC16_INITIAL, src, payload);
    }
    t = now() - t;
    best[1] = (t < best[1]) ? t : best[1];

    TVMFramer_Init(&framer, count_write, NULL);
    g_sink_bytes = 0;
    t = now();
    for (p = 0; p < packets; ++p) {
      if (TVMFramer_Write(&framer, src, payload) != kTvmErrorNoError) {
        return 4;
      }
    }
    t = now() - t;
    best[2] = (t < best[2]) ? t : best[2];

    TVMUnframer_Init(&unframer, &h, (uint32_t)payload);
    g_payload_bytes = 0;
    g_ok_packets = 0;
    t = now();
    for (p = 0; p < packets; ++p) {
      size_t consumed;
      if (TVMUnframer_Write(&unframer, wire.data, wire.len, &consumed) != kTvmErrorNoError) {
        return 5;
      }
    }
    t = now() - t;
    best[3] = (t < best[3]) ? t : best[3];
    if ((size_t)g_ok_packets != packets || g_payload_bytes != packets * payload) {
      fprintf(stderr, "decode check failed: %d good packets of %lu\n", g_ok_packets, (unsigned long)packets);
      return 6;
    }
  }
  {
    double bytes = (double)packets * (double)payload;
    printf("{\"payload_bytes\": %lu, \"packets\": %lu, \"wire_bytes_per_packet\": %lu, "
           "\"memcpy_MBps\": %.1f, \"crc16_MBps\": %.1f, \"encode_MBps\": %.1f, \"decode_MBps\": %.1f}\n",
           (unsigned long)payload, (unsigned long)packets, (unsigned long)wire.len, bytes / best[0] / 1e6,
           bytes / best[1] / 1e6, bytes / best[2] / 1e6, bytes / best[3] / 1e6);
  }
  (void)crc_sink;
  free(src);
  free(dst);
  free(wire.data);
  return 0;
}
