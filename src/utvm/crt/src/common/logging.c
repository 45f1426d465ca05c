/*
 * logging.c -- TVMLogf: format into a stack buffer and hand the text to TVMPlatformLog.
 */
#include <stdarg.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/platform.h>

void TVMLogf(int level, const char* fmt, ...) {
  char message[TVM_CRT_MAX_LOG_MESSAGE_BYTES];
  size_t length = 0U;
  va_list args;
  message[0] = '\0';
  if (fmt != NULL) {
    va_start(args, fmt);
    length = TVMPlatformFormatMessage(message, sizeof(message), fmt, args);
    va_end(args);
  }
  if (length >= sizeof(message)) {
    length = sizeof(message) - 1U;
  }
  message[length] = '\0';
  TVMPlatformLog(level, message, length);
}
