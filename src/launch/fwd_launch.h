// Declaration of the per-variant forward launchers. Each is defined (explicitly
// instantiated) in its own small file under src/kernels/fwd_sm80/inst/ (portable, sm_80+)
// or src/kernels/fwd_sm90/inst/ (Hopper, sm_90a only).
#pragma once

#include "kernels/attention_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

struct fp16_t {};  // tags naming the element type without pulling in cuda_fp16.h
struct bf16_t {};

// What the launchers need to know about the current device. Read once per device by the
// dispatcher (fwd_dispatch.cpp) and cached, so a launch makes no attribute queries.
struct DeviceInfo {
  int device;
  int cc_major;
  int cc_minor;
  int smem_optin;  // max dynamic shared memory per block, bytes
  int l2_bytes;
  int num_sms;
};

// Returns the cudaError_t of the launch (as int, 0 = success).
template <typename DTypeTag, int kHeadDim>
int launch_fwd_sm80(const FwdParams& params, const DeviceInfo& dev, cudaStream_t stream);
template <typename DTypeTag, int kHeadDim>
int launch_fwd_sm90(const FwdParams& params, const DeviceInfo& dev, cudaStream_t stream);

}  // namespace flashkit
