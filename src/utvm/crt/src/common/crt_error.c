/*
 * crt_error.c -- the last-error message: TVMGetLastError, TVMAPISetLastError(f).
 *
 * Two static buffers of TVM_CRT_MAX_ERROR_MESSAGE_LENGTH bytes: a new message is formatted into the one
 * not currently shown and then made current, so a message may quote the previous one
 * (TVMAPISetLastErrorf("while x: %s", TVMGetLastError())) without overlapping copies. Longer messages
 * are truncated; every buffer is always NUL-terminated.
 */
#include <stdarg.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/platform.h>

#include "crt_internal.h"

#define MESSAGE_BYTES ((size_t)TVM_CRT_MAX_ERROR_MESSAGE_LENGTH)

static char g_error_buffers[2][TVM_CRT_MAX_ERROR_MESSAGE_LENGTH];
static uint8_t g_error_current = 0U;
static uint32_t g_error_serial = 0U;

static char* next_buffer(void);
static void publish(char* buffer);
static void set_errorv(const char* fmt, va_list args);

static char* next_buffer(void) {
  return g_error_buffers[(g_error_current == 0U) ? 1U : 0U];
}

static void publish(char* buffer) {
  buffer[MESSAGE_BYTES - 1U] = '\0';
  g_error_current = (g_error_current == 0U) ? 1U : 0U;
  g_error_serial++;
}

static void set_errorv(const char* fmt, va_list args) {
  char* buffer = next_buffer();
  buffer[0] = '\0';
  if (fmt != NULL) {
    (void)TVMPlatformFormatMessage(buffer, MESSAGE_BYTES, fmt, args);
  }
  publish(buffer);
}

const char* TVMGetLastError(void) { return g_error_buffers[g_error_current]; }

void TVMAPISetLastError(const char* msg) {
  char* buffer = next_buffer();
  size_t n = 0U;
  if (msg != NULL) {
    while ((n < (MESSAGE_BYTES - 1U)) && (msg[n] != '\0')) {
      buffer[n] = msg[n];
      n++;
    }
  }
  buffer[n] = '\0';
  publish(buffer);
}

void TVMAPISetLastErrorf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  set_errorv(fmt, args);
  va_end(args);
}

tvm_crt_error_t TVMCrtError_Set(tvm_crt_error_t code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  set_errorv(fmt, args);
  va_end(args);
  return code;
}

uint32_t TVMCrtError_Serial(void) { return g_error_serial; }

void TVMCrtError_Reset(void) {
  (void)memset((void*)g_error_buffers, 0, sizeof(g_error_buffers));
  g_error_current = 0U;
}
