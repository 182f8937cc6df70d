// Hopper MLA decoding split kernel, bf16, pages of >= 64 tokens (one TMA box per chunk).
#include "launch/mla_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_MLA_SM90_BOX64(__nv_bfloat16)
