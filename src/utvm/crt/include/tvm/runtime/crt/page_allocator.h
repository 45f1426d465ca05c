/*
 * tvm/runtime/crt/page_allocator.h -- a page allocator over one caller-owned buffer.
 *
 * The buffer is split into a page table (one u32 per page) and a pool of pages of
 * 2^TVM_CRT_PAGE_BITS bytes each, aligned to TVM_CRT_ALLOC_ALIGNMENT_BYTES. An allocation takes the
 * first run of enough free pages (first fit); freeing returns the run. No locking: one caller at a time.
 * Platform ports use it to implement TVMPlatformMemoryAllocate/Free over a static array, or over the CRT's
 * own pool of TVM_CRT_MEMORY_POOL_BYTES (crt_config.h) with TVMPageAllocator_CreateStatic.
 * In a debug build (TVM_CRT_DEBUG 1) every Allocate and Free first checks the table (TVMPageAllocator_Check)
 * and refuses to work on a broken one, and Free fills the freed pages with TVM_CRT_DEBUG_FREED_BYTE.
 * Depends on config.h, compiler.h, error_codes.h.
 */
#ifndef TVM_RUNTIME_CRT_PAGE_ALLOCATOR_H_
#define TVM_RUNTIME_CRT_PAGE_ALLOCATOR_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Bytes per page. */
#define TVM_CRT_PAGE_SIZE_BYTES ((size_t)1U << TVM_CRT_PAGE_BITS)

typedef struct TVMPageAllocator {
  /*! \brief Per page: 0 free; n > 0 first page of an n-page run; TVM_PAGE_CONTINUATION inside a run.
   * Points into the caller's buffer. */
  uint32_t* page_table;
  /*! \brief First page (aligned); points into the caller's buffer. */
  uint8_t* pool;
  /*! \brief Number of pages in the pool. */
  uint32_t num_pages;
  /*! \brief Pages currently free. */
  uint32_t num_free_pages;
} TVMPageAllocator;

/*! \brief Page-table marker of a page inside (not at the start of) an allocated run. */
#define TVM_PAGE_CONTINUATION 0xffffffffU

/*! \brief Lay out an allocator over `buffer` (`buffer_size_bytes` long, caller-owned, alive while the
 * allocator is used). kTvmErrorBufferTooSmall if not even one page fits. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPageAllocator_Create(TVMPageAllocator* alloc, uint8_t* buffer,
                                                            size_t buffer_size_bytes);

/*! \brief Lay an allocator over the CRT's own static pool: TVM_CRT_MEMORY_POOL_BYTES of pages (crt_config.h;
 * microTVM's TVM_CRT_LOG_VIRT_MEM_SIZE, TVM_CRT_VIRT_MEM_SIZE or TVM_CRT_MAX_PAGES set it), so exactly
 * TVM_CRT_MEMORY_POOL_BYTES >> TVM_CRT_PAGE_BITS pages. One pool: a second allocator over it starts it afresh.
 * kTvmErrorBufferTooSmall when TVM_CRT_MEMORY_POOL_BYTES is 0 (no pool is built in). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPageAllocator_CreateStatic(TVMPageAllocator* alloc);

/*! \brief Allocate ceil(num_bytes / page) pages (one page for 0 bytes); *out_ptr is page-aligned.
 * kTvmErrorPlatformNoMemory when no run of free pages is long enough (*out_ptr = NULL). */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPageAllocator_Allocate(TVMPageAllocator* alloc, size_t num_bytes,
                                                              void** out_ptr);

/*! \brief Free a run returned by TVMPageAllocator_Allocate. kTvmErrorPlatformInvalidArgument for a
 * pointer this allocator did not return (or already freed); nothing changes then. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPageAllocator_Free(TVMPageAllocator* alloc, void* ptr);

/*! \brief Length in pages of the longest run of free pages (what the next allocation can get). */
uint32_t TVMPageAllocator_LargestFreeRun(const TVMPageAllocator* alloc);

/*! \brief Check the page table: every run head (n > 0) is followed by n - 1 continuation pages and stays in
 * the pool, no continuation page stands outside a run, and num_free_pages counts the free pages.
 * kTvmErrorPlatformCheckFailure if not (the table was overwritten: a write past an allocation's page table
 * neighbour, or a stray pointer); *out_bad_page (may be NULL) is then the first page found wrong, or
 * num_pages when only the count is off. kTvmErrorPlatformInvalidArgument for an allocator never created.
 * A debug build runs it before every Allocate and Free. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMPageAllocator_Check(const TVMPageAllocator* alloc, uint32_t* out_bad_page);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_PAGE_ALLOCATOR_H_ */
