/*
 * tvm/runtime/crt/microtvm_rpc_server.h -- the on-device RPC server (docs/architecture.md §5), with microTVM's
 * API so firmware written for microTVM ports unchanged. Depends on error_codes.h and write_stream.h.
 *
 * Use:
 *   TVMPlatformInitialize();
 *   microtvm_rpc_server_t server = MicroTVMRpcServerInit(uart_write, NULL);  // sends terminate
 *   ...register your own globals here (TVMFuncRegisterGlobal)...
 *   for (;;) {
 *     uint8_t* data = rx_bytes; size_t size = rx_count;
 *     while (size > 0) {
 *       tvm_crt_error_t err = MicroTVMRpcServerLoop(server, &data, &size);
 *       if (err == kTvmErrorPlatformShutdown) { ...the host sent Shutdown... }
 *       else if (err != kTvmErrorNoError) { ...the write function failed... }
 *     }
 *   }
 *
 * MicroTVMRpcServerInit calls TVMInitializeRuntime() (which resets the global registry, so register
 * firmware functions after it), registers tvm.rpc.server.GetCRTMaxPacketSize, draws the session nonce
 * from TVMPlatformGenerateRandom, and sends a session terminate so a waiting host learns of the reset.
 * The server is a single static instance; its memory (message buffer of TVM_CRT_MAX_PACKET_SIZE_BYTES
 * plus framing/session/MinRPC state) is static, nothing is allocated. It also defines TVMPlatformLog
 * (logging.h): log text goes to the host as session log messages.
 *
 * Malformed input (line noise, bad CRCs, truncated or hostile packets) never makes the loop fail: bad
 * frames are dropped and reported to the host as log messages, bad requests are answered with an RPC
 * Exception (see src/rpc_server/SECURITY.md).
 */
#ifndef TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_
#define TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/rpc_common/write_stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Write up to num_bytes to the link; return the count written (>= 1) or a negative value on
 * error. (microTVM's signature; tvm_crt_ssize_t is ssize_t wherever <sys/types.h> exists.) */
typedef tvm_crt_ssize_t (*microtvm_rpc_channel_write_t)(void* context, const uint8_t* data, size_t num_bytes);

/*! \brief Opaque handle of the server. */
typedef void* microtvm_rpc_server_t;

/*! \brief Initialize the runtime and the server; write_func(write_func_ctx, ...) sends bytes to the host.
 * Calls TVMPlatformAbort if the runtime cannot be initialized. */
microtvm_rpc_server_t MicroTVMRpcServerInit(microtvm_rpc_channel_write_t write_func, void* write_func_ctx);

/*! \brief Feed bytes received from the host. Consumes *new_data_size_bytes bytes from *new_data,
 * advancing both, and executes each request as soon as its packet is complete (replies are written
 * before this returns). Returns kTvmErrorNoError; kTvmErrorPlatformShutdown once the host sent Shutdown
 * (the bytes after it are left unconsumed, and every later call returns it too); or the write error
 * (kTvmErrorWriteStreamShortWrite/LongWrite) when a reply could not be sent. */
tvm_crt_error_t MicroTVMRpcServerLoop(microtvm_rpc_server_t server, uint8_t** new_data,
                                      size_t* new_data_size_bytes);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_ */
