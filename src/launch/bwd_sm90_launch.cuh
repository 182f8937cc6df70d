// Launcher of the Hopper backward (sm_90a): the same pre/post kernels as the portable
// family around the wgmma main kernel. Included only by src/kernels/bwd_sm90/inst/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/bwd_sm80/prepost.cuh"
#include "kernels/bwd_sm90/kernel.cuh"
#include "launch/bwd_launch.h"
#include "launch/element_type.cuh"
#include "launch/launch_common.cuh"

namespace flashkit {

template <typename Tag, int kD>
int launch_bwd_sm90(const BwdParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  using Tr = bwd_sm90::BwdTraits<T, kD>;
  static_assert(Tr::kBlockM % kBwdSemBlockM == 0, "dq counters are sized for 32-row blocks");
  constexpr int kThreads = bwd_sm80::kPrePostThreads;
  constexpr int kGroup = bwd_sm80::RowGroup<kD>::kGroup;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t q_items = int64_t(p.rows_q) * p.h_q;
  if (q_items > 0) {
    const int64_t blocks = (q_items * kGroup + kThreads - 1) / kThreads;
    bwd_sm80::bwd_pre_kernel<T, kD><<<unsigned(blocks), kThreads, 0, stream>>>(p);
  }
  if (varlen && p.total_k > 0) {
    const int64_t chunks = int64_t(p.total_k) * p.h_kv * (kD / 8);
    bwd_sm80::bwd_zero_rows_kernel<T, kD><<<unsigned((chunks + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p);
  }
  if (p.batch > 0 && p.seqlen_k > 0) {
    const dim3 grid(unsigned((p.seqlen_k + Tr::kBlockN - 1) / Tr::kBlockN), unsigned(p.h_kv), unsigned(p.batch));
    if (p.softcap > 0.f) {
      cudaError_t err = launch_util::raise_smem_limit<&bwd_sm90::bwd_kernel<Tr, true>>(dev.device, Tr::kSmemBytes);
      if (err != cudaSuccess) return int(err);
      bwd_sm90::bwd_kernel<Tr, true><<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
    } else {
      cudaError_t err = launch_util::raise_smem_limit<&bwd_sm90::bwd_kernel<Tr>>(dev.device, Tr::kSmemBytes);
      if (err != cudaSuccess) return int(err);
      bwd_sm90::bwd_kernel<Tr><<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
    }
  }
  if (q_items > 0) {
    const int64_t blocks = (q_items * kGroup + kThreads - 1) / kThreads;
    bwd_sm80::bwd_post_kernel<T, kD><<<unsigned(blocks), kThreads, 0, stream>>>(p);
  }
  return int(cudaGetLastError());
}

}  // namespace flashkit

#define FLASHKIT_INSTANTIATE_BWD_SM90(TAG, D)                                                  \
  template int flashkit::launch_bwd_sm90<flashkit::TAG, D>(const flashkit::BwdParams&,          \
                                                           const flashkit::DeviceInfo&, cudaStream_t);
