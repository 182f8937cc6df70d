// The sticky per-device error word that kernels set when device-side index data is out
// of range (bits in kernels/decode_params.h and flashkit/errors.h). One 32-bit word per
// device, defined in device_errors.cu; kernels receive its address in their params.
#pragma once

#include <cstdint>

namespace flashkit {

// Address of the error word on `device` (the current device when -1), or nullptr when the
// runtime cannot provide it. Looked up once per device.
uint32_t* device_error_word(int device);

// Reads (and with `clear`, resets) the error word of `device` (-1: current). Synchronizes
// with the device (a blocking copy). cudaError_t as int.
int device_errors_read(int device, bool clear, uint32_t* bits);

}  // namespace flashkit
