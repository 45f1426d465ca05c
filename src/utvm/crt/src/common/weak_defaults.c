/*
 * weak_defaults.c -- weak default definitions that firmware replaces by defining the symbol itself.
 *
 * Each lives here, in its own object, so that linking libcommon never forces a default over a strong
 * definition. Note for static archives: the linker does not pull an archive member just to replace a
 * weak definition, so link generated code (TVMSystemLibEntryPoint) as object files, or list its archive
 * before libcommon.
 */
#include <stddef.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/module.h>

/* No system library: runtime.SystemLib reports kTvmErrorSystemLibMissing. */
TVM_CRT_WEAK const TVMModule* TVMSystemLibEntryPoint(void) { return NULL; }

/* No table of named system libraries: runtime.SystemLib(name) finds no model of any name. */
TVM_CRT_WEAK const TVMSystemLibTableEntry* TVMSystemLibTable(size_t* num_entries) {
  if (num_entries != NULL) {
    *num_entries = 0U;
  }
  return NULL;
}

/* Log sink: drop the message. The RPC server and ports override this. */
TVM_CRT_WEAK void TVMPlatformLog(int level, const char* message, size_t length) {
  (void)level;
  (void)message;
  (void)length;
}
