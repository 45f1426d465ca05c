/*
 * overlapping_allocator.c -- a TEST-ONLY broken port (utvm.acceptance.faults, fault "overlapping-allocator"):
 * TVMPlatformMemoryAllocate/Free as a bump allocator with a classic bug. The bump pointer advances by half of
 * each block (rounded up to TVM_CRT_ALLOC_ALIGNMENT_BYTES), so every block overlaps the next one. Blocks are
 * aligned, Free accepts every pointer it handed out, and the pool is rewound when the last block is freed:
 * the port never crashes, it only hands out memory twice, which is what `utvm acceptance`'s allocator check
 * must catch. The kit appends this file to the platform's own port with that port's two memory hooks renamed.
 */
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#define UTVM_ACC_FAULT_POOL_BYTES (256u * 1024u)

static uint8_t g_acc_fault_pool[UTVM_ACC_FAULT_POOL_BYTES] __attribute__((aligned(TVM_CRT_ALLOC_ALIGNMENT_BYTES)));
static size_t g_acc_fault_next;
static size_t g_acc_fault_live;

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  const size_t align = (size_t)TVM_CRT_ALLOC_ALIGNMENT_BYTES;
  size_t step;
  (void)dev;
  if (out_ptr == NULL) {
    return kTvmErrorPlatformInvalidArgument;
  }
  *out_ptr = NULL;
  if (num_bytes > (UTVM_ACC_FAULT_POOL_BYTES - g_acc_fault_next)) {
    return kTvmErrorPlatformNoMemory;
  }
  step = ((num_bytes / 2u) + align - 1u) & ~(align - 1u); /* THE BUG: half a block instead of a whole one */
  if (step == 0u) {
    step = align;
  }
  *out_ptr = &g_acc_fault_pool[g_acc_fault_next];
  g_acc_fault_next += step;
  g_acc_fault_live++;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  const uintptr_t at = (uintptr_t)ptr;
  const uintptr_t base = (uintptr_t)g_acc_fault_pool;
  (void)dev;
  if ((at < base) || (at >= base + UTVM_ACC_FAULT_POOL_BYTES) || (g_acc_fault_live == 0u)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  g_acc_fault_live--;
  if (g_acc_fault_live == 0u) {
    g_acc_fault_next = 0u;
  }
  return kTvmErrorNoError;
}
