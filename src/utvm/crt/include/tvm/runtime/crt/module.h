/*
 * tvm/runtime/crt/module.h -- CRT modules: a module is a function registry.
 *
 * A module is registered once into a table of TVM_CRT_MAX_REGISTERED_MODULES slots and named by a
 * TVMModuleHandle. Handles are opaque 32-bit values, never NULL: ((module_index | 0x8000) << 16), i.e.
 * a function handle (docs/architecture.md §4) whose function half is empty, so one can never pass for the other.
 * A module struct may embed TVMModule as its first member to carry more state; module functions receive
 * the TVMModule* as their resource_handle.
 */
#ifndef TVM_RUNTIME_CRT_MODULE_H_
#define TVM_RUNTIME_CRT_MODULE_H_

#include <stddef.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/compiler.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/func_registry.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMModule {
  /*! \brief The module's functions; usually a const registry in flash. Not owned. */
  const TVMFuncRegistry* registry;
} TVMModule;

/*! \brief The system library: generated code defines it. Firmware without a system library links
 * a weak default returning NULL, and runtime.SystemLib then fails with kTvmErrorSystemLibMissing. */
const TVMModule* TVMSystemLibEntryPoint(void);

/*! \brief One model of a firmware that links several: its name (the model name, `tvmgen_<name>_...`) and
 * its system library's own entry point (`tvmgen_<name>_system_lib`). */
typedef struct TVMSystemLibTableEntry {
  const char* name;
  const TVMModule* (*entry_point)(void);
} TVMSystemLibTableEntry;

/*! \brief The firmware's table of named system libraries (generated into evaluation firmware by
 * utvm.evaluate.build_firmware); sets *num_entries. A weak default returns NULL and 0 (no named models:
 * only TVMSystemLibEntryPoint). TVMSystemLibEntryPoint is the firmware's default model (the first). */
const TVMSystemLibTableEntry* TVMSystemLibTable(size_t* num_entries);

/*! \brief The system library of the model `name` (an entry of TVMSystemLibTable), or NULL when the firmware
 * links no model of that name. runtime.SystemLib(name) calls it. */
const TVMModule* TVMSystemLibLookup(const char* name);

/*! \brief Register `mod` (static storage, not owned) and return its handle. Registering the same module
 * again returns the same handle. kTvmErrorModuleRegistryFull when every slot is taken,
 * kTvmErrorPlatformInvalidArgument for a NULL module or a module without a registry. Sets the last error. */
TVM_CRT_WARN_UNUSED tvm_crt_error_t TVMModCreateFromCModule(const TVMModule* mod, TVMModuleHandle* out_handle);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_MODULE_H_ */
