/*
 * crt_config.h of the local runtime: the CRT built as a shared library inside the host Python process
 * (utvm.runtime.local). A host has memory to spare, so the limits that bound what Python can register
 * or read back are raised; everything else keeps the template's defaults.
 */
#ifndef UTVM_LOCAL_CRT_CONFIG_H_
#define UTVM_LOCAL_CRT_CONFIG_H_

/*! Python callbacks registered as C globals (names + pointers, bytes). */
#define TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES 32768
/*! Room for a Python exception's message in TVMGetLastError() (bytes, including the NUL). */
#define TVM_CRT_MAX_ERROR_MESSAGE_LENGTH 1024
/*! Modules registered at once (the test module, a system library, ...). */
#define TVM_CRT_MAX_REGISTERED_MODULES 8
/*! Function names up to 255 characters. */
#define TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES 256
/*! Arguments to one call. */
#define TVM_CRT_MAX_ARGS 64
/*! NDArrays allocated through TVMArrayAlloc at once. */
#define TVM_CRT_MAX_NDARRAYS 64

#include "../../crt/templates/crt_config.h.template"

#endif /* UTVM_LOCAL_CRT_CONFIG_H_ */
