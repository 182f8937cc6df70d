// Where one CTA of a dense forward kernel works: its (batch, head, row block), the
// sequence extents (fixed or varlen, the latter clamped to the tensors: varlen_extents)
// and the global pointers of its Q/K/V/O/LSE slices.
// Shared by the forward kernel families, which all use the same 3-D grid order.
#pragma once

#include <cstdint>

#include "flashkit/errors.h"
#include "kernels/attention_params.h"
#include "kernels/device_errors.cuh"

namespace flashkit::attn {

// Sequence `batch`'s extents in varlen mode, from cu_seqlens_q/k: device memory, never
// trusted (an index array, however wrong, must not make the kernel read or write outside
// q/k/v/out/lse). A range not inside [0, total] becomes empty (start 0, length 0): a bad q
// range leaves the CTA nothing to do (it writes nothing), a bad k range makes its rows see
// no key (out = 0, lse = -inf). Valid ranges come out unchanged. Shared by both forward
// families (sm80 calls it inline in its kernel body).
__device__ __forceinline__ void varlen_extents(const FwdParams& p, int batch, int& q_start, int& seqlen_q,
                                               int& k_start, int& seqlen_k) {
  const int q0 = p.cu_seqlens_q[batch], q1 = p.cu_seqlens_q[batch + 1];
  const int k0 = p.cu_seqlens_k[batch], k1 = p.cu_seqlens_k[batch + 1];
  // No subtraction before the checks: q1 - q0 could overflow for garbage values.
  const bool q_ok = 0 <= q0 && q0 <= q1 && q1 <= p.total_q;
  const bool k_ok = 0 <= k0 && k0 <= k1 && k1 <= p.total_k;
  q_start = q_ok ? q0 : 0;
  seqlen_q = q_ok ? q1 - q0 : 0;
  k_start = k_ok ? k0 : 0;
  seqlen_k = k_ok ? k1 - k0 : 0;
}

// Reports in p.error_flag what is wrong with sequence `batch`'s cu_seqlens entries:
//  - kDeviceErrorCuSeqlens: a range outside [0, total] or reversed, cu_seqlens[0] != 0, or
//    cu_seqlens[B] != total (rows no sequence covers, never written);
//  - kDeviceErrorSeqlenAboveMax: a length above p.seqlen_q / p.seqlen_k, i.e. above
//    max_seqlen_q/k (for q the grid covers only p.seqlen_q rows, rounded up to the block).
// Reads the entries again (cached; a compiler may merge the loads with varlen_extents')
// so a kernel can report wherever it costs no registers: measured with ptxas (-v), the
// sm80 kernels keep their registers and spills unchanged when they report right after
// varlen_extents, while the sm90 d64 kernel (128 registers) spilled 60/88 bytes
// (stores/loads) instead of 44/56 that way, and 16/16 when it reports at its exits (each
// early return and after the epilogue), which is what it does. Only thread 0 reports; a
// no-op when not varlen.
__device__ __forceinline__ void report_varlen_errors(const FwdParams& p, int batch) {
  if (p.cu_seqlens_q == nullptr || threadIdx.x != 0) return;
  const int q0 = p.cu_seqlens_q[batch], q1 = p.cu_seqlens_q[batch + 1];
  const int k0 = p.cu_seqlens_k[batch], k1 = p.cu_seqlens_k[batch + 1];
  const bool q_ok = 0 <= q0 && q0 <= q1 && q1 <= p.total_q;
  const bool k_ok = 0 <= k0 && k0 <= k1 && k1 <= p.total_k;
  const bool bad_ends = (batch == 0 && (q0 != 0 || k0 != 0)) ||
                        (batch == p.batch - 1 && (q1 != p.total_q || k1 != p.total_k));
  uint32_t err = q_ok && k_ok && !bad_ends ? 0u : uint32_t(kDeviceErrorCuSeqlens);
  if ((q_ok && q1 - q0 > p.seqlen_q) || (k_ok && k1 - k0 > p.seqlen_k)) err |= kDeviceErrorSeqlenAboveMax;
  if (err != 0) report_device_error(p.error_flag, err);
}

// Tile order: the grid is (sched_group, num_m_blocks, groups) and CTAs are dispatched
// x fastest, so (batch, head) pairs are taken in groups of p.sched_group whose K/V fit in
// L2 together (the launcher sizes the groups), and within a group row blocks run from last
// to first. With a causal mask the last rows see the most keys, so the longest CTAs start
// first and the short ones fill the tail, while the CTAs in flight still share K/V in L2.
template <typename T, int kBlockM>
struct BlockInfo {
  int batch, head, m0;
  int seqlen_q, seqlen_k;
  int k_row0;     // row of key 0 in the K/V tensors' row dimension (varlen: cu_seqlens_k[b])
  int rows_here;  // valid query rows of this block (<= kBlockM)
  const T* q;     // row m0 of this (batch, head)
  const T* k;     // key 0 of this (batch, kv head)
  const T* v;
  T* o;           // row m0
  float* lse;     // row m0, or nullptr

  int q_row0;     // row of query 0 in the Q/O tensors' row dimension (varlen: cu_seqlens_q[b])

  // Returns false when the CTA has nothing to do (past the last pair or the sequence end).
  __device__ __forceinline__ bool init(const FwdParams& p) {
    return init_at(p, blockIdx.x, gridDim.y - 1 - blockIdx.y, blockIdx.z);
  }
  // The same for the tile a grid CTA (x, y, z) would own, m_block = gridDim.y - 1 - y (the
  // persistent kernel walks that order itself: fwd_sm90/kernel_persistent.cuh).
  __device__ __forceinline__ bool init_at(const FwdParams& p, int x, int m_block, int z) {
    const int bh = z * p.sched_group + x;
    if (bh >= p.batch * p.h_q) return false;
    p.div_h_q.divmod(bh, batch, head);
    const bool varlen = p.cu_seqlens_q != nullptr;
    int q_start = 0, k_start = 0;
    seqlen_q = p.seqlen_q;
    seqlen_k = p.seqlen_k;
    if (varlen) varlen_extents(p, batch, q_start, seqlen_q, k_start, seqlen_k);
    k_row0 = k_start;
    q_row0 = q_start;
    m0 = m_block * kBlockM;
    if (m0 >= seqlen_q) {
      report_varlen_errors(p, batch);
      return false;
    }
    rows_here = min(kBlockM, seqlen_q - m0);
    const int head_kv = p.div_h_ratio.div(head);
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
