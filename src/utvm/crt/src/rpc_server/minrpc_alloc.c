/*
 * minrpc_alloc.c -- the table of memory the host may touch through the MinRPC server, and the range
 * check every copy and every tensor argument goes through (SECURITY.md invariants 1 and 3).
 */
#include <stdarg.h>
#include <string.h>
#include <tvm/runtime/crt/platform.h>

#include "minrpc_server.h"

void TVMMinRpcServer_SetError(TVMMinRpcServer* server, const char* fmt, ...) {
  va_list args;
  size_t length;
  va_start(args, fmt);
  length = TVMPlatformFormatMessage(server->error, sizeof(server->error), fmt, args);
  va_end(args);
  if (length >= sizeof(server->error)) {
    length = sizeof(server->error) - 1U;
  }
  server->error[length] = '\0';
}

tvm_crt_error_t TVMMinRpcServer_TensorBytes(const DLTensor* tensor, uint64_t* out_num_bytes) {
  uint64_t total = ((uint64_t)tensor->dtype.bits * (uint64_t)tensor->dtype.lanes + 7U) / 8U;
  int32_t i;
  for (i = 0; i < tensor->ndim; ++i) {
    int64_t dim = tensor->shape[i];
    if (dim < 0) {
      return kTvmErrorFunctionCallInvalidArg;
    }
    if ((dim != 0) && (total > (UINT64_MAX / (uint64_t)dim))) {
      return kTvmErrorFunctionCallInvalidArg;
    }
    total *= (uint64_t)dim;
  }
  *out_num_bytes = total;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMMinRpcServer_CheckRange(TVMMinRpcServer* server, const char* what, uint64_t data,
                                           uint64_t byte_offset, uint64_t num_bytes, uint8_t** out_ptr) {
  size_t i;
  uint64_t address;
  *out_ptr = NULL;
  if ((data > (uint64_t)UINTPTR_MAX) || (byte_offset > (UINT64_MAX - data))) {
    TVMMinRpcServer_SetError(server, "%s: data 0x%lx + byte_offset %lu is not a device address", what,
                             (unsigned long)data, (unsigned long)byte_offset);
    return kTvmErrorFunctionCallInvalidArg;
  }
  address = data + byte_offset;
  for (i = 0U; i < (size_t)TVM_CRT_MAX_NDARRAYS; ++i) {
    const TVMMinRpcAllocation* a = &server->allocations[i];
    /* [address, address + num_bytes) inside [data, data + size); an empty range may sit at the end. */
    if ((a->kind != (uint8_t)kTVMMinRpcAllocFree) && (address >= (uint64_t)a->data) &&
        ((address - (uint64_t)a->data) <= (uint64_t)a->size) &&
        (num_bytes <= ((uint64_t)a->size - (address - (uint64_t)a->data)))) {
      *out_ptr = (uint8_t*)(a->data + (uintptr_t)(address - (uint64_t)a->data));
      return kTvmErrorNoError;
    }
  }
  TVMMinRpcServer_SetError(server,
                           "%s: %lu bytes at 0x%lx (data 0x%lx + byte_offset %lu) are not inside memory "
                           "allocated over RPC",
                           what, (unsigned long)num_bytes, (unsigned long)address,
                           (unsigned long)data, (unsigned long)byte_offset);
  return kTvmErrorFunctionCallInvalidArg;
}

tvm_crt_error_t TVMMinRpcServer_AddAllocation(TVMMinRpcServer* server, TVMMinRpcAllocKind kind, void* handle,
                                              void* base, uintptr_t data, size_t size, DLDevice device) {
  size_t i;
  for (i = 0U; i < (size_t)TVM_CRT_MAX_NDARRAYS; ++i) {
    TVMMinRpcAllocation* a = &server->allocations[i];
    if (a->kind == (uint8_t)kTVMMinRpcAllocFree) {
      a->kind = (uint8_t)kind;
      a->handle = handle;
      a->base = base;
      a->data = data;
      a->size = size;
      a->device = device;
      return kTvmErrorNoError;
    }
  }
  return kTvmErrorPlatformNoMemory;
}

TVMMinRpcAllocation* TVMMinRpcServer_FindAllocation(TVMMinRpcServer* server, TVMMinRpcAllocKind kind,
                                                    const void* handle) {
  size_t i;
  for (i = 0U; i < (size_t)TVM_CRT_MAX_NDARRAYS; ++i) {
    TVMMinRpcAllocation* a = &server->allocations[i];
    if ((a->kind == (uint8_t)kind) && (a->handle == handle)) {
      return a;
    }
  }
  return NULL;
}

int TVMMinRpcServer_ReleaseAllocation(TVMMinRpcAllocation* allocation) {
  int rc = 0;
  if (allocation->kind == (uint8_t)kTVMMinRpcAllocDataSpace) {
    rc = TVMDeviceFreeDataSpace(allocation->device, allocation->base);
  } else if (allocation->kind == (uint8_t)kTVMMinRpcAllocNDArray) {
    rc = TVMArrayFree((TVMArrayHandle)allocation->handle);
  } else {
    /* free entry: nothing to do */
  }
  (void)memset(allocation, 0, sizeof(*allocation));
  return rc;
}

void TVMMinRpcServer_FreeAll(TVMMinRpcServer* server) {
  size_t i;
  for (i = 0U; i < (size_t)TVM_CRT_MAX_NDARRAYS; ++i) {
    /* Nothing useful can be done about a failing free here: the memory is forgotten either way. */
    (void)TVMMinRpcServer_ReleaseAllocation(&server->allocations[i]);
  }
}
