// Hopper MLA decoding split kernel, bf16.
#include "launch/mla_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_MLA_SM90(bf16_t)
