// Portable backward, fp16, head dim 128.
#include "launch/bwd_sm80_launch.cuh"

FLASHKIT_INSTANTIATE_BWD_SM80(fp16_t, 128)
