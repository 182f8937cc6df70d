// The launches every backward family shares around its main kernel, in stream order:
// bwd_pre_kernel (delta = rowsum(dO * O), clears the dq accumulator and counters), for
// varlen bwd_zero_rows_kernel (dk/dv rows outside every sequence), the family's main
// kernel, and bwd_post_kernel (dq in the input dtype). Included by the family launchers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bwd_params.h"
#include "kernels/bwd_sm80/prepost.cuh"
#include "launch/family_dispatch.h"

namespace flashkit::launch_util {

// Whether the main kernel's key blocks launch key-major (BwdParams::key_major, attn::make_bwd_cta):
// under a right bound (causal, or a right window) the first key blocks of every (batch, KV head)
// group carry the most rows, and with the grid's own order (key blocks fastest) a heavy block
// of a later group starts after the light blocks of the earlier ones, leaving a tail. GQA makes
// it worse: a CTA walks every query head of its group. A list-scheduling model on 132 SMs
// (docs/kernels/bwd.md, "Key-major launch order") puts the grid order's efficiency at 0.61..0.69
// for D 128 GQA 8 causal at S 512..8k and key-major at 0.97..1.0; MHA 0.93..0.95 -> 0.99.
// FLASHKIT_BWD_KEY_MAJOR=0 (read once) keeps the grid order in fast mode;
// FLASHKIT_BWD_DET_KEY_MAJOR (read once, default 0) takes it in deterministic mode.
inline bool bwd_key_major(const BwdParams& p) {
  static const bool fast = !dispatch::env_off("FLASHKIT_BWD_KEY_MAJOR");
  static const bool det = dispatch::env_flag("FLASHKIT_BWD_DET_KEY_MAJOR");
  return FLASHKIT_BWD_KEY_MAJOR_REMAP && (p.causal || p.window_right >= 0) && (p.deterministic ? det : fast);
}

// The main kernel's grid: (key blocks, h_kv, batch), or with p.key_major (h_kv, batch, key blocks),
// so that launch order (x fastest) runs over the groups of a key block before the next block.
inline dim3 bwd_grid(const BwdParams& p, int n_blocks) {
  return p.key_major ? dim3(unsigned(p.h_kv), unsigned(p.batch), unsigned(n_blocks))
                     : dim3(unsigned(n_blocks), unsigned(p.h_kv), unsigned(p.batch));
}

// `main_launch()` launches the main kernel (called only when there are keys) and returns a
// cudaError_t as int; a non-zero result is returned before the post kernel is launched.
template <typename T, int kD, typename MainLaunch>
int launch_bwd_with_prepost(const BwdParams& p, cudaStream_t stream, MainLaunch&& main_launch) {
  constexpr int kThreads = bwd_sm80::kPrePostThreads;
  constexpr int kGroup = bwd_sm80::RowGroup<kD>::kGroup;
  const int64_t q_items = int64_t(p.rows_q) * p.h_q;
  const int64_t pre_post_blocks = (q_items * kGroup + kThreads - 1) / kThreads;
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
