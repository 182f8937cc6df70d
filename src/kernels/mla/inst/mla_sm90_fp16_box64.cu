// Hopper MLA decoding split kernel, fp16, pages of >= 64 tokens (one TMA box per chunk).
#include "launch/mla_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_MLA_SM90_BOX64(__half)
