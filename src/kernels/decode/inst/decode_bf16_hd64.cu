// Instantiation: paged-decode split kernel, bf16, head dim 64.
#include "launch/decode_split_launch.cuh"
FLASHKIT_INSTANTIATE_DECODE(bf16_t, 64)
