/*
 * stack_allocator.c -- LIFO allocator for workspaces (see tvm/runtime/crt/stack_allocator.h).
 *
 * Block layout, from an aligned `top`:  | header (rounded up to the alignment) | data ... (rounded up) |
 * The header records the previous top and the previous newest block, plus a check word; it is copied
 * with memcpy, so any TVM_CRT_ALLOC_ALIGNMENT_BYTES works. Free accepts only the newest block's pointer
 * and a header whose check word still matches (a block overrun that hit it is reported as a bad free).
 */
#include <string.h>
#include <tvm/runtime/crt/stack_allocator.h>

#define ALIGN ((size_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES)
#define CHECK_SALT ((size_t)0x5a17c0deU)

typedef struct {
  size_t prev_top;
  size_t prev_last;
  size_t check;
} BlockHeader;

#define HEADER_BYTES (((sizeof(BlockHeader) + ALIGN) - 1U) & ~(ALIGN - 1U))

static size_t header_check(size_t prev_top, size_t prev_last);

static size_t header_check(size_t prev_top, size_t prev_last) {
  return (prev_top ^ (prev_last * 31U)) ^ CHECK_SALT;
}

tvm_crt_error_t TVMStackAllocator_Create(TVMStackAllocator* alloc, uint8_t* buffer, size_t buffer_size_bytes) {
  uintptr_t start;
  size_t pad;
  if ((alloc == NULL) || (buffer == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  start = (uintptr_t)buffer;
  pad = (size_t)((ALIGN - (size_t)(start % (uintptr_t)ALIGN)) % ALIGN);
  if ((buffer_size_bytes < pad) || ((buffer_size_bytes - pad) < HEADER_BYTES)) {
    (void)memset((void*)alloc, 0, sizeof(*alloc));
    return kTvmErrorBufferTooSmall;
  }
  alloc->base = &buffer[pad];
  alloc->size = (buffer_size_bytes - pad) & ~(ALIGN - 1U);
  alloc->top = 0U;
  alloc->last = SIZE_MAX;
  alloc->peak = 0U;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMStackAllocator_Allocate(TVMStackAllocator* alloc, size_t num_bytes, void** out_ptr) {
  size_t data_bytes;
  size_t need;
  BlockHeader header;
  if ((alloc == NULL) || (alloc->base == NULL) || (out_ptr == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  *out_ptr = NULL;
  if (num_bytes > (SIZE_MAX - ALIGN - HEADER_BYTES)) {
    return kTvmErrorPlatformNoMemory;
  }
  data_bytes = ((num_bytes + ALIGN) - 1U) & ~(ALIGN - 1U);
  need = HEADER_BYTES + data_bytes;
  if (need > (alloc->size - alloc->top)) {
    return kTvmErrorPlatformNoMemory;
  }
  header.prev_top = alloc->top;
  header.prev_last = alloc->last;
  header.check = header_check(header.prev_top, header.prev_last);
  (void)memcpy((void*)&alloc->base[alloc->top], (const void*)&header, sizeof(header));
  alloc->last = alloc->top + HEADER_BYTES;
  alloc->top += need;
  if (alloc->top > alloc->peak) {
    alloc->peak = alloc->top;
  }
  *out_ptr = (void*)&alloc->base[alloc->last];
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMStackAllocator_Free(TVMStackAllocator* alloc, void* ptr) {
  BlockHeader header;
  if ((alloc == NULL) || (alloc->base == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  if ((ptr == NULL) || (alloc->last == SIZE_MAX) || (ptr != (void*)&alloc->base[alloc->last])) {
    return kTvmErrorPlatformStackAllocBadFree;
  }
  (void)memcpy((void*)&header, (const void*)&alloc->base[alloc->last - HEADER_BYTES], sizeof(header));
  if ((header.check != header_check(header.prev_top, header.prev_last)) ||
      (header.prev_top != (alloc->last - HEADER_BYTES))) {
    return kTvmErrorPlatformStackAllocBadFree;
  }
  alloc->top = header.prev_top;
  alloc->last = header.prev_last;
  return kTvmErrorNoError;
}

void TVMStackAllocator_Reset(TVMStackAllocator* alloc) {
  if (alloc != NULL) {
    alloc->top = 0U;
    alloc->last = SIZE_MAX;
  }
}
