/*
 * tvm/runtime/crt/crt.h -- runtime life cycle.
 */
#ifndef TVM_RUNTIME_CRT_CRT_H_
#define TVM_RUNTIME_CRT_CRT_H_

#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Initialize the runtime: clears the module table and the global registry, then registers the
 * built-in globals (runtime.SystemLib, ...). Call once at boot, after TVMPlatformInitialize and before
 * any other runtime call; calling it again resets the runtime. No global constructors are used. */
tvm_crt_error_t TVMInitializeRuntime(void);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_CRT_H_ */
