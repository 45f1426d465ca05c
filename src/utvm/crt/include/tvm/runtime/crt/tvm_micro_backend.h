/*
 * tvm/runtime/crt/tvm_micro_backend.h -- the types behind the embedded C interface (RFC "Embedded C
 * Runtime Interface"): the model descriptor the compiler generates and the context an application owns.
 * Depends only on <stddef.h>, <stdint.h> and tvm/runtime/crt/error_codes.h (no DLPack, no TVMValue).
 *
 * Applications include tvm_micro_runtime.h (the stable API) and the generated tvmgen_<model>.h; fields
 * here may grow (appended, with TVM_MICRO_MODEL_VERSION bumped), so read them through the API.
 */
#ifndef TVM_RUNTIME_CRT_TVM_MICRO_BACKEND_H_
#define TVM_RUNTIME_CRT_TVM_MICRO_BACKEND_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Layout version of TVMModel written by the compiler (checked by TVMAotExecutor_Run). */
#define TVM_MICRO_MODEL_VERSION 1U

/*! \brief Required alignment of every workspace given through a TVMContext (bytes). */
#define TVM_MICRO_WORKSPACE_ALIGNMENT 16U

/*! \brief Returned by generated code when the TVMContext lacks a (suitably aligned) workspace. */
#define TVM_MICRO_ERROR_BAD_CONTEXT kTvmErrorExecutorModuleBadContext

/*! \brief Where a model runs: memory, parameters and devices the application provides. Owned by the
 * application; may be const-initialised and live in flash when everything it points to is global (the
 * generated code and the runtime only read it, through `const TVMContext*`). Members may be appended:
 * initialise it with designated initialisers (a positional `{workspaces}` misses the later members, which
 * -Wextra's missing-field-initializers reports):
 *
 *   static uint8_t workspace[TVMGEN_M_WORKSPACE_SIZE] __attribute__((aligned(16)));
 *   static void* const workspaces[1] = {workspace};
 *   static const TVMContext context = {.workspace = workspaces};
 *
 * The generated operators of a model compiled with `--params external`, or with a user operator declared
 * with UTVM_CUSTOM_OP_WITH_CONTEXT, receive the context as their last argument, `void* resource_handle`.
 */
typedef struct TVMContext {
  /*! \brief workspace[i]: memory for workspace pool i, TVMGetWorkspaceSize(model, i) bytes, aligned to
   * TVM_MICRO_WORKSPACE_ALIGNMENT. Read only by models compiled with `--workspace user`; NULL otherwise
   * allowed. Not owned: it must stay valid during TVMExecute. */
  void* const* workspace;
  /*! \brief The parameter blob (weights) of a model compiled with `--params external`, set by
   * TVMSetParameters once the blob is validated; NULL otherwise allowed. Not owned: anywhere the CPU reads
   * (flash, RAM), TVM_MICRO_PARAMS_ALIGNMENT aligned, valid and unchanged during TVMExecute. */
  const void* params;
  /*! \brief The application's handle for operators (a device, a DMA channel, an accelerator; TVMSetDevice):
   * never read by utvm's own code, only by user operators that take the context. Not owned. */
  void* device;
} TVMContext;

/*! \brief Required alignment of a parameter blob (bytes). */
#define TVM_MICRO_PARAMS_ALIGNMENT 16U
/*! \brief The parameter blob format this runtime reads (utvm.compiler.params.FORMAT_VERSION). */
#define TVM_MICRO_PARAMS_FORMAT_VERSION 1U
/*! \brief Bytes of a parameter blob's fixed header (before its table of arrays) and of its model hash. */
#define TVM_MICRO_PARAMS_HEADER_BYTES 48U
#define TVM_MICRO_PARAMS_HASH_BYTES 32U

/*! \brief What a model compiled with `--params external` expects of its parameter blob, generated as
 * `const TVMParamsInfo tvmgen_<model>_params_info` (can live in flash); TVMSetParameters checks a blob
 * against it. */
typedef struct TVMParamsInfo {
  const uint8_t* model_hash; /*!< TVM_MICRO_PARAMS_HASH_BYTES bytes: SHA-256 of the code reading the blob */
  uint32_t total_size;       /*!< bytes of the blob, CRC included */
  uint32_t num_arrays;       /*!< arrays in the blob */
  const uint32_t* layout;    /*!< 2 * num_arrays words: each array's offset and size in bytes */
} TVMParamsInfo;

/*! \brief The generated entry point: `inputs`/`outputs` point to the model's
 * struct tvmgen_<model>_inputs / _outputs; returns 0 or an error code. */
typedef int32_t (*TVMMicroEntryPoint)(void* inputs, void* outputs, const TVMContext* context);

/*! \brief A compiled model, generated as `const TVMModel tvmgen_<model>_model` (can live in flash). */
typedef struct TVMModel {
  uint32_t version;            /*!< TVM_MICRO_MODEL_VERSION of the generator */
  const char* name;            /*!< model name given at compile time */
  uint32_t num_input_tensors;  /*!< members of struct tvmgen_<model>_inputs */
  uint32_t num_output_tensors; /*!< members of struct tvmgen_<model>_outputs */
  uint32_t num_workspaces;     /*!< entries of workspace_size */
  const size_t* workspace_size;  /*!< bytes of each workspace pool */
  uint32_t workspace_from_context; /*!< 1: the TVMContext must provide the workspaces (--workspace user) */
  TVMMicroEntryPoint entrypoint; /*!< runs the model (call it through TVMExecute) */
} TVMModel;

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_TVM_MICRO_BACKEND_H_ */
