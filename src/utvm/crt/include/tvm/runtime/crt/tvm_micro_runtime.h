/*
 * tvm/runtime/crt/tvm_micro_runtime.h -- the stable API for running a compiled model from an embedded
 * application (RFC "Embedded C Runtime Interface"). Header-only: static inline functions over the
 * generated TVMModel, so an application needs this file, tvm_micro_backend.h, error_codes.h and the
 * generated tvmgen_<model>.h -- no library, no DLPack.
 *
 *   #include "tvmgen_my_model.h"
 *   #include <tvm/runtime/crt/tvm_micro_runtime.h>
 *
 *   static int8_t input[TVMGEN_MY_MODEL_INPUT_1_SIZE];
 *   static int8_t output[TVMGEN_MY_MODEL_IDENTITY_SIZE];
 *   struct tvmgen_my_model_inputs in = {input};
 *   struct tvmgen_my_model_outputs out = {output};
 *   int32_t err = TVMExecute(&tvmgen_my_model_model, &in, &out, NULL);
 *
 * With a model compiled with `--workspace user`, give the workspace through a context:
 *
 *   static uint8_t workspace[TVMGEN_MY_MODEL_WORKSPACE_SIZE] __attribute__((aligned(16)));
 *   static void* const workspaces[1] = {workspace};
 *   static const TVMContext context = {.workspace = workspaces};   (const: may live in flash)
 *   err = TVMExecute(&tvmgen_my_model_model, &in, &out, &context);
 *
 * or fill a mutable context at run time with TVMSetWorkspaces(&context, workspaces).
 *
 * A model compiled with `--params external` reads its weights from a parameter blob (params.bin) the
 * context carries; TVMSetParameters validates a blob for the model and puts it in the context, and
 * refuses a wrong or corrupt one (leaving the context as it was):
 *
 *   static TVMContext context;
 *   err = TVMSetParameters(&context, &tvmgen_my_model_params_info, blob, blob_size);
 *   if (err == 0) err = TVMExecute(&tvmgen_my_model_model, &in, &out, &context);
 */
#ifndef TVM_RUNTIME_CRT_TVM_MICRO_RUNTIME_H_
#define TVM_RUNTIME_CRT_TVM_MICRO_RUNTIME_H_

#include <tvm/runtime/crt/tvm_micro_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Run `model` on the struct tvmgen_<model>_inputs / _outputs pointed to by inputs / outputs.
 * `context` may be NULL unless the model takes its workspace from it. Returns 0 or an error code. */
static inline int32_t TVMExecute(const TVMModel* model, void* inputs, void* outputs,
                                 const TVMContext* context) {
  return model->entrypoint(inputs, outputs, context);
}

/*! \brief Point a mutable `context` at the application's workspaces (one per pool; see
 * TVMGetWorkspaceSize). A context known at build time can instead be a `static const TVMContext`. */
static inline void TVMSetWorkspaces(TVMContext* context, void* const* workspaces) {
  context->workspace = workspaces;
}

/*! \brief Bytes of workspace pool `workspace_index` of `model`; 0 for an index it does not have. */
static inline size_t TVMGetWorkspaceSize(const TVMModel* model, size_t workspace_index) {
  return (workspace_index < (size_t)model->num_workspaces) ? model->workspace_size[workspace_index] : 0U;
}

/*! \brief Whether `model` reads its workspace from the TVMContext (compiled with --workspace user). */
static inline int TVMModelNeedsWorkspace(const TVMModel* model) {
  return model->workspace_from_context != 0U;
}

/*! \brief The little-endian u32 at `p` (parameter blobs are little-endian whatever the CPU). */
static inline uint32_t TVMParamsReadU32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8U) | ((uint32_t)p[2] << 16U) | ((uint32_t)p[3] << 24U);
}

/*! \brief CRC-32 (IEEE 802.3: reflected polynomial 0xEDB88320, initial value and final XOR 0xFFFFFFFF; zlib's
 * crc32) of `size` bytes, four bits at a time from a 64-byte table. */
static inline uint32_t TVMParamsCrc32(const uint8_t* data, size_t size) {
  static const uint32_t kNibble[16] = {
      0x00000000U, 0x1DB71064U, 0x3B6E20C8U, 0x26D930ACU, 0x76DC4190U, 0x6B6B51F4U, 0x4DB26158U, 0x5005713CU,
      0xEDB88320U, 0xF00F9344U, 0xD6D6A3E8U, 0xCB61B38CU, 0x9B64C2B0U, 0x86D3D2D4U, 0xA00AE278U, 0xBDBDF21CU};
  uint32_t crc = 0xFFFFFFFFU;
  size_t i;
  for (i = 0U; i < size; ++i) {
    crc ^= (uint32_t)data[i];
    crc = (crc >> 4U) ^ kNibble[crc & 0x0FU];
    crc = (crc >> 4U) ^ kNibble[crc & 0x0FU];
  }
  return crc ^ 0xFFFFFFFFU;
}

/*!
 * \brief Check that `blob` (`size` bytes readable at it) is a parameter blob of the model `info` describes
 * (tvmgen_<model>_params_info). Returns 0, or why it is not, checked in this order:
 * kTvmErrorParamsMisaligned (not TVM_MICRO_PARAMS_ALIGNMENT aligned), kTvmErrorParamsTruncated (shorter than
 * its magic and version), kTvmErrorParamsBadMagic, kTvmErrorParamsBadVersion, kTvmErrorParamsTruncated
 * (shorter than its header), kTvmErrorParamsOtherModel (another model's hash), kTvmErrorParamsTruncated
 * (shorter than its declared size), kTvmErrorParamsSizeMismatch (its size or an array's offset or size is not
 * the model's), kTvmErrorParamsCrcMismatch (a corrupt byte). kTvmErrorFunctionCallInvalidArg for NULL.
 * The CRC reads every byte of the blob: validate once, when a blob arrives, not before every run.
 */
static inline int32_t TVMValidateParameters(const TVMParamsInfo* info, const void* blob, size_t size) {
  const uint8_t* b = (const uint8_t*)blob;
  uint32_t total;
  uint32_t i;
  if ((info == NULL) || (b == NULL)) {
    return (int32_t)kTvmErrorFunctionCallInvalidArg;
  }
  if (((uintptr_t)b % (uintptr_t)TVM_MICRO_PARAMS_ALIGNMENT) != 0U) {
    return (int32_t)kTvmErrorParamsMisaligned;
  }
  if (size < 8U) {
    return (int32_t)kTvmErrorParamsTruncated;
  }
  if ((b[0] != (uint8_t)'U') || (b[1] != (uint8_t)'T') || (b[2] != (uint8_t)'V') || (b[3] != (uint8_t)'P')) {
    return (int32_t)kTvmErrorParamsBadMagic;
  }
  if (TVMParamsReadU32(&b[4]) != TVM_MICRO_PARAMS_FORMAT_VERSION) {
    return (int32_t)kTvmErrorParamsBadVersion;
  }
  if (size < (size_t)TVM_MICRO_PARAMS_HEADER_BYTES) {
    return (int32_t)kTvmErrorParamsTruncated;
  }
  for (i = 0U; i < TVM_MICRO_PARAMS_HASH_BYTES; ++i) {
    if (b[8U + i] != info->model_hash[i]) {
      return (int32_t)kTvmErrorParamsOtherModel;
    }
  }
  total = TVMParamsReadU32(&b[40]);
  if ((size_t)total > size) {
    return (int32_t)kTvmErrorParamsTruncated;
  }
  if ((total != info->total_size) || (TVMParamsReadU32(&b[44]) != info->num_arrays)) {
    return (int32_t)kTvmErrorParamsSizeMismatch;
  }
  /* total is the model's, so the table and the CRC lie inside the blob */
  for (i = 0U; i < (2U * info->num_arrays); ++i) {
    if (TVMParamsReadU32(&b[TVM_MICRO_PARAMS_HEADER_BYTES + (4U * i)]) != info->layout[i]) {
      return (int32_t)kTvmErrorParamsSizeMismatch;
    }
  }
  if (TVMParamsCrc32(b, (size_t)total - 4U) != TVMParamsReadU32(&b[total - 4U])) {
    return (int32_t)kTvmErrorParamsCrcMismatch;
  }
  return 0;
}

/*!
 * \brief Validate `blob` for the model `info` describes (TVMValidateParameters) and, when it is valid, make
 * it the parameters of `context`. On an error the context is left as it was (its previous blob, or none):
 * a model never runs on a refused blob. The blob stays the application's: it must stay valid and
 * unchanged while the context uses it (write a new blob elsewhere, then switch).
 */
static inline int32_t TVMSetParameters(TVMContext* context, const TVMParamsInfo* info, const void* blob,
                                       size_t size) {
  int32_t err;
  if (context == NULL) {
    return (int32_t)kTvmErrorFunctionCallInvalidArg;
  }
  err = TVMValidateParameters(info, blob, size);
  if (err == 0) {
    context->params = blob;
  }
  return err;
}

/*! \brief Bytes of the parameter blob of the model `info` describes (TVMGEN_<M>_PARAMS_SIZE). */
static inline size_t TVMGetParametersSize(const TVMParamsInfo* info) {
  return (size_t)info->total_size;
}

/*! \brief Put the application's handle for operators (a device, a DMA channel, ...) in a mutable `context`:
 * user operators declared with UTVM_CUSTOM_OP_WITH_CONTEXT read it as
 * `((const TVMContext*)resource_handle)->device`. */
static inline void TVMSetDevice(TVMContext* context, void* device) {
  context->device = device;
}

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_TVM_MICRO_RUNTIME_H_ */
