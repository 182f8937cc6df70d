// Instantiation: paged-decode split kernel, fp16, head dim 64.
#include "launch/decode_split_launch.cuh"
FLASHKIT_INSTANTIATE_DECODE(fp16_t, 64)
