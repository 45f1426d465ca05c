/*
 * tvm/runtime/crt/ndarray.h -- NDArrays: a DLTensor plus storage for its shape.
 *
 * The caller owns the TVMNDArray struct; TVMNDArray_Empty takes the data from TVMPlatformMemoryAllocate
 * (aligned to TVM_CRT_ALLOC_ALIGNMENT_BYTES) and TVMNDArray_Release gives it back. TVMArrayAlloc/Free
 * (c_runtime_api.h) keep their structs in a bounded table of TVM_CRT_MAX_NDARRAYS entries.
 * Depends on c_runtime_api.h, config.h, compiler.h, error_codes.h, platform.h.
 */
#ifndef TVM_RUNTIME_CRT_NDARRAY_H_
#define TVM_RUNTIME_CRT_NDARRAY_H_

#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMNDArray {
  /*! \brief The tensor. dl.shape points at `shape` below; dl.strides is NULL (compact row-major);
   * dl.data is owned by this array after TVMNDArray_Empty (NULL after TVMNDArray_Create). */
  DLTensor dl;
  /*! \brief Storage of the shape (dl.ndim entries used). */
  int64_t shape[TVM_CRT_MAX_NDIM];
} TVMNDArray;

/*! \brief Fill in `array` (no data) for `ndim` dims of `shape` (each >= 0), `dtype` and `dev`.
 * kTvmErrorFunctionCallInvalidArg for ndim outside 0..TVM_CRT_MAX_NDIM, a negative dim or a dtype with
 * 0 bits or 0 lanes. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMNDArray_Create(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                                      DLDevice dev, TVMNDArray* array);

/*! \brief TVMNDArray_Create, then allocate the data (kTvmErrorPlatformNoMemory if the platform has none;
 * array->dl.data is NULL then). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMNDArray_Empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                                     DLDevice dev, TVMNDArray* array);

/*! \brief Bytes of data of a compact tensor: prod(shape) * ceil(bits * lanes / 8).
 * kTvmErrorFunctionCallInvalidArg if that overflows size_t or a dim is negative. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMNDArray_DataSizeBytes(const DLTensor* tensor, size_t* out_num_bytes);

/*! \brief Free the data of an array made by TVMNDArray_Empty (no-op when data is NULL). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMNDArray_Release(TVMNDArray* array);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_NDARRAY_H_ */
