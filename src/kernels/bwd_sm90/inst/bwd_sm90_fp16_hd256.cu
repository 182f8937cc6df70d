// Hopper backward, fp16, head dim 256.
#include "launch/bwd_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_BWD_SM90(fp16_t, 256)
