// Where one CTA of a dense forward kernel works: its (batch, head, row block), the
// sequence extents (fixed or varlen) and the global pointers of its Q/K/V/O/LSE slices.
// Shared by the forward kernel families, which all use the same 3-D grid order.
#pragma once

#include <cstdint>

#include "kernels/attention_params.h"

namespace flashkit::attn {

// Tile order: the grid is (sched_group, num_m_blocks, groups) and CTAs are dispatched
// x fastest, so (batch, head) pairs are taken in groups of p.sched_group whose K/V fit in
// L2 together (the launcher sizes the groups), and within a group row blocks run from last
// to first. With a causal mask the last rows see the most keys, so the longest CTAs start
// first and the short ones fill the tail, while the CTAs in flight still share K/V in L2.
template <typename T, int kBlockM>
struct BlockInfo {
  int batch, head, m0;
  int seqlen_q, seqlen_k;
  int rows_here;  // valid query rows of this block (<= kBlockM)
  const T* q;     // row m0 of this (batch, head)
  const T* k;     // key 0 of this (batch, kv head)
  const T* v;
  T* o;           // row m0
  float* lse;     // row m0, or nullptr

  // Returns false when the CTA has nothing to do (past the last pair or the sequence end).
  __device__ __forceinline__ bool init(const FwdParams& p) {
    const int bh = blockIdx.z * p.sched_group + blockIdx.x;
    if (bh >= p.batch * p.h_q) return false;
    const int m_block = gridDim.y - 1 - blockIdx.y;
    head = bh % p.h_q;
    batch = bh / p.h_q;
    const bool varlen = p.cu_seqlens_q != nullptr;
    int q_start = 0, k_start = 0;
    seqlen_q = p.seqlen_q;
    seqlen_k = p.seqlen_k;
    if (varlen) {
      q_start = p.cu_seqlens_q[batch];
      seqlen_q = p.cu_seqlens_q[batch + 1] - q_start;
      k_start = p.cu_seqlens_k[batch];
      seqlen_k = p.cu_seqlens_k[batch + 1] - k_start;
    }
    m0 = m_block * kBlockM;
    if (m0 >= seqlen_q) return false;
    rows_here = min(kBlockM, seqlen_q - m0);
    const int head_kv = head / p.h_ratio;
    const int64_t q_off = varlen ? int64_t(q_start) * p.q_row_stride : int64_t(batch) * p.q_batch_stride;
    const int64_t k_off = varlen ? int64_t(k_start) * p.k_row_stride : int64_t(batch) * p.k_batch_stride;
    const int64_t v_off = varlen ? int64_t(k_start) * p.v_row_stride : int64_t(batch) * p.v_batch_stride;
    const int64_t o_off = varlen ? int64_t(q_start) * p.o_row_stride : int64_t(batch) * p.o_batch_stride;
    q = static_cast<const T*>(p.q) + q_off + head * p.q_head_stride + int64_t(m0) * p.q_row_stride;
    k = static_cast<const T*>(p.k) + k_off + head_kv * p.k_head_stride;
    v = static_cast<const T*>(p.v) + v_off + head_kv * p.v_head_stride;
    o = static_cast<T*>(p.o) + o_off + head * p.o_head_stride + int64_t(m0) * p.o_row_stride;
    lse = p.lse == nullptr ? nullptr
                           : p.lse + (varlen ? int64_t(q_start) : int64_t(batch) * p.lse_batch_stride) +
                                 head * p.lse_head_stride + m0;
    return true;
  }
};

}  // namespace flashkit::attn
