// Device side of the error word (include/flashkit/errors.h): how a kernel reports invalid
// index data it found (and clamped). Any kernel family includes this; the word's address
// comes in the kernel's params (launch/device_errors.h).
#pragma once

#include <cstdint>

#include "flashkit/errors.h"

namespace flashkit {

// Sets `bits` in the device error word (no-op when `word` is null, e.g. params built by
// hand in a test). Meant for cold paths: callers report once per CTA, from one thread.
__device__ __forceinline__ void report_device_error(uint32_t* word, uint32_t bits) {
  if (word != nullptr) atomicOr(word, bits);
}

}  // namespace flashkit
