/*
 * tvm/runtime/crt/rpc_common/write_stream.h -- the byte sink the link writes to (a UART, a pipe, a test
 * buffer). Depends on error_codes.h and the C library's <sys/types.h> only.
 *
 * A write function is microTVM's channel write signature: it writes up to num_bytes from data and returns
 * how many it wrote (>= 1), or a negative value on failure. TVMWriteStream_WriteAll loops until everything
 * is written; a function that writes nothing (0) or fails (< 0) ends the write with
 * kTvmErrorWriteStreamShortWrite, one that claims more than it was given with kTvmErrorWriteStreamLongWrite.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_WRITE_STREAM_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_WRITE_STREAM_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

/* ssize_t is POSIX, not C99. Every toolchain we target (glibc, newlib, Zephyr) has it in <sys/types.h>,
 * which keeps microTVM ports that declare `ssize_t write(void*, const uint8_t*, size_t)` source compatible.
 * A libc without <sys/types.h> defines TVM_CRT_NO_SYS_TYPES_H and gets a ptrdiff_t-based type instead. */
#ifndef TVM_CRT_NO_SYS_TYPES_H
#include <sys/types.h>
typedef ssize_t tvm_crt_ssize_t;
#else
typedef ptrdiff_t tvm_crt_ssize_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Write up to num_bytes of data; return the count written (>= 1) or a negative value on error. */
typedef tvm_crt_ssize_t (*TVMWriteFunc)(void* context, const uint8_t* data, size_t num_bytes);

typedef struct TVMWriteStream {
  /*! \brief The write function. Not owned. */
  TVMWriteFunc write;
  /*! \brief Passed to write unchanged. Not owned. */
  void* context;
} TVMWriteStream;

/*! \brief Write all num_bytes of data, calling stream->write as often as needed. */
tvm_crt_error_t TVMWriteStream_WriteAll(const TVMWriteStream* stream, const uint8_t* data, size_t num_bytes);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_RPC_COMMON_WRITE_STREAM_H_ */
