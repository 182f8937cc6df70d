// Instantiation: portable MLA split kernel (sm_80+), fp16.
#include "launch/mla_sm80_launch.cuh"
FLASHKIT_INSTANTIATE_MLA_SM80(fp16_t)
