/*
 * minrpc_server.h -- the on-device MinRPC server (docs/architecture.md §5.3); private to librpc_server (tests and
 * fuzz targets include it by path). Depends on c_runtime_api.h, config.h, error_codes.h.
 *
 * The server is event driven: the session hands it the body of each normal message as it arrives
 * (TVMMinRpcServer_MessageStart/Data/End). A message is collected in the caller's message buffer and
 * executed when its CRC verdict is good -- except CopyToRemote, whose header is collected and checked
 * and whose payload then streams straight into the destination tensor (it may be far larger than the
 * buffer), the reply waiting for the verdict. Replies go out through a TVMMinRpcReplyWriter (the
 * session), streamed as well: their size is computed first, then they are encoded a piece at a time.
 *
 * Every byte from the link is untrusted (SECURITY.md): lengths are checked before use, memory is only
 * read or written inside allocations this server made (the allocation table below), handles are
 * checked by the runtime before use, and every error is answered with an Exception carrying text.
 */
#ifndef TVM_CRT_SRC_RPC_SERVER_MINRPC_SERVER_H_
#define TVM_CRT_SRC_RPC_SERVER_MINRPC_SERVER_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/* TVM_CRT_RPC_EXCEPTION_MESSAGE_BYTES (longest Exception text) comes from config.h. */

/*! \brief RPC codes (docs/architecture.md §5.3); values are wire format. */
typedef enum {
  kTVMMinRpcNone = 0,
  kTVMMinRpcShutdown = 1,
  kTVMMinRpcInitServer = 2,
  kTVMMinRpcCallFunc = 3,
  kTVMMinRpcReturn = 4,
  kTVMMinRpcException = 5,
  kTVMMinRpcCopyFromRemote = 6,
  kTVMMinRpcCopyToRemote = 7,
  kTVMMinRpcCopyAck = 8,
  kTVMMinRpcGetGlobalFunc = 9,
  kTVMMinRpcFreeHandle = 10,
  kTVMMinRpcDevSetDevice = 11,
  kTVMMinRpcDevGetAttr = 12,
  kTVMMinRpcDevAllocData = 13,
  kTVMMinRpcDevFreeData = 14,
  kTVMMinRpcDevStreamSync = 15,
  kTVMMinRpcCopyAmongRemote = 16,
  kTVMMinRpcDevAllocDataWithScope = 17,
  kTVMMinRpcDevCreateStream = 18,
  kTVMMinRpcDevFreeStream = 19,
  kTVMMinRpcDevSetStream = 20
} TVMMinRpcCode;

/*! \brief The protocol version string InitServer must carry. */
#define TVM_MINRPC_PROTOCOL_VERSION "0.8.0"

/*! \brief Where replies go: start(size) once, write() pieces adding up to size, finish(). log() sends a
 * log message (outside any reply). All must be set. */
typedef struct TVMMinRpcReplyWriter {
  tvm_crt_error_t (*start)(void* context, uint32_t size_bytes);
  tvm_crt_error_t (*write)(void* context, const uint8_t* data, size_t size_bytes);
  tvm_crt_error_t (*finish)(void* context);
  void (*log)(void* context, const char* text, size_t length);
  /*! \brief Passed to the callbacks. Not owned. */
  void* context;
} TVMMinRpcReplyWriter;

typedef enum {
  kTVMMinRpcAllocFree = 0,     /*!< Unused table entry. */
  kTVMMinRpcAllocDataSpace = 1, /*!< From DevAllocData(WithScope); handle == data. */
  kTVMMinRpcAllocNDArray = 2   /*!< An NDArray a function returned; handle is its DLTensor*. */
} TVMMinRpcAllocKind;

/*! \brief One block of memory the host may read and write through the server. */
typedef struct TVMMinRpcAllocation {
  uint8_t kind;
  /*! \brief What the host holds: the data pointer, or the NDArray's DLTensor*. */
  void* handle;
  /*! \brief What to free: the block TVMDeviceAllocDataSpace returned (handle may be aligned up in it). */
  void* base;
  /*! \brief First byte and size of the accessible block. */
  uintptr_t data;
  size_t size;
  /*! \brief Device it was allocated on (freed on the same). */
  DLDevice device;
} TVMMinRpcAllocation;

typedef enum {
  kTVMMinRpcRxIdle = 0,     /*!< No message. */
  kTVMMinRpcRxHeader = 1,   /*!< Collecting the fixed header (and a CopyToRemote's tensor header). */
  kTVMMinRpcRxBuffer = 2,   /*!< Collecting the whole message into the buffer. */
  kTVMMinRpcRxStream = 3,   /*!< CopyToRemote payload going into the destination. */
  kTVMMinRpcRxDiscard = 4,  /*!< Reading to the end; `error` holds the Exception to send. */
  kTVMMinRpcRxEmpty = 5     /*!< A packet of length 0 (ignored, as MinRPC does). */
} TVMMinRpcRxState;

typedef struct TVMMinRpcServer {
  TVMMinRpcReplyWriter writer;
  /*! \brief Message buffer (caller-owned, buffer_size bytes, kept alive as long as the server). */
  uint8_t* buffer;
  size_t buffer_size;
  /* --- receive state of the current message --- */
  uint8_t rx_state;
  /*! \brief Nonzero once a CopyToRemote has written into its destination. */
  uint8_t rx_touched;
  uint32_t rx_body_size;
  /*! \brief Body bytes received so far (all states). */
  uint32_t rx_received;
  /*! \brief Header bytes needed before the next decision (rx_state Header). */
  uint32_t rx_needed;
  uint8_t* rx_dest;
  uint64_t rx_dest_remaining;
  /*! \brief Nonzero after Shutdown: no more messages are processed. */
  uint8_t shutdown;
  /*! \brief Exception text pending (Discard) or being built. */
  char error[TVM_CRT_RPC_EXCEPTION_MESSAGE_BYTES];
  /* --- decoded arguments of the message being executed --- */
  TVMValue values[TVM_CRT_MAX_ARGS];
  int type_codes[TVM_CRT_MAX_ARGS];
  DLTensor tensors[TVM_CRT_MAX_ARGS];
  int64_t shapes[TVM_CRT_MAX_ARGS][TVM_CRT_MAX_NDIM];
  TVMByteArray byte_arrays[TVM_CRT_MAX_ARGS];
  /* --- memory the host may access --- */
  TVMMinRpcAllocation allocations[TVM_CRT_MAX_NDARRAYS];
} TVMMinRpcServer;

/*! \brief Set up a server over `buffer` (buffer_size bytes: the largest message it executes). */
void TVMMinRpcServer_Init(TVMMinRpcServer* server, uint8_t* buffer, size_t buffer_size,
                          const TVMMinRpcReplyWriter* writer);

/*! \brief A normal message of body_size_bytes begins. */
tvm_crt_error_t TVMMinRpcServer_MessageStart(TVMMinRpcServer* server, uint32_t body_size_bytes);
/*! \brief Body bytes, in order. */
tvm_crt_error_t TVMMinRpcServer_MessageData(TVMMinRpcServer* server, const uint8_t* data, size_t size_bytes);
/*! \brief The message ended with the framing verdict: execute it and reply. Returns
 * kTvmErrorPlatformShutdown after Shutdown, a write error if the reply could not be sent, and
 * kTvmErrorNoError otherwise -- including for every malformed message (answered or dropped). */
tvm_crt_error_t TVMMinRpcServer_MessageEnd(TVMMinRpcServer* server, tvm_crt_error_t verdict);

/*! \brief Free every allocation the host made (its handles died with its session). */
void TVMMinRpcServer_FreeAll(TVMMinRpcServer* server);

/* --- allocation table (minrpc_alloc.c) --- */

/*! \brief Find the block holding [data + byte_offset, + num_bytes) (an empty range: an address inside the
 * block or just past its end); *out_ptr is its first byte.
 * kTvmErrorFunctionCallInvalidArg (with text in server->error) when no allocation holds it. */
tvm_crt_error_t TVMMinRpcServer_CheckRange(TVMMinRpcServer* server, const char* what, uint64_t data,
                                           uint64_t byte_offset, uint64_t num_bytes, uint8_t** out_ptr);
/*! \brief Record an allocation; kTvmErrorPlatformNoMemory when the table is full. */
tvm_crt_error_t TVMMinRpcServer_AddAllocation(TVMMinRpcServer* server, TVMMinRpcAllocKind kind, void* handle,
                                              void* base, uintptr_t data, size_t size, DLDevice device);
/*! \brief The entry of `kind` whose handle is `handle`, or NULL. */
TVMMinRpcAllocation* TVMMinRpcServer_FindAllocation(TVMMinRpcServer* server, TVMMinRpcAllocKind kind,
                                                    const void* handle);
/*! \brief Release an entry's memory and clear it; nonzero on failure (TVMGetLastError has the text). */
int TVMMinRpcServer_ReleaseAllocation(TVMMinRpcAllocation* allocation);
/*! \brief Bytes of a compact tensor (prod(shape) * ceil(bits * lanes / 8)); kTvmErrorFunctionCallInvalidArg
 * on a negative dim or overflow. */
tvm_crt_error_t TVMMinRpcServer_TensorBytes(const DLTensor* tensor, uint64_t* out_num_bytes);

/*! \brief Format server->error (printf-style, truncated to fit). */
void TVMMinRpcServer_SetError(TVMMinRpcServer* server, const char* fmt, ...) TVM_CRT_FORMAT(2, 3);

#ifdef __cplusplus
}
#endif

#endif /* TVM_CRT_SRC_RPC_SERVER_MINRPC_SERVER_H_ */
