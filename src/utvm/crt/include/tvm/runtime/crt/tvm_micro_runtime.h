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
 *   static const TVMContext context = {workspaces};   (const: may live in flash)
 *   err = TVMExecute(&tvmgen_my_model_model, &in, &out, &context);
 *
 * or fill a mutable context at run time with TVMSetWorkspaces(&context, workspaces).
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

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_TVM_MICRO_RUNTIME_H_ */
