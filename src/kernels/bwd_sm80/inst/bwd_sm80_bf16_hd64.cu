// Portable backward, bf16, head dim 64.
#include "launch/bwd_sm80_launch.cuh"

FLASHKIT_INSTANTIATE_BWD_SM80(bf16_t, 64)
