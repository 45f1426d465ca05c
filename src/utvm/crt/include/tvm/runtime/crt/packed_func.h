/*
 * tvm/runtime/crt/packed_func.h -- calling a PackedFunc from C: look it up, add arguments, call, read the
 * typed return value. No malloc: a TVMPackedFunc holds fixed arrays of TVM_CRT_MAX_ARGS arguments, so keep it
 * in static storage or on a stack that can take it (about 20 bytes per argument on a 32-bit target).
 *
 *   TVMPackedFunc f;
 *   int64_t sum = 0;
 *   if ((TVMPackedFunc_InitGlobal(&f, "demo.add") != kTvmErrorNoError) ||
 *       (TVMPackedFunc_AddInt(&f, 40) != kTvmErrorNoError) || (TVMPackedFunc_AddInt(&f, 2) != kTvmErrorNoError) ||
 *       (TVMPackedFunc_Call(&f) != 0) || (TVMPackedFunc_GetRetInt(&f, &sum) != kTvmErrorNoError)) {
 *     ... TVMGetLastError() says what failed ...
 *   }
 *
 * - Init*: the function comes from TVMFuncGetGlobal (a global), TVMModGetFunction (a module's function) or a
 *   handle the caller already has (e.g. returned by another function); the arguments are cleared.
 * - Add*: append one argument of that type. The first failing Add (no room past TVM_CRT_MAX_ARGS, a NULL
 *   tensor or string) is remembered: Call then returns its code without calling, so a chain of Adds can be
 *   checked once, at Call. ClearArgs starts the argument list (and that memory) afresh; Init does it too.
 * - Call: TVMFuncCall with the arguments; returns 0 or the callee's nonzero code (its message in
 *   TVMGetLastError()). The arguments stay, so the function can be called again with them.
 * - GetRet*: the return value of the last Call, if it has that type; otherwise
 *   kTvmErrorFunctionCallWrongReturnType with the function's name, the type wanted and the type returned in
 *   TVMGetLastError() (a function that returned nothing returned kTVMNullptr). Before any Call, nothing.
 * Strings, bytes and tensors are borrowed: they must outlive the Call (the return value's, the callee's rules).
 * Every function sets TVMGetLastError() when it fails. Depends on c_runtime_api.h, config.h, compiler.h,
 * error_codes.h.
 */
#ifndef TVM_RUNTIME_CRT_PACKED_FUNC_H_
#define TVM_RUNTIME_CRT_PACKED_FUNC_H_

#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief A PackedFunc with its arguments and last return value. Read it through the functions below. */
typedef struct TVMPackedFunc {
  /*! \brief The function (NULL until an Init succeeds). */
  TVMFunctionHandle handle;
  /*! \brief The arguments, in order, and their type codes. */
  TVMValue args[TVM_CRT_MAX_ARGS];
  int type_codes[TVM_CRT_MAX_ARGS];
  /*! \brief Storage of the kTVMBytes arguments (args[i].v_handle points at bytes[i]). */
  TVMByteArray bytes[TVM_CRT_MAX_ARGS];
  /*! \brief Number of arguments added. */
  int num_args;
  /*! \brief The first failed Add since the arguments were cleared (kTvmErrorNoError: none). */
  tvm_crt_error_t arg_error;
  /*! \brief The last Call's return value and type code (kTVMNullptr before any Call). */
  TVMValue ret_value;
  int ret_type_code;
} TVMPackedFunc;

/*! \brief The global function `name` (TVMFuncGetGlobal). kTvmErrorFunctionNameNotFound if there is none,
 * kTvmErrorPlatformInvalidArgument for a NULL pf or name; pf->handle is NULL after a failure. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_InitGlobal(TVMPackedFunc* pf, const char* name);

/*! \brief The function `name` of module `mod` (TVMModGetFunction). Its error when it fails. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_InitModuleFunction(TVMPackedFunc* pf, TVMModuleHandle mod,
                                                                     const char* name);

/*! \brief A function handle the caller has (a kTVMPackedFuncHandle return value, ...); checked by Call. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_InitHandle(TVMPackedFunc* pf, TVMFunctionHandle handle);

/*! \brief Forget the arguments (and a failed Add), keeping the function. */
void TVMPackedFunc_ClearArgs(TVMPackedFunc* pf);

/*! \brief Append an argument: kTVMArgInt, kTVMArgFloat, kTVMOpaqueHandle (any pointer, NULL allowed),
 * kTVMDLTensorHandle (not NULL), kTVMStr (NUL-terminated, not NULL), kTVMBytes (`size` bytes at `data`; data
 * may be NULL only when size is 0), kTVMModuleHandle, kTVMPackedFuncHandle, kTVMNullptr. Errors:
 * kTvmErrorFunctionCallNumArguments when TVM_CRT_MAX_ARGS arguments are there already,
 * kTvmErrorFunctionCallInvalidArg for a NULL tensor, string or bytes (or handle of those kinds),
 * kTvmErrorPlatformInvalidArgument for a NULL pf. The argument is not added then, and Call fails with the
 * code. */
tvm_crt_error_t TVMPackedFunc_AddInt(TVMPackedFunc* pf, int64_t value);
tvm_crt_error_t TVMPackedFunc_AddFloat(TVMPackedFunc* pf, double value);
tvm_crt_error_t TVMPackedFunc_AddHandle(TVMPackedFunc* pf, void* handle);
tvm_crt_error_t TVMPackedFunc_AddTensor(TVMPackedFunc* pf, DLTensor* tensor);
tvm_crt_error_t TVMPackedFunc_AddString(TVMPackedFunc* pf, const char* text);
tvm_crt_error_t TVMPackedFunc_AddBytes(TVMPackedFunc* pf, const void* data, size_t size);
tvm_crt_error_t TVMPackedFunc_AddModule(TVMPackedFunc* pf, TVMModuleHandle mod);
tvm_crt_error_t TVMPackedFunc_AddFunction(TVMPackedFunc* pf, TVMFunctionHandle func);
tvm_crt_error_t TVMPackedFunc_AddNull(TVMPackedFunc* pf);

/*! \brief Call the function with the arguments added. 0, or: the code of the first failed Add (nothing is
 * called), kTvmErrorFunctionHandleInvalid before a successful Init, kTvmErrorPlatformInvalidArgument for a
 * NULL pf, or TVMFuncCall's (the callee's) nonzero code. */
TVM_CRT_WARN_UNUSED int TVMPackedFunc_Call(TVMPackedFunc* pf);

/*! \brief Number of arguments added; type code of the last Call's return value (kTVMNullptr: none). */
int TVMPackedFunc_NumArgs(const TVMPackedFunc* pf);
int TVMPackedFunc_RetTypeCode(const TVMPackedFunc* pf);

/*! \brief The last Call's return value as a given type. kTvmErrorFunctionCallWrongReturnType when it has
 * another type code (*out untouched), kTvmErrorPlatformInvalidArgument for a NULL pf or out. Int: kTVMArgInt;
 * Float: kTVMArgFloat; Handle: kTVMOpaqueHandle; Tensor: kTVMDLTensorHandle or kTVMNDArrayHandle; String:
 * kTVMStr; Bytes: kTVMBytes; Module: kTVMModuleHandle; Function: kTVMPackedFuncHandle. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetInt(const TVMPackedFunc* pf, int64_t* out);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetFloat(const TVMPackedFunc* pf, double* out);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetHandle(const TVMPackedFunc* pf, void** out);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetTensor(const TVMPackedFunc* pf, DLTensor** out);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetString(const TVMPackedFunc* pf, const char** out);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetBytes(const TVMPackedFunc* pf, const TVMByteArray** out);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetModule(const TVMPackedFunc* pf, TVMModuleHandle* out);
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPackedFunc_GetRetFunction(const TVMPackedFunc* pf, TVMFunctionHandle* out);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_PACKED_FUNC_H_ */
