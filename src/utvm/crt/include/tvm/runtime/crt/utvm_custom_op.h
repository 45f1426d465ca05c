/*
 * utvm_custom_op.h -- the signature of a user operator bound with `--custom-op NAME=FILE.c:symbol`
 * (docs/custom_ops.md). Plain C99, no runtime dependency: the user's file includes only this header.
 *
 * The generated code calls
 *
 *   int32_t symbol(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
 *                  int32_t num_outputs, const uint8_t* options, int32_t options_size);
 *
 * once per run of the model, in the operator's place. Every tensor is dense, row-major, on the CPU; the
 * output buffers are the model's planned memory (write every element; do not keep the pointers). `options`
 * are the operator's option bytes as the model stores them (a TFLite CUSTOM op's custom_options, a
 * flexbuffer; NULL with options_size 0 when it has none). Return 0 on success; any other value stops the
 * run and is what the model's run function returns. Write only the outputs' elements and never an input:
 * the generated code checks guard bytes around every output and a checksum of every non-constant input
 * after each call (UTVM_CUSTOM_OP_ERROR_GUARD).
 *
 * An operator that needs the application's context (a device handle, a DMA channel, an accelerator: what
 * TVMSetDevice put in the TVMContext) declares itself with UTVM_CUSTOM_OP_WITH_CONTEXT and takes one more
 * argument, the context the model runs with (a `const TVMContext*`, from tvm/runtime/crt/tvm_micro_backend.h):
 *
 *   UTVM_CUSTOM_OP_WITH_CONTEXT(symbol);
 *   int32_t symbol(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,
 *                  int32_t num_outputs, const uint8_t* options, int32_t options_size, void* resource_handle) {
 *     const TVMContext* context = (const TVMContext*)resource_handle;
 *     ... context->device ...
 *   }
 *
 * utvm reads the declaration in the file (the macro, with the symbol's name) and then passes the context to
 * every operator of the model. Operators without the declaration keep the signature above.
 */
#ifndef TVM_RUNTIME_CRT_UTVM_CUSTOM_OP_H_
#define TVM_RUNTIME_CRT_UTVM_CUSTOM_OP_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief The version of this interface; changes only when the signatures or the structs below change
 * (2: UTVM_CUSTOM_OP_WITH_CONTEXT and UtvmCustomCall.resource_handle; version 1's signature still works). */
#define UTVM_CUSTOM_OP_ABI_VERSION 2

/*! \brief The most inputs plus outputs one user operator may have. */
#define UTVM_CUSTOM_OP_MAX_TENSORS 16

/*!
 * \brief What the generated code returns when a user operator that returned 0 broke the memory contract
 * (docs/custom_ops.md, "The memory guard"): it wrote into the guard bytes just before or just after one of
 * its outputs, or into one of its (non-constant) inputs. The model's run stops with this status; in the
 * packed convention the runtime's last error names the operator and what it wrote. Apart from every
 * tvm_crt_error_t (in the generated code's category, 0x06xx, beyond the codes error_codes.h defines); a user
 * operator should not return it itself.
 */
#define UTVM_CUSTOM_OP_ERROR_GUARD 0x0610

/*! \brief dtype codes (DLPack's): signed integer, unsigned integer, IEEE float, bool (one byte). */
#define UTVM_CUSTOM_INT 0U
#define UTVM_CUSTOM_UINT 1U
#define UTVM_CUSTOM_FLOAT 2U
#define UTVM_CUSTOM_BOOL 6U

/*! \brief One input or output of a user operator. */
typedef struct {
  void* data;            /*!< the first element (an input's: read only) */
  uint8_t dtype_code;    /*!< UTVM_CUSTOM_INT, _UINT, _FLOAT or _BOOL */
  uint8_t dtype_bits;    /*!< 8, 16, 32 or 64 */
  int32_t ndim;          /*!< rank (0 for a scalar) */
  const int64_t* shape;  /*!< ndim extents */
  float scale;           /*!< quantization scale; 0.0f when the tensor is not quantized */
  int32_t zero_point;    /*!< quantization zero point; 0 when the tensor is not quantized */
} UtvmCustomTensor;

/*! \brief The type of a user operator. */
typedef int32_t (*UtvmCustomOpFunc)(const UtvmCustomTensor* inputs, int32_t num_inputs,
                                    UtvmCustomTensor* outputs, int32_t num_outputs, const uint8_t* options,
                                    int32_t options_size);

/*! \brief The type of a user operator that takes the context (UTVM_CUSTOM_OP_WITH_CONTEXT). */
typedef int32_t (*UtvmCustomOpContextFunc)(const UtvmCustomTensor* inputs, int32_t num_inputs,
                                           UtvmCustomTensor* outputs, int32_t num_outputs,
                                           const uint8_t* options, int32_t options_size, void* resource_handle);

/*!
 * \brief Declares `symbol` as a user operator that takes the context: write it, with the symbol's own name,
 * in the operator's C file before the definition (utvm reads it there; the C compiler then holds the
 * definition to this prototype). `resource_handle` is the model's `const TVMContext*` as a `void*`.
 */
#define UTVM_CUSTOM_OP_WITH_CONTEXT(symbol)                                                                 \
  int32_t(symbol)(const UtvmCustomTensor* inputs, int32_t num_inputs, UtvmCustomTensor* outputs,          \
                  int32_t num_outputs, const uint8_t* options, int32_t options_size, void* resource_handle)

/*!
 * \brief What a generated operator passes, besides the DLTensors, to the packed wrapper of a user operator
 * (packed convention only: the last argument, a kTVMOpaqueHandle): every tensor's description (inputs,
 * then outputs; the wrapper takes data pointers from the DLTensors) and the option bytes.
 */
typedef struct {
  int32_t num_inputs;
  int32_t num_outputs;
  const UtvmCustomTensor* tensors;
  const uint8_t* options;
  int32_t options_size;
  void* resource_handle; /*!< the model's context, for an operator that takes it (set only then) */
} UtvmCustomCall;

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TVM_RUNTIME_CRT_UTVM_CUSTOM_OP_H_ */
