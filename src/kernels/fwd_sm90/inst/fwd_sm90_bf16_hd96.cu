// Instantiation: Hopper forward, bf16, head dim 96 (tiles padded to 128 columns).
#include "launch/fwd_sm90_launch.cuh"
FLASHKIT_INSTANTIATE_FWD_SM90(bf16_t, 96)
