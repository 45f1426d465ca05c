/*
 * utvm_platform.h -- what platform.c (the TVMPlatform* hooks) needs from the firmware's application.
 */
#ifndef UTVM_PLATFORM_H_
#define UTVM_PLATFORM_H_

#include <tvm/runtime/crt/error_codes.h>

/*! 1: TVMPlatformAbort resets the board (RPC firmware); 0: it ends the emulation (standalone firmware). */
#ifndef UTVM_ABORT_RESETS
#define UTVM_ABORT_RESETS 0
#endif

/*! Exit status of a standalone firmware whose runtime called TVMPlatformAbort. */
#define UTVM_EXIT_ABORT 86

/*! Tell the user why the runtime aborted, on whatever channel the firmware has (implemented by main_*.c). */
void utvm_app_report_abort(tvm_crt_error_t code);

#endif /* UTVM_PLATFORM_H_ */
