/*
 * bench_ack: the trivial peer of bench_rpc's "same exchange pattern" baseline.
 *
 * Reads requests from stdin and answers each one on stdout, doing no other work, so the host can drive a
 * raw pipe with exactly the request/reply pattern of an RPC copy (packet-sized requests + small replies
 * for an upload, small requests + packet-sized replies for a download) without any protocol code on
 * either side. Each request is:
 *
 *     u32 body_bytes (little-endian) . u32 reply_bytes (little-endian) . body_bytes bytes (discarded)
 *
 * and its reply is reply_bytes zero bytes. EOF on stdin ends the program (exit 0); a short write or a
 * reply larger than REPLY_MAX ends it with exit 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#define IN_BUFFER_BYTES 65536u
#define REPLY_MAX (1u << 20)

static unsigned char in_buf[IN_BUFFER_BYTES];
static size_t in_len;
static size_t in_pos;
static unsigned char reply_buf[REPLY_MAX];

static int refill(void);
static int skip_bytes(size_t n);
static int take_u32(uint32_t* out);
static int write_all(const unsigned char* data, size_t n);

/* 1: more bytes are buffered, 0: EOF, -1: error. */
static int refill(void) {
  ssize_t got;
  do {
    got = read(STDIN_FILENO, in_buf, sizeof(in_buf));
  } while (got < 0 && errno == EINTR);
  if (got <= 0) {
    return got == 0 ? 0 : -1;
  }
  in_len = (size_t)got;
  in_pos = 0;
  return 1;
}

static int skip_bytes(size_t n) {
  while (n > 0) {
    size_t avail;
    if (in_pos == in_len) {
      int rc = refill();
      if (rc <= 0) {
        return rc;
      }
    }
    avail = in_len - in_pos;
    if (avail > n) {
      avail = n;
    }
    in_pos += avail;
    n -= avail;
  }
  return 1;
}

static int take_u32(uint32_t* out) {
  uint32_t value = 0;
  unsigned int i;
  for (i = 0; i < 4u; i++) {
    if (in_pos == in_len) {
      int rc = refill();
      if (rc <= 0) {
        return rc;
      }
    }
    value |= (uint32_t)in_buf[in_pos] << (8u * i);
    in_pos++;
  }
  *out = value;
  return 1;
}

static int write_all(const unsigned char* data, size_t n) {
  while (n > 0) {
    ssize_t put = write(STDOUT_FILENO, data, n);
    if (put < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -1;
    }
    data += put;
    n -= (size_t)put;
  }
  return 1;
}

int main(void) {
  for (;;) {
    uint32_t body = 0;
    uint32_t reply = 0;
    int rc = take_u32(&body);
    if (rc > 0) {
      rc = take_u32(&reply);
    }
    if (rc > 0) {
      rc = skip_bytes(body);
    }
    if (rc == 0) {
      return 0;
    }
    if (rc < 0 || reply > REPLY_MAX) {
      fprintf(stderr, "bench_ack: %s\n", rc < 0 ? "read failed" : "reply larger than REPLY_MAX");
      return 1;
    }
    if (write_all(reply_buf, reply) < 0) {
      fprintf(stderr, "bench_ack: write failed\n");
      return 1;
    }
  }
}
