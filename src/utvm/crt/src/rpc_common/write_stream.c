/*
 * write_stream.c -- write everything through a caller-supplied write function (write_stream.h).
 */
#include <tvm/runtime/crt/rpc_common/write_stream.h>

tvm_crt_error_t TVMWriteStream_WriteAll(const TVMWriteStream* stream, const uint8_t* data, size_t num_bytes) {
  size_t done = 0U;
  if ((stream == NULL) || (stream->write == NULL) || ((data == NULL) && (num_bytes > 0U))) {
    return kTvmErrorWriteStreamShortWrite;
  }
  while (done < num_bytes) {
    tvm_crt_ssize_t written = stream->write(stream->context, &data[done], num_bytes - done);
    if (written <= 0) {
      return kTvmErrorWriteStreamShortWrite;
    }
    if ((size_t)written > (num_bytes - done)) {
      return kTvmErrorWriteStreamLongWrite;
    }
    done += (size_t)written;
  }
  return kTvmErrorNoError;
}
