/*
 * ndarray.c -- TVMNDArray create/empty/release, TVMArrayAlloc/Free over a bounded table, and the CPU
 * device data-space API (TVMDeviceAllocDataSpace/FreeDataSpace, TVMSynchronize). Memory comes from
 * TVMPlatformMemoryAllocate; only kDLCPU devices are accepted.
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>

#include "crt_internal.h"

static TVMNDArray g_arrays[TVM_CRT_MAX_NDARRAYS];
static uint8_t g_array_live[TVM_CRT_MAX_NDARRAYS];

static tvm_crt_error_t check_cpu(DLDevice dev, const char* api);

static tvm_crt_error_t check_cpu(DLDevice dev, const char* api) {
  tvm_crt_error_t err = kTvmErrorNoError;
  if (dev.device_type != kDLCPU) {
    err = TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg, "%s: device type %d is not supported (only kDLCPU=1)",
                          api, (int)dev.device_type);
  }
  return err;
}

tvm_crt_error_t TVMNDArray_DataSizeBytes(const DLTensor* tensor, size_t* out_num_bytes) {
  size_t elements = 1U;
  size_t element_bytes;
  int32_t i;
  if ((tensor == NULL) || (out_num_bytes == NULL) || (tensor->ndim < 0) ||
      ((tensor->ndim > 0) && (tensor->shape == NULL))) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  for (i = 0; i < tensor->ndim; i++) {
    const int64_t dim = tensor->shape[i];
    if (dim < 0) {
      return kTvmErrorFunctionCallInvalidArg;
    }
    if ((dim > 0) && ((uint64_t)elements > ((uint64_t)SIZE_MAX / (uint64_t)dim))) {
      return kTvmErrorFunctionCallInvalidArg;
    }
    elements *= (size_t)dim;
  }
  element_bytes = (((size_t)tensor->dtype.bits * (size_t)tensor->dtype.lanes) + 7U) / 8U;
  if ((element_bytes > 0U) && (elements > (SIZE_MAX / element_bytes))) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  *out_num_bytes = elements * element_bytes;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMNDArray_Create(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice dev,
                                  TVMNDArray* array) {
  int32_t i;
  if ((array == NULL) || (ndim < 0) || (ndim > (int32_t)TVM_CRT_MAX_NDIM) || ((ndim > 0) && (shape == NULL)) ||
      (dtype.bits == 0U) || (dtype.lanes == 0U)) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  for (i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      return kTvmErrorFunctionCallInvalidArg;
    }
  }
  (void)memset((void*)array, 0, sizeof(*array));
  for (i = 0; i < ndim; i++) {
    array->shape[i] = shape[i];
  }
  array->dl.data = NULL;
  array->dl.device = dev;
  array->dl.ndim = ndim;
  array->dl.dtype = dtype;
  array->dl.shape = array->shape;
  array->dl.strides = NULL;
  array->dl.byte_offset = 0U;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMNDArray_Empty(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice dev,
                                 TVMNDArray* array) {
  size_t num_bytes = 0U;
  void* data = NULL;
  tvm_crt_error_t err = TVMNDArray_Create(ndim, shape, dtype, dev, array);
  if (err == kTvmErrorNoError) {
    err = TVMNDArray_DataSizeBytes(&array->dl, &num_bytes);
  }
  if (err == kTvmErrorNoError) {
    err = TVMPlatformMemoryAllocate(num_bytes, dev, &data);
    if (err == kTvmErrorNoError) {
      array->dl.data = data;
    } else {
      array->dl.data = NULL;
    }
  }
  return err;
}

tvm_crt_error_t TVMNDArray_Release(TVMNDArray* array) {
  tvm_crt_error_t err = kTvmErrorNoError;
  if (array == NULL) {
    err = kTvmErrorFunctionCallInvalidArg;
  } else if (array->dl.data != NULL) {
    err = TVMPlatformMemoryFree(array->dl.data, array->dl.device);
    array->dl.data = NULL;
  } else {
    /* nothing to free */
  }
  return err;
}

void TVMCrtNDArray_Reset(void) {
  size_t i;
  for (i = 0U; i < (size_t)TVM_CRT_MAX_NDARRAYS; i++) {
    if (g_array_live[i] != 0U) {
      /* A reset cannot report a failing free; the slot is reclaimed regardless. */
      const tvm_crt_error_t ignored = TVMNDArray_Release(&g_arrays[i]);
      (void)ignored;
      g_array_live[i] = 0U;
    }
  }
}

int TVMArrayAlloc(const int64_t* shape, int ndim, int dtype_code, int dtype_bits, int dtype_lanes,
                  int device_type, int device_id, TVMArrayHandle* out) {
  DLDataType dtype;
  DLDevice dev;
  size_t i;
  tvm_crt_error_t err;
  if (out == NULL) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg, "TVMArrayAlloc: NULL out");
  }
  *out = NULL;
  if ((dtype_code < 0) || (dtype_code > 255) || (dtype_bits < 1) || (dtype_bits > 255) || (dtype_lanes < 1) ||
      (dtype_lanes > 65535)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "TVMArrayAlloc: invalid dtype (code %d, bits %d, lanes %d)", dtype_code,
                                dtype_bits, dtype_lanes);
  }
  if ((ndim < 0) || (ndim > (int)TVM_CRT_MAX_NDIM)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "TVMArrayAlloc: ndim %d is outside 0..%d (TVM_CRT_MAX_NDIM)", ndim,
                                (int)TVM_CRT_MAX_NDIM);
  }
  dtype.code = (uint8_t)dtype_code;
  dtype.bits = (uint8_t)dtype_bits;
  dtype.lanes = (uint16_t)dtype_lanes;
  dev.device_type = (DLDeviceType)device_type;
  dev.device_id = (int32_t)device_id;
  err = check_cpu(dev, "TVMArrayAlloc");
  if (err != kTvmErrorNoError) {
    return (int)err;
  }
  for (i = 0U; i < (size_t)TVM_CRT_MAX_NDARRAYS; i++) {
    if (g_array_live[i] == 0U) {
      break;
    }
  }
  if (i == (size_t)TVM_CRT_MAX_NDARRAYS) {
    return (int)TVMCrtError_Set(kTvmErrorPlatformNoMemory,
                                "TVMArrayAlloc: all TVM_CRT_MAX_NDARRAYS=%d arrays are allocated",
                                (int)TVM_CRT_MAX_NDARRAYS);
  }
  err = TVMNDArray_Empty((int32_t)ndim, shape, dtype, dev, &g_arrays[i]);
  if (err == kTvmErrorPlatformNoMemory) {
    return (int)TVMCrtError_Set(err, "TVMArrayAlloc: out of memory for the array data");
  }
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err, "TVMArrayAlloc: invalid shape (negative dim or size overflow)");
  }
  g_array_live[i] = 1U;
  *out = &g_arrays[i].dl;
  TVM_CRT_DEBUG_LOG("TVMArrayAlloc: array %lu, %d dims, data at %p", (unsigned long)i, ndim,
                    g_arrays[i].dl.data);
  return 0;
}

int TVMArrayFree(TVMArrayHandle handle) {
  size_t i;
  for (i = 0U; i < (size_t)TVM_CRT_MAX_NDARRAYS; i++) {
    if ((g_array_live[i] != 0U) && (handle == &g_arrays[i].dl)) {
      const tvm_crt_error_t err = TVMNDArray_Release(&g_arrays[i]);
      g_array_live[i] = 0U;
      TVM_CRT_DEBUG_LOG("TVMArrayFree: array %lu", (unsigned long)i);
      if (err != kTvmErrorNoError) {
        return (int)TVMCrtError_Set(err, "TVMArrayFree: TVMPlatformMemoryFree failed (0x%x)", (unsigned)err);
      }
      return 0;
    }
  }
  return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                              "TVMArrayFree: %p was not returned by TVMArrayAlloc (or is already freed)",
                              (void*)handle);
}

int TVMDeviceAllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType type_hint,
                            void** out_data) {
  tvm_crt_error_t err;
  (void)type_hint;
  if (out_data == NULL) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg, "TVMDeviceAllocDataSpace: NULL out_data");
  }
  *out_data = NULL;
  err = check_cpu(dev, "TVMDeviceAllocDataSpace");
  if (err != kTvmErrorNoError) {
    return (int)err;
  }
  if ((alignment > (size_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES) || ((alignment & (alignment - 1U)) != 0U)) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "TVMDeviceAllocDataSpace: alignment %lu is not a power of two <= %lu "
                                "(TVM_CRT_ALLOC_ALIGNMENT_BYTES)",
                                (unsigned long)alignment, (unsigned long)TVM_CRT_ALLOC_ALIGNMENT_BYTES);
  }
  err = TVMPlatformMemoryAllocate(nbytes, dev, out_data);
  if (err != kTvmErrorNoError) {
    *out_data = NULL;
    return (int)TVMCrtError_Set(err, "TVMDeviceAllocDataSpace: cannot allocate %lu bytes (0x%x)",
                                (unsigned long)nbytes, (unsigned)err);
  }
  return 0;
}

int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr) {
  tvm_crt_error_t err = check_cpu(dev, "TVMDeviceFreeDataSpace");
  if (err != kTvmErrorNoError) {
    return (int)err;
  }
  err = TVMPlatformMemoryFree(ptr, dev);
  if (err != kTvmErrorNoError) {
    return (int)TVMCrtError_Set(err, "TVMDeviceFreeDataSpace: TVMPlatformMemoryFree failed (0x%x)",
                                (unsigned)err);
  }
  return 0;
}

int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream) {
  (void)device_id;
  (void)stream;
  if (device_type != (int)kDLCPU) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg,
                                "TVMSynchronize: device type %d is not supported (only kDLCPU=1)", device_type);
  }
  return 0; /* the CPU is always synchronous */
}
