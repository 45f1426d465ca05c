/*
 * tvm/runtime/crt/stack_allocator.h -- a LIFO (stack) allocator over one caller-owned buffer, used for
 * the workspaces of generated code (TVMBackendAllocWorkspace).
 *
 * Each block is preceded by a small header (the previous top and a check word) and starts at a multiple
 * of TVM_CRT_ALLOC_ALIGNMENT_BYTES. Blocks must be freed in reverse order of allocation: freeing any other
 * pointer is detected and refused with kTvmErrorPlatformStackAllocBadFree (nothing changes). Running out
 * gives kTvmErrorPlatformNoMemory. Depends on config.h, compiler.h, error_codes.h.
 */
#ifndef TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_
#define TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMStackAllocator {
  /*! \brief First usable byte (aligned), in the caller's buffer. */
  uint8_t* base;
  /*! \brief Usable bytes from base. */
  size_t size;
  /*! \brief Offset from base of the first free byte. */
  size_t top;
  /*! \brief Offset from base of the newest live block's data, or SIZE_MAX when none is live. */
  size_t last;
  /*! \brief Highest `top` reached since Create (bytes): the workspace high-water mark. */
  size_t peak;
} TVMStackAllocator;

/*! \brief Lay out an allocator over `buffer` (caller-owned, alive while the allocator is used).
 * kTvmErrorBufferTooSmall if it cannot hold one aligned block header. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMStackAllocator_Create(TVMStackAllocator* alloc, uint8_t* buffer,
                                                             size_t buffer_size_bytes);

/*! \brief Push a block of `num_bytes` (0 allowed); *out_ptr is TVM_CRT_ALLOC_ALIGNMENT_BYTES-aligned.
 * kTvmErrorPlatformNoMemory when it does not fit (*out_ptr = NULL, nothing changes). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMStackAllocator_Allocate(TVMStackAllocator* alloc, size_t num_bytes,
                                                               void** out_ptr);

/*! \brief Pop the newest block, which must be `ptr`; kTvmErrorPlatformStackAllocBadFree otherwise. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMStackAllocator_Free(TVMStackAllocator* alloc, void* ptr);

/*! \brief Free everything at once (e.g. after a failed inference). */
void TVMStackAllocator_Reset(TVMStackAllocator* alloc);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_ */
