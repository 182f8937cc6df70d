// Declarations of the MLA decoding launchers (src/kernels/mla/). All return cudaError_t as
// int. The split kernels exist per dtype: the Hopper one (sm_90a, wgmma) in
// src/kernels/mla/inst/mla_sm90_<dtype>.cu (+ _box64.cu, and bf16's _fp8.cu), the portable one (sm_80+, mma.sync) in
// src/kernels/mla/inst/mla_sm80_<dtype>.cu; metadata and combine in
// src/kernels/mla/inst/mla_aux.cu.
#pragma once

#include "kernels/mla_params.h"
#include "launch/fwd_launch.h"  // DeviceInfo, fp16_t / bf16_t tags

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

int launch_mla_metadata(const MlaMetadataParams& params, cudaStream_t stream);

// Split kernels. `pdl_wait`: the kernel was launched as a programmatic dependent of the
// previous one (it then calls griddepcontrol.wait before reading the metadata).
// The Hopper launcher returns kMlaLaunchNotHandled for an FP8 cache it has no kernel for (q not
// bf16, pages not multiples of 64 tokens, a cache its TMA maps cannot describe): the dispatcher
// then runs the portable kernel.
constexpr int kMlaLaunchNotHandled = -1;
template <typename DTypeTag>
int launch_mla_split_sm90(const MlaParams& params, const DeviceInfo& dev, cudaStream_t stream);
template <typename DTypeTag>
int launch_mla_split_sm80(const MlaParams& params, const DeviceInfo& dev, cudaStream_t stream);

// Combine (launched over every (sequence, kv head, m-block); returns at once for sequences
// with a single piece). pdl: launch with programmatic dependent launch (cc 9.0+).
template <typename DTypeTag>
int launch_mla_combine(const MlaParams& params, bool pdl, cudaStream_t stream);

}  // namespace flashkit
