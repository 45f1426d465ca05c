/*
 * page_allocator.c -- first-fit page allocator (see tvm/runtime/crt/page_allocator.h).
 *
 * Buffer layout: | page table: num_pages x u32 | padding to the alignment | page 0 | page 1 | ... |
 * The page table entry of a run's first page holds the run length; the other pages of the run hold
 * TVM_PAGE_CONTINUATION; free pages hold 0. Free checks that a pointer is the first byte of a run.
 * TVMPageAllocator_Check walks the table; a debug build (TVM_CRT_DEBUG) runs it before every Allocate and
 * Free and poisons freed pages. The CRT's own pool (TVM_CRT_MEMORY_POOL_BYTES > 0) is a static buffer
 * holding the table as well as the pages, with room for the alignment padding.
 */
#include <string.h>
#include <tvm/runtime/crt/page_allocator.h>

#define ALIGN ((uintptr_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES)
#define ENTRY_BYTES (sizeof(uint32_t))
#define MAX_PAGES 0xfffffffeU

static uintptr_t align_up(uintptr_t value, uintptr_t alignment);
static int layout_fits(uintptr_t start, size_t size, size_t pages, size_t* out_pool_offset);
static tvm_crt_error_t debug_check(const TVMPageAllocator* alloc);

static uintptr_t align_up(uintptr_t value, uintptr_t alignment) {
  return (value + (alignment - 1U)) & ~(alignment - 1U);
}

/* Does a table + pool of `pages` pages fit in [start, start + size)? Gives the pool's offset. */
static int layout_fits(uintptr_t start, size_t size, size_t pages, size_t* out_pool_offset) {
  const uintptr_t table = align_up(start, (uintptr_t)ENTRY_BYTES);
  const uintptr_t pool = align_up(table + ((uintptr_t)pages * ENTRY_BYTES), ALIGN);
  const uintptr_t end = pool + ((uintptr_t)pages * (uintptr_t)TVM_CRT_PAGE_SIZE_BYTES);
  int fits = 0;
  if ((end >= pool) && ((end - start) <= (uintptr_t)size)) {
    *out_pool_offset = (size_t)(pool - start);
    fits = 1;
  }
  return fits;
}

tvm_crt_error_t TVMPageAllocator_Create(TVMPageAllocator* alloc, uint8_t* buffer, size_t buffer_size_bytes) {
  const uintptr_t start = (uintptr_t)buffer;
  size_t pages;
  size_t pool_offset = 0U;
  size_t table_offset;
  if ((alloc == NULL) || (buffer == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  (void)memset((void*)alloc, 0, sizeof(*alloc));
  /* An upper bound, then step down until the layout (with its padding) fits. */
  pages = buffer_size_bytes / (TVM_CRT_PAGE_SIZE_BYTES + ENTRY_BYTES);
  if (pages > (size_t)MAX_PAGES) {
    pages = (size_t)MAX_PAGES;
  }
  while ((pages > 0U) && (layout_fits(start, buffer_size_bytes, pages, &pool_offset) == 0)) {
    pages--;
  }
  if (pages == 0U) {
    return kTvmErrorBufferTooSmall;
  }
  table_offset = (size_t)(align_up(start, (uintptr_t)ENTRY_BYTES) - start);
  alloc->page_table = (uint32_t*)(void*)&buffer[table_offset];
  alloc->pool = &buffer[pool_offset];
  alloc->num_pages = (uint32_t)pages;
  alloc->num_free_pages = (uint32_t)pages;
  (void)memset((void*)alloc->page_table, 0, pages * ENTRY_BYTES);
  return kTvmErrorNoError;
}

/* The table check of a debug build; nothing in a release build. */
static tvm_crt_error_t debug_check(const TVMPageAllocator* alloc) {
  tvm_crt_error_t err = kTvmErrorNoError;
#if TVM_CRT_DEBUG
  err = TVMPageAllocator_Check(alloc, NULL);
#else
  (void)alloc;
#endif
  return err;
}

tvm_crt_error_t TVMPageAllocator_CreateStatic(TVMPageAllocator* alloc) {
#if TVM_CRT_MEMORY_POOL_BYTES > 0
  /* The pages, their table, and the worst padding of each (the table to 4 bytes, the pool to ALIGN). */
  static uint8_t pool[(size_t)TVM_CRT_MEMORY_POOL_BYTES + (((size_t)TVM_CRT_MEMORY_POOL_BYTES >> TVM_CRT_PAGE_BITS) *
                                                           ENTRY_BYTES) + (size_t)ALIGN + ENTRY_BYTES];
  const uint32_t pages = (uint32_t)((size_t)TVM_CRT_MEMORY_POOL_BYTES >> TVM_CRT_PAGE_BITS);
  const tvm_crt_error_t err = TVMPageAllocator_Create(alloc, pool, sizeof(pool));
  /* With a page no larger than the padding room, a well-aligned buffer holds one page more: not in the pool. */
  if ((err == kTvmErrorNoError) && (alloc->num_pages > pages)) {
    alloc->num_pages = pages;
    alloc->num_free_pages = pages;
  }
  return err;
#else
  if (alloc != NULL) {
    (void)memset((void*)alloc, 0, sizeof(*alloc));
  }
  return kTvmErrorBufferTooSmall;
#endif
}

tvm_crt_error_t TVMPageAllocator_Check(const TVMPageAllocator* alloc, uint32_t* out_bad_page) {
  tvm_crt_error_t err = kTvmErrorNoError;
  uint32_t free_pages = 0U;
  uint32_t bad = 0U;
  uint32_t i = 0U;
  if ((alloc == NULL) || (alloc->page_table == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  while ((i < alloc->num_pages) && (err == kTvmErrorNoError)) {
    const uint32_t entry = alloc->page_table[i];
    if (entry == 0U) {
      free_pages++;
      i++;
    } else if ((entry == TVM_PAGE_CONTINUATION) || (entry > (alloc->num_pages - i))) {
      bad = i; /* a continuation outside a run, or a run past the last page */
      err = kTvmErrorPlatformCheckFailure;
    } else {
      uint32_t j = 1U;
      while ((j < entry) && (alloc->page_table[i + j] == TVM_PAGE_CONTINUATION)) {
        j++;
      }
      if (j < entry) {
        bad = i + j; /* a run cut short */
        err = kTvmErrorPlatformCheckFailure;
      } else {
        i += entry;
      }
    }
  }
  if ((err == kTvmErrorNoError) && (free_pages != alloc->num_free_pages)) {
    bad = alloc->num_pages;
    err = kTvmErrorPlatformCheckFailure;
  }
  if ((err != kTvmErrorNoError) && (out_bad_page != NULL)) {
    *out_bad_page = bad;
  }
  return err;
}

tvm_crt_error_t TVMPageAllocator_Allocate(TVMPageAllocator* alloc, size_t num_bytes, void** out_ptr) {
  size_t wanted;
  uint32_t i = 0U;
  tvm_crt_error_t err;
  if ((alloc == NULL) || (alloc->page_table == NULL) || (out_ptr == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  *out_ptr = NULL;
  err = debug_check(alloc);
  if (err != kTvmErrorNoError) {
    return err;
  }
  wanted = (num_bytes / TVM_CRT_PAGE_SIZE_BYTES) + (((num_bytes % TVM_CRT_PAGE_SIZE_BYTES) != 0U) ? 1U : 0U);
  if (wanted == 0U) {
    wanted = 1U;
  }
  if (wanted > (size_t)alloc->num_free_pages) {
    return kTvmErrorPlatformNoMemory;
  }
  while (i < alloc->num_pages) {
    const uint32_t entry = alloc->page_table[i];
    if (entry == 0U) {
      uint32_t run = 0U;
      while (((i + run) < alloc->num_pages) && (alloc->page_table[i + run] == 0U) && ((size_t)run < wanted)) {
        run++;
      }
      if ((size_t)run == wanted) {
        uint32_t j;
        alloc->page_table[i] = run;
        for (j = 1U; j < run; j++) {
          alloc->page_table[i + j] = TVM_PAGE_CONTINUATION;
        }
        alloc->num_free_pages -= run;
        *out_ptr = (void*)&alloc->pool[(size_t)i * TVM_CRT_PAGE_SIZE_BYTES];
        return kTvmErrorNoError;
      }
      i += run;
    } else if (entry == TVM_PAGE_CONTINUATION) {
      i++; /* not reached for a consistent table: runs are skipped from their head */
    } else {
      i += entry;
    }
  }
  return kTvmErrorPlatformNoMemory;
}

tvm_crt_error_t TVMPageAllocator_Free(TVMPageAllocator* alloc, void* ptr) {
  uintptr_t offset;
  size_t index;
  uint32_t run;
  uint32_t j;
  tvm_crt_error_t err;
  if ((alloc == NULL) || (alloc->page_table == NULL) || (ptr == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  err = debug_check(alloc);
  if (err != kTvmErrorNoError) {
    return err;
  }
  /* Integer arithmetic: ptr may point anywhere, and comparing unrelated pointers is undefined. */
  offset = (uintptr_t)ptr - (uintptr_t)alloc->pool;
  if (((uintptr_t)ptr < (uintptr_t)alloc->pool) || ((offset % (uintptr_t)TVM_CRT_PAGE_SIZE_BYTES) != 0U)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  index = (size_t)(offset / (uintptr_t)TVM_CRT_PAGE_SIZE_BYTES);
  if (index >= (size_t)alloc->num_pages) {
    return kTvmErrorPlatformInvalidArgument;
  }
  run = alloc->page_table[index];
  if ((run == 0U) || (run == TVM_PAGE_CONTINUATION)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  for (j = 0U; j < run; j++) {
    alloc->page_table[index + j] = 0U;
  }
  alloc->num_free_pages += run;
#if TVM_CRT_DEBUG
  (void)memset(ptr, (int)TVM_CRT_DEBUG_FREED_BYTE, (size_t)run * TVM_CRT_PAGE_SIZE_BYTES);
#endif
  return kTvmErrorNoError;
}

uint32_t TVMPageAllocator_LargestFreeRun(const TVMPageAllocator* alloc) {
  uint32_t best = 0U;
  uint32_t current = 0U;
  uint32_t i;
  if ((alloc != NULL) && (alloc->page_table != NULL)) {
    for (i = 0U; i < alloc->num_pages; i++) {
      if (alloc->page_table[i] == 0U) {
        current++;
        if (current > best) {
          best = current;
        }
      } else {
        current = 0U;
      }
    }
  }
  return best;
}
