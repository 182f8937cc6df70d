// Declaration of the per-variant backward launchers, each defined (explicitly instantiated)
// in its own small file under src/kernels/bwd_sm80/inst/.
#pragma once

#include "kernels/bwd_params.h"
#include "launch/fwd_launch.h"  // fp16_t / bf16_t tags, DeviceInfo

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// Runs the whole backward (preprocessing, main kernel, dq conversion) on `stream`.
// Returns the cudaError_t of the launches (as int, 0 = success).
template <typename DTypeTag, int kHeadDim>
int launch_bwd_sm80(const BwdParams& params, const DeviceInfo& dev, cudaStream_t stream);

template <typename DTypeTag, int kHeadDim>
int launch_bwd_sm90(const BwdParams& params, const DeviceInfo& dev, cudaStream_t stream);

// Row-block size of the variant's main kernel (workspace sizing uses the smallest, 32).
constexpr int kBwdSemBlockM = 32;

}  // namespace flashkit
