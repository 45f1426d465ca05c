/*
 * tvm/runtime/crt/error_codes.h -- every error the C runtime can return.
 *
 * A tvm_crt_error_t is (category << 8) | code. Zero is success. Categories (docs/architecture.md §4):
 * 1 function registry, 2 framing, 3 write stream, 4 session, 5 platform, 6 generated code,
 * 7 executor, 8 function call, 9 time evaluator, 10 parameter blobs. Numbers here are ABI: never renumber,
 * only append.
 * tests/vectors/abi.json repeats them and both the C and the Python tests check against it.
 */
#ifndef TVM_RUNTIME_CRT_ERROR_CODES_H_
#define TVM_RUNTIME_CRT_ERROR_CODES_H_

#ifdef __cplusplus
extern "C" {
#endif

#define TVM_CRT_ERROR_CATEGORY_Pos 8
#define TVM_CRT_ERROR_CATEGORY_Msk (0xffU << TVM_CRT_ERROR_CATEGORY_Pos)
#define TVM_CRT_ERROR_CODE_Pos 0
#define TVM_CRT_ERROR_CODE_Msk (0xffU << TVM_CRT_ERROR_CODE_Pos)

/* Codes below are written as literals, (category << 8) | code, so the enum needs no shifts of enum
 * constants (MISRA 10.1); DEFINE_TVM_CRT_ERROR computes the same numbers for code that wants it. */
#define DEFINE_TVM_CRT_ERROR(category, code) \
  (((category) << TVM_CRT_ERROR_CATEGORY_Pos) | ((code) << TVM_CRT_ERROR_CODE_Pos))

typedef enum {
  kTvmErrorCategoryFunctionRegistry = 1,
  kTvmErrorCategoryFraming = 2,
  kTvmErrorCategoryWriteStream = 3,
  kTvmErrorCategorySession = 4,
  kTvmErrorCategoryPlatform = 5,
  kTvmErrorCategoryGenerated = 6,
  kTvmErrorCategoryExecutor = 7,
  kTvmErrorCategoryFunctionCall = 8,
  kTvmErrorCategoryTimeEvaluator = 9,
  kTvmErrorCategoryParams = 10
} tvm_crt_error_category_t;

typedef enum {
  kTvmErrorNoError = 0,

  /* Function registry. */
  kTvmErrorFunctionNameNotFound = 0x0100,
  kTvmErrorFunctionIndexInvalid = 0x0101,
  kTvmErrorFunctionRegistryFull = 0x0102,
  kTvmErrorFunctionAlreadyDefined = 0x0103,
  kTvmErrorBufferTooSmall = 0x0104,
  kTvmErrorModuleRegistryFull = 0x0105,
  kTvmErrorModuleHandleInvalid = 0x0106,
  kTvmErrorFunctionHandleInvalid = 0x0107,
  kTvmErrorSystemLibMissing = 0x0108,

  /* Framing. */
  kTvmErrorFramingInvalidState = 0x0200,
  kTvmErrorFramingShortPacket = 0x0201,
  kTvmErrorFramingInvalidEscape = 0x0202,
  kTvmErrorFramingPayloadOverflow = 0x0203,
  kTvmErrorFramingPayloadIncomplete = 0x0204,
  kTvmErrorFramingCrcMismatch = 0x0205,
  kTvmErrorFramingPacketTooLong = 0x0206,

  /* Write stream. */
  kTvmErrorWriteStreamShortWrite = 0x0300,
  kTvmErrorWriteStreamLongWrite = 0x0301,

  /* Session. */
  kTvmErrorSessionInvalidState = 0x0400,
  kTvmErrorSessionReceiveBufferBusy = 0x0401,
  kTvmErrorSessionReceiveBufferShortWrite = 0x0402,
  kTvmErrorSessionInvalidMessage = 0x0403,

  /* Platform. */
  kTvmErrorPlatformCheckFailure = 0x0500,
  kTvmErrorPlatformMemoryManagerInitialized = 0x0501,
  kTvmErrorPlatformShutdown = 0x0502,
  kTvmErrorPlatformNoMemory = 0x0503,
  kTvmErrorPlatformTimerBadState = 0x0504,
  kTvmErrorPlatformStackAllocBadFree = 0x0505,
  kTvmErrorPlatformInvalidArgument = 0x0506,

  /* Generated code. */
  kTvmErrorGeneratedInvalidStorageId = 0x0600,
  kTvmErrorGeneratedArgumentMismatch = 0x0601,

  /* Executor. */
  kTvmErrorExecutorModuleAlreadyCreated = 0x0700,
  kTvmErrorExecutorModuleBadContext = 0x0701,
  kTvmErrorExecutorModuleNoSuchInput = 0x0702,

  /* Function call. */
  kTvmErrorFunctionCallNumArguments = 0x0800,
  kTvmErrorFunctionCallWrongArgType = 0x0801,
  kTvmErrorFunctionCallNotImplemented = 0x0802,
  kTvmErrorFunctionCallInvalidArg = 0x0803,
  kTvmErrorFunctionCallWrongReturnType = 0x0804,

  /* Time evaluator. */
  kTvmErrorTimeEvaluatorBadHandle = 0x0900,

  /* Parameter blobs (--params external; TVMSetParameters in tvm/runtime/crt/tvm_micro_runtime.h): why a
   * blob was refused, and a run that found none in its context. */
  kTvmErrorParamsBadMagic = 0x0A00,
  kTvmErrorParamsBadVersion = 0x0A01,
  kTvmErrorParamsOtherModel = 0x0A02,
  kTvmErrorParamsTruncated = 0x0A03,
  kTvmErrorParamsSizeMismatch = 0x0A04,
  kTvmErrorParamsCrcMismatch = 0x0A05,
  kTvmErrorParamsMisaligned = 0x0A06,
  kTvmErrorParamsMissing = 0x0A07,

  /* System errors outside any category. */
  kTvmErrorSystemErrorMask = (-2147483647 - 1) /* INT32_MIN, i.e. bit 31 */
} tvm_crt_error_t;

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_ERROR_CODES_H_ */
