// Hopper MLA decoding split kernel, fp16.
#include "launch/mla_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_MLA_SM90(fp16_t)
