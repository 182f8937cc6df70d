// Hopper backward, fp16, head dim 192 (on D 256's tiles: launch/bwd_sm90_launch.cuh, launch_bwd_sm90_padded).
#include "launch/bwd_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_BWD_SM90(fp16_t, 192)
