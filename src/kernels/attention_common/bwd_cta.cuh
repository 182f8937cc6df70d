// What every backward kernel family derives the same way from the grid and the
// parameters: the key block, KV head and batch a CTA owns (in deterministic causal mode the
// key blocks run in descending order), its sequence extents (varlen clamped to
// max_seqlen: rows past it are outside the grid and the dq counters, their gradients stay
// zero), the row blocks that see its keys under the mask, and the deterministic dq turn.
#pragma once

#include <cstdint>

#include "kernels/attention_common/block_info.cuh"
#include "kernels/attention_common/bwd_launch_order.h"
#include "kernels/attention_common/mask.cuh"
#include "kernels/bwd_params.h"
#include "prims/fastdiv.h"

// How long (ns of %globaltimer) a lane of a rotated deterministic walk (BwdCta::m_block_rot) waits
// for one turn before it takes its group as not all resident, reports kDeviceErrorDetOrder and
// stops waiting (kernel_pp.cuh det_wait, kernel_ks.cuh; the residency GPU test's bound).
#ifndef FLASHKIT_BWD_DET_GIVE_UP_NS
#define FLASHKIT_BWD_DET_GIVE_UP_NS 200000000ull
#endif

namespace flashkit::attn {

// lse is kept in natural-log units; the backward kernels rescale it to exp2 units with this.
constexpr float kLog2e = 1.4426950408889634f;

struct BwdCta {
  bool varlen;
  bool descending;  // causal or a right window bound: the deterministic dq order descends
  int n_block, head_kv, batch;
  int q_start, k_start, seqlen_q, seqlen_k;
  int n0, keys_here;  // first key of the block; keys in it (valid once n0 < seqlen_k)
  Mask mask;
  int m_begin;   // first row block that sees these keys
  int per_head;  // row blocks per query head that see them
  int iters;     // per_head x the GQA group: the CTA's walk (head-major)

  // The walk's step `it`: query head and row block. Without GQA (h_ratio 1, a uniform
  // branch) the walk is one head's row blocks and needs no division by per_head (a ~25
  // instruction sequence, several per row block in the kernels' loops).
  __device__ __forceinline__ int head_of(const BwdParams& p, int it) const {
    return p.h_ratio == 1 ? head_kv : head_kv * p.h_ratio + it / per_head;
  }
  __device__ __forceinline__ int m_block_of(const BwdParams& p, int it) const {
    return m_begin + (p.h_ratio == 1 ? it : it % per_head);
  }
  // Element offset of this sequence's row 0 in a tensor with these strides.
  __device__ __forceinline__ int64_t q_side_offset(int64_t row_stride, int64_t batch_stride) const {
    return varlen ? int64_t(q_start) * row_stride : int64_t(batch) * batch_stride;
  }
  __device__ __forceinline__ int64_t k_side_offset(int64_t row_stride, int64_t batch_stride) const {
    return varlen ? int64_t(k_start) * row_stride : int64_t(batch) * batch_stride;
  }
  // Row of dq_accum ([rows][h_q][D]) and of lse/delta's row index for this sequence's row 0.
  __device__ __forceinline__ int64_t q_row0() const { return varlen ? int64_t(q_start) : int64_t(batch) * seqlen_q; }
  __device__ __forceinline__ int64_t stat_offset(const BwdParams& p, int head, int m0) const {
    return (varlen ? int64_t(q_start) : int64_t(batch) * p.lse_batch_stride) + head * p.lse_head_stride + m0;
  }
  // Fixed-point dQ (BwdParams::dq_fixed): the exponents of rows r and r + 8 of the row block at m0
  // (laid out like lse; 0 for rows past the sequence, whose adds are zeros).
  __device__ __forceinline__ void dq_row_exps(const BwdParams& p, int head, int m0, int r, int (&fx)[2]) const {
    const int32_t* ex = p.dq_exp + stat_offset(p, head, m0);
    fx[0] = m0 + r < seqlen_q ? ex[r] : 0;
    fx[1] = m0 + r + 8 < seqlen_q ? ex[r + 8] : 0;
  }

  // Deterministic mode: this key block's place in the fixed order of dq adds of the row
  // block starting at m0, and that row block's counter. Descending: from the last key
  // block the row block sees (n_last) down; ascending: from its first.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int dq_turn(int m0) const {
    if (descending) {
      const int n_last = max(0, min((seqlen_k - 1) / kBlockN, mask.right_of(min(m0 + kBlockM, seqlen_q) - 1) / kBlockN));
      return n_last - n_block;
    }
    return n_block - mask.first_key_tile(m0, kBlockN);
  }
  // Deterministic mode on key-block pairs (kernel_ks_pair.cuh): both CTAs of pair n_block / 2
  // add their column halves after every CTA of the pairs before it in the dq order that walk
  // this row block (two per pair: a pair walks the union of its blocks' row blocks, so every
  // pair between the first and the last visible key block's pair takes part).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int dq_turn_pair(int m0) const {
    const int pair = n_block >> 1;
    int before;
    if (descending) {
      const int n_last = max(0, min((seqlen_k - 1) / kBlockN, mask.right_of(min(m0 + kBlockM, seqlen_q) - 1) / kBlockN));
      before = (n_last >> 1) - pair;
    } else {
      before = pair - (mask.first_key_tile(m0, kBlockN) >> 1);
    }
    return 2 * max(0, before);
  }
  // Deterministic mode without a mask, rotated (p.dq_rotate; docs/kernels/bwd.md, "Deterministic
  // mode: the plan"; scripts/dev/models/bwd_det_rotation_model.py): with M = per_head row blocks
  // and N key blocks, CTA n walks row blocks shift = floor(n M / N), shift + 1, ... (mod M), and
  // the turn of (m, n) is (n*(m) - n) mod N, n*(m) = the last key block whose walk starts at or
  // before m: the visitors of a row block in the order of their steps, each floor(M / N) steps
  // after the previous one.
  template <int kBlockN>
  __device__ __forceinline__ int rot_shift() const {
    const int n_blocks = (seqlen_k + kBlockN - 1) / kBlockN;
    return int(int64_t(n_block) * per_head / n_blocks);
  }
  __device__ __forceinline__ int m_block_rot(int it, int shift) const {
    int m = it % per_head + shift;
    if (m >= per_head) m -= per_head;
    return m_begin + m;
  }
  template <int kBlockN>
  __device__ __forceinline__ int dq_turn_rot(int m_block) const {
    const int n_blocks = (seqlen_k + kBlockN - 1) / kBlockN;
    const int m = m_block - m_begin;
    const int n_star = min(n_blocks - 1, int((int64_t(m + 1) * n_blocks + per_head - 1) / per_head) - 1);
    const int turn = n_star - n_block;
    return turn < 0 ? turn + n_blocks : turn;
  }
  // The same with the division by per_head as a multiply-high (`div` = per_head's FastDiv) where
  // the dividend fits 31 bits, the 64-bit division otherwise (kernel_pp.cuh's
  // FLASHKIT_BWD_PP_FASTDIV).
  template <int kBlockN>
  __device__ __forceinline__ int dq_turn_rot(int m_block, const prims::FastDiv& div) const {
    const int n_blocks = (seqlen_k + kBlockN - 1) / kBlockN;
    const int64_t num = int64_t(m_block - m_begin + 1) * n_blocks + per_head - 1;
    const int q = num < (int64_t(1) << 31) ? div.div(int(num)) : int(num / per_head);
    const int turn = min(n_blocks - 1, q - 1) - n_block;
    return turn < 0 ? turn + n_blocks : turn;
  }
  __device__ __forceinline__ int32_t* dq_counter(const BwdParams& p, int head, int m_block) const {
    return p.dq_semaphore + (int64_t(batch) * p.h_q + head) * p.sem_m_blocks + m_block;
  }
};

// Key blocks in launch order: ascending (with a causal mask the first ones see the most
// rows: heaviest first), except in deterministic causal mode, whose dq order is
// descending: a CTA only ever waits for CTAs launched before it (no deadlock whatever the
// number of resident CTAs).
// kSplit (the ping-pong kernel's GQA split instantiations, BwdParams::gqa_split_log2): grid.x
// holds key block << log2 | sub, and iters counts the CTA's h_ratio >> log2 heads only.
// BwdParams::order_chunk (not with kSplit) reorders the launch in chunks of groups, key block
// first; in deterministic causal mode the key blocks of a chunk still run from the last one down.
template <int kBlockM, int kBlockN, bool kSplit = false>
__device__ __forceinline__ BwdCta make_bwd_cta(const BwdParams& p) {
  BwdCta c;
  c.descending = p.causal || p.window_right >= 0;
  if constexpr (kSplit) {
    const int bx = int(blockIdx.x) >> p.gqa_split_log2;
    c.n_block = p.deterministic && c.descending ? (int(gridDim.x) >> p.gqa_split_log2) - 1 - bx : bx;
    c.head_kv = blockIdx.y;
    c.batch = blockIdx.z;
  } else {
    int bx = int(blockIdx.x), by = int(blockIdx.y), bz = int(blockIdx.z);
    if (p.order_chunk > 0) {  // chunked launch order (BwdParams::order_chunk, bwd_launch_order.h): once per CTA
      const int nx = int(gridDim.x), ny = int(gridDim.y);
      const BwdBlockCoords b = bwd_chunked_coords(bx + nx * (by + ny * bz), nx, ny * int(gridDim.z), p.order_chunk);
      bx = b.key_block;
      by = b.group % ny;
      bz = b.group / ny;
    }
    c.n_block = p.deterministic && c.descending ? int(gridDim.x) - 1 - bx : bx;
    c.head_kv = by;
    c.batch = bz;
  }
  c.varlen = p.cu_seqlens_q != nullptr;
  c.q_start = 0;
  c.k_start = 0;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_k = p.seqlen_k;
  if (c.varlen) {
    varlen_extents(p, c.batch, c.q_start, c.seqlen_q, c.k_start, c.seqlen_k);
    if (c.n_block == 0 && c.head_kv == 0) report_varlen_errors(p, c.batch);
    c.seqlen_q = min(c.seqlen_q, p.seqlen_q);
    c.seqlen_k = min(c.seqlen_k, p.seqlen_k);
  }
  c.n0 = c.n_block * kBlockN;
  c.keys_here = min(kBlockN, c.seqlen_k - c.n0);
  c.mask = Mask{c.seqlen_q, c.seqlen_k, p.causal, p.window_left, p.window_right};
  // Row blocks that see these keys: with a right bound (causal or window), rows before
  // n0 - d - right see none; with a left window, rows after n0 + kBlockN - 1 - d + left
  // see none (d = seqlen_k - seqlen_q).
  c.m_begin = c.mask.has_right() ? max(0, c.n0 - c.mask.right_of(0)) / kBlockM : 0;
  int m_end = (c.seqlen_q + kBlockM - 1) / kBlockM;
  if (p.window_left >= 0) {
    const int last_row = c.n0 + kBlockN - 1 - (c.seqlen_k - c.seqlen_q) + p.window_left;
    m_end = last_row < 0 ? 0 : min(m_end, last_row / kBlockM + 1);
  }
  c.per_head = max(0, m_end - c.m_begin);
  c.iters = c.per_head * (kSplit ? p.h_ratio >> p.gqa_split_log2 : p.h_ratio);
  return c;
}

// The same for key block `n_block` of this CTA's (batch, KV head), ascending order, without the
// varlen error report (the pair kernel's partner block, kernel_ks_pair.cuh). A copy of the body
// above rather than a shared helper: factoring it changed every backward kernel's SASS.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ BwdCta make_bwd_cta_at(const BwdParams& p, int n_block) {
  BwdCta c;
  c.descending = p.causal || p.window_right >= 0;
  c.n_block = n_block;
  c.head_kv = blockIdx.y;
  c.batch = blockIdx.z;
  c.varlen = p.cu_seqlens_q != nullptr;
  c.q_start = 0;
  c.k_start = 0;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_k = p.seqlen_k;
  if (c.varlen) {
    varlen_extents(p, c.batch, c.q_start, c.seqlen_q, c.k_start, c.seqlen_k);
    c.seqlen_q = min(c.seqlen_q, p.seqlen_q);
    c.seqlen_k = min(c.seqlen_k, p.seqlen_k);
  }
  c.n0 = c.n_block * kBlockN;
  c.keys_here = min(kBlockN, c.seqlen_k - c.n0);
  c.mask = Mask{c.seqlen_q, c.seqlen_k, p.causal, p.window_left, p.window_right};
  // Row blocks that see these keys: with a right bound (causal or window), rows before
  // n0 - d - right see none; with a left window, rows after n0 + kBlockN - 1 - d + left
  // see none (d = seqlen_k - seqlen_q).
  c.m_begin = c.mask.has_right() ? max(0, c.n0 - c.mask.right_of(0)) / kBlockM : 0;
  int m_end = (c.seqlen_q + kBlockM - 1) / kBlockM;
  if (p.window_left >= 0) {
    const int last_row = c.n0 + kBlockN - 1 - (c.seqlen_k - c.seqlen_q) + p.window_left;
    m_end = last_row < 0 ? 0 : min(m_end, last_row / kBlockM + 1);
  }
  c.per_head = max(0, m_end - c.m_begin);
  c.iters = c.per_head * p.h_ratio;
  return c;
}

}  // namespace flashkit::attn
