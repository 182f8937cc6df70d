// Instantiation: paged-decode split kernel, bf16, head dim 256.
#include "launch/decode_split_launch.cuh"
FLASHKIT_INSTANTIATE_DECODE(bf16_t, 256)
