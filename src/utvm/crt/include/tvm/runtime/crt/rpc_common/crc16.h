/*
 * tvm/runtime/crt/rpc_common/crc16.h -- CRC-16/CCITT-FALSE, the checksum of the framing layer
 * (docs/architecture.md §5.1): polynomial 0x1021, initial value 0xFFFF, not reflected, no final XOR. Equal to
 * Python's binascii.crc_hqx(data, 0xFFFF). Depends on nothing but <stddef.h>/<stdint.h>.
 *
 * Table driven (512 bytes of const data, in flash on a microcontroller).
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_CRC16_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_CRC16_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Initial value of a CRC-16/CCITT-FALSE computation. */
#define TVM_CRC16_INITIAL 0xFFFFU

/*! \brief Continue a CRC over size_bytes of data (data may be NULL when size_bytes is 0).
 * Start with crc = TVM_CRC16_INITIAL; feeding data in pieces gives the same result as all at once. */
uint16_t TVMCrc16_Update(uint16_t crc, const uint8_t* data, size_t size_bytes);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_RPC_COMMON_CRC16_H_ */
