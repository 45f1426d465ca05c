/*
 * utvm_acceptance.c -- the conformance module of `utvm acceptance` (docs/acceptance.md): globals the host's
 * checks call to look at a TVMPlatform* port and the CRT from inside the device. Linked into the platform's
 * normal RPC firmware as user code; utvm_user_init() registers them before RPC is served.
 *
 *   acceptance.info()                    -> str  "key=value ..." of the limits this firmware was built with
 *   acceptance.echo(bytes)               -> bytes the same bytes (at most ACC_ECHO_MAX)
 *   acceptance.digest(bytes | tensor)    -> int  (length << 32) | CRC-32 (IEEE) of what arrived
 *   acceptance.fill(tensor, seed)        -> int  bytes written: byte i = (7 i + 13 seed + (i >> 8)) mod 256
 *   acceptance.alloc_check(n, size, big) -> str  TVMPlatformMemoryAllocate/Free: alignment, no overlap,
 *                                                contents kept, reuse, a huge request refused, exhaustion
 *   acceptance.registry_check()          -> str  the global registry seen from C (lookup, call, handles,
 *                                                registration at run time, acceptance.late)
 *   acceptance.tick(read)                -> int  read 0: count one call; read 1: the count so far
 *   acceptance.spin(n)                   -> int  n iterations of a loop the compiler cannot remove
 *   acceptance.timer_check()             -> str  TVMPlatformTimerStart/Stop: states and elapsed times
 *   acceptance.log(text)                 -> None TVMLogf the text (reaches the host as a session log)
 *   acceptance.reset()                   -> never returns: TVMPlatformAbort (a board resets)
 *
 * A failed check returns an error whose text (TVMGetLastError, the host's RemoteError) names the block,
 * handle, call or byte at fault. Nothing here allocates except alloc_check, which frees what it took.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/platform.h>

#define ACC_ECHO_MAX 1024u
#define ACC_MAX_BLOCKS 32
#define ACC_TEXT_BYTES 160u

typedef int (*acc_func)(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res);

void utvm_user_init(void);

static const char* acc_text(const char* fmt, ...) TVM_CRT_FORMAT(1, 2);
static int acc_fail(int code, const char* fmt, ...) TVM_CRT_FORMAT(2, 3);
static int acc_args(const char* name, const int* type_codes, int num_args, int want, const int* codes);
static uint32_t acc_crc32(uint32_t crc, const uint8_t* data, size_t size);
static int acc_tensor(const char* name, int index, const TVMValue* args, uint8_t** data, size_t* size);
static int acc_return_text(TVMValue* ret, int* ret_code, const char* text);
static void acc_free_blocks(void** blocks, int count);
static int acc_allocate_blocks(void** blocks, size_t* sizes, int n, size_t size, const char* round);
static int acc_exhaust(void** blocks, size_t big, int* out_count);
static int acc_registry_handle(const char* name, TVMFunctionHandle* out);

static uint64_t g_ticks;
static uint8_t g_echo[ACC_ECHO_MAX];
static TVMByteArray g_echo_bytes;

/* printf-style text in a static buffer (TVMPlatformFormatMessage: the port's own formatter). */
static const char* acc_text(const char* fmt, ...) {
  static char text[ACC_TEXT_BYTES];
  va_list args;
  va_start(args, fmt);
  (void)TVMPlatformFormatMessage(text, sizeof(text), fmt, args);
  va_end(args);
  return text;
}

/* Set the last error (the host's RemoteError text) and return `code`. */
static int acc_fail(int code, const char* fmt, ...) {
  char text[ACC_TEXT_BYTES];
  va_list args;
  va_start(args, fmt);
  (void)TVMPlatformFormatMessage(text, sizeof(text), fmt, args);
  va_end(args);
  TVMAPISetLastError(text);
  return code;
}

/* `want` arguments of the type codes `codes` (kTVMDLTensorHandle also accepts kTVMNDArrayHandle). */
static int acc_args(const char* name, const int* type_codes, int num_args, int want, const int* codes) {
  int i;
  if (num_args != want) {
    return acc_fail((int)kTvmErrorFunctionCallNumArguments, "%s: expects %d argument(s), got %d", name, want,
                    num_args);
  }
  for (i = 0; i < want; ++i) {
    int got = type_codes[i];
    if ((codes[i] == (int)kTVMDLTensorHandle) && (got == (int)kTVMNDArrayHandle)) {
      got = (int)kTVMDLTensorHandle;
    }
    if (got != codes[i]) {
      return acc_fail((int)kTvmErrorFunctionCallWrongArgType, "%s: argument %d has type code %d, expected %d", name,
                      i, type_codes[i], codes[i]);
    }
  }
  return 0;
}

/* CRC-32 (IEEE 802.3, reflected 0xEDB88320), as zlib.crc32: start with 0. */
static uint32_t acc_crc32(uint32_t crc, const uint8_t* data, size_t size) {
  size_t i;
  uint32_t c = ~crc;
  for (i = 0u; i < size; ++i) {
    int bit;
    c ^= (uint32_t)data[i];
    for (bit = 0; bit < 8; ++bit) {
      c = ((c & 1u) != 0u) ? ((c >> 1) ^ 0xEDB88320u) : (c >> 1);
    }
  }
  return ~c;
}

/* A compact tensor argument: its bytes (byte_offset applied). */
static int acc_tensor(const char* name, int index, const TVMValue* args, uint8_t** data, size_t* size) {
  const DLTensor* t = (const DLTensor*)args[index].v_handle;
  uint64_t count = 1u;
  int32_t d;
  if ((t == NULL) || (t->strides != NULL) || (t->ndim < 0)) {
    return acc_fail((int)kTvmErrorFunctionCallInvalidArg, "%s: argument %d is not a compact tensor", name, index);
  }
  for (d = 0; d < t->ndim; ++d) {
    if ((t->shape[d] < 0) || ((t->shape[d] > 0) && (count > (UINT32_MAX / (uint64_t)t->shape[d])))) {
      return acc_fail((int)kTvmErrorFunctionCallInvalidArg, "%s: argument %d: dimension %d is out of range", name,
                      index, (int)d);
    }
    count *= (uint64_t)t->shape[d];
  }
  count *= ((uint64_t)t->dtype.bits * (uint64_t)t->dtype.lanes + 7u) / 8u;
  *data = (uint8_t*)t->data + t->byte_offset;
  *size = (size_t)count;
  return 0;
}

static int acc_return_text(TVMValue* ret, int* ret_code, const char* text) {
  ret->v_str = text;
  *ret_code = (int)kTVMStr;
  return 0;
}

/* --- acceptance.info ------------------------------------------------------------------------------------ */
static int acc_info(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  (void)args;
  (void)res;
  if (acc_args("acceptance.info", type_codes, num_args, 0, NULL) != 0) {
    return (int)kTvmErrorFunctionCallNumArguments;
  }
  return acc_return_text(ret, ret_code,
                         acc_text("pointer_bytes=%u alloc_alignment=%u max_packet=%u max_args=%u max_ndarrays=%u "
                                  "max_ndim=%u time_evaluator_repeat=%u log_bytes=%u echo_max=%u",
                                  (unsigned)sizeof(void*), (unsigned)TVM_CRT_ALLOC_ALIGNMENT_BYTES,
                                  (unsigned)TVM_CRT_MAX_PACKET_SIZE_BYTES, (unsigned)TVM_CRT_MAX_ARGS,
                                  (unsigned)TVM_CRT_MAX_NDARRAYS, (unsigned)TVM_CRT_MAX_NDIM,
                                  (unsigned)TVM_CRT_MAX_TIME_EVALUATOR_REPEAT, (unsigned)TVM_CRT_MAX_LOG_MESSAGE_BYTES,
                                  (unsigned)ACC_ECHO_MAX));
}

/* --- acceptance.echo / digest / fill: the bytes the link carried ------------------------------------------ */
static int acc_echo(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  static const int kCodes[1] = {(int)kTVMBytes};
  const TVMByteArray* in;
  int rc = acc_args("acceptance.echo", type_codes, num_args, 1, kCodes);
  (void)res;
  if (rc != 0) {
    return rc;
  }
  in = (const TVMByteArray*)args[0].v_handle;
  if (in->size > ACC_ECHO_MAX) {
    return acc_fail((int)kTvmErrorFunctionCallInvalidArg, "acceptance.echo: %lu bytes, at most %u",
                    (unsigned long)in->size, ACC_ECHO_MAX);
  }
  if (in->size > 0u) {
    (void)memcpy(g_echo, in->data, in->size);
  }
  g_echo_bytes.data = (const char*)g_echo;
  g_echo_bytes.size = in->size;
  ret->v_handle = &g_echo_bytes;
  *ret_code = (int)kTVMBytes;
  return 0;
}

static int acc_digest(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  const uint8_t* data = NULL;
  size_t size = 0u;
  (void)res;
  if (num_args != 1) {
    return acc_fail((int)kTvmErrorFunctionCallNumArguments, "acceptance.digest: expects 1 argument, got %d",
                    num_args);
  }
  if (type_codes[0] == (int)kTVMBytes) {
    const TVMByteArray* in = (const TVMByteArray*)args[0].v_handle;
    data = (const uint8_t*)in->data;
    size = in->size;
  } else if ((type_codes[0] == (int)kTVMDLTensorHandle) || (type_codes[0] == (int)kTVMNDArrayHandle)) {
    uint8_t* bytes = NULL;
    int rc = acc_tensor("acceptance.digest", 0, args, &bytes, &size);
    if (rc != 0) {
      return rc;
    }
    data = bytes;
  } else {
    return acc_fail((int)kTvmErrorFunctionCallWrongArgType, "acceptance.digest: argument 0 has type code %d, "
                    "expected bytes or a tensor", type_codes[0]);
  }
  ret->v_int64 = (int64_t)(((uint64_t)size << 32) | (uint64_t)acc_crc32(0u, data, size));
  *ret_code = (int)kTVMArgInt;
  return 0;
}

static int acc_fill(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  static const int kCodes[2] = {(int)kTVMDLTensorHandle, (int)kTVMArgInt};
  uint8_t* data = NULL;
  size_t size = 0u;
  size_t i;
  uint32_t seed;
  int rc = acc_args("acceptance.fill", type_codes, num_args, 2, kCodes);
  (void)res;
  if (rc == 0) {
    rc = acc_tensor("acceptance.fill", 0, args, &data, &size);
  }
  if (rc != 0) {
    return rc;
  }
  seed = (uint32_t)args[1].v_int64;
  for (i = 0u; i < size; ++i) {
    data[i] = (uint8_t)(((uint32_t)i * 7u + seed * 13u + (uint32_t)(i >> 8)) & 0xFFu);
  }
  ret->v_int64 = (int64_t)size;
  *ret_code = (int)kTVMArgInt;
  return 0;
}

/* --- acceptance.alloc_check: the port's TVMPlatformMemoryAllocate / Free ----------------------------------- */
static void* g_blocks[ACC_MAX_BLOCKS];
static size_t g_sizes[ACC_MAX_BLOCKS];

static void acc_free_blocks(void** blocks, int count) {
  const DLDevice dev = {kDLCPU, 0};
  int i;
  for (i = 0; i < count; ++i) {
    if (blocks[i] != NULL) {
      (void)TVMPlatformMemoryFree(blocks[i], dev);
      blocks[i] = NULL;
    }
  }
}

/* n blocks of size + 24 (i mod 4) bytes: each allocated, aligned, apart from every other, and keeping what was
 * written to it while the others are written. On failure every block is freed and the error names the block. */
static int acc_allocate_blocks(void** blocks, size_t* sizes, int n, size_t size, const char* round) {
  const DLDevice dev = {kDLCPU, 0};
  int i;
  int j;
  for (i = 0; i < n; ++i) {
    tvm_crt_error_t err;
    sizes[i] = size + (size_t)(i % 4) * 24u;
    blocks[i] = NULL;
    err = TVMPlatformMemoryAllocate(sizes[i], dev, &blocks[i]);
    if ((err != kTvmErrorNoError) || (blocks[i] == NULL)) {
      unsigned long at = (unsigned long)(uintptr_t)blocks[i];
      blocks[i] = NULL;
      acc_free_blocks(blocks, i);
      return acc_fail((int)kTvmErrorPlatformNoMemory, "%s: allocating block %d (%lu bytes) failed: error 0x%04x, "
                      "pointer 0x%lx", round, i, (unsigned long)sizes[i], (unsigned)err, at);
    }
    if (((uintptr_t)blocks[i] % (uintptr_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES) != 0u) {
      unsigned long at = (unsigned long)(uintptr_t)blocks[i];
      acc_free_blocks(blocks, i + 1);
      return acc_fail((int)kTvmErrorPlatformCheckFailure, "%s: block %d at 0x%lx is not aligned to %u bytes "
                      "(TVM_CRT_ALLOC_ALIGNMENT_BYTES)", round, i, at, (unsigned)TVM_CRT_ALLOC_ALIGNMENT_BYTES);
    }
  }
  for (i = 0; i < n; ++i) {
    for (j = i + 1; j < n; ++j) {
      const uintptr_t a = (uintptr_t)blocks[i];
      const uintptr_t b = (uintptr_t)blocks[j];
      if ((a < b + sizes[j]) && (b < a + sizes[i])) {
        const unsigned long lo = (unsigned long)((a > b) ? a : b);
        const unsigned long hi = (unsigned long)((a + sizes[i] < b + sizes[j]) ? a + sizes[i] : b + sizes[j]);
        acc_free_blocks(blocks, n);
        return acc_fail((int)kTvmErrorPlatformCheckFailure, "%s: blocks %d [0x%lx, +%lu) and %d [0x%lx, +%lu) "
                        "overlap by %lu bytes", round, i, (unsigned long)a, (unsigned long)sizes[i], j,
                        (unsigned long)b, (unsigned long)sizes[j], hi - lo);
      }
    }
  }
  for (i = 0; i < n; ++i) {
    (void)memset(blocks[i], (int)(uint8_t)(0x11 * (i % 15) + 1), sizes[i]);
  }
  for (i = 0; i < n; ++i) {
    const uint8_t want = (uint8_t)(0x11 * (i % 15) + 1);
    const uint8_t* p = (const uint8_t*)blocks[i];
    size_t k;
    for (k = 0u; k < sizes[i]; ++k) {
      if (p[k] != want) {
        const unsigned long at = (unsigned long)(uintptr_t)&p[k];
        const unsigned got = (unsigned)p[k];
        acc_free_blocks(blocks, n);
        return acc_fail((int)kTvmErrorPlatformCheckFailure, "%s: block %d: byte %lu (0x%lx) reads 0x%02x, 0x%02x "
                        "was written (another block shares its memory)", round, i, (unsigned long)k, at, got,
                        (unsigned)want);
      }
    }
  }
  return 0;
}

/* Blocks of `big` bytes until the port refuses one (cleanly: an error and a NULL pointer) or ACC_MAX_BLOCKS are
 * held; then all are freed. *out_count: how many fit, -1 if the port never refused. */
static int acc_exhaust(void** blocks, size_t big, int* out_count) {
  const DLDevice dev = {kDLCPU, 0};
  int count = 0;
  int refused = 0;
  while ((count < ACC_MAX_BLOCKS) && (refused == 0)) {
    void* p = NULL;
    tvm_crt_error_t err = TVMPlatformMemoryAllocate(big, dev, &p);
    if (err != kTvmErrorNoError) {
      if (p != NULL) {
        acc_free_blocks(blocks, count);
        return acc_fail((int)kTvmErrorPlatformCheckFailure, "out of memory after %d blocks of %lu bytes: error "
                        "0x%04x but the pointer is 0x%lx, not NULL", count, (unsigned long)big, (unsigned)err,
                        (unsigned long)(uintptr_t)p);
      }
      refused = 1;
    } else if (p == NULL) {
      acc_free_blocks(blocks, count);
      return acc_fail((int)kTvmErrorPlatformCheckFailure, "block %d of %lu bytes: success with a NULL pointer",
                      count, (unsigned long)big);
    } else {
      blocks[count] = p;
      count++;
    }
  }
  acc_free_blocks(blocks, count);
  *out_count = (refused != 0) ? count : -1;
  return 0;
}

static int acc_alloc_check(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  static const int kCodes[3] = {(int)kTVMArgInt, (int)kTVMArgInt, (int)kTVMArgInt};
  const DLDevice dev = {kDLCPU, 0};
  void* huge_ptr = NULL;
  tvm_crt_error_t huge_err;
  int n;
  int first = 0;
  int second = 0;
  int rc = acc_args("acceptance.alloc_check", type_codes, num_args, 3, kCodes);
  (void)res;
  if (rc != 0) {
    return rc;
  }
  if ((args[0].v_int64 < 1) || (args[0].v_int64 > ACC_MAX_BLOCKS) || (args[1].v_int64 < 1) ||
      (args[1].v_int64 > 65536) || (args[2].v_int64 < 1) || (args[2].v_int64 > (1 << 24))) {
    return acc_fail((int)kTvmErrorFunctionCallInvalidArg, "acceptance.alloc_check: n 1..%d, size 1..65536, big "
                    "1..2^24", ACC_MAX_BLOCKS);
  }
  n = (int)args[0].v_int64;
  rc = acc_allocate_blocks(g_blocks, g_sizes, n, (size_t)args[1].v_int64, "first round");
  if (rc != 0) {
    return rc;
  }
  acc_free_blocks(g_blocks, n);
  rc = acc_allocate_blocks(g_blocks, g_sizes, n, (size_t)args[1].v_int64, "after freeing, second round");
  if (rc != 0) {
    return rc;
  }
  acc_free_blocks(g_blocks, n);
  huge_err = TVMPlatformMemoryAllocate(((size_t)-1) / 2u, dev, &huge_ptr);
  if ((huge_err == kTvmErrorNoError) || (huge_ptr != NULL)) {
    if (huge_ptr != NULL) {
      (void)TVMPlatformMemoryFree(huge_ptr, dev);
    }
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "a request of %lu bytes was not refused: error 0x%04x, "
                    "pointer 0x%lx", (unsigned long)(((size_t)-1) / 2u), (unsigned)huge_err,
                    (unsigned long)(uintptr_t)huge_ptr);
  }
  rc = acc_exhaust(g_blocks, (size_t)args[2].v_int64, &first);
  if (rc == 0) {
    rc = acc_exhaust(g_blocks, (size_t)args[2].v_int64, &second);
  }
  if (rc != 0) {
    return rc;
  }
  if (second != first) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "memory is not given back: %d blocks of %ld bytes fit, "
                    "all were freed, then %d fit", first, (long)args[2].v_int64, second);
  }
  return acc_return_text(ret, ret_code,
                         acc_text("blocks=%d alignment=%u huge_error=0x%04x big_blocks=%d", n,
                                  (unsigned)TVM_CRT_ALLOC_ALIGNMENT_BYTES, (unsigned)huge_err, first));
}

/* --- acceptance.registry_check: the global registry from C ---------------------------------------------- */
static int acc_late(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  (void)res;
  ret->v_int64 = 42;
  *ret_code = (int)kTVMArgInt;
  return 0;
}

static int acc_registry_handle(const char* name, TVMFunctionHandle* out) {
  *out = NULL;
  if ((TVMFuncGetGlobal(name, out) != 0) || (*out == NULL)) {
    return acc_fail((int)kTvmErrorFunctionNameNotFound, "TVMFuncGetGlobal(\"%s\") found nothing: %s", name,
                    TVMGetLastError());
  }
  return 0;
}

static int acc_registry_check(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code,
                              void* res) {
  /* Handles that name nothing: no valid bits; a module handle (function half without its valid bit); a
   * well-formed handle of an empty function slot of module 0. */
  static const uint32_t kBad[3] = {0x12345678u, 0x80000000u, 0x8000FFF0u};
  acc_func late = &acc_late;
  TVMFunctionHandle late_handle = NULL;
  TVMFunctionHandle h = NULL;
  TVMValue value;
  TVMValue out;
  int code = (int)kTVMArgInt;
  int out_code = (int)kTVMNullptr;
  int i;
  int rc;
  (void)args;
  (void)res;
  rc = acc_args("acceptance.registry_check", type_codes, num_args, 0, NULL);
  if (rc == 0) {
    rc = acc_registry_handle("acceptance.tick", &h);
  }
  if (rc != 0) {
    return rc;
  }
  value.v_int64 = 1;
  out.v_int64 = -1;
  rc = TVMFuncCall(h, &value, &code, 1, &out, &out_code);
  if ((rc != 0) || (out_code != (int)kTVMArgInt) || (out.v_int64 != (int64_t)g_ticks)) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMFuncCall(acceptance.tick) through its handle 0x%lx: "
                    "code %d, type code %d, value %ld", (unsigned long)(uintptr_t)h, rc, out_code,
                    (long)out.v_int64);
  }
  if (TVMFuncFree(h) != 0) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMFuncFree of a global handle failed: %s",
                    TVMGetLastError());
  }
  h = (TVMFunctionHandle)(uintptr_t)1u;
  if ((TVMFuncGetGlobal("acceptance.no such function", &h) == 0) || (h != NULL)) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMFuncGetGlobal found a function that was never "
                    "registered (handle 0x%lx)", (unsigned long)(uintptr_t)h);
  }
  for (i = 0; i < 3; ++i) {
    if (TVMFuncCall((TVMFunctionHandle)(uintptr_t)kBad[i], &value, &code, 1, &out, &out_code) == 0) {
      return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMFuncCall accepted the invalid handle 0x%08lx",
                      (unsigned long)kBad[i]);
    }
  }
  (void)memcpy((void*)&late_handle, (const void*)&late, sizeof(late_handle));
  h = NULL;
  if (TVMFuncGetGlobal("acceptance.late", &h) != 0) { /* the first run since boot registers it */
    if (TVMFuncRegisterGlobal("acceptance.late", late_handle, 0) != 0) {
      return acc_fail((int)kTvmErrorFunctionRegistryFull, "TVMFuncRegisterGlobal(\"acceptance.late\") failed: %s",
                      TVMGetLastError());
    }
  }
  if (TVMFuncRegisterGlobal("acceptance.late", late_handle, 0) == 0) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMFuncRegisterGlobal without override replaced "
                    "acceptance.late");
  }
  if (TVMFuncRegisterGlobal("acceptance.late", late_handle, 1) != 0) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMFuncRegisterGlobal with override failed: %s",
                    TVMGetLastError());
  }
  rc = acc_registry_handle("acceptance.late", &h);
  if (rc != 0) {
    return rc;
  }
  out.v_int64 = 0;
  if ((TVMFuncCall(h, NULL, NULL, 0, &out, &out_code) != 0) || (out.v_int64 != 42)) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "acceptance.late, registered at run time, returned %ld, "
                    "not 42", (long)out.v_int64);
  }
  TVMAPISetLastError("");
  return acc_return_text(ret, ret_code, "ok");
}

/* --- acceptance.tick / spin / timer_check: the time evaluator and the port's timer ----------------------- */
static int acc_tick(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  static const int kCodes[1] = {(int)kTVMArgInt};
  int rc = acc_args("acceptance.tick", type_codes, num_args, 1, kCodes);
  (void)res;
  if (rc != 0) {
    return rc;
  }
  if (args[0].v_int64 == 0) {
    g_ticks++;
  }
  ret->v_int64 = (int64_t)g_ticks;
  *ret_code = (int)kTVMArgInt;
  return 0;
}

static int acc_spin(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  static const int kCodes[1] = {(int)kTVMArgInt};
  volatile uint32_t sink = 0u;
  int64_t i;
  int rc = acc_args("acceptance.spin", type_codes, num_args, 1, kCodes);
  (void)res;
  if (rc != 0) {
    return rc;
  }
  for (i = 0; i < args[0].v_int64; ++i) {
    sink = sink + 1u;
  }
  ret->v_int64 = (int64_t)sink;
  *ret_code = (int)kTVMArgInt;
  return 0;
}

static int acc_timer_check(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  double elapsed = -1.0;
  double longest = 0.0;
  tvm_crt_error_t err;
  int i;
  int rc = acc_args("acceptance.timer_check", type_codes, num_args, 0, NULL);
  (void)args;
  (void)res;
  if (rc != 0) {
    return rc;
  }
  err = TVMPlatformTimerStop(&elapsed);
  if (err != kTvmErrorPlatformTimerBadState) {
    return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMPlatformTimerStop of a stopped timer returned 0x%04x, "
                    "not kTvmErrorPlatformTimerBadState (0x0504)", (unsigned)err);
  }
  for (i = 0; i < 3; ++i) {
    volatile uint32_t sink = 0u;
    uint32_t k;
    err = TVMPlatformTimerStart();
    if (err != kTvmErrorNoError) {
      return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMPlatformTimerStart (%d) returned 0x%04x", i,
                      (unsigned)err);
    }
    if (i == 0) {
      err = TVMPlatformTimerStart();
      if (err != kTvmErrorPlatformTimerBadState) {
        (void)TVMPlatformTimerStop(&elapsed);
        return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMPlatformTimerStart of a running timer returned "
                        "0x%04x, not kTvmErrorPlatformTimerBadState (0x0504)", (unsigned)err);
      }
    }
    for (k = 0u; k < 1000u * (uint32_t)i; ++k) {
      sink = sink + 1u;
    }
    elapsed = -1.0;
    err = TVMPlatformTimerStop(&elapsed);
    if ((err != kTvmErrorNoError) || !(elapsed >= 0.0) || !(elapsed < 3600.0)) {
      return acc_fail((int)kTvmErrorPlatformCheckFailure, "TVMPlatformTimerStop (%d) returned 0x%04x, elapsed %ld "
                      "ns", i, (unsigned)err, (long)(elapsed * 1e9));
    }
    if (elapsed > longest) {
      longest = elapsed;
    }
  }
  return acc_return_text(ret, ret_code, acc_text("longest_ns=%ld", (long)(longest * 1e9)));
}

/* --- acceptance.log / reset ------------------------------------------------------------------------------ */
static int acc_log(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  static const int kCodes[1] = {(int)kTVMStr};
  int rc = acc_args("acceptance.log", type_codes, num_args, 1, kCodes);
  (void)res;
  if (rc != 0) {
    return rc;
  }
  TVMLogf(TVM_CRT_LOG_LEVEL_INFO, "%s", args[0].v_str);
  ret->v_handle = NULL;
  *ret_code = (int)kTVMNullptr;
  return 0;
}

static int acc_reset(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* res) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  (void)ret;
  (void)ret_code;
  (void)res;
  TVMPlatformAbort(kTvmErrorPlatformCheckFailure);
}

void utvm_user_init(void) {
  static const struct {
    const char* name;
    acc_func func;
  } kFunctions[] = {
      {"acceptance.info", &acc_info},
      {"acceptance.echo", &acc_echo},
      {"acceptance.digest", &acc_digest},
      {"acceptance.fill", &acc_fill},
      {"acceptance.alloc_check", &acc_alloc_check},
      {"acceptance.registry_check", &acc_registry_check},
      {"acceptance.tick", &acc_tick},
      {"acceptance.spin", &acc_spin},
      {"acceptance.timer_check", &acc_timer_check},
      {"acceptance.log", &acc_log},
      {"acceptance.reset", &acc_reset},
  };
  size_t i;
  for (i = 0u; i < (sizeof(kFunctions) / sizeof(kFunctions[0])); ++i) {
    TVMFunctionHandle handle = NULL;
    /* TVMFuncRegisterGlobal takes the function as a TVMFunctionHandle (TVM's ABI): copy its bytes. */
    (void)memcpy((void*)&handle, (const void*)&kFunctions[i].func, sizeof(handle));
    if (TVMFuncRegisterGlobal(kFunctions[i].name, handle, 1) != 0) {
      return; /* the last error says which: the firmware reports it, the registry check names the missing ones */
    }
  }
}
