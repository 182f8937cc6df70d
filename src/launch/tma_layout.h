// The layout checks every Hopper TMA map shares (host only, no CUDA headers, so the CPU tests
// reach it): what cuTensorMapEncodeTiled accepts for a 4-D tensor, checked before calling it so
// that a tensor it cannot describe gives `false` (the launcher then takes the copy path or
// reports the failure) rather than a driver error.
#pragma once

#include <cstdint>

namespace flashkit::launch_util {

// base: 16-byte aligned; dims (innermost first): each in [1, 2^32); st: the byte strides of
// dims 1..3, each in (0, 2^40) and a multiple of 16, except that a dim of size 1 is never
// stepped, so its stride is replaced by 16 (any valid value). st is updated in place.
inline bool tma_layout_ok(const void* base, const int64_t (&dims)[4], int64_t (&st)[3]) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  for (int i = 0; i < 4; ++i) {
    if (dims[i] <= 0 || dims[i] >= (int64_t(1) << 32)) return false;
  }
  for (int i = 0; i < 3; ++i) {
    if (dims[i + 1] == 1) st[i] = 16;
    if (st[i] <= 0 || st[i] % 16 != 0 || st[i] >= (int64_t(1) << 40)) return false;
  }
  return true;
}

}  // namespace flashkit::launch_util
