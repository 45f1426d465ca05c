/*
 * host/crt_config.h -- CRT configuration for host (Linux/POSIX) builds: the local ctypes backend and the
 * host platform's firmware. Same limits as templates/crt_config.h.template, with host-sized memory and
 * logging at warn level. See the template for what each limit means.
 */
#ifndef TVM_RUNTIME_CRT_CONFIG_H_
#define TVM_RUNTIME_CRT_CONFIG_H_

#define TVM_CRT_LOG_LEVEL 2
#define TVM_CRT_MAX_NDIM 6
#define TVM_CRT_MAX_ARGS 16
#define TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES 4096
#define TVM_CRT_MAX_REGISTERED_MODULES 2
#define TVM_CRT_MAX_PACKET_SIZE_BYTES 2048
#define TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES 80
#define TVM_CRT_MAX_ERROR_MESSAGE_LENGTH 512
#define TVM_CRT_MAX_LOG_MESSAGE_BYTES 256
#define TVM_CRT_MAX_TIME_EVALUATORS 8
#define TVM_CRT_MAX_TIME_EVALUATOR_REPEAT 64
#define TVM_CRT_MAX_NDARRAYS 64
#define TVM_CRT_PAGE_BITS 10
#define TVM_CRT_ALLOC_ALIGNMENT_BYTES 16
#define TVM_CRT_WORKSPACE_SIZE_BYTES 1048576

#endif /* TVM_RUNTIME_CRT_CONFIG_H_ */
