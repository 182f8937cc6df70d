// Instantiation: portable MLA split kernel (sm_80+), bf16.
#include "launch/mla_sm80_launch.cuh"
FLASHKIT_INSTANTIATE_MLA_SM80(bf16_t)
