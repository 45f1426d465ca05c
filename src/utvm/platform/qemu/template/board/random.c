/*
 * random.c -- a per-boot random stream for session nonces and random_fill.
 *
 * Under -icount shift=0 the emulated machine is deterministic, so the seed is taken from the host: the
 * `seed=<hex>` word of the semihosting command line (the QEMU platform driver passes fresh os.urandom bytes
 * there), mixed with the host's wall clock and elapsed-time counter. The stream itself is SplitMix64.
 */
#include <stddef.h>
#include <stdint.h>

#include "utvm_board.h"

static uint64_t g_state;
static int g_seeded;

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

static uint64_t seed_from_cmdline(void) {
  char cmdline[160];
  uint64_t seed = 0u;
  int i;
  if (utvm_semihost_cmdline(cmdline, sizeof(cmdline)) < 0) {
    return 0u;
  }
  for (i = 0; cmdline[i] != '\0'; ++i) {
    if (cmdline[i] == 's' && cmdline[i + 1] == 'e' && cmdline[i + 2] == 'e' && cmdline[i + 3] == 'd' &&
        cmdline[i + 4] == '=') {
      int j;
      for (j = i + 5; hex_value(cmdline[j]) >= 0; ++j) {
        seed = mix64(seed ^ (uint64_t)hex_value(cmdline[j]));
      }
      break;
    }
  }
  return seed;
}

static void seed_once(void) {
  uint64_t seed = seed_from_cmdline();
  seed = mix64(seed ^ utvm_semihost_time());
  seed = mix64(seed ^ utvm_semihost_elapsed());
  g_state = seed;
  g_seeded = 1;
}

void utvm_random_fill(uint8_t* buf, size_t num_bytes) {
  size_t i;
  uint64_t word = 0u;
  if (!g_seeded) {
    seed_once();
  }
  for (i = 0; i < num_bytes; ++i) {
    if ((i & 7u) == 0u) {
      g_state += 0x9E3779B97F4A7C15ull;
      word = mix64(g_state);
    }
    buf[i] = (uint8_t)(word >> (8u * (i & 7u)));
  }
}
