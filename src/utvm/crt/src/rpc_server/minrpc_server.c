/*
 * minrpc_server.c -- receiving, checking and executing MinRPC messages (see minrpc_server.h).
 *
 * Layout of a message body (docs/architecture.md §5.3, all little endian): u64 nbytes (bytes after itself), i32 code,
 * then per code: CallFunc u64 handle + packed sequence; CopyFromRemote / CopyToRemote a bare tensor
 * header (u64 data, i32 device type, i32 device id, i32 ndim, u8 code, u8 bits, u16 lanes,
 * i64 shape[ndim], u64 byte_offset) + u64 nbytes (+ the bytes for CopyToRemote); InitServer u64 length
 * + version string + packed sequence; syscalls a packed sequence. A packed sequence is i32 n,
 * i32 type_code[n], then each value (see decode_value / emit_value).
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

#include "minrpc_server.h"

/* Offsets in a CopyToRemote body (after the 12 bytes of nbytes + code). */
#define MINRPC_PREFIX_BYTES 12U
#define MINRPC_COPY_NDIM_END 32U      /* through i32 ndim */
#define MINRPC_COPY_FIXED_BYTES 52U   /* header without the shape */
/* Largest CopyFromRemote the reply packet (u32 length) can carry, with room for its headers. */
#define MINRPC_MAX_REPLY_BYTES ((uint64_t)UINT32_MAX - 64U)

/* --- a cursor over a received message (in the server's buffer, so strings can be terminated in place) --- */
typedef struct {
  uint8_t* data;
  size_t size;
  size_t pos;
} Reader;

/* --- two-pass reply encoder: first counts the bytes, then writes them --- */
typedef struct {
  TVMMinRpcServer* server;
  int counting;
  uint64_t count;
  tvm_crt_error_t err;
} Emitter;

typedef struct {
  int32_t code;
  const TVMValue* values;
  const int* type_codes;
  int num_values;
  const uint8_t* raw; /* CopyAck payload */
  uint64_t raw_size;
} Reply;

static uint64_t load_u64(const uint8_t* p);
static uint32_t load_u32(const uint8_t* p);
static int32_t to_i32(uint32_t u);
static int64_t to_i64(uint64_t u);
static int read_u64(Reader* r, uint64_t* out);
static int bytes_equal_text(const uint8_t* bytes, const char* text, size_t length);
static int read_i32(Reader* r, int32_t* out);
static tvm_crt_error_t decode_tensor(TVMMinRpcServer* server, Reader* r, const char* what, DLTensor* tensor,
                                     int64_t* shape);
static tvm_crt_error_t decode_value(TVMMinRpcServer* server, Reader* r, const char* what, int index,
                                    int validate_tensors);
static tvm_crt_error_t decode_seq(TVMMinRpcServer* server, Reader* r, const char* what, int validate_tensors,
                                  int* out_num_args);
static tvm_crt_error_t check_end(TVMMinRpcServer* server, const Reader* r, const char* what);
static tvm_crt_error_t check_args(TVMMinRpcServer* server, const char* what, int num_args, int expected,
                                  const int* codes);
static void emit(Emitter* e, const void* data, size_t size);
static void emit_u64(Emitter* e, uint64_t value);
static void emit_i32(Emitter* e, int32_t value);
static void emit_value(Emitter* e, const TVMValue* value, int type_code);
static void emit_reply_body(Emitter* e, const Reply* reply);
static tvm_crt_error_t send_reply(TVMMinRpcServer* server, const Reply* reply);
static tvm_crt_error_t send_exception(TVMMinRpcServer* server, const char* text);
static tvm_crt_error_t send_error(TVMMinRpcServer* server);
static tvm_crt_error_t send_last_error(TVMMinRpcServer* server, const char* what);
static tvm_crt_error_t send_return(TVMMinRpcServer* server, TVMValue value, int type_code);
static void discard(TVMMinRpcServer* server);
static void header_step(TVMMinRpcServer* server);
static tvm_crt_error_t process(TVMMinRpcServer* server);
static tvm_crt_error_t handle_init_server(TVMMinRpcServer* server, Reader* r);
static tvm_crt_error_t handle_call_func(TVMMinRpcServer* server, Reader* r);
static tvm_crt_error_t handle_copy_from_remote(TVMMinRpcServer* server, Reader* r);
static tvm_crt_error_t handle_syscall(TVMMinRpcServer* server, int32_t code, Reader* r);
static tvm_crt_error_t sys_alloc(TVMMinRpcServer* server, const char* what, DLDevice dev, uint64_t num_bytes,
                                 uint64_t alignment, DLDataType type_hint);
static const char* code_name(int32_t code);
static int device_available(DLDevice dev);

/* ================================================================================================ */
/* Decoding                                                                                           */

static uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0U;
  int i;
  for (i = 7; i >= 0; --i) {
    v = (v << 8) | (uint64_t)p[i];
  }
  return v;
}

static uint32_t load_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* The signed integer whose two's-complement bits are u (wire integers are sent as their bits). Written
 * out rather than cast, since converting an out-of-range value to a signed type is implementation
 * defined, and rather than memcpy'd between types of different signedness (MISRA 21.15). */
static int32_t to_i32(uint32_t u) {
  int32_t value;
  if (u <= (uint32_t)INT32_MAX) {
    value = (int32_t)u;
  } else {
    /* u = 2^32 - 1 - magnitude with magnitude <= INT32_MAX, so the value is -magnitude - 1. */
    const uint32_t magnitude = ~u;
    value = -(int32_t)magnitude - 1;
  }
  return value;
}

static int64_t to_i64(uint64_t u) {
  int64_t value;
  if (u <= (uint64_t)INT64_MAX) {
    value = (int64_t)u;
  } else {
    const uint64_t magnitude = ~u; /* as in to_i32 */
    value = -(int64_t)magnitude - 1;
  }
  return value;
}

static int read_u64(Reader* r, uint64_t* out) {
  if ((r->size - r->pos) < 8U) {
    return 0;
  }
  *out = load_u64(&r->data[r->pos]);
  r->pos += 8U;
  return 1;
}

static int read_i32(Reader* r, int32_t* out) {
  uint32_t u;
  if ((r->size - r->pos) < 4U) {
    return 0;
  }
  u = load_u32(&r->data[r->pos]);
  *out = to_i32(u);
  r->pos += 4U;
  return 1;
}

/* Nonzero when the `length` bytes equal the first `length` characters of text. */
static int bytes_equal_text(const uint8_t* bytes, const char* text, size_t length) {
  int equal = 1;
  size_t i;
  for (i = 0U; (i < length) && (equal != 0); ++i) {
    if (bytes[i] != (uint8_t)text[i]) {
      equal = 0;
    }
  }
  return equal;
}

/* A bare tensor header: u64 data, device, i32 ndim, dtype, i64 shape[ndim], u64 byte_offset. */
static tvm_crt_error_t decode_tensor(TVMMinRpcServer* server, Reader* r, const char* what, DLTensor* tensor,
                                     int64_t* shape) {
  uint64_t data = 0U;
  uint64_t byte_offset = 0U;
  int32_t device_type = 0;
  int32_t device_id = 0;
  int32_t ndim = 0;
  int32_t i;
  if (!read_u64(r, &data) || !read_i32(r, &device_type) || !read_i32(r, &device_id) || !read_i32(r, &ndim)) {
    TVMMinRpcServer_SetError(server, "%s: message ends inside a tensor header", what);
    return kTvmErrorFunctionCallInvalidArg;
  }
  if ((ndim < 0) || (ndim > TVM_CRT_MAX_NDIM)) {
    TVMMinRpcServer_SetError(server, "%s: tensor ndim %ld is outside 0..%d (TVM_CRT_MAX_NDIM)", what, (long)ndim,
                             (int)TVM_CRT_MAX_NDIM);
    return kTvmErrorFunctionCallInvalidArg;
  }
  if ((r->size - r->pos) < (4U + (8U * (size_t)ndim) + 8U)) {
    TVMMinRpcServer_SetError(server, "%s: message ends inside a tensor header", what);
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (data > (uint64_t)UINTPTR_MAX) {
    TVMMinRpcServer_SetError(server, "%s: tensor data 0x%lx is not a device address", what, (unsigned long)data);
    return kTvmErrorFunctionCallInvalidArg;
  }
  tensor->dtype.code = r->data[r->pos];
  tensor->dtype.bits = r->data[r->pos + 1U];
  tensor->dtype.lanes = (uint16_t)((uint16_t)r->data[r->pos + 2U] | (uint16_t)((uint16_t)r->data[r->pos + 3U] << 8));
  r->pos += 4U;
  for (i = 0; i < ndim; ++i) {
    uint64_t dim = 0U;
    (void)read_u64(r, &dim);
    shape[i] = to_i64(dim);
  }
  (void)read_u64(r, &byte_offset);
  tensor->data = (void*)(uintptr_t)data;
  tensor->device.device_type = (DLDeviceType)device_type;
  tensor->device.device_id = device_id;
  tensor->ndim = ndim;
  tensor->shape = shape;
  tensor->strides = NULL;
  tensor->byte_offset = byte_offset;
  return kTvmErrorNoError;
}

static tvm_crt_error_t decode_value(TVMMinRpcServer* server, Reader* r, const char* what, int index,
                                    int validate_tensors) {
  TVMValue* value = &server->values[index];
  const int type_code = server->type_codes[index];
  uint64_t u = 0U;
  int32_t a = 0;
  int32_t b = 0;
  switch (type_code) {
    case kTVMArgInt:
    case kDLUInt:
    case kTVMArgFloat:
      if (!read_u64(r, &u)) {
        break;
      }
      value->v_int64 = to_i64(u); /* the 8 bytes of an int64 or a double: the union carries either */
      return kTvmErrorNoError;
    case kTVMOpaqueHandle:
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
      if (!read_u64(r, &u)) {
        break;
      }
      if (u > (uint64_t)UINTPTR_MAX) {
        TVMMinRpcServer_SetError(server, "%s: argument %d: handle 0x%lx is not a device handle", what, index,
                                 (unsigned long)u);
        return kTvmErrorFunctionCallInvalidArg;
      }
      value->v_handle = (void*)(uintptr_t)u;
      return kTvmErrorNoError;
    case kTVMNullptr:
      value->v_handle = NULL;
      return kTvmErrorNoError;
    case kTVMDataType:
      if ((r->size - r->pos) < 8U) {
        break;
      }
      value->v_type.code = r->data[r->pos];
      value->v_type.bits = r->data[r->pos + 1U];
      value->v_type.lanes =
          (uint16_t)((uint16_t)r->data[r->pos + 2U] | (uint16_t)((uint16_t)r->data[r->pos + 3U] << 8));
      r->pos += 8U; /* 4 bytes of type + 4 of padding */
      return kTvmErrorNoError;
    case kDLDevice:
      if (!read_i32(r, &a) || !read_i32(r, &b)) {
        break;
      }
      value->v_device.device_type = (DLDeviceType)a;
      value->v_device.device_id = b;
      return kTvmErrorNoError;
    case kTVMDLTensorHandle: {
      DLTensor* tensor = &server->tensors[index];
      tvm_crt_error_t err = decode_tensor(server, r, what, tensor, server->shapes[index]);
      if (err != kTvmErrorNoError) {
        return err;
      }
      if (validate_tensors != 0) {
        uint64_t num_bytes = 0U;
        uint8_t* ptr = NULL;
        if ((tensor->dtype.bits == 0U) || (tensor->dtype.lanes == 0U)) {
          TVMMinRpcServer_SetError(server, "%s: argument %d: tensor dtype has %u bits and %u lanes", what, index,
                                   (unsigned)tensor->dtype.bits, (unsigned)tensor->dtype.lanes);
          return kTvmErrorFunctionCallInvalidArg;
        }
        if (TVMMinRpcServer_TensorBytes(tensor, &num_bytes) != kTvmErrorNoError) {
          TVMMinRpcServer_SetError(server, "%s: argument %d: tensor has a negative or overflowing shape", what,
                                   index);
          return kTvmErrorFunctionCallInvalidArg;
        }
        err = TVMMinRpcServer_CheckRange(server, what, (uint64_t)(uintptr_t)tensor->data, tensor->byte_offset,
                                         num_bytes, &ptr);
        if (err != kTvmErrorNoError) {
          return err;
        }
      }
      value->v_handle = tensor;
      return kTvmErrorNoError;
    }
    case kTVMStr:
    case kTVMBytes: {
      uint8_t* text;
      if (!read_u64(r, &u)) {
        break;
      }
      if (u > (uint64_t)(r->size - r->pos)) {
        TVMMinRpcServer_SetError(server, "%s: argument %d: length %lu runs past the end of the message", what,
                                 index, (unsigned long)u);
        return kTvmErrorFunctionCallInvalidArg;
      }
      text = &r->data[r->pos];
      r->pos += (size_t)u;
      if (type_code == (int)kTVMBytes) {
        server->byte_arrays[index].data = (const char*)text;
        server->byte_arrays[index].size = (size_t)u;
        value->v_handle = &server->byte_arrays[index];
      } else {
        /* Terminate in place: shift the text one byte back over its (already read) length field; the
         * NUL then takes the place of the text's last byte, never a byte after the text. */
        uint8_t* start = &r->data[r->pos - (size_t)u - 1U];
        (void)memmove(start, text, (size_t)u);
        start[u] = 0U;
        value->v_str = (const char*)start;
      }
      return kTvmErrorNoError;
    }
    default:
      TVMMinRpcServer_SetError(server, "%s: argument %d has type code %d, which cannot be sent to the device",
                               what, index, type_code);
      return kTvmErrorFunctionCallWrongArgType;
  }
  TVMMinRpcServer_SetError(server, "%s: message ends inside argument %d (type code %d)", what, index, type_code);
  return kTvmErrorFunctionCallInvalidArg;
}

static tvm_crt_error_t decode_seq(TVMMinRpcServer* server, Reader* r, const char* what, int validate_tensors,
                                  int* out_num_args) {
  int32_t num_args = 0;
  int32_t i;
  if (!read_i32(r, &num_args)) {
    TVMMinRpcServer_SetError(server, "%s: message ends before the argument count", what);
    return kTvmErrorFunctionCallInvalidArg;
  }
  if ((num_args < 0) || (num_args > TVM_CRT_MAX_ARGS)) {
    TVMMinRpcServer_SetError(server, "%s: %ld arguments, outside 0..%d (TVM_CRT_MAX_ARGS)", what, (long)num_args,
                             (int)TVM_CRT_MAX_ARGS);
    return kTvmErrorFunctionCallNumArguments;
  }
  for (i = 0; i < num_args; ++i) {
    int32_t code = 0;
    if (!read_i32(r, &code)) {
      TVMMinRpcServer_SetError(server, "%s: message ends inside the type codes", what);
      return kTvmErrorFunctionCallInvalidArg;
    }
    server->type_codes[i] = (int)code;
  }
  for (i = 0; i < num_args; ++i) {
    tvm_crt_error_t err = decode_value(server, r, what, (int)i, validate_tensors);
    if (err != kTvmErrorNoError) {
      return err;
    }
  }
  *out_num_args = (int)num_args;
  return kTvmErrorNoError;
}

static tvm_crt_error_t check_end(TVMMinRpcServer* server, const Reader* r, const char* what) {
  if (r->pos != r->size) {
    TVMMinRpcServer_SetError(server, "%s: %lu unexpected bytes after the request", what,
                             (unsigned long)(r->size - r->pos));
    return kTvmErrorFunctionCallInvalidArg;
  }
  return kTvmErrorNoError;
}

/* The argument count and type codes of a syscall; codes[i] < 0 accepts any handle kind. */
static tvm_crt_error_t check_args(TVMMinRpcServer* server, const char* what, int num_args, int expected,
                                  const int* codes) {
  int i;
  if (num_args != expected) {
    TVMMinRpcServer_SetError(server, "%s: expects %d arguments, got %d", what, expected, num_args);
    return kTvmErrorFunctionCallNumArguments;
  }
  for (i = 0; i < expected; ++i) {
    const int tc = server->type_codes[i];
    int ok = 0;
    if (codes[i] >= 0) {
      if (tc == codes[i]) {
        ok = 1;
      }
    } else if ((tc == (int)kTVMOpaqueHandle) || (tc == (int)kTVMNullptr) || (tc == (int)kTVMModuleHandle) ||
               (tc == (int)kTVMPackedFuncHandle)) {
      ok = 1;
    } else {
      /* not a handle */
    }
    if (ok == 0) {
      TVMMinRpcServer_SetError(server, "%s: argument %d has type code %d, expected %d", what, i, tc,
                               (codes[i] >= 0) ? codes[i] : (int)kTVMOpaqueHandle);
      return kTvmErrorFunctionCallWrongArgType;
    }
  }
  return kTvmErrorNoError;
}

/* ================================================================================================ */
/* Encoding replies                                                                                   */

static void emit(Emitter* e, const void* data, size_t size) {
  if (e->counting != 0) {
    e->count += (uint64_t)size;
  } else if ((e->err == kTvmErrorNoError) && (size > 0U)) {
    e->err = e->server->writer.write(e->server->writer.context, (const uint8_t*)data, size);
  } else {
    /* an earlier write failed: the rest is dropped */
  }
}

static void emit_u64(Emitter* e, uint64_t value) {
  uint8_t bytes[8];
  uint64_t rest = value;
  size_t i;
  for (i = 0U; i < sizeof(bytes); ++i) {
    bytes[i] = (uint8_t)(rest & 0xFFU);
    rest >>= 8;
  }
  emit(e, bytes, sizeof(bytes));
}

static void emit_i32(Emitter* e, int32_t value) {
  const uint32_t u = (uint32_t)value; /* two's-complement bits, well defined for every value */
  uint8_t bytes[4];
  bytes[0] = (uint8_t)(u & 0xFFU);
  bytes[1] = (uint8_t)((u >> 8) & 0xFFU);
  bytes[2] = (uint8_t)((u >> 16) & 0xFFU);
  bytes[3] = (uint8_t)((u >> 24) & 0xFFU);
  emit(e, bytes, sizeof(bytes));
}

/* One value of a packed sequence; callers only pass type codes listed here. */
static void emit_value(Emitter* e, const TVMValue* value, int type_code) {
  uint64_t u = 0U;
  switch (type_code) {
    case kTVMArgInt:
    case kDLUInt:
    case kTVMArgFloat:
      u = (uint64_t)value->v_int64; /* the 8 bytes of an int64 or a double */
      emit_u64(e, u);
      break;
    case kTVMOpaqueHandle:
      emit_u64(e, (uint64_t)(uintptr_t)value->v_handle);
      break;
    case kTVMDataType: {
      const uint8_t bytes[8] = {value->v_type.code, value->v_type.bits, (uint8_t)(value->v_type.lanes & 0xFFU),
                                (uint8_t)(value->v_type.lanes >> 8), 0U, 0U, 0U, 0U};
      emit(e, bytes, sizeof(bytes));
      break;
    }
    case kDLDevice:
      emit_i32(e, (int32_t)value->v_device.device_type);
      emit_i32(e, value->v_device.device_id);
      break;
    case kTVMDLTensorHandle: {
      const DLTensor* t = (const DLTensor*)value->v_handle;
      const uint8_t dtype[4] = {t->dtype.code, t->dtype.bits, (uint8_t)(t->dtype.lanes & 0xFFU),
                                (uint8_t)(t->dtype.lanes >> 8)};
      int32_t i;
      emit_u64(e, (uint64_t)(uintptr_t)t->data);
      emit_i32(e, (int32_t)t->device.device_type);
      emit_i32(e, t->device.device_id);
      emit_i32(e, t->ndim);
      emit(e, dtype, sizeof(dtype));
      for (i = 0; i < t->ndim; ++i) {
        emit_u64(e, (uint64_t)t->shape[i]);
      }
      emit_u64(e, t->byte_offset);
      break;
    }
    case kTVMStr: {
      const size_t length = strlen(value->v_str);
      emit_u64(e, (uint64_t)length);
      emit(e, value->v_str, length);
      break;
    }
    case kTVMBytes: {
      const TVMByteArray* bytes = (const TVMByteArray*)value->v_handle;
      emit_u64(e, (uint64_t)bytes->size);
      emit(e, bytes->data, bytes->size);
      break;
    }
    default: /* kTVMNullptr: no bytes */
      break;
  }
}

static void emit_reply_body(Emitter* e, const Reply* reply) {
  emit_i32(e, reply->code);
  if (reply->code == (int32_t)kTVMMinRpcCopyAck) {
    emit(e, reply->raw, (size_t)reply->raw_size);
  } else {
    int i;
    emit_i32(e, (int32_t)reply->num_values);
    for (i = 0; i < reply->num_values; ++i) {
      emit_i32(e, (int32_t)reply->type_codes[i]);
    }
    for (i = 0; i < reply->num_values; ++i) {
      emit_value(e, &reply->values[i], reply->type_codes[i]);
    }
  }
}

static tvm_crt_error_t send_reply(TVMMinRpcServer* server, const Reply* reply) {
  Emitter counter = {NULL, 1, 0U, kTvmErrorNoError};
  Emitter writer = {NULL, 0, 0U, kTvmErrorNoError};
  tvm_crt_error_t err;
  counter.server = server;
  writer.server = server;
  emit_reply_body(&counter, reply);
  if (counter.count > ((uint64_t)UINT32_MAX - 8U - 16U)) {
    return kTvmErrorFramingPacketTooLong; /* unreachable: requests are checked against MINRPC_MAX_REPLY_BYTES */
  }
  err = server->writer.start(server->writer.context, (uint32_t)(counter.count + 8U));
  if (err != kTvmErrorNoError) {
    return err;
  }
  emit_u64(&writer, counter.count);
  emit_reply_body(&writer, reply);
  if (writer.err != kTvmErrorNoError) {
    return writer.err;
  }
  return server->writer.finish(server->writer.context);
}

static tvm_crt_error_t send_exception(TVMMinRpcServer* server, const char* text) {
  TVMValue value;
  const int type_code = (int)kTVMStr;
  Reply reply;
  value.v_str = (text != NULL) ? text : "";
  reply.code = (int32_t)kTVMMinRpcException;
  reply.values = &value;
  reply.type_codes = &type_code;
  reply.num_values = 1;
  reply.raw = NULL;
  reply.raw_size = 0U;
  return send_reply(server, &reply);
}

static tvm_crt_error_t send_error(TVMMinRpcServer* server) { return send_exception(server, server->error); }

/* A runtime call failed: its text is in TVMGetLastError(). */
static tvm_crt_error_t send_last_error(TVMMinRpcServer* server, const char* what) {
  const char* text = TVMGetLastError();
  if ((text == NULL) || (text[0] == '\0')) {
    TVMMinRpcServer_SetError(server, "%s failed (no error message)", what);
    text = server->error;
  }
  return send_exception(server, text);
}

static tvm_crt_error_t send_return(TVMMinRpcServer* server, TVMValue value, int type_code) {
  Reply reply;
  reply.code = (int32_t)kTVMMinRpcReturn;
  reply.values = &value;
  reply.type_codes = &type_code;
  reply.num_values = 1;
  reply.raw = NULL;
  reply.raw_size = 0U;
  return send_reply(server, &reply);
}

static tvm_crt_error_t send_void(TVMMinRpcServer* server) {
  TVMValue value;
  value.v_handle = NULL;
  return send_return(server, value, (int)kTVMNullptr);
}

static tvm_crt_error_t send_handle(TVMMinRpcServer* server, void* handle) {
  TVMValue value;
  value.v_handle = handle;
  return send_return(server, value, (int)kTVMOpaqueHandle);
}

/* ================================================================================================ */
/* Receiving                                                                                          */

void TVMMinRpcServer_Init(TVMMinRpcServer* server, uint8_t* buffer, size_t buffer_size,
                          const TVMMinRpcReplyWriter* writer) {
  (void)memset(server, 0, sizeof(*server));
  server->writer = *writer;
  server->buffer = buffer;
  server->buffer_size = buffer_size;
  server->rx_state = (uint8_t)kTVMMinRpcRxIdle;
}

/* Read the rest of the message and answer it with the Exception now in server->error. */
static void discard(TVMMinRpcServer* server) { server->rx_state = (uint8_t)kTVMMinRpcRxDiscard; }

tvm_crt_error_t TVMMinRpcServer_MessageStart(TVMMinRpcServer* server, uint32_t body_size_bytes) {
  server->rx_body_size = body_size_bytes;
  server->rx_received = 0U;
  server->rx_touched = 0U;
  server->rx_dest = NULL;
  server->rx_dest_remaining = 0U;
  server->error[0] = '\0';
  if (server->shutdown != 0U) {
    server->rx_state = (uint8_t)kTVMMinRpcRxIdle;
    return kTvmErrorPlatformShutdown;
  }
  server->rx_state = (uint8_t)kTVMMinRpcRxHeader;
  server->rx_needed = 8U;
  if (body_size_bytes < 8U) {
    TVMMinRpcServer_SetError(server, "RPC packet of %lu bytes is shorter than its 8-byte length field",
                             (unsigned long)body_size_bytes);
    discard(server);
  }
  return kTvmErrorNoError;
}

/* The header bytes collected so far reached rx_needed: look at them and decide what comes next. */
static void header_step(TVMMinRpcServer* server) {
  const uint8_t* b = server->buffer;
  const uint32_t body = server->rx_body_size;
  if (server->rx_received == 8U) {
    uint64_t nbytes = load_u64(b);
    if ((nbytes == 0U) && (body == 8U)) {
      server->rx_state = (uint8_t)kTVMMinRpcRxEmpty;
    } else if (nbytes != ((uint64_t)body - 8U)) {
      TVMMinRpcServer_SetError(server, "RPC packet length field says %lu bytes but %lu follow",
                               (unsigned long)nbytes, (unsigned long)body - 8UL);
      discard(server);
    } else if (body < MINRPC_PREFIX_BYTES) {
      TVMMinRpcServer_SetError(server, "RPC packet of %lu bytes has no code", (unsigned long)body);
      discard(server);
    } else {
      server->rx_needed = MINRPC_PREFIX_BYTES;
    }
  } else if (server->rx_received == MINRPC_PREFIX_BYTES) {
    const int32_t code = to_i32(load_u32(&b[8]));
    if (code == (int32_t)kTVMMinRpcCopyToRemote) {
      server->rx_needed = MINRPC_COPY_NDIM_END;
      if (body < MINRPC_COPY_NDIM_END) {
        TVMMinRpcServer_SetError(server, "CopyToRemote: packet of %lu bytes ends inside the tensor header",
                                 (unsigned long)body);
        discard(server);
      }
    } else if (body > server->buffer_size) {
      TVMMinRpcServer_SetError(server, "%s: message of %lu bytes exceeds the %lu-byte message buffer",
                               code_name(code), (unsigned long)body, (unsigned long)server->buffer_size);
      discard(server);
    } else {
      server->rx_state = (uint8_t)kTVMMinRpcRxBuffer;
    }
  } else if (server->rx_received == MINRPC_COPY_NDIM_END) {
    const int32_t ndim = to_i32(load_u32(&b[28]));
    if ((ndim < 0) || (ndim > TVM_CRT_MAX_NDIM)) {
      TVMMinRpcServer_SetError(server, "CopyToRemote: tensor ndim %ld is outside 0..%d (TVM_CRT_MAX_NDIM)",
                               (long)ndim, (int)TVM_CRT_MAX_NDIM);
      discard(server);
      return;
    }
    server->rx_needed = MINRPC_COPY_FIXED_BYTES + (8U * (uint32_t)ndim);
    if ((server->rx_needed > body) || (server->rx_needed > server->buffer_size)) {
      TVMMinRpcServer_SetError(server, "CopyToRemote: packet of %lu bytes ends inside the tensor header",
                               (unsigned long)body);
      discard(server);
    }
  } else {
    /* The whole CopyToRemote header: check it, then let the payload stream into place. */
    Reader r;
    DLTensor tensor;
    uint64_t num_bytes = 0U;
    uint8_t* dest = NULL;
    r.data = server->buffer;
    r.size = server->rx_received;
    r.pos = MINRPC_PREFIX_BYTES;
    if (decode_tensor(server, &r, "CopyToRemote", &tensor, server->shapes[0]) != kTvmErrorNoError) {
      discard(server);
      return;
    }
    (void)read_u64(&r, &num_bytes);
    if (num_bytes != ((uint64_t)body - (uint64_t)server->rx_received)) {
      TVMMinRpcServer_SetError(server, "CopyToRemote: nbytes says %lu but %lu payload bytes follow",
                               (unsigned long)num_bytes, (unsigned long)(body - server->rx_received));
      discard(server);
      return;
    }
    if (TVMMinRpcServer_CheckRange(server, "CopyToRemote", (uint64_t)(uintptr_t)tensor.data, tensor.byte_offset,
                                   num_bytes, &dest) != kTvmErrorNoError) {
      discard(server);
      return;
    }
    server->rx_dest = dest;
    server->rx_dest_remaining = num_bytes;
    server->rx_state = (uint8_t)kTVMMinRpcRxStream;
  }
}

tvm_crt_error_t TVMMinRpcServer_MessageData(TVMMinRpcServer* server, const uint8_t* data, size_t size_bytes) {
  size_t used = 0U;
  while (used < size_bytes) {
    const size_t left = size_bytes - used;
    if ((server->rx_state == (uint8_t)kTVMMinRpcRxHeader) || (server->rx_state == (uint8_t)kTVMMinRpcRxBuffer)) {
      const uint32_t target =
          (server->rx_state == (uint8_t)kTVMMinRpcRxHeader) ? server->rx_needed : server->rx_body_size;
      size_t take = (size_t)(target - server->rx_received);
      if (take == 0U) {
        return kTvmErrorNoError; /* more bytes than the body holds: cannot happen through the session */
      }
      if (take > left) {
        take = left;
      }
      (void)memcpy(&server->buffer[server->rx_received], &data[used], take);
      server->rx_received += (uint32_t)take;
      used += take;
      if ((server->rx_state == (uint8_t)kTVMMinRpcRxHeader) && (server->rx_received == server->rx_needed)) {
        header_step(server);
      }
    } else if (server->rx_state == (uint8_t)kTVMMinRpcRxStream) {
      size_t take = left;
      if ((uint64_t)take > server->rx_dest_remaining) {
        take = (size_t)server->rx_dest_remaining;
      }
      if (take == 0U) {
        return kTvmErrorNoError;
      }
      (void)memcpy(server->rx_dest, &data[used], take);
      server->rx_dest = &server->rx_dest[take];
      server->rx_dest_remaining -= (uint64_t)take;
      server->rx_received += (uint32_t)take;
      server->rx_touched = 1U;
      used += take;
    } else {
      return kTvmErrorNoError; /* discarding, empty or idle */
    }
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMMinRpcServer_MessageEnd(TVMMinRpcServer* server, tvm_crt_error_t verdict) {
  const uint8_t state = server->rx_state;
  server->rx_state = (uint8_t)kTVMMinRpcRxIdle;
  if (server->shutdown != 0U) {
    return kTvmErrorPlatformShutdown;
  }
  if (verdict != kTvmErrorNoError) {
    if ((state == (uint8_t)kTVMMinRpcRxStream) && (server->rx_touched != 0U)) {
      /* Bytes already landed in the tensor: the call happened and failed; never report success. */
      TVMMinRpcServer_SetError(server,
                               "CopyToRemote: the packet failed its framing check (error 0x%x) after its "
                               "payload was written; the destination holds unchecked data",
                               (unsigned)verdict);
      return send_error(server);
    }
    TVMMinRpcServer_SetError(server, "RPC: dropped a message that failed its framing check (error 0x%x)",
                             (unsigned)verdict);
    server->writer.log(server->writer.context, server->error, strlen(server->error));
    return kTvmErrorNoError;
  }
  switch (state) {
    case kTVMMinRpcRxEmpty:
    case kTVMMinRpcRxIdle:
      return kTvmErrorNoError;
    case kTVMMinRpcRxDiscard:
      return send_error(server);
    case kTVMMinRpcRxStream:
      if (server->rx_dest_remaining != 0U) {
        TVMMinRpcServer_SetError(server, "CopyToRemote: message ended %lu bytes early",
                                 (unsigned long)server->rx_dest_remaining);
        return send_error(server);
      }
      return send_void(server);
    case kTVMMinRpcRxBuffer:
      if (server->rx_received == server->rx_body_size) {
        return process(server);
      }
      break;
    default:
      break;
  }
  TVMMinRpcServer_SetError(server, "RPC packet truncated: %lu of %lu bytes", (unsigned long)server->rx_received,
                           (unsigned long)server->rx_body_size);
  return send_error(server);
}

/* ================================================================================================ */
/* Executing                                                                                          */

static const char* code_name(int32_t code) {
  static const char* const kNames[] = {"None",         "Shutdown",        "InitServer",   "CallFunc",
                                       "Return",       "Exception",       "CopyFromRemote", "CopyToRemote",
                                       "CopyAck",      "GetGlobalFunc",   "FreeHandle",   "DevSetDevice",
                                       "DevGetAttr",   "DevAllocData",    "DevFreeData",  "DevStreamSync",
                                       "CopyAmongRemote", "DevAllocDataWithScope", "DevCreateStream",
                                       "DevFreeStream", "DevSetStream"};
  const size_t count = sizeof(kNames) / sizeof(kNames[0]);
  if ((code >= 0) && ((size_t)code < count)) {
    return kNames[code];
  }
  return "RPC";
}

/* A whole, CRC-checked message is in the buffer. */
static tvm_crt_error_t process(TVMMinRpcServer* server) {
  Reader r;
  const int32_t code = to_i32(load_u32(&server->buffer[8]));
  r.data = server->buffer;
  r.size = server->rx_body_size;
  r.pos = MINRPC_PREFIX_BYTES;
  switch (code) {
    case kTVMMinRpcShutdown:
      server->shutdown = 1U;
      return kTvmErrorPlatformShutdown; /* no reply */
    case kTVMMinRpcInitServer:
      return handle_init_server(server, &r);
    case kTVMMinRpcCallFunc:
      return handle_call_func(server, &r);
    case kTVMMinRpcCopyFromRemote:
      return handle_copy_from_remote(server, &r);
    case kTVMMinRpcReturn:
    case kTVMMinRpcException:
    case kTVMMinRpcCopyAck:
      TVMMinRpcServer_SetError(server, "RPC code %ld (%s) is a reply; the device only serves requests",
                               (long)code, code_name(code));
      return send_error(server);
    default:
      if ((code >= (int32_t)kTVMMinRpcGetGlobalFunc) && (code <= (int32_t)kTVMMinRpcDevSetStream)) {
        return handle_syscall(server, code, &r);
      }
      TVMMinRpcServer_SetError(server, "unknown RPC code %ld", (long)code);
      return send_error(server);
  }
}

static tvm_crt_error_t handle_init_server(TVMMinRpcServer* server, Reader* r) {
  static const char kVersion[] = TVM_MINRPC_PROTOCOL_VERSION;
  uint64_t length = 0U;
  int num_args = 0;
  const uint8_t* version;
  if (!read_u64(r, &length) || (length > (uint64_t)(r->size - r->pos))) {
    TVMMinRpcServer_SetError(server, "InitServer: protocol version string runs past the end of the message");
    return send_error(server);
  }
  version = &r->data[r->pos];
  r->pos += (size_t)length;
  if ((decode_seq(server, r, "InitServer", 0, &num_args) != kTvmErrorNoError) ||
      (check_end(server, r, "InitServer") != kTvmErrorNoError)) {
    return send_error(server);
  }
  if ((length != (uint64_t)(sizeof(kVersion) - 1U)) || !bytes_equal_text(version, kVersion, sizeof(kVersion) - 1U)) {
    TVMMinRpcServer_SetError(server, "InitServer: client protocol version '%.*s' is not %s", (int)((length < 16U) ? length : 16U),
                             (const char*)version, kVersion);
    return send_error(server);
  }
  return send_void(server);
}

static tvm_crt_error_t handle_call_func(TVMMinRpcServer* server, Reader* r) {
  uint64_t raw_handle = 0U;
  int num_args = 0;
  TVMValue ret;
  int ret_code = (int)kTVMNullptr;
  TVMValue out[3];
  int out_codes[3];
  int num_out = 2;
  Reply reply;
  int rc;
  if (!read_u64(r, &raw_handle)) {
    TVMMinRpcServer_SetError(server, "CallFunc: message ends before the function handle");
    return send_error(server);
  }
  if (raw_handle > (uint64_t)UINTPTR_MAX) {
    TVMMinRpcServer_SetError(server, "CallFunc: 0x%lx is not a function handle", (unsigned long)raw_handle);
    return send_error(server);
  }
  if ((decode_seq(server, r, "CallFunc", 1, &num_args) != kTvmErrorNoError) ||
      (check_end(server, r, "CallFunc") != kTvmErrorNoError)) {
    return send_error(server);
  }
  ret.v_int64 = 0;
  rc = TVMFuncCall((TVMFunctionHandle)(uintptr_t)raw_handle, server->values, server->type_codes, num_args, &ret,
                   &ret_code);
  if (rc != 0) {
    return send_last_error(server, "CallFunc");
  }
  /* Return layout: [int: the callee's type code, the value (translated for the wire)]. */
  out[0].v_int64 = (int64_t)ret_code;
  out_codes[0] = (int)kTVMArgInt;
  out[1] = ret;
  out_codes[1] = ret_code;
  switch (ret_code) {
    case kTVMArgInt:
    case kDLUInt:
    case kTVMArgFloat:
    case kTVMOpaqueHandle:
    case kTVMNullptr:
    case kTVMDataType:
    case kDLDevice:
      break;
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
      out_codes[1] = (int)kTVMOpaqueHandle;
      break;
    case kTVMStr:
      if (ret.v_str == NULL) {
        TVMMinRpcServer_SetError(server, "CallFunc: the function returned a NULL string");
        return send_error(server);
      }
      break;
    case kTVMBytes:
      if ((ret.v_handle == NULL) || ((((const TVMByteArray*)ret.v_handle)->data == NULL) &&
                                     (((const TVMByteArray*)ret.v_handle)->size > 0U))) {
        TVMMinRpcServer_SetError(server, "CallFunc: the function returned NULL bytes");
        return send_error(server);
      }
      break;
    case kTVMDLTensorHandle:
    case kTVMNDArrayHandle: {
      const DLTensor* t = (const DLTensor*)ret.v_handle;
      uint64_t num_bytes = 0U;
      if ((t == NULL) || (t->ndim < 0) || (t->ndim > TVM_CRT_MAX_NDIM) || (t->strides != NULL) ||
          (TVMMinRpcServer_TensorBytes(t, &num_bytes) != kTvmErrorNoError) || (num_bytes > (uint64_t)SIZE_MAX)) {
        TVMMinRpcServer_SetError(server, "CallFunc: the function returned a tensor the link cannot carry");
        return send_error(server);
      }
      out_codes[1] = (int)kTVMDLTensorHandle;
      if (ret_code == (int)kTVMNDArrayHandle) {
        /* The host now owns the array: remember it so copies may use it and FreeHandle can free it. */
        DLDevice dev = t->device;
        if (TVMMinRpcServer_AddAllocation(server, kTVMMinRpcAllocNDArray, ret.v_handle, ret.v_handle,
                                          (uintptr_t)t->data + (uintptr_t)t->byte_offset, (size_t)num_bytes,
                                          dev) != kTvmErrorNoError) {
          (void)TVMArrayFree((TVMArrayHandle)ret.v_handle);
          TVMMinRpcServer_SetError(server, "CallFunc: returned array dropped, all TVM_CRT_MAX_NDARRAYS=%d slots in use",
                                   (int)TVM_CRT_MAX_NDARRAYS);
          return send_error(server);
        }
        out[2].v_handle = ret.v_handle;
        out_codes[2] = (int)kTVMOpaqueHandle;
        num_out = 3;
      }
      break;
    }
    default:
      TVMMinRpcServer_SetError(server, "CallFunc: the function returned type code %d, which the link cannot carry",
                               ret_code);
      return send_error(server);
  }
  reply.code = (int32_t)kTVMMinRpcReturn;
  reply.values = out;
  reply.type_codes = out_codes;
  reply.num_values = num_out;
  reply.raw = NULL;
  reply.raw_size = 0U;
  return send_reply(server, &reply);
}

static tvm_crt_error_t handle_copy_from_remote(TVMMinRpcServer* server, Reader* r) {
  DLTensor tensor;
  uint64_t num_bytes = 0U;
  uint8_t* src = NULL;
  Reply reply;
  if (decode_tensor(server, r, "CopyFromRemote", &tensor, server->shapes[0]) != kTvmErrorNoError) {
    return send_error(server);
  }
  if (!read_u64(r, &num_bytes)) {
    TVMMinRpcServer_SetError(server, "CopyFromRemote: message ends before nbytes");
    return send_error(server);
  }
  if (num_bytes > MINRPC_MAX_REPLY_BYTES) {
    TVMMinRpcServer_SetError(server, "CopyFromRemote: %lu bytes do not fit in one reply packet",
                             (unsigned long)num_bytes);
    return send_error(server);
  }
  if ((check_end(server, r, "CopyFromRemote") != kTvmErrorNoError) ||
      (TVMMinRpcServer_CheckRange(server, "CopyFromRemote", (uint64_t)(uintptr_t)tensor.data, tensor.byte_offset,
                                  num_bytes, &src) != kTvmErrorNoError)) {
    return send_error(server);
  }
  reply.code = (int32_t)kTVMMinRpcCopyAck;
  reply.values = NULL;
  reply.type_codes = NULL;
  reply.num_values = 0;
  reply.raw = src;
  reply.raw_size = num_bytes;
  return send_reply(server, &reply);
}

static int device_available(DLDevice dev) {
  return ((dev.device_type == kDLCPU) || (dev.device_type == kDLExtDev)) && (dev.device_id == 0);
}

/* DevAllocData / DevAllocDataWithScope: allocate, record, return the handle. */
static tvm_crt_error_t sys_alloc(TVMMinRpcServer* server, const char* what, DLDevice dev, uint64_t num_bytes,
                                 uint64_t alignment, DLDataType type_hint) {
  void* base = NULL;
  uint8_t* block;
  uint8_t* ptr;
  uintptr_t address;
  size_t pad;
  size_t request;
  size_t runtime_alignment;
  int rc;
  if (num_bytes > (uint64_t)(SIZE_MAX / 2U)) {
    TVMMinRpcServer_SetError(server, "%s: %lu bytes is more than this device can address", what,
                             (unsigned long)num_bytes);
    return send_error(server);
  }
  if ((alignment == 0U) || ((alignment & (alignment - 1U)) != 0U) || (alignment > 4096U)) {
    TVMMinRpcServer_SetError(server, "%s: alignment %lu is not a power of two up to 4096", what,
                             (unsigned long)alignment);
    return send_error(server);
  }
  if (TVMMinRpcServer_FindAllocation(server, kTVMMinRpcAllocFree, NULL) == NULL) {
    TVMMinRpcServer_SetError(server, "%s: all TVM_CRT_MAX_NDARRAYS=%d allocation slots are in use", what,
                             (int)TVM_CRT_MAX_NDARRAYS);
    return send_error(server);
  }
  /* A zero-byte request still gets a distinct, non-NULL block. Alignments above what the runtime
   * guarantees (TVM clients ask for 64) are met by over-allocating and aligning up inside the block. */
  request = (num_bytes == 0U) ? 1U : (size_t)num_bytes;
  if (alignment > (uint64_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES) {
    request += (size_t)alignment;
    runtime_alignment = (size_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES;
  } else {
    runtime_alignment = (size_t)alignment;
  }
  rc = TVMDeviceAllocDataSpace(dev, request, runtime_alignment, type_hint, &base);
  if (rc != 0) {
    return send_last_error(server, what);
  }
  if (base == NULL) {
    TVMMinRpcServer_SetError(server, "%s: the device returned no memory for %lu bytes", what,
                             (unsigned long)num_bytes);
    return send_error(server);
  }
  /* Align up inside the block: pad = bytes to the next multiple of alignment (0 when base is aligned),
   * which is < alignment, and the block has that many spare bytes whenever the runtime aligned it less. */
  block = (uint8_t*)base;
  address = (uintptr_t)block;
  pad = (size_t)((~address + 1U) & ((uintptr_t)alignment - 1U));
  ptr = &block[pad];
  (void)TVMMinRpcServer_AddAllocation(server, kTVMMinRpcAllocDataSpace, ptr, base, address + (uintptr_t)pad,
                                      (size_t)num_bytes, dev);
  return send_handle(server, ptr);
}

static tvm_crt_error_t handle_syscall(TVMMinRpcServer* server, int32_t code, Reader* r) {
  static const int kStr[1] = {kTVMStr};
  static const int kHandleInt[2] = {-1, kTVMArgInt};
  static const int kDevice[1] = {kDLDevice};
  static const int kDeviceInt[2] = {kDLDevice, kTVMArgInt};
  static const int kAlloc[4] = {kDLDevice, kTVMArgInt, kTVMArgInt, kTVMDataType};
  static const int kDeviceHandle[2] = {kDLDevice, -1};
  static const int kCopy[3] = {kTVMDLTensorHandle, kTVMDLTensorHandle, -1};
  const char* what = code_name(code);
  TVMValue* v = server->values;
  TVMValue result;
  int num_args = 0;
  if ((decode_seq(server, r, what, 0, &num_args) != kTvmErrorNoError) ||
      (check_end(server, r, what) != kTvmErrorNoError)) {
    return send_error(server);
  }
  switch (code) {
    case kTVMMinRpcGetGlobalFunc: {
      void* handle = NULL;
      if (check_args(server, what, num_args, 1, kStr) != kTvmErrorNoError) {
        return send_error(server);
      }
      if (TVMFuncGetGlobal(v[0].v_str, &handle) != 0) {
        handle = NULL; /* unknown names give the null handle */
      }
      return send_handle(server, handle);
    }
    case kTVMMinRpcFreeHandle: {
      int rc;
      if (check_args(server, what, num_args, 2, kHandleInt) != kTvmErrorNoError) {
        return send_error(server);
      }
      if (v[1].v_int64 == (int64_t)kTVMNDArrayHandle) {
        TVMMinRpcAllocation* a = TVMMinRpcServer_FindAllocation(server, kTVMMinRpcAllocNDArray, v[0].v_handle);
        if (a == NULL) {
          TVMMinRpcServer_SetError(server, "FreeHandle: 0x%lx is not an NDArray handed out over RPC",
                                   (unsigned long)(uintptr_t)v[0].v_handle);
          return send_error(server);
        }
        rc = TVMMinRpcServer_ReleaseAllocation(a);
      } else if (v[1].v_int64 == (int64_t)kTVMPackedFuncHandle) {
        rc = TVMFuncFree(v[0].v_handle);
      } else if (v[1].v_int64 == (int64_t)kTVMModuleHandle) {
        rc = TVMModFree(v[0].v_handle);
      } else {
        TVMMinRpcServer_SetError(server, "FreeHandle: cannot free a handle of type code %ld",
                                 (long)v[1].v_int64);
        return send_error(server);
      }
      return (rc != 0) ? send_last_error(server, what) : send_void(server);
    }
    case kTVMMinRpcDevSetDevice:
      if (check_args(server, what, num_args, 1, kDevice) != kTvmErrorNoError) {
        return send_error(server);
      }
      if (!device_available(v[0].v_device)) {
        TVMMinRpcServer_SetError(server, "DevSetDevice: device (%d, %d) does not exist here (cpu 0 or ext_dev 0)",
                                 (int)v[0].v_device.device_type, (int)v[0].v_device.device_id);
        return send_error(server);
      }
      return send_void(server);
    case kTVMMinRpcDevGetAttr:
      if (check_args(server, what, num_args, 2, kDeviceInt) != kTvmErrorNoError) {
        return send_error(server);
      }
      if (v[1].v_int64 != 0) { /* 0 = kExist */
        TVMMinRpcServer_SetError(server, "DevGetAttr: device attribute %ld is not supported (only kExist=0)",
                                 (long)v[1].v_int64);
        return send_error(server);
      }
      result.v_int64 = device_available(v[0].v_device) ? 1 : 0;
      return send_return(server, result, (int)kTVMArgInt);
    case kTVMMinRpcDevAllocData:
      if (check_args(server, what, num_args, 4, kAlloc) != kTvmErrorNoError) {
        return send_error(server);
      }
      if ((v[1].v_int64 < 0) || (v[2].v_int64 < 0)) {
        TVMMinRpcServer_SetError(server, "DevAllocData: negative size %ld or alignment %ld", (long)v[1].v_int64,
                                 (long)v[2].v_int64);
        return send_error(server);
      }
      return sys_alloc(server, what, v[0].v_device, (uint64_t)v[1].v_int64, (uint64_t)v[2].v_int64, v[3].v_type);
    case kTVMMinRpcDevFreeData: {
      TVMMinRpcAllocation* a;
      if (check_args(server, what, num_args, 2, kDeviceHandle) != kTvmErrorNoError) {
        return send_error(server);
      }
      a = TVMMinRpcServer_FindAllocation(server, kTVMMinRpcAllocDataSpace, v[1].v_handle);
      if (a == NULL) {
        TVMMinRpcServer_SetError(server, "DevFreeData: 0x%lx is not memory allocated over RPC",
                                 (unsigned long)(uintptr_t)v[1].v_handle);
        return send_error(server);
      }
      return (TVMMinRpcServer_ReleaseAllocation(a) != 0) ? send_last_error(server, what) : send_void(server);
    }
    case kTVMMinRpcDevStreamSync:
    case kTVMMinRpcDevFreeStream:
    case kTVMMinRpcDevSetStream:
      if (check_args(server, what, num_args, 2, kDeviceHandle) != kTvmErrorNoError) {
        return send_error(server);
      }
      if (v[1].v_handle != NULL) {
        TVMMinRpcServer_SetError(server, "%s: stream 0x%lx does not exist (the CRT has only the null stream)",
                                 what, (unsigned long)(uintptr_t)v[1].v_handle);
        return send_error(server);
      }
      return send_void(server); /* everything runs synchronously on the null stream */
    case kTVMMinRpcCopyAmongRemote: {
      uint64_t from_bytes = 0U;
      uint64_t to_bytes = 0U;
      uint8_t* from = NULL;
      uint8_t* to = NULL;
      if (check_args(server, what, num_args, 3, kCopy) != kTvmErrorNoError) {
        return send_error(server);
      }
      if ((TVMMinRpcServer_TensorBytes(&server->tensors[0], &from_bytes) != kTvmErrorNoError) ||
          (TVMMinRpcServer_TensorBytes(&server->tensors[1], &to_bytes) != kTvmErrorNoError) ||
          (from_bytes != to_bytes)) {
        TVMMinRpcServer_SetError(server, "CopyAmongRemote: source (%lu bytes) and destination (%lu bytes) differ",
                                 (unsigned long)from_bytes, (unsigned long)to_bytes);
        return send_error(server);
      }
      if (v[2].v_handle != NULL) {
        TVMMinRpcServer_SetError(server, "CopyAmongRemote: only the null stream exists");
        return send_error(server);
      }
      if ((TVMMinRpcServer_CheckRange(server, "CopyAmongRemote (source)", (uint64_t)(uintptr_t)server->tensors[0].data,
                                      server->tensors[0].byte_offset, from_bytes, &from) != kTvmErrorNoError) ||
          (TVMMinRpcServer_CheckRange(server, "CopyAmongRemote (destination)",
                                      (uint64_t)(uintptr_t)server->tensors[1].data, server->tensors[1].byte_offset,
                                      to_bytes, &to) != kTvmErrorNoError)) {
        return send_error(server);
      }
      if (from_bytes > 0U) {
        (void)memmove(to, from, (size_t)from_bytes);
      }
      return send_void(server);
    }
    case kTVMMinRpcDevAllocDataWithScope: {
      uint64_t num_bytes = 0U;
      const DLTensor* t = &server->tensors[0];
      if ((num_args != 2) || (server->type_codes[0] != (int)kTVMDLTensorHandle) ||
          ((server->type_codes[1] != (int)kTVMNullptr) && (server->type_codes[1] != (int)kTVMStr))) {
        TVMMinRpcServer_SetError(server, "DevAllocDataWithScope: expects (tensor, scope string or null)");
        return send_error(server);
      }
      if ((server->type_codes[1] == (int)kTVMStr) && (strcmp(v[1].v_str, "global") != 0)) {
        TVMMinRpcServer_SetError(server, "DevAllocDataWithScope: memory scope '%.24s' is not supported (only global)",
                                 v[1].v_str);
        return send_error(server);
      }
      if (TVMMinRpcServer_TensorBytes(t, &num_bytes) != kTvmErrorNoError) {
        TVMMinRpcServer_SetError(server, "DevAllocDataWithScope: negative or overflowing shape");
        return send_error(server);
      }
      return sys_alloc(server, what, t->device, num_bytes, (uint64_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES, t->dtype);
    }
    default: /* kTVMMinRpcDevCreateStream */
      TVMMinRpcServer_SetError(server, "%s: streams are not supported (the CRT runs everything synchronously)",
                               what);
      return send_error(server);
  }
}
