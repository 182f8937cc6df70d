// A CUtensorMap (128 bytes, 64-byte aligned) without cuda.h, for kernel parameter structs:
// filled on the host by a launcher (launch/tma_encode.cuh), read by the TMA copies of the
// Hopper kernels (prims/tma.cuh) from a __grid_constant__ parameter.
#pragma once

#include <cstdint>

namespace flashkit {

struct alignas(64) TmaDesc {
  uint64_t words[16];
};

}  // namespace flashkit
