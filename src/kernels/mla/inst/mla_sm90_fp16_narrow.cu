// Hopper MLA decoding split kernel, fp16, at most 32 query rows per KV head, pages of multiples of 64
// tokens: the narrow kernel (query rows as the wgmma N dimension; kernels/mla/sm90_narrow_kernel.cuh).
#include "launch/mla_sm90_launch.cuh"

FLASHKIT_INSTANTIATE_MLA_SM90_NARROW(__half)
