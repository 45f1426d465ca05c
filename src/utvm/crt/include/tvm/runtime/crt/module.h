/*
 * tvm/runtime/crt/module.h -- CRT modules: a module is a function registry.
 */
#ifndef TVM_RUNTIME_CRT_MODULE_H_
#define TVM_RUNTIME_CRT_MODULE_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/func_registry.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMModule {
  /*! \brief The module's functions; usually a const registry in flash. Not owned. */
  const TVMFuncRegistry* registry;
} TVMModule;

/*! \brief The system library: generated code defines it. Firmware without a system library links
 * a weak default returning NULL, and runtime.SystemLib then fails with kTvmErrorSystemLibMissing. */
const TVMModule* TVMSystemLibEntryPoint(void);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_MODULE_H_ */
