// Hopper backward, fp16, head dim 64.
#include "launch/bwd_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_BWD_SM90(fp16_t, 64)
