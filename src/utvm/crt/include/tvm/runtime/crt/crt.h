/*
 * tvm/runtime/crt/crt.h -- runtime life cycle, and the conventions of the C API as the CRT implements it.
 *
 * Libraries: libcommon (this API, registries, NDArrays, time evaluator, logging) needs libmemory (the
 * workspace stack) and a platform port (TVMPlatform* hooks, e.g. libhost). No malloc: every table is a
 * static array sized by crt_config.h.
 *
 * Handles (docs/architecture.md §4), opaque 32-bit values in a void*, never NULL:
 *   function  ((module_index | 0x8000) << 16) | (function_index | 0x8000)
 *             module_index TVM_CRT_MAX_REGISTERED_MODULES = the global registry (0x80028003 is global
 *             function 3 with 2 module slots); TVM_CRT_MAX_REGISTERED_MODULES + 1 = time evaluators
 *   module    ((module_index | 0x8000) << 16)   (never accepted where a function handle is expected)
 * Module and global function handles stay valid until TVMInitializeRuntime is called again;
 * TVMFuncFree/TVMModFree only check them, except that TVMFuncFree releases a time evaluator.
 *
 * Lookups: TVMFuncGetGlobal and TVMModGetFunction of an unknown name return
 * kTvmErrorFunctionNameNotFound with *out = NULL (an RPC server maps that to a null handle);
 * tvm.rpc.server.ModuleGetFunction returns a null handle (type code kTVMNullptr) and succeeds.
 *
 * Return values: TVMFuncCall sets *ret_type_code = kTVMNullptr before the call, so a function that
 * returns nothing returns null. A kTVMBytes return has ret_val->v_handle pointing at a TVMByteArray that
 * stays valid until the next call of the same function (runtime.RPCTimeEvaluator's results live in a
 * static buffer of 8 * TVM_CRT_MAX_TIME_EVALUATOR_REPEAT bytes).
 *
 * Errors: every API function returns 0 or a tvm_crt_error_t (or the callee's code for TVMFuncCall) and
 * leaves text in TVMGetLastError(), truncated to TVM_CRT_MAX_ERROR_MESSAGE_LENGTH - 1 characters. A callee
 * that fails without setting a message gets "<name> failed with code N and no message".
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
