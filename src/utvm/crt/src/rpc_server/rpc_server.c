/*
 * rpc_server.c -- MicroTVMRpcServerInit/Loop: the unframer feeds the session, the session feeds the
 * MinRPC server, replies and log messages go back through the session and the framer to write_func.
 * See tvm/runtime/crt/microtvm_rpc_server.h.
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/rpc_common/framing.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#include "minrpc_server.h"

/*! Bytes of header around an RPC packet in a session payload: u16 id + u8 type + u64 nbytes. */
#define RPC_SERVER_PACKET_OVERHEAD_BYTES 11

typedef struct {
  TVMFramer framer;
  TVMUnframer unframer;
  TVMSession session;
  TVMMinRpcServer rpc;
  uint8_t running;
  /*! \brief Nonzero while a log message from the host is being received (read and ignored). */
  uint8_t rx_log;
} MicroRpcServer;

static MicroRpcServer g_server;
static uint8_t g_server_initialized = 0U;

static tvm_crt_error_t on_message_start(void* context, TVMSessionMessageType type, uint32_t body_size_bytes);
static tvm_crt_error_t on_message_data(void* context, const uint8_t* data, size_t size_bytes);
static tvm_crt_error_t on_message_end(void* context, TVMSessionMessageType type, tvm_crt_error_t verdict);
static void on_session_event(void* context, TVMSessionEvent event);
static tvm_crt_error_t reply_start(void* context, uint32_t size_bytes);
static tvm_crt_error_t reply_write(void* context, const uint8_t* data, size_t size_bytes);
static tvm_crt_error_t reply_finish(void* context);
static void reply_log(void* context, const char* text, size_t length);
static int get_crt_max_packet_size(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value,
                                   int* ret_type_code, void* resource_handle);

/* --- session -> MinRPC --- */
static tvm_crt_error_t on_message_start(void* context, TVMSessionMessageType type, uint32_t body_size_bytes) {
  MicroRpcServer* server = (MicroRpcServer*)context;
  server->rx_log = (type == kTVMSessionMessageNormal) ? 0U : 1U;
  if (server->rx_log != 0U) {
    return kTvmErrorNoError; /* a log message from the host: read and ignored */
  }
  return TVMMinRpcServer_MessageStart(&server->rpc, body_size_bytes);
}

static tvm_crt_error_t on_message_data(void* context, const uint8_t* data, size_t size_bytes) {
  MicroRpcServer* server = (MicroRpcServer*)context;
  if (server->rx_log != 0U) {
    return kTvmErrorNoError;
  }
  return TVMMinRpcServer_MessageData(&server->rpc, data, size_bytes);
}

static tvm_crt_error_t on_message_end(void* context, TVMSessionMessageType type, tvm_crt_error_t verdict) {
  MicroRpcServer* server = (MicroRpcServer*)context;
  (void)type;
  if (server->rx_log != 0U) {
    server->rx_log = 0U;
    return kTvmErrorNoError;
  }
  return TVMMinRpcServer_MessageEnd(&server->rpc, verdict);
}

/* A new session or a terminate: the host lost every handle it had, so free what it allocated. */
static void on_session_event(void* context, TVMSessionEvent event) {
  MicroRpcServer* server = (MicroRpcServer*)context;
  (void)event;
  TVMMinRpcServer_FreeAll(&server->rpc);
}

/* --- MinRPC replies -> session --- */
static tvm_crt_error_t reply_start(void* context, uint32_t size_bytes) {
  return TVMSession_StartMessage(&((MicroRpcServer*)context)->session, kTVMSessionMessageNormal, size_bytes);
}

static tvm_crt_error_t reply_write(void* context, const uint8_t* data, size_t size_bytes) {
  return TVMSession_WriteBody(&((MicroRpcServer*)context)->session, data, size_bytes);
}

static tvm_crt_error_t reply_finish(void* context) {
  return TVMSession_FinishMessage(&((MicroRpcServer*)context)->session);
}

static void reply_log(void* context, const char* text, size_t length) {
  MicroRpcServer* server = (MicroRpcServer*)context;
  (void)TVMSession_SendMessage(&server->session, kTVMSessionMessageLog, (const uint8_t*)text, length);
}

/* tvm.rpc.server.GetCRTMaxPacketSize() -> the largest RPC packet (u64 nbytes included) a session
 * message can carry: TVM_CRT_MAX_PACKET_SIZE_BYTES - 11. */
static int get_crt_max_packet_size(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value,
                                   int* ret_type_code, void* resource_handle) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  (void)resource_handle;
  ret_value->v_int64 = (int64_t)TVM_CRT_MAX_PACKET_SIZE_BYTES - RPC_SERVER_PACKET_OVERHEAD_BYTES;
  *ret_type_code = (int)kTVMArgInt;
  return 0;
}

/* The log sink of logging.h: while the server runs, log text goes to the host as a session log message.
 * A message logged while a reply is being written cannot be interleaved with it and is dropped. */
void TVMPlatformLog(int level, const char* message, size_t length) {
  size_t size = length;
  (void)level;
  if ((g_server_initialized == 0U) || (message == NULL) ||
      (g_server.framer.state == (uint8_t)kTVMFramerStateInPacket)) {
    return;
  }
  if (size > ((size_t)TVM_CRT_MAX_PACKET_SIZE_BYTES - TVM_SESSION_HEADER_BYTES)) {
    size = (size_t)TVM_CRT_MAX_PACKET_SIZE_BYTES - TVM_SESSION_HEADER_BYTES;
  }
  (void)TVMSession_SendMessage(&g_server.session, kTVMSessionMessageLog, (const uint8_t*)message, size);
}

microtvm_rpc_server_t MicroTVMRpcServerInit(microtvm_rpc_channel_write_t write_func, void* write_func_ctx) {
  /* The message buffer: the largest RPC message the server executes whole. */
  static uint8_t message_buffer[TVM_CRT_MAX_PACKET_SIZE_BYTES];
  TVMSessionHandler session_handler;
  TVMUnframerHandler unframer_handler;
  TVMMinRpcReplyWriter writer;
  TVMBackendPackedCFunc max_packet_size = &get_crt_max_packet_size;
  TVMFunctionHandle max_packet_size_handle = NULL;
  uint8_t nonce = 0U;
  tvm_crt_error_t err;

  g_server_initialized = 0U;
  err = TVMInitializeRuntime();
  if (err != kTvmErrorNoError) {
    TVMPlatformAbort(err);
  }
  /* TVMFuncRegisterGlobal takes the function as a TVMFunctionHandle (TVM's ABI); copy its bytes. */
  (void)memcpy((void*)&max_packet_size_handle, (const void*)&max_packet_size, sizeof(max_packet_size_handle));
  if (TVMFuncRegisterGlobal("tvm.rpc.server.GetCRTMaxPacketSize", max_packet_size_handle, 1) != 0) {
    TVMPlatformAbort(kTvmErrorFunctionRegistryFull);
  }
  err = TVMPlatformGenerateRandom(&nonce, sizeof(nonce));
  if (err != kTvmErrorNoError) {
    TVMPlatformAbort(err);
  }

  (void)memset(&g_server, 0, sizeof(g_server));
  TVMFramer_Init(&g_server.framer, write_func, write_func_ctx);

  session_handler.message_start = on_message_start;
  session_handler.message_data = on_message_data;
  session_handler.message_end = on_message_end;
  session_handler.event = on_session_event;
  session_handler.context = &g_server;
  TVMSession_Init(&g_server.session, &g_server.framer, nonce, &session_handler);
  g_server.session.log_dropped_packets = 1U;

  TVMSession_GetUnframerHandler(&g_server.session, &unframer_handler);
  TVMUnframer_Init(&g_server.unframer, &unframer_handler, (uint32_t)TVM_CRT_MAX_PACKET_SIZE_BYTES);

  writer.start = reply_start;
  writer.write = reply_write;
  writer.finish = reply_finish;
  writer.log = reply_log;
  writer.context = &g_server;
  TVMMinRpcServer_Init(&g_server.rpc, message_buffer, sizeof(message_buffer), &writer);

  g_server.running = 1U;
  g_server_initialized = 1U;
  /* Tell a host that may be waiting on a previous incarnation that we reset. If nobody listens yet the
   * write may fail; the host's own terminate + start-init will sort things out. */
  (void)TVMSession_Initialize(&g_server.session);
  return (microtvm_rpc_server_t)&g_server;
}

tvm_crt_error_t MicroTVMRpcServerLoop(microtvm_rpc_server_t server, uint8_t** new_data,
                                      size_t* new_data_size_bytes) {
  /* The only server is g_server: the handle is checked against it, then g_server is used directly. */
  MicroRpcServer* const s = &g_server;
  size_t consumed = 0U;
  tvm_crt_error_t err;
  if ((server != (microtvm_rpc_server_t)s) || (g_server.running == 0U)) {
    return kTvmErrorPlatformShutdown;
  }
  if ((new_data == NULL) || (*new_data == NULL) || (new_data_size_bytes == NULL) || (*new_data_size_bytes == 0U)) {
    return kTvmErrorNoError;
  }
  err = TVMUnframer_Write(&s->unframer, *new_data, *new_data_size_bytes, &consumed);
  *new_data = &(*new_data)[consumed];
  *new_data_size_bytes -= consumed;
  if (err == kTvmErrorPlatformShutdown) {
    s->running = 0U;
  }
  return err;
}
