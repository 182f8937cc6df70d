// Maps the dtype tags of launch/fwd_launch.h to CUDA element types (device code only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "launch/fwd_launch.h"

namespace flashkit {

template <typename Tag> struct ElementOf;
template <> struct ElementOf<fp16_t> { using type = __half; };
template <> struct ElementOf<bf16_t> { using type = __nv_bfloat16; };

}  // namespace flashkit
