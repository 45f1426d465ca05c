/*
 * tvm/runtime/c_runtime_api.h -- the TVM C runtime API, as implemented by the utvm CRT.
 *
 * Type codes (TVMArgTypeCode) are ABI and defined only here for C; tests/vectors/abi.json repeats them.
 * Every function returns 0 on success and a nonzero code on failure; the failure's text is then
 * available from TVMGetLastError() until the next failing call.
 */
#ifndef TVM_RUNTIME_C_RUNTIME_API_H_
#define TVM_RUNTIME_C_RUNTIME_API_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef TVM_DLL
#define TVM_DLL
#endif

/*! \brief Version string of the RPC protocol spoken by this runtime. */
#define TVM_VERSION "0.8.0"

/*! \brief Type codes of TVMValue (extends DLDataTypeCode). Values are ABI (docs/architecture.md §5.3). */
typedef enum {
  kTVMArgInt = kDLInt,
  kTVMArgUInt = kDLUInt,
  kTVMArgFloat = kDLFloat,
  kTVMOpaqueHandle = 3U,
  kTVMNullptr = 4U,
  kTVMDataType = 5U,
  kDLDevice = 6U,
  kTVMDLTensorHandle = 7U,
  kTVMObjectHandle = 8U,
  kTVMModuleHandle = 9U,
  kTVMPackedFuncHandle = 10U,
  kTVMStr = 11U,
  kTVMBytes = 12U,
  kTVMNDArrayHandle = 13U,
  kTVMObjectRValueRefArg = 14U,
  kTVMExtBegin = 15U
} TVMArgTypeCode;

typedef DLTensor* TVMArrayHandle;
typedef void* TVMFunctionHandle;
typedef void* TVMModuleHandle;
typedef void* TVMRetValueHandle;
typedef void* TVMStreamHandle;
typedef void* TVMObjectHandle;

/*! \brief A type-erased value; its meaning comes from the type code passed beside it. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/*! \brief A byte array argument (type code kTVMBytes points at one of these). */
typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

/*! \brief The one signature of every C function the runtime calls (docs/architecture.md §4).
 * resource_handle is the owning TVMModule* for module functions, NULL for globals. */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

/* --- errors --- */
TVM_DLL const char* TVMGetLastError(void);
TVM_DLL void TVMAPISetLastError(const char* msg);
/*! \brief printf-style TVMAPISetLastError; the text is truncated to TVM_CRT_MAX_ERROR_MESSAGE_LENGTH. */
TVM_DLL void TVMAPISetLastErrorf(const char* fmt, ...);

/* --- functions and modules --- */
TVM_DLL int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out);
TVM_DLL int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override);
TVM_DLL int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                              TVMFunctionHandle* out);
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code);
TVM_DLL int TVMFuncFree(TVMFunctionHandle func);
TVM_DLL int TVMModFree(TVMModuleHandle mod);
TVM_DLL int TVMModImport(TVMModuleHandle mod, TVMModuleHandle dep);

/* --- arrays --- */
TVM_DLL int TVMArrayAlloc(const int64_t* shape, int ndim, int dtype_code, int dtype_bits,
                          int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out);
TVM_DLL int TVMArrayFree(TVMArrayHandle handle);

/* --- devices (CPU-only; present for API compatibility) --- */
TVM_DLL int TVMDeviceAllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                    DLDataType type_hint, void** out_data);
TVM_DLL int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr);
TVM_DLL int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_C_RUNTIME_API_H_ */
