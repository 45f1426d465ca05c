/*
 * func_registry.c -- TVMFuncRegistry lookup (works on const, flash-resident registries) and
 * TVMMutableFuncRegistry over one caller buffer. See tvm/runtime/crt/func_registry.h for the layout.
 *
 * Mutable registry buffer layout (names from the front, pointers from the back):
 *
 *   buffer                                                        ptr_end (aligned down)
 *   | count(2) | name0 \0 | name1 \0 | ... | \0 | free ... | f0 | f1 | ... | fn-1 |
 *                                                           ^ registry.funcs
 *
 * Adding a function appends its name before the final NUL and moves the pointer array down one slot, so
 * funcs[i] always belongs to the i-th name. Full means the names would run into the pointers. A debug build
 * (TVM_CRT_DEBUG) checks that layout before each change (debug_check_mutable) and refuses to change a broken
 * registry.
 */
#include <string.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/func_registry.h>

#include "crt_internal.h"

/* Byte of the names blob after the count and every name, plus the final NUL. */
#define NAMES_OVERHEAD_BYTES (TVM_FUNC_REGISTRY_COUNT_BYTES + 1U)
#define FUNC_PTR_BYTES (sizeof(TVMBackendPackedCFunc))

static uint16_t read_count(const char* names);
static void write_count(char* names, uint16_t count);
static size_t names_used_bytes(const TVMFuncRegistry* reg);
static uint8_t* pointer_region_end(const TVMMutableFuncRegistry* reg);
static TVMBackendPackedCFunc* as_funcs(uint8_t* bytes);
static tvm_crt_error_t debug_check_mutable(const TVMMutableFuncRegistry* reg);

static uint16_t read_count(const char* names) {
  const uint8_t lo = (uint8_t)names[0];
  const uint8_t hi = (uint8_t)names[1];
  return (uint16_t)((uint16_t)lo | (uint16_t)((uint16_t)hi << 8U));
}

static void write_count(char* names, uint16_t count) {
  names[0] = (char)(uint8_t)(count & 0xffU);
  names[1] = (char)(uint8_t)((count >> 8U) & 0xffU);
}

/* strlen that stops at max_len (returns max_len when no NUL is within the first max_len bytes). */
size_t TVMCrtBoundedStrlen(const char* s, size_t max_len) {
  size_t n = 0U;
  while ((n < max_len) && (s[n] != '\0')) {
    n++;
  }
  return n;
}

/* Bytes of the names blob: count, every name with its NUL, and the final NUL. */
static size_t names_used_bytes(const TVMFuncRegistry* reg) {
  const uint16_t count = read_count(reg->names);
  size_t offset = TVM_FUNC_REGISTRY_COUNT_BYTES;
  uint16_t i;
  for (i = 0U; i < count; i++) {
    offset += strlen(&reg->names[offset]) + 1U;
  }
  return offset + 1U;
}

/* One past the last byte usable for the pointer array: the buffer end, aligned down for pointers. */
static uint8_t* pointer_region_end(const TVMMutableFuncRegistry* reg) {
  const uintptr_t end = (uintptr_t)reg->buffer + reg->buffer_size_bytes;
  const uintptr_t aligned = end - (end % (uintptr_t)FUNC_PTR_BYTES);
  return &reg->buffer[aligned - (uintptr_t)reg->buffer];
}

/* The pointer region is function-pointer aligned (pointer_region_end), so it can be viewed as an array. */
static TVMBackendPackedCFunc* as_funcs(uint8_t* bytes) {
  void* region = bytes;
  return region;
}

/* A debug build's check of a mutable registry's layout: the names (count of them, each non-empty, then the final
 * NUL) end before the pointers, which are the last `count` slots of the buffer and none NULL. Walks the names
 * within the buffer only, so an overwritten count or a lost NUL cannot make it read past it. Nothing in a
 * release build. */
static tvm_crt_error_t debug_check_mutable(const TVMMutableFuncRegistry* reg) {
  tvm_crt_error_t err = kTvmErrorNoError;
#if TVM_CRT_DEBUG
  const char* names = reg->registry.names;
  const uint16_t count = read_count(names);
  uint8_t* ptr_end = pointer_region_end(reg);
  const ptrdiff_t region_signed = ptr_end - reg->buffer;
  const size_t region = (size_t)region_signed;
  const size_t ptr_bytes = (size_t)count * FUNC_PTR_BYTES;
  size_t offset = TVM_FUNC_REGISTRY_COUNT_BYTES;
  uint16_t i;
  if ((names != (const char*)reg->buffer) || (ptr_bytes > region)) {
    err = kTvmErrorPlatformCheckFailure;
  } else {
    const size_t names_end = region - ptr_bytes; /* the names must end before this offset */
    const TVMBackendPackedCFunc* funcs = as_funcs(ptr_end);
    funcs = &funcs[-(ptrdiff_t)count];
    if (reg->registry.funcs != funcs) {
      err = kTvmErrorPlatformCheckFailure;
    }
    for (i = 0U; (i < count) && (err == kTvmErrorNoError); i++) {
      const size_t len = (offset < names_end) ? TVMCrtBoundedStrlen(&names[offset], names_end - offset) : 0U;
      if ((len == 0U) || ((offset + len) >= names_end) || (funcs[i] == NULL)) {
        err = kTvmErrorPlatformCheckFailure;
      }
      offset += len + 1U;
    }
    if ((err == kTvmErrorNoError) && ((offset >= names_end) || (names[offset] != '\0'))) {
      err = kTvmErrorPlatformCheckFailure;
    }
  }
#else
  (void)reg;
#endif
  return err;
}

uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg) {
  uint16_t count = 0U;
  if ((reg != NULL) && (reg->names != NULL)) {
    count = read_count(reg->names);
  }
  return count;
}

tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index) {
  tvm_crt_error_t err = kTvmErrorFunctionNameNotFound;
  if ((reg == NULL) || (reg->names == NULL) || (name == NULL) || (function_index == NULL)) {
    err = kTvmErrorPlatformInvalidArgument;
  } else {
    const uint16_t count = read_count(reg->names);
    const char* candidate = &reg->names[TVM_FUNC_REGISTRY_COUNT_BYTES];
    uint16_t i;
    for (i = 0U; i < count; i++) {
      if (strcmp(candidate, name) == 0) {
        *function_index = (tvm_function_index_t)i;
        err = kTvmErrorNoError;
        break;
      }
      candidate = &candidate[strlen(candidate) + 1U];
    }
  }
  return err;
}

tvm_crt_error_t TVMFuncRegistry_GetByIndex(const TVMFuncRegistry* reg, tvm_function_index_t function_index,
                                           TVMBackendPackedCFunc* out_func) {
  tvm_crt_error_t err = kTvmErrorFunctionIndexInvalid;
  if ((reg == NULL) || (reg->names == NULL) || (reg->funcs == NULL) || (out_func == NULL)) {
    err = kTvmErrorPlatformInvalidArgument;
  } else if (function_index < read_count(reg->names)) {
    *out_func = reg->funcs[function_index];
    err = kTvmErrorNoError;
  } else {
    /* out of range: err stays kTvmErrorFunctionIndexInvalid */
  }
  return err;
}

tvm_crt_error_t TVMMutableFuncRegistry_Create(TVMMutableFuncRegistry* reg, uint8_t* buffer,
                                              size_t buffer_size_bytes) {
  tvm_crt_error_t err = kTvmErrorNoError;
  if ((reg == NULL) || (buffer == NULL)) {
    err = kTvmErrorPlatformInvalidArgument;
  } else {
    uint8_t* ptr_end;
    ptrdiff_t usable_signed;
    size_t usable;
    reg->buffer = buffer;
    reg->buffer_size_bytes = buffer_size_bytes;
    ptr_end = pointer_region_end(reg);
    usable_signed = ptr_end - buffer;
    usable = (size_t)usable_signed;
    /* Room for the smallest registry holding anything: one 1-character name and one pointer. */
    if (usable < (NAMES_OVERHEAD_BYTES + 2U + FUNC_PTR_BYTES)) {
      reg->buffer = NULL;
      reg->buffer_size_bytes = 0U;
      reg->registry.names = NULL;
      reg->registry.funcs = NULL;
      reg->max_functions = 0U;
      err = kTvmErrorBufferTooSmall;
    } else {
      char* names = (char*)buffer;
      write_count(names, 0U);
      names[TVM_FUNC_REGISTRY_COUNT_BYTES] = '\0';
      reg->registry.names = names;
      reg->registry.funcs = as_funcs(ptr_end);
      reg->max_functions = (usable - NAMES_OVERHEAD_BYTES) / (FUNC_PTR_BYTES + 2U);
      if (reg->max_functions > TVM_FUNC_REGISTRY_MAX_FUNCS) {
        reg->max_functions = TVM_FUNC_REGISTRY_MAX_FUNCS;
      }
    }
  }
  return err;
}

tvm_crt_error_t TVMMutableFuncRegistry_Set(TVMMutableFuncRegistry* reg, const char* name,
                                           TVMBackendPackedCFunc func, int override) {
  tvm_crt_error_t err;
  tvm_function_index_t index = 0U;
  size_t name_len = 0U;
  if ((reg == NULL) || (reg->buffer == NULL) || (name == NULL) || (func == NULL)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  name_len = TVMCrtBoundedStrlen(name, (size_t)TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES);
  if ((name_len == 0U) || (name_len >= (size_t)TVM_CRT_MAX_FUNCTION_NAME_LENGTH_BYTES)) {
    return kTvmErrorPlatformInvalidArgument;
  }
  err = debug_check_mutable(reg);
  if (err != kTvmErrorNoError) {
    return err;
  }
  err = TVMFuncRegistry_Lookup(&reg->registry, name, &index);
  if (err == kTvmErrorNoError) {
    if (override == 0) {
      err = kTvmErrorFunctionAlreadyDefined;
    } else {
      TVMBackendPackedCFunc* funcs = as_funcs(pointer_region_end(reg));
      const uint16_t count = read_count(reg->registry.names);
      funcs = &funcs[-(ptrdiff_t)count];
      funcs[index] = func;
    }
  } else {
    char* names = (char*)reg->buffer;
    const uint16_t count = read_count(names);
    const size_t used = names_used_bytes(&reg->registry);
    uint8_t* ptr_end = pointer_region_end(reg);
    const size_t ptr_bytes_after = ((size_t)count + 1U) * FUNC_PTR_BYTES;
    const ptrdiff_t region_signed = ptr_end - reg->buffer;
    const size_t region = (size_t)region_signed;
    /* used already counts the final NUL, which moves behind the new name. */
    if ((count >= TVM_FUNC_REGISTRY_MAX_FUNCS) || (ptr_bytes_after > region) ||
        ((used + name_len + 1U) > (region - ptr_bytes_after))) {
      err = kTvmErrorFunctionRegistryFull;
    } else {
      TVMBackendPackedCFunc* old_funcs = as_funcs(ptr_end);
      TVMBackendPackedCFunc* new_funcs;
      old_funcs = &old_funcs[-(ptrdiff_t)count];
      new_funcs = &old_funcs[-1];
      (void)memmove(new_funcs, old_funcs, (size_t)count * FUNC_PTR_BYTES);
      new_funcs[count] = func;
      (void)memcpy((void*)&names[used - 1U], (const void*)name, name_len);
      names[used - 1U + name_len] = '\0';
      names[used + name_len] = '\0';
      write_count(names, (uint16_t)(count + 1U));
      reg->registry.funcs = new_funcs;
      err = kTvmErrorNoError;
    }
  }
  return err;
}
