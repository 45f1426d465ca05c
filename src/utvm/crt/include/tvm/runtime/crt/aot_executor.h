/*
 * tvm/runtime/crt/aot_executor.h -- running a generated TVMModel with checks and error text (library
 * `aot_executor`, links against `common`). TVMExecute (tvm_micro_runtime.h) is the zero-overhead path;
 * these functions validate the model descriptor and the context first and record what went wrong in
 * TVMGetLastError(), for firmware that wants a diagnosis rather than a bare code.
 */
#ifndef TVM_RUNTIME_CRT_AOT_EXECUTOR_H_
#define TVM_RUNTIME_CRT_AOT_EXECUTOR_H_

#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/tvm_micro_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Check a model descriptor: non-NULL, TVM_MICRO_MODEL_VERSION, an entry point, workspace sizes.
 * kTvmErrorExecutorModuleBadContext otherwise (text in TVMGetLastError()). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMAotExecutor_CheckModel(const TVMModel* model);

/*! \brief Check that `context` provides what `model` needs: for a model compiled with --workspace user,
 * a non-NULL, TVM_MICRO_WORKSPACE_ALIGNMENT-aligned workspace per pool. Any context (even NULL) suits a
 * model with a static workspace. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMAotExecutor_CheckContext(const TVMModel* model,
                                                               const TVMContext* context);

/*! \brief TVMAotExecutor_CheckModel, TVMAotExecutor_CheckContext, then run the model. A failing model
 * returns its own code, with the model's name in TVMGetLastError(). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMAotExecutor_Run(const TVMModel* model, void* inputs, void* outputs,
                                                      const TVMContext* context);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_AOT_EXECUTOR_H_ */
