// Hopper MLA decoding split kernel, fp16, pages of >= 64 tokens (one TMA box per chunk).
#define FLASHKIT_MLA_TRACE_TU_BOX64  // its own trace readers (development builds only)
#include "launch/mla_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_MLA_SM90_BOX64(__half)
