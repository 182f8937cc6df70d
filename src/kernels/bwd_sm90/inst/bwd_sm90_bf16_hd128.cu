// Hopper backward, bf16, head dim 128.
#include "launch/bwd_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_BWD_SM90(bf16_t, 128)
