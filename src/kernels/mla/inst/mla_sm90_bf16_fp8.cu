// Hopper MLA decoding split kernel over FlashMLA's FP8 cache, bf16 q, pages of multiples of 64
// tokens (the converters' warpgroup dequantizes in place; sm90_kernel.cuh, Traits::kFp8).
#define FLASHKIT_MLA_TRACE_TU_FP8  // its own trace readers (development builds only)
#include "launch/mla_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_MLA_SM90_FP8(__nv_bfloat16)
