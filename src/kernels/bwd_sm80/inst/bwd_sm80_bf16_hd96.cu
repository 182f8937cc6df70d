// Portable backward, bf16, head dim 96.
#include "launch/bwd_sm80_launch.cuh"

FLASHKIT_INSTANTIATE_BWD_SM80(bf16_t, 96)
