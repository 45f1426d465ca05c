/*
 * utvm_test_functions.h -- the test library of the evaluation firmware: global functions the link tests
 * call over RPC. Platform neutral (C99, CRT only): any platform may link utvm_test_functions.c.
 *
 *   testing.add_one(a, b)     b = a + 1 elementwise; a, b float32 tensors of the same shape. Returns nothing.
 *   testing.fail(message)     fails with `message` as the error text (the host raises RemoteError with it).
 *   testing.log(message)      sends `message` to the host as a session log message; returns 0.
 *   testing.sleep_ms(n)       runs for n milliseconds (0 <= n <= 600000); returns n.
 *
 * The platform provides UTVMPlatformSleepMs. Register after MicroTVMRpcServerInit (which resets the
 * global registry).
 */
#ifndef UTVM_TEST_FUNCTIONS_H_
#define UTVM_TEST_FUNCTIONS_H_

#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Register the four testing.* globals. */
tvm_crt_error_t UTVMTestFunctions_Register(void);

/*! \brief Platform hook: return after about `ms` milliseconds (sleeping or busy-waiting). Must not use
 * the TVMPlatformTimer (the time evaluator may be timing the caller). */
void UTVMPlatformSleepMs(uint32_t ms);

#ifdef __cplusplus
}
#endif

#endif /* UTVM_TEST_FUNCTIONS_H_ */
