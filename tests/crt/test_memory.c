/*
 * test_memory.c -- the stack (LIFO) allocator and the page allocator over caller buffers: alignment,
 * LIFO misuse, exhaustion, bad frees, first fit, and no write outside the caller's buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <tvm/runtime/crt/page_allocator.h>
#include <tvm/runtime/crt/stack_allocator.h>

#define ALIGN TVM_CRT_ALLOC_ALIGNMENT_BYTES
#define PAGE TVM_CRT_PAGE_SIZE_BYTES
#define GUARD 64
/* Bytes of a buffer holding exactly n pages: pages, page table, worst-case alignment padding. */
#define POOL_BYTES(n) ((n) * PAGE + (n) * 4 + ALIGN + 3)

/* Room for the largest buffer the tests ask for (16 pages at an offset of up to 7), whatever the page size. */
static uint8_t g_storage[GUARD + POOL_BYTES(16) + 8 + GUARD];

/* A caller buffer of `size` bytes at `offset` past an aligned point, with guard bytes around it. */
static uint8_t* guarded_buffer(size_t size, size_t offset) {
  memset(g_storage, 0xcd, sizeof(g_storage));
  assert_true(GUARD + offset + size + GUARD <= sizeof(g_storage));
  return &g_storage[GUARD + offset];
}

static void assert_guards_intact(const uint8_t* buffer, size_t size) {
  const uint8_t* p;
  for (p = g_storage; p < buffer; p++) {
    assert_int_equal(*p, 0xcd);
  }
  for (p = buffer + size; p < g_storage + sizeof(g_storage); p++) {
    assert_int_equal(*p, 0xcd);
  }
}

/* ---- stack allocator ------------------------------------------------------------------------------ */
static void stack_alignment_any_buffer(void** state) {
  size_t offset, i;
  (void)state;
  for (offset = 0; offset < 2 * ALIGN; offset++) {
    const size_t size = 1000;
    uint8_t* buf = guarded_buffer(size, offset);
    TVMStackAllocator a;
    void* p[6];
    const size_t sizes[6] = {1, 0, 3, ALIGN, ALIGN + 1, 17};
    assert_int_equal(TVMStackAllocator_Create(&a, buf, size), kTvmErrorNoError);
    for (i = 0; i < 6; i++) {
      assert_int_equal(TVMStackAllocator_Allocate(&a, sizes[i], &p[i]), kTvmErrorNoError);
      assert_int_equal((uintptr_t)p[i] % ALIGN, 0);
      assert_true((uint8_t*)p[i] >= buf && (uint8_t*)p[i] + sizes[i] <= buf + size);
      memset(p[i], 0x11 * (int)(i + 1), sizes[i]);
      if (i > 0) {
        assert_true((uint8_t*)p[i] >= (uint8_t*)p[i - 1] + sizes[i - 1]); /* no overlap */
      }
    }
    for (i = 6; i > 0; i--) {
      assert_int_equal(TVMStackAllocator_Free(&a, p[i - 1]), kTvmErrorNoError);
    }
    assert_int_equal(a.top, 0);
    assert_guards_intact(buf, size);
  }
}

static void stack_lifo_misuse_detected(void** state) {
  uint8_t* buf = guarded_buffer(512, 0);
  TVMStackAllocator a;
  void *p1, *p2, *p3;
  size_t top;
  (void)state;
  assert_int_equal(TVMStackAllocator_Create(&a, buf, 512), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 8, &p1), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 8, &p2), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 8, &p3), kTvmErrorNoError);
  top = a.top;
  assert_int_equal(TVMStackAllocator_Free(&a, p1), kTvmErrorPlatformStackAllocBadFree);
  assert_int_equal(TVMStackAllocator_Free(&a, p2), kTvmErrorPlatformStackAllocBadFree);
  assert_int_equal(TVMStackAllocator_Free(&a, (uint8_t*)p3 + 1), kTvmErrorPlatformStackAllocBadFree);
  assert_int_equal(TVMStackAllocator_Free(&a, NULL), kTvmErrorPlatformStackAllocBadFree);
  assert_int_equal(TVMStackAllocator_Free(&a, &top), kTvmErrorPlatformStackAllocBadFree);
  assert_int_equal(a.top, top); /* refused frees change nothing */
  assert_int_equal(TVMStackAllocator_Free(&a, p3), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Free(&a, p3), kTvmErrorPlatformStackAllocBadFree); /* double free */
  assert_int_equal(TVMStackAllocator_Free(&a, p2), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Free(&a, p1), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Free(&a, p1), kTvmErrorPlatformStackAllocBadFree); /* empty */
}

static void stack_header_overrun_detected(void** state) {
  uint8_t* buf = guarded_buffer(512, 0);
  TVMStackAllocator a;
  void *p1, *p2;
  (void)state;
  assert_int_equal(TVMStackAllocator_Create(&a, buf, 512), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 16, &p1), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 16, &p2), kTvmErrorNoError);
  /* p1's user wrote past its end, over p2's header */
  memset((uint8_t*)p1 + 16, 0x77, (size_t)((uint8_t*)p2 - ((uint8_t*)p1 + 16)));
  assert_int_equal(TVMStackAllocator_Free(&a, p2), kTvmErrorPlatformStackAllocBadFree);
}

static void stack_exhaustion(void** state) {
  uint8_t* buf = guarded_buffer(256, 3);
  TVMStackAllocator a;
  void* p = (void*)1;
  void* q;
  size_t n = 0, top;
  (void)state;
  assert_int_equal(TVMStackAllocator_Create(&a, buf, 256), kTvmErrorNoError);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 257, &p), kTvmErrorPlatformNoMemory);
  assert_null(p);
  assert_int_equal(TVMStackAllocator_Allocate(&a, SIZE_MAX, &p), kTvmErrorPlatformNoMemory);
  assert_int_equal(TVMStackAllocator_Allocate(&a, SIZE_MAX - ALIGN + 1, &p), kTvmErrorPlatformNoMemory);
  while (TVMStackAllocator_Allocate(&a, 10, &q) == kTvmErrorNoError) {
    memset(q, 0xee, 10);
    n++;
    assert_true(n < 256);
  }
  assert_true(n > 0);
  top = a.top;
  assert_int_equal(TVMStackAllocator_Allocate(&a, 0, &p), kTvmErrorPlatformNoMemory);
  assert_int_equal(a.top, top);
  assert_int_equal(a.peak, top);
  assert_guards_intact(buf, 256);
  TVMStackAllocator_Reset(&a);
  assert_int_equal(a.top, 0);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 100, &p), kTvmErrorNoError);
}

static void stack_bad_create(void** state) {
  uint8_t buf[8];
  TVMStackAllocator a;
  void* p;
  (void)state;
  assert_int_equal(TVMStackAllocator_Create(&a, buf, 0), kTvmErrorBufferTooSmall);
  assert_int_equal(TVMStackAllocator_Allocate(&a, 1, &p), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMStackAllocator_Create(NULL, buf, 8), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMStackAllocator_Create(&a, NULL, 8), kTvmErrorPlatformInvalidArgument);
}

/* ---- page allocator ------------------------------------------------------------------------------- */
static void page_layout_and_alignment(void** state) {
  size_t offset;
  (void)state;
  for (offset = 0; offset < 8; offset++) {
    const size_t size = POOL_BYTES(8);
    uint8_t* buf = guarded_buffer(size, offset);
    TVMPageAllocator a;
    void* p[8];
    int i;
    assert_int_equal(TVMPageAllocator_Create(&a, buf, size), kTvmErrorNoError);
    assert_int_equal(a.num_pages, 8);
    assert_int_equal(a.num_free_pages, a.num_pages);
    for (i = 0; i < (int)a.num_pages; i++) {
      assert_int_equal(TVMPageAllocator_Allocate(&a, PAGE, &p[i]), kTvmErrorNoError);
      assert_int_equal((uintptr_t)p[i] % ALIGN, 0);
      assert_true((uint8_t*)p[i] >= buf && (uint8_t*)p[i] + PAGE <= buf + size);
      memset(p[i], i, PAGE);
    }
    assert_int_equal(TVMPageAllocator_Allocate(&a, 1, &p[0]), kTvmErrorPlatformNoMemory);
    assert_null(p[0]);
    assert_guards_intact(buf, size);
  }
}

static void page_first_fit_runs(void** state) {
  uint8_t* buf = guarded_buffer(POOL_BYTES(16), 0);
  TVMPageAllocator a;
  void *a1, *a2, *a3, *a4, *b;
  (void)state;
  assert_int_equal(TVMPageAllocator_Create(&a, buf, POOL_BYTES(16)), kTvmErrorNoError);
  assert_int_equal(a.num_pages, 16);
  assert_int_equal(TVMPageAllocator_Allocate(&a, 2 * PAGE, &a1), kTvmErrorNoError);   /* pages 0-1 */
  assert_int_equal(TVMPageAllocator_Allocate(&a, PAGE + 1, &a2), kTvmErrorNoError);   /* 2-3 */
  assert_int_equal(TVMPageAllocator_Allocate(&a, 0, &a3), kTvmErrorNoError);          /* 4 (0 bytes: 1 page) */
  assert_int_equal(TVMPageAllocator_Allocate(&a, 3 * PAGE, &a4), kTvmErrorNoError);   /* 5-7 */
  assert_ptr_equal((uint8_t*)a2, (uint8_t*)a1 + 2 * PAGE);
  assert_ptr_equal((uint8_t*)a3, (uint8_t*)a1 + 4 * PAGE);
  assert_ptr_equal((uint8_t*)a4, (uint8_t*)a1 + 5 * PAGE);
  assert_int_equal(a.num_free_pages, 8);
  assert_int_equal(TVMPageAllocator_Free(&a, a2), kTvmErrorNoError);
  /* a 3-page request skips the 2-page hole; a 2-page one takes it */
  assert_int_equal(TVMPageAllocator_Allocate(&a, 3 * PAGE, &b), kTvmErrorNoError);
  assert_ptr_equal((uint8_t*)b, (uint8_t*)a1 + 8 * PAGE);
  assert_int_equal(TVMPageAllocator_Free(&a, b), kTvmErrorNoError);
  assert_int_equal(TVMPageAllocator_Allocate(&a, 2 * PAGE, &b), kTvmErrorNoError);
  assert_ptr_equal(b, a2);
  assert_int_equal(TVMPageAllocator_LargestFreeRun(&a), 8);
  /* fragmentation: 8 free pages in one run, but 9 do not fit */
  assert_int_equal(TVMPageAllocator_Allocate(&a, 9 * PAGE, &b), kTvmErrorPlatformNoMemory);
  assert_int_equal(TVMPageAllocator_Free(&a, a3), kTvmErrorNoError);
  assert_int_equal(a.num_free_pages, 9);
  assert_int_equal(TVMPageAllocator_Allocate(&a, 9 * PAGE, &b), kTvmErrorPlatformNoMemory);
  assert_int_equal(TVMPageAllocator_LargestFreeRun(&a), 8);
}

static void page_bad_frees(void** state) {
  uint8_t* buf = guarded_buffer(8 * PAGE + 256, 1);
  TVMPageAllocator a;
  void *p, *q;
  uint32_t free_pages;
  int local;
  (void)state;
  assert_int_equal(TVMPageAllocator_Create(&a, buf, 8 * PAGE + 256), kTvmErrorNoError);
  assert_int_equal(TVMPageAllocator_Allocate(&a, 3 * PAGE, &p), kTvmErrorNoError);
  assert_int_equal(TVMPageAllocator_Allocate(&a, PAGE, &q), kTvmErrorNoError);
  free_pages = a.num_free_pages;
  assert_int_equal(TVMPageAllocator_Free(&a, (uint8_t*)p + PAGE), kTvmErrorPlatformInvalidArgument); /* mid-run */
  assert_int_equal(TVMPageAllocator_Free(&a, (uint8_t*)p + 1), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPageAllocator_Free(&a, (uint8_t*)q + PAGE), kTvmErrorPlatformInvalidArgument); /* free page */
  assert_int_equal(TVMPageAllocator_Free(&a, &local), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPageAllocator_Free(&a, buf), kTvmErrorPlatformInvalidArgument); /* the page table */
  assert_int_equal(TVMPageAllocator_Free(&a, NULL), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(a.num_free_pages, free_pages);
  assert_int_equal(TVMPageAllocator_Free(&a, p), kTvmErrorNoError);
  assert_int_equal(TVMPageAllocator_Free(&a, p), kTvmErrorPlatformInvalidArgument); /* double free */
  assert_int_equal(a.num_free_pages, free_pages + 3);
  assert_guards_intact(buf, 8 * PAGE + 256);
}

static void page_too_small_and_huge(void** state) {
  uint8_t* buf = guarded_buffer(PAGE + 64, 0);
  TVMPageAllocator a;
  void* p;
  (void)state;
  assert_int_equal(TVMPageAllocator_Create(&a, buf, PAGE - 1), kTvmErrorBufferTooSmall);
  assert_int_equal(TVMPageAllocator_Allocate(&a, 1, &p), kTvmErrorPlatformInvalidArgument);
  assert_int_equal(TVMPageAllocator_Create(&a, buf, PAGE + 64), kTvmErrorNoError);
  assert_int_equal(a.num_pages, 1);
  assert_int_equal(TVMPageAllocator_Allocate(&a, SIZE_MAX, &p), kTvmErrorPlatformNoMemory);
  assert_int_equal(TVMPageAllocator_Allocate(&a, PAGE + 1, &p), kTvmErrorPlatformNoMemory);
  assert_int_equal(TVMPageAllocator_Allocate(&a, PAGE, &p), kTvmErrorNoError);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(stack_alignment_any_buffer),
      cmocka_unit_test(stack_lifo_misuse_detected),
      cmocka_unit_test(stack_header_overrun_detected),
      cmocka_unit_test(stack_exhaustion),
      cmocka_unit_test(stack_bad_create),
      cmocka_unit_test(page_layout_and_alignment),
      cmocka_unit_test(page_first_fit_runs),
      cmocka_unit_test(page_bad_frees),
      cmocka_unit_test(page_too_small_and_huge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
