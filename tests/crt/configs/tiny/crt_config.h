/*
 * crt_config.h for the C tests, variant "tiny": the smallest sensible limits, so tests hit every
 * "full" / "too long" / "no memory" path with small inputs. One module slot, a small global registry,
 * short error messages, small packets and workspace.
 */
#ifndef TVM_RUNTIME_CRT_CONFIG_H_
#define TVM_RUNTIME_CRT_CONFIG_H_

#define TVM_CRT_LOG_LEVEL 0
#define TVM_CRT_MAX_NDIM 2
#define TVM_CRT_MAX_ARGS 4
#define TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES 192
#define TVM_CRT_MAX_REGISTERED_MODULES 1
#define TVM_CRT_MAX_PACKET_SIZE_BYTES 256
#define TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES 40
#define TVM_CRT_MAX_ERROR_MESSAGE_LENGTH 100
#define TVM_CRT_MAX_LOG_MESSAGE_BYTES 48
#define TVM_CRT_MAX_TIME_EVALUATORS 1
#define TVM_CRT_MAX_NDARRAYS 2
#define TVM_CRT_PAGE_BITS 6
#define TVM_CRT_ALLOC_ALIGNMENT_BYTES 8
#define TVM_CRT_WORKSPACE_SIZE_BYTES 512

#endif /* TVM_RUNTIME_CRT_CONFIG_H_ */
