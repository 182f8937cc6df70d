// The launches every backward family shares around its main kernel, in stream order:
// (dq_fixed only: a memset and bwd_kvbound_kernel, the KV bounds of the row exponents)
// bwd_pre_kernel (delta = rowsum(dO * O), clears the dq accumulator and counters), for
// varlen bwd_zero_rows_kernel (dk/dv rows outside every sequence), the family's main
// kernel, and bwd_post_kernel (dq in the input dtype). Included by the family launchers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bwd_params.h"
#include "kernels/bwd_sm80/prepost.cuh"

namespace flashkit::launch_util {

// `main_launch()` launches the main kernel (called only when there are keys) and returns a
// cudaError_t as int; a non-zero result is returned before the post kernel is launched.
template <typename T, int kD, typename MainLaunch>
int launch_bwd_with_prepost(const BwdParams& p, cudaStream_t stream, MainLaunch&& main_launch) {
  constexpr int kThreads = bwd_sm80::kPrePostThreads;
  constexpr int kGroup = bwd_sm80::RowGroup<kD>::kGroup;
  const int64_t q_items = int64_t(p.rows_q) * p.h_q;
  const int64_t pre_post_blocks = (q_items * kGroup + kThreads - 1) / kThreads;
  if (p.dq_fixed) {  // the KV bounds of the fixed-point dQ's row exponents, before the pre kernel reads them
    cudaError_t err = cudaMemsetAsync(p.dq_kvbound, 0, size_t(p.h_kv) * 2 * sizeof(float), stream);
    if (err != cudaSuccess) return int(err);
    const int64_t k_rows = p.cu_seqlens_k != nullptr ? int64_t(p.total_k) : int64_t(p.batch) * p.seqlen_k;
    const int64_t rows_per_block = kThreads / kGroup;
    int64_t blocks = (k_rows + rows_per_block - 1) / rows_per_block;
    const int64_t cap = (1024 + p.h_kv - 1) / p.h_kv;  // a grid of ~1k blocks in all: a few waves
    blocks = blocks < 1 ? 1 : (blocks > cap ? cap : blocks);
    bwd_sm80::bwd_kvbound_kernel<T, kD><<<dim3(unsigned(blocks), unsigned(p.h_kv)), kThreads, 0, stream>>>(p);
  }
  if (q_items > 0) bwd_sm80::bwd_pre_kernel<T, kD><<<unsigned(pre_post_blocks), kThreads, 0, stream>>>(p);
  if (p.cu_seqlens_q != nullptr && p.total_k > 0) {
    const int64_t chunks = int64_t(p.total_k) * p.h_kv * (kD / 8);
    bwd_sm80::bwd_zero_rows_kernel<T, kD><<<unsigned((chunks + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p);
  }
  if (p.batch > 0 && p.seqlen_k > 0) {
    const int err = main_launch();
    if (err != 0) return err;
  }
  if (q_items > 0) bwd_sm80::bwd_post_kernel<T, kD><<<unsigned(pre_post_blocks), kThreads, 0, stream>>>(p);
  return int(cudaGetLastError());
}

}  // namespace flashkit::launch_util
