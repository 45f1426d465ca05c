/*
 * crt_backend_api.c -- the API generated operator code calls (c_backend_api.h): workspaces from a LIFO
 * stack allocator over a static buffer of TVM_CRT_WORKSPACE_SIZE_BYTES, global function lookup, and
 * parallel launch (always one task, run inline).
 *
 * The workspace is set up by TVMInitializeRuntime, or on first use when a firmware (e.g. a standalone
 * AOT deployment) never calls it.
 */
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/stack_allocator.h>

#include "crt_internal.h"

static TVMStackAllocator g_workspace;
static uint8_t g_workspace_ready = 0U;

static tvm_crt_error_t ensure_workspace(void);

static tvm_crt_error_t ensure_workspace(void) {
  tvm_crt_error_t err = kTvmErrorNoError;
  if (g_workspace_ready == 0U) {
    err = TVMCrtWorkspace_Reset();
  }
  return err;
}

tvm_crt_error_t TVMCrtWorkspace_Reset(void) {
  /* The stack allocator aligns its base itself, so a plain byte array suffices. */
  static uint8_t workspace_buffer[TVM_CRT_WORKSPACE_SIZE_BYTES];
  const tvm_crt_error_t err = TVMStackAllocator_Create(&g_workspace, workspace_buffer, sizeof(workspace_buffer));
  g_workspace_ready = (err == kTvmErrorNoError) ? 1U : 0U;
  return err;
}

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint) {
  void* ptr = NULL;
  tvm_crt_error_t err;
  (void)device_type;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  err = ensure_workspace();
  if (err != kTvmErrorNoError) {
    (void)TVMCrtError_Set(err, "TVMBackendAllocWorkspace: the workspace could not be set up");
  } else if (nbytes > (uint64_t)SIZE_MAX) {
    (void)TVMCrtError_Set(kTvmErrorPlatformNoMemory, "TVMBackendAllocWorkspace: %lu MiB do not fit in memory",
                          (unsigned long)(nbytes >> 20U));
  } else {
    err = TVMStackAllocator_Allocate(&g_workspace, (size_t)nbytes, &ptr);
    if (err != kTvmErrorNoError) {
      ptr = NULL;
      (void)TVMCrtError_Set(err,
                            "TVMBackendAllocWorkspace: no room for %lu bytes (%lu of %lu bytes in use; "
                            "TVM_CRT_WORKSPACE_SIZE_BYTES)",
                            (unsigned long)nbytes, (unsigned long)g_workspace.top,
                            (unsigned long)g_workspace.size);
    }
  }
  return ptr;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  tvm_crt_error_t err;
  (void)device_type;
  (void)device_id;
  err = ensure_workspace();
  if (err == kTvmErrorNoError) {
    err = TVMStackAllocator_Free(&g_workspace, ptr);
    if (err != kTvmErrorNoError) {
      (void)TVMCrtError_Set(err,
                            "TVMBackendFreeWorkspace: %p is not the newest block (free in reverse order)",
                            ptr);
    }
  }
  return (int)err;
}

int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out) {
  /* As TVM's ModuleNode::GetFuncFromEnv: the calling module's own functions first, then the global
   * registry. In the CRT, mod_node is NULL or the `const TVMModule*` of the calling code (generated code
   * passes the module holding the packed wrappers of user operators, docs/custom_ops.md). */
  const TVMModule* mod = (const TVMModule*)mod_node;
  TVMModuleHandle handle = NULL;
  tvm_function_index_t index = 0U;
  tvm_crt_error_t err;
  int rc;
  if ((mod != NULL) && (out != NULL) && (func_name != NULL) && (mod->registry != NULL) &&
      (TVMFuncRegistry_Lookup(mod->registry, func_name, &index) == kTvmErrorNoError)) {
    err = TVMModCreateFromCModule(mod, &handle); /* sets the message when no module slot is free */
    rc = (err == kTvmErrorNoError) ? TVMModGetFunction(handle, func_name, 0, out) : (int)err;
  } else {
    rc = TVMFuncGetGlobal(func_name, out);
  }
  return rc;
}

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  TVMParallelGroupEnv env;
  (void)num_task; /* always one task */
  if (flambda == NULL) {
    return (int)TVMCrtError_Set(kTvmErrorFunctionCallInvalidArg, "TVMBackendParallelLaunch: NULL lambda");
  }
  env.sync_handle = NULL;
  env.num_task = 1;
  return flambda(0, &env, cdata);
}

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  (void)task_id;
  (void)penv;
  return 0; /* one task: nothing to wait for */
}
