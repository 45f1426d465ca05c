/*
 * dlpack/dlpack.h -- DLPack-compatible tensor description, written for utvm.
 *
 * Same memory layout and enumerator values as DLPack v0.x (DLDevice, DLDataType, DLTensor), so
 * firmware and tools written against DLPack interoperate. Only what the CRT needs is declared.
 */
#ifndef UTVM_DLPACK_DLPACK_H_
#define UTVM_DLPACK_DLPACK_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLPACK_VERSION 60

/*! \brief Device kinds (values fixed by DLPack). */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLExtDev = 12
} DLDeviceType;

/*! \brief A device: its kind and ordinal. */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/*! \brief Element type codes (values fixed by DLPack). */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;

/*! \brief Element type: code, bits per lane, lanes (1 for scalars). */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/*! \brief A strided view of memory on a device. `strides` NULL means compact row-major. */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

#ifdef __cplusplus
}
#endif

#endif /* UTVM_DLPACK_DLPACK_H_ */
