/*
 * tvm/runtime/crt/config.h -- the CRT's view of crt_config.h: includes the firmware's <crt_config.h>
 * (found through -I$(CRT_CONFIG)), fills in a default for every limit it leaves out, and rejects
 * impossible values at compile time. CRT sources include this, never <crt_config.h> directly.
 *
 * The defaults below are exactly those of templates/crt_config.h.template (a test checks they agree);
 * each comment gives the unit and what RAM grows with the limit.
 *
 * A crt_config.h written for upstream microTVM works too: config_upstream.h (generated from the CRT's
 * upstream_config.json) maps the upstream names utvm honours and stops the build with an #error naming
 * each one it cannot. While crt_config.h is read, UTVM_CRT_CONFIG_READING_ is defined: a CRT header that
 * crt_config.h includes (upstream files include tvm/runtime/crt/logging.h) then waits for it to finish.
 * Upstream's TVM_CRT_MAX_PAGES reaches this file as UTVM_CRT_UPSTREAM_POOL_PAGES_ (pages of the memory
 * pool), turned into TVM_CRT_MEMORY_POOL_BYTES once the page size is known.
 */
#ifndef TVM_RUNTIME_CRT_CONFIG_H_DEFAULTS_
#define TVM_RUNTIME_CRT_CONFIG_H_DEFAULTS_

#define UTVM_CRT_CONFIG_READING_ 1
#include <crt_config.h>
#undef UTVM_CRT_CONFIG_READING_
#include <tvm/runtime/crt/config_upstream.h>

/* Log levels (values of TVM_CRT_LOG_LEVEL). */
#define TVM_CRT_LOG_LEVEL_DEBUG 0
#define TVM_CRT_LOG_LEVEL_INFO 1
#define TVM_CRT_LOG_LEVEL_WARN 2
#define TVM_CRT_LOG_LEVEL_ERROR 3
#define TVM_CRT_LOG_LEVEL_OFF 4

/*! Debug build: 0 off, 1 on (upstream microTVM's setting, same meaning). On, the CRT checks its invariants
 * (page allocator table, function registries, modules, handles) on every change and reports a broken one as
 * kTvmErrorPlatformCheckFailure naming it, fills freed pages with TVM_CRT_DEBUG_FREED_BYTE, and logs what it
 * registers and allocates at debug level (the log level defaults to debug when crt_config.h sets none).
 * Costs code and time, no RAM. */
#ifndef TVM_CRT_DEBUG
#define TVM_CRT_DEBUG 0
#endif

/*! The byte a debug build fills freed pages with (a read of freed memory then shows it). */
#define TVM_CRT_DEBUG_FREED_BYTE 0xdbU

/* A debug build logs at debug level unless crt_config.h chose a level. */
#if !defined(TVM_CRT_LOG_LEVEL) && ((TVM_CRT_DEBUG + 0) == 1)
#define TVM_CRT_LOG_LEVEL 0
#endif

/*! Log level: 0 debug, 1 info, 2 warn, 3 error, 4 off (log calls compile to nothing). */
#ifndef TVM_CRT_LOG_LEVEL
#define TVM_CRT_LOG_LEVEL 3
#endif

/*! Maximum rank of a tensor (dims), for NDArrays and over RPC. RAM: 8 bytes per dim per array. */
#ifndef TVM_CRT_MAX_NDIM
#define TVM_CRT_MAX_NDIM 6
#endif

/*! Maximum arguments to one PackedFunc call over RPC (runtime.RPCTimeEvaluator takes 12).
 * RAM: ~48 bytes per argument in the RPC server. */
#ifndef TVM_CRT_MAX_ARGS
#define TVM_CRT_MAX_ARGS 16
#endif

/*! Size of the buffer holding global function names + pointers (bytes). RAM: this many bytes. */
#ifndef TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES
#define TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES 512
#endif

/*! Maximum number of registered modules (the system library counts as one). RAM: one pointer each. */
#ifndef TVM_CRT_MAX_REGISTERED_MODULES
#define TVM_CRT_MAX_REGISTERED_MODULES 2
#endif

/*! Largest session payload (bytes); bounds the RPC message buffer. RAM: this many bytes. */
#ifndef TVM_CRT_MAX_PACKET_SIZE_BYTES
#define TVM_CRT_MAX_PACKET_SIZE_BYTES 2048
#endif

/*! Maximum length of a function name, including the NUL (bytes). Longer names are rejected. */
#ifndef TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES
#define TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES 80
#endif

/*! Maximum length of the last-error message, including the NUL (bytes). RAM: twice this many bytes. */
#ifndef TVM_CRT_MAX_ERROR_MESSAGE_LENGTH
#define TVM_CRT_MAX_ERROR_MESSAGE_LENGTH 160
#endif

/*! Largest formatted log message, including the NUL (bytes). Stack: this many bytes while logging. */
#ifndef TVM_CRT_MAX_LOG_MESSAGE_BYTES
#define TVM_CRT_MAX_LOG_MESSAGE_BYTES 128
#endif

/*! Maximum number of time evaluators alive at once. RAM: ~32 bytes each. */
#ifndef TVM_CRT_MAX_TIME_EVALUATORS
#define TVM_CRT_MAX_TIME_EVALUATORS 2
#endif

/*! Largest `repeat` of one time evaluator. RAM: 8 bytes each (the static result buffer, one for all). */
#ifndef TVM_CRT_MAX_TIME_EVALUATOR_REPEAT
#define TVM_CRT_MAX_TIME_EVALUATOR_REPEAT 32
#endif

/*! Maximum number of NDArrays allocated through TVMArrayAlloc at once. RAM: ~(40 + 8*MAX_NDIM) each. */
#ifndef TVM_CRT_MAX_NDARRAYS
#define TVM_CRT_MAX_NDARRAYS 16
#endif

/*! log2 of the page size of the page allocator (bytes). */
#ifndef TVM_CRT_PAGE_BITS
#define TVM_CRT_PAGE_BITS 10
#endif

/* Upstream's TVM_CRT_MAX_PAGES: the pool in pages of the size above. */
#ifdef UTVM_CRT_UPSTREAM_POOL_PAGES_
#ifdef TVM_CRT_MEMORY_POOL_BYTES
#if (TVM_CRT_MEMORY_POOL_BYTES) != ((UTVM_CRT_UPSTREAM_POOL_PAGES_) * (1 << (TVM_CRT_PAGE_BITS)))
#error "crt_config.h: TVM_CRT_MAX_PAGES (microTVM) pages of 1 << TVM_CRT_PAGE_BITS bytes disagree with the pool size set by TVM_CRT_MEMORY_POOL_BYTES (utvm) or TVM_CRT_LOG_VIRT_MEM_SIZE / TVM_CRT_VIRT_MEM_SIZE (microTVM): keep one"
#endif
#else
#define TVM_CRT_MEMORY_POOL_BYTES ((UTVM_CRT_UPSTREAM_POOL_PAGES_) * (1UL << (TVM_CRT_PAGE_BITS)))
#endif
#endif

/*! Bytes of pages in the CRT's own memory pool, a multiple of the page size; 0: no pool (the platform port
 * brings its memory). TVMPageAllocator_CreateStatic (page_allocator.h) lays a page allocator over it, and the
 * host port allocates from it when it is not 0. RAM: this many bytes + 4 bytes per page.
 * (microTVM: TVM_CRT_LOG_VIRT_MEM_SIZE = log2 of it, TVM_CRT_VIRT_MEM_SIZE, TVM_CRT_MAX_PAGES.) */
#ifndef TVM_CRT_MEMORY_POOL_BYTES
#define TVM_CRT_MEMORY_POOL_BYTES 0
#endif

/*! Size of the RPC framer's output staging buffer (bytes, >= 8). RAM: this many bytes per framer. Bigger
 * means fewer calls of the write function (a whole escaped packet gives one write per reply). */
#ifndef TVM_CRT_FRAMER_BUFFER_SIZE_BYTES
#define TVM_CRT_FRAMER_BUFFER_SIZE_BYTES 64
#endif

/*! Longest Exception text the RPC server formats itself (bytes, with the NUL). RAM: this many bytes. */
#ifndef TVM_CRT_RPC_EXCEPTION_MESSAGE_BYTES
#define TVM_CRT_RPC_EXCEPTION_MESSAGE_BYTES 128
#endif

/*! Alignment of workspace and NDArray allocations (bytes, a power of two). */
#ifndef TVM_CRT_ALLOC_ALIGNMENT_BYTES
#define TVM_CRT_ALLOC_ALIGNMENT_BYTES 16
#endif

/*! Size of the workspace stack used by TVMBackendAllocWorkspace (bytes). RAM: this many bytes. */
#ifndef TVM_CRT_WORKSPACE_SIZE_BYTES
#define TVM_CRT_WORKSPACE_SIZE_BYTES 65536
#endif

/*! Longest function name, with its NUL, that TVMModGetFunction looks up in a module (bytes; 0: no limit): a
 * longer name is refused naming this limit. (microTVM: TVM_CRT_MAX_STRLEN_FUNCTION_NAME, TVM_CRT_STRLEN_NAME,
 * which sized the operator names of its graph executor.) */
#ifndef TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES
#define TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES 0
#endif

/*! Longest model name, with its NUL, that runtime.SystemLib(name) looks up (bytes; 0: no limit): a longer
 * name is refused naming this limit. (microTVM: TVM_CRT_MAX_STRLEN_PARAM_NAME, which sized the parameter
 * names its graph executor looked up.) */
#ifndef TVM_CRT_MAX_MODEL_NAME_BYTES
#define TVM_CRT_MAX_MODEL_NAME_BYTES 0
#endif

/* ---- sanity checks: impossible configurations fail here, not at run time ---- */
/* An empty definition (`#define TVM_CRT_DEBUG`) reads as 0 - - 1 == 1 below; -2 is told apart by the + 0. */
#if (((0 - TVM_CRT_DEBUG - 1) == 1) && ((TVM_CRT_DEBUG + 0) != -2)) || \
    (((TVM_CRT_DEBUG + 0) != 0) && ((TVM_CRT_DEBUG + 0) != 1))
#error "crt_config.h: TVM_CRT_DEBUG must be 0 (release build) or 1 (debug build)"
#endif
#if (TVM_CRT_LOG_LEVEL < 0) || (TVM_CRT_LOG_LEVEL > 4)
#error "crt_config.h: TVM_CRT_LOG_LEVEL must be 0 (debug) .. 4 (off)"
#endif
#if (TVM_CRT_MAX_NDIM < 1) || (TVM_CRT_MAX_NDIM > 32)
#error "crt_config.h: TVM_CRT_MAX_NDIM must be 1 .. 32"
#endif
#if TVM_CRT_FRAMER_BUFFER_SIZE_BYTES < 8
#error "crt_config.h: TVM_CRT_FRAMER_BUFFER_SIZE_BYTES must be >= 8"
#endif
#if TVM_CRT_MAX_ARGS < 1
#error "crt_config.h: TVM_CRT_MAX_ARGS must be >= 1"
#endif
#if TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES < 64
#error "crt_config.h: TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES must be >= 64"
#endif
/* Module indices are 15 bits in a handle; MAX is the global registry and MAX + 1 the time evaluators. */
#if (TVM_CRT_MAX_REGISTERED_MODULES < 1) || (TVM_CRT_MAX_REGISTERED_MODULES > 0x7ffd)
#error "crt_config.h: TVM_CRT_MAX_REGISTERED_MODULES must be 1 .. 32765"
#endif
#if TVM_CRT_MAX_PACKET_SIZE_BYTES < 128
#error "crt_config.h: TVM_CRT_MAX_PACKET_SIZE_BYTES must be >= 128"
#endif
/* The CRT registers globals of its own at start-up; the longest is "tvm.rpc.server.GetCRTMaxPacketSize". */
#if TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES < 35
#error "crt_config.h: TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES must be >= 35 (the CRT's own global tvm.rpc.server.GetCRTMaxPacketSize and its NUL)"
#endif
#if TVM_CRT_MAX_ERROR_MESSAGE_LENGTH < 16
#error "crt_config.h: TVM_CRT_MAX_ERROR_MESSAGE_LENGTH must be >= 16"
#endif
#if TVM_CRT_MAX_LOG_MESSAGE_BYTES < 16
#error "crt_config.h: TVM_CRT_MAX_LOG_MESSAGE_BYTES must be >= 16"
#endif
#if (TVM_CRT_MAX_TIME_EVALUATORS < 1) || (TVM_CRT_MAX_TIME_EVALUATORS > 0x7fff)
#error "crt_config.h: TVM_CRT_MAX_TIME_EVALUATORS must be 1 .. 32767"
#endif
#if TVM_CRT_MAX_TIME_EVALUATOR_REPEAT < 1
#error "crt_config.h: TVM_CRT_MAX_TIME_EVALUATOR_REPEAT must be >= 1"
#endif
#if TVM_CRT_MAX_NDARRAYS < 1
#error "crt_config.h: TVM_CRT_MAX_NDARRAYS must be >= 1"
#endif
#if (TVM_CRT_ALLOC_ALIGNMENT_BYTES < 1) || \
    ((TVM_CRT_ALLOC_ALIGNMENT_BYTES & (TVM_CRT_ALLOC_ALIGNMENT_BYTES - 1)) != 0)
#error "crt_config.h: TVM_CRT_ALLOC_ALIGNMENT_BYTES must be a power of two"
#endif
#if (TVM_CRT_PAGE_BITS < 4) || (TVM_CRT_PAGE_BITS > 24)
#error "crt_config.h: TVM_CRT_PAGE_BITS must be 4 .. 24"
#endif
#if (1 << TVM_CRT_PAGE_BITS) < TVM_CRT_ALLOC_ALIGNMENT_BYTES
#error "crt_config.h: a page (1 << TVM_CRT_PAGE_BITS) must be at least TVM_CRT_ALLOC_ALIGNMENT_BYTES"
#endif
#if TVM_CRT_WORKSPACE_SIZE_BYTES < TVM_CRT_ALLOC_ALIGNMENT_BYTES
#error "crt_config.h: TVM_CRT_WORKSPACE_SIZE_BYTES must be >= TVM_CRT_ALLOC_ALIGNMENT_BYTES"
#endif
#if ((TVM_CRT_MEMORY_POOL_BYTES) < 0) || ((TVM_CRT_MEMORY_POOL_BYTES) > 0x80000000) || \
    (((TVM_CRT_MEMORY_POOL_BYTES) % (1 << (TVM_CRT_PAGE_BITS))) != 0)
#error "crt_config.h: TVM_CRT_MEMORY_POOL_BYTES (microTVM: 1 << TVM_CRT_LOG_VIRT_MEM_SIZE, TVM_CRT_VIRT_MEM_SIZE) must be 0 or a multiple of the page size (1 << TVM_CRT_PAGE_BITS) up to 2 GiB"
#endif
#if ((TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES) != 0) && \
    (((TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES) < 2) || ((TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES) > 65535))
#error "crt_config.h: TVM_CRT_MAX_MODULE_FUNCTION_NAME_BYTES (microTVM: TVM_CRT_MAX_STRLEN_FUNCTION_NAME, TVM_CRT_STRLEN_NAME) must be 0 (no limit) or 2 .. 65535"
#endif
#if ((TVM_CRT_MAX_MODEL_NAME_BYTES) != 0) && \
    (((TVM_CRT_MAX_MODEL_NAME_BYTES) < 2) || ((TVM_CRT_MAX_MODEL_NAME_BYTES) > 65535))
#error "crt_config.h: TVM_CRT_MAX_MODEL_NAME_BYTES (microTVM: TVM_CRT_MAX_STRLEN_PARAM_NAME) must be 0 (no limit) or 2 .. 65535"
#endif

#endif /* TVM_RUNTIME_CRT_CONFIG_H_DEFAULTS_ */
