// The device error word (include/flashkit/errors.h): one sticky 32-bit word per device,
// defined once (src/launch/device_errors.cu) and shared by every FlashKit kernel. The
// library is built without separable compilation, so kernels cannot name the variable:
// launchers put its address into the kernel params (FwdParams::error_flag, ...) and
// kernels report with report_device_error (src/kernels/device_errors.cuh).
#pragma once

#include <cstdint>

#include "export.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// Device address of the error word of CUDA device `device` (looked up once per device,
// devices 0..63; others on every call), or nullptr with *err set (when err is not null) if
// the runtime cannot give it (no such device, no code for it).
FLASHKIT_EXPORT uint32_t* device_error_word(int device, int* err = nullptr);

// Synchronizes `device`, reads its word into *bits and, if `clear`, clears the bits read
// (atomically: bits set in between survive). Returns a cudaError_t as int (0 = success).
// The caller makes `device` current (this does not switch devices).
int read_device_error_word(int device, bool clear, uint32_t* bits);

}  // namespace flashkit
