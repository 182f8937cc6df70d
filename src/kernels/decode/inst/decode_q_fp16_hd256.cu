// Instantiation: paged-decode split kernels over int8 and fp8 e4m3 caches, fp16, head dim 256.
#include "launch/decode_split_launch.cuh"
FLASHKIT_INSTANTIATE_DECODE_Q(fp16_t, 256, 1)
FLASHKIT_INSTANTIATE_DECODE_Q(fp16_t, 256, 2)
