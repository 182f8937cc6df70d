// Instantiation: paged-decode split kernels over int8 and fp8 e4m3 caches, bf16, head dim 64.
#include "launch/decode_split_launch.cuh"
FLASHKIT_INSTANTIATE_DECODE_Q(bf16_t, 64, 1)
FLASHKIT_INSTANTIATE_DECODE_Q(bf16_t, 64, 2)
