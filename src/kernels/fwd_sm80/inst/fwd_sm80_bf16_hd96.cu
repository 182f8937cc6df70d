// Instantiation: portable forward, bf16, head dim 96.
#include "launch/fwd_sm80_launch.cuh"
FLASHKIT_INSTANTIATE_FWD_SM80(bf16_t, 96)
