/*
 * aot_executor.c -- checked execution of a generated TVMModel (see tvm/runtime/crt/aot_executor.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_executor.h>

static const char* model_name(const TVMModel* model);

static const char* model_name(const TVMModel* model) {
  return (model->name != NULL) ? model->name : "(unnamed)";
}

tvm_crt_error_t TVMAotExecutor_CheckModel(const TVMModel* model) {
  if (model == NULL) {
    TVMAPISetLastError("TVMAotExecutor: model is NULL");
    return kTvmErrorExecutorModuleBadContext;
  }
  if (model->version != TVM_MICRO_MODEL_VERSION) {
    TVMAPISetLastErrorf("TVMAotExecutor: model descriptor version %u, this runtime reads version %u "
                        "(recompile the model or update the runtime)",
                        (unsigned)model->version, (unsigned)TVM_MICRO_MODEL_VERSION);
    return kTvmErrorExecutorModuleBadContext;
  }
  if (model->entrypoint == NULL) {
    TVMAPISetLastErrorf("TVMAotExecutor: model '%s' has no entry point",
                        model_name(model));
    return kTvmErrorExecutorModuleBadContext;
  }
  if ((model->num_workspaces > 0U) && (model->workspace_size == NULL)) {
    TVMAPISetLastErrorf("TVMAotExecutor: model '%s' declares %u workspaces but no sizes",
                        model_name(model), (unsigned)model->num_workspaces);
    return kTvmErrorExecutorModuleBadContext;
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMAotExecutor_CheckContext(const TVMModel* model, const TVMContext* context) {
  uint32_t i;
  if (model->workspace_from_context == 0U) {
    return kTvmErrorNoError;
  }
  for (i = 0U; i < model->num_workspaces; ++i) {
    const uint8_t* ws;
    if (model->workspace_size[i] == 0U) {
      continue;
    }
    if ((context == NULL) || (context->workspace == NULL)) {
      TVMAPISetLastErrorf("TVMAotExecutor: model '%s' takes its workspace from the context "
                          "(%lu bytes); call TVMSetWorkspaces first",
                          model_name(model), (unsigned long)model->workspace_size[i]);
      return kTvmErrorExecutorModuleBadContext;
    }
    ws = (const uint8_t*)context->workspace[i];
    if (ws == NULL) {
      TVMAPISetLastErrorf("TVMAotExecutor: model '%s': workspace %u is NULL (%lu bytes needed)", model_name(model),
                          (unsigned)i, (unsigned long)model->workspace_size[i]);
      return kTvmErrorExecutorModuleBadContext;
    }
    if (((uintptr_t)ws % (uintptr_t)TVM_MICRO_WORKSPACE_ALIGNMENT) != 0U) {
      TVMAPISetLastErrorf("TVMAotExecutor: model '%s': workspace %u is not %u-byte aligned", model_name(model),
                          (unsigned)i, (unsigned)TVM_MICRO_WORKSPACE_ALIGNMENT);
      return kTvmErrorExecutorModuleBadContext;
    }
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMAotExecutor_Run(const TVMModel* model, void* inputs, void* outputs, const TVMContext* context) {
  int32_t ret;
  tvm_crt_error_t err = TVMAotExecutor_CheckModel(model);
  if (err != kTvmErrorNoError) {
    return err;
  }
  err = TVMAotExecutor_CheckContext(model, context);
  if (err != kTvmErrorNoError) {
    return err;
  }
  if ((inputs == NULL) || (outputs == NULL)) {
    TVMAPISetLastErrorf("TVMAotExecutor: model '%s': inputs and outputs must not be NULL", model_name(model));
    return kTvmErrorFunctionCallInvalidArg;
  }
  ret = model->entrypoint(inputs, outputs, context);
  if (ret != 0) {
    TVMAPISetLastErrorf("TVMAotExecutor: model '%s' failed with error 0x%lx", model_name(model),
                        (unsigned long)ret);
    return (tvm_crt_error_t)ret;
  }
  return kTvmErrorNoError;
}
