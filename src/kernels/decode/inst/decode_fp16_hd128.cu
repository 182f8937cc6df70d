// Instantiation: paged-decode split kernel, fp16, head dim 128.
#include "launch/decode_split_launch.cuh"
FLASHKIT_INSTANTIATE_DECODE(fp16_t, 128)
