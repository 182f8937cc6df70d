// Instantiation: paged-decode split kernel, fp16, head dim 256.
#include "launch/decode_split_launch.cuh"
FLASHKIT_INSTANTIATE_DECODE(fp16_t, 256)
