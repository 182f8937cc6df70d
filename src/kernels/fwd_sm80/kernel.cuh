// Portable dense attention forward (FlashAttention-2 algorithm), sm_80 and newer.
//
// One CTA = kBlockM query rows of one (batch, head). Per key tile (walking from the last
// visible tile to the first, so the tiles that need masking come first):
//
//   wait K(n) ─ sync ─ issue V(n) ─ S = Q K(n)^T ─ mask ─ online softmax ─ wait V(n) ─ sync
//     ─ issue K(n-1) ─ O += P V(n)
//
// so the V load overlaps QK^T + softmax and the next K load overlaps PV (one K and one V
// buffer, as FA2 on sm80). S and P never leave registers: P's fp32 C fragments are packed
// to 16 bits and used directly as the A operand of P V (see prims/mma.cuh).
//
// Naming (CuTe-style): sQ/sK/sV shared tiles, qa/kb/vb register fragments, s/o accumulators.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_params.h"
#include "kernels/attention_common/block_info.cuh"
#include "kernels/attention_common/mask.cuh"
#include "kernels/attention_common/online_softmax.cuh"
#include "kernels/attention_common/softcap.cuh"
#include "kernels/fwd_sm80/traits.cuh"
#include "prims/cp_async.cuh"
#include "prims/ldmatrix.cuh"
#include "prims/mma.cuh"
#include "prims/numeric.cuh"
#include "prims/opaque.cuh"
#include "tiles/tile_copy.cuh"

namespace flashkit::fwd_sm80 {

using attn::Mask;
using attn::OnlineSoftmax;

// S[kMTiles][kNTiles] = Q (warp rows) x K(tile)^T, Q and K from shared memory.
// Fragments are double-buffered in registers: the ldmatrix for the next (k-step, key pair)
// is issued before the MMAs of the current one, so the MMAs never wait on shared memory
// right after its load (ncu: short-scoreboard stalls 1.32 -> see docs/kernels/fwd_sm80.md).
template <class Tr>
__device__ __forceinline__ void gemm_qk(float (&s)[Tr::kMTiles][Tr::kNTiles][4],
                                        const typename Tr::T* sQ, const typename Tr::T* sK,
                                        int warp_row0, int lane) {
  using T = typename Tr::T;
  constexpr int kPairs = Tr::kNTiles / 2;  // key pairs of n8 tiles = one ldmatrix.x4 of K
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tr::kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;

  // Lane address patterns of ldmatrix.x4 (see prims/ldmatrix.cuh):
  //   A (Q, 16x16): row lane%16, column 8*(lane/16)
  //   B (K, two n8 tiles x k16): key lane%8 + 8*(lane/16), column 8*((lane/8)%2)
  const uint32_t q_addr = prims::opaque(
      prims::smem_addr(sQ + Tr::QTile::offset(warp_row0 + (lane % 16), (lane / 16) * 8)));
  const uint32_t k_addr = prims::opaque(
      prims::smem_addr(sK + Tr::KTile::offset((lane % 8) + (lane / 16) * 8, ((lane / 8) % 2) * 8)));
  uint32_t qa[2][Tr::kMTiles][4];
  uint32_t kb[2][4];
  auto load_q = [&](int buf, int ks) {
#pragma unroll
    for (int mt = 0; mt < Tr::kMTiles; ++mt) {
      prims::ldmatrix_x4(qa[buf][mt], Tr::QTile::step_addr(q_addr, mt * 16, ks * 16));
    }
  };
  auto load_k = [&](int buf, int ks, int np) {
    prims::ldmatrix_x4(kb[buf], Tr::KTile::step_addr(k_addr, np * 16, ks * 16));
  };
  load_q(0, 0);
  load_k(0, 0, 0);
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) {
#pragma unroll
    for (int np = 0; np < kPairs; ++np) {
      const int i = ks * kPairs + np;
      if (np + 1 < kPairs) {
        load_k((i + 1) % 2, ks, np + 1);
      } else if (ks + 1 < Tr::kKSteps) {
        load_q((ks + 1) % 2, ks + 1);
        load_k((i + 1) % 2, ks + 1, 0);
      }
#pragma unroll
      for (int mt = 0; mt < Tr::kMTiles; ++mt) {
        prims::mma_m16n8k16<T>(s[mt][2 * np], qa[ks % 2][mt], kb[i % 2][0], kb[i % 2][1]);
        prims::mma_m16n8k16<T>(s[mt][2 * np + 1], qa[ks % 2][mt], kb[i % 2][2], kb[i % 2][3]);
      }
    }
  }
}

// Packs the probabilities P (fp32 C fragments) into 16-bit A fragments of P V: the C
// fragments of n8 tiles 2j and 2j+1 form the A fragment of k16 step j. Packing right
// after the softmax halves the registers P occupies during P V.
template <class Tr>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[Tr::kMTiles][Tr::kPSteps][4],
                                       const float (&p)[Tr::kMTiles][Tr::kNTiles][4]) {
  using T = typename Tr::T;
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt) {
#pragma unroll
    for (int ps = 0; ps < Tr::kPSteps; ++ps) {
      pa[mt][ps][0] = prims::pack2<T>(p[mt][2 * ps][0], p[mt][2 * ps][1]);
      pa[mt][ps][1] = prims::pack2<T>(p[mt][2 * ps][2], p[mt][2 * ps][3]);
      pa[mt][ps][2] = prims::pack2<T>(p[mt][2 * ps + 1][0], p[mt][2 * ps + 1][1]);
      pa[mt][ps][3] = prims::pack2<T>(p[mt][2 * ps + 1][2], p[mt][2 * ps + 1][3]);
    }
  }
}

// O += P V(tile): P from registers, V from shared memory (transposed ldmatrix, since V is
// stored [key][d] and the MMA wants B as k x n = key x d). V fragments double-buffered.
template <class Tr>
__device__ __forceinline__ void gemm_pv(float (&o)[Tr::kMTiles][Tr::kDTiles][4],
                                        const uint32_t (&pa)[Tr::kMTiles][Tr::kPSteps][4],
                                        const typename Tr::T* sV, int lane) {
  using T = typename Tr::T;
  constexpr int kPairs = Tr::kDTiles / 2;
  const uint32_t v_addr = prims::opaque(
      prims::smem_addr(sV + Tr::VTile::offset((lane % 8) + ((lane / 8) % 2) * 8, (lane / 16) * 8)));
  uint32_t vb[2][4];
  auto load_v = [&](int buf, int ps, int dp) {
    prims::ldmatrix_x4_trans(vb[buf], Tr::VTile::step_addr(v_addr, ps * 16, dp * 16));
  };
  load_v(0, 0, 0);
#pragma unroll
  for (int ps = 0; ps < Tr::kPSteps; ++ps) {
#pragma unroll
    for (int dp = 0; dp < kPairs; ++dp) {
      const int i = ps * kPairs + dp;
      if (dp + 1 < kPairs) {
        load_v((i + 1) % 2, ps, dp + 1);
      } else if (ps + 1 < Tr::kPSteps) {
        load_v((i + 1) % 2, ps + 1, 0);
      }
#pragma unroll
      for (int mt = 0; mt < Tr::kMTiles; ++mt) {
        prims::mma_m16n8k16<T>(o[mt][2 * dp], pa[mt][ps], vb[i % 2][0], vb[i % 2][1]);
        prims::mma_m16n8k16<T>(o[mt][2 * dp + 1], pa[mt][ps], vb[i % 2][2], vb[i % 2][3]);
      }
    }
  }
}

// kMods: the instantiation for calls with a sliding window, a non-causal right bound or a
// softcap. Kept apart from the plain one: the window's third key loop and the cap raised
// ptxas spills of the plain d64 kernel from 20/44 to 188/412 bytes (stores/loads).
template <class Tr, bool kMods = false>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) fwd_kernel(const FwdParams p) {
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kThreads = Tr::kThreads;

  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  // Tile order: the grid is (sched_group, num_m_blocks, groups) and CTAs are dispatched
  // x fastest, so (batch, head) pairs are taken in groups of p.sched_group whose K/V fit
  // in L2 together (the launcher sizes the groups), and within a group row blocks run
  // from last to first. With a causal mask the last rows see the most keys, so the
  // longest CTAs start first and the short ones fill the tail, while the CTAs in flight
  // still share K/V through L2. Everything derives from blockIdx: ptxas re-reads it where
  // registers are short (a variant that recomputed coordinates in the epilogue spilled
  // 112 bytes at d128, this one 8). The same logic as a struct (attn::BlockInfo, used by
  // the sm90 family) made ptxas spill here: d64 8 -> 64 bytes, d128 8 -> 24 bytes.
  const int bh = blockIdx.z * p.sched_group + blockIdx.x;
  if (bh >= p.batch * p.h_q) return;
  const int m_block = gridDim.y - 1 - blockIdx.y;
  const int head = bh % p.h_q;
  const int batch = bh / p.h_q;

  // Sequence extents (varlen: from cu_seqlens, clamped to the tensors by
  // attn::varlen_extents, problems reported to the device error word; a zero-length or
  // invalid q range exits here).
  const bool varlen = p.cu_seqlens_q != nullptr;
  int q_start = 0, k_start = 0, seqlen_q = p.seqlen_q, seqlen_k = p.seqlen_k;
  if (varlen) {
    attn::varlen_extents(p, batch, q_start, seqlen_q, k_start, seqlen_k);
    attn::report_varlen_errors(p, batch);
  }
  const int m0 = m_block * kBlockM;
  if (m0 >= seqlen_q) return;
  const int rows_here = min(kBlockM, seqlen_q - m0);

  const int head_kv = head / p.h_ratio;
  const int64_t q_off = varlen ? int64_t(q_start) * p.q_row_stride : int64_t(batch) * p.q_batch_stride;
  const int64_t k_off = varlen ? int64_t(k_start) * p.k_row_stride : int64_t(batch) * p.k_batch_stride;
  const int64_t v_off = varlen ? int64_t(k_start) * p.v_row_stride : int64_t(batch) * p.v_batch_stride;
  const int64_t o_off = varlen ? int64_t(q_start) * p.o_row_stride : int64_t(batch) * p.o_batch_stride;
  const T* gQ = static_cast<const T*>(p.q) + q_off + head * p.q_head_stride + int64_t(m0) * p.q_row_stride;
  const T* gK = static_cast<const T*>(p.k) + k_off + head_kv * p.k_head_stride;
  const T* gV = static_cast<const T*>(p.v) + v_off + head_kv * p.v_head_stride;
  T* gO = static_cast<T*>(p.o) + o_off + head * p.o_head_stride + int64_t(m0) * p.o_row_stride;
  float* gLse = p.lse == nullptr ? nullptr
                                 : p.lse + (varlen ? int64_t(q_start) : int64_t(batch) * p.lse_batch_stride) +
                                       head * p.lse_head_stride + m0;

  const Mask mask{seqlen_q, seqlen_k, p.causal, kMods ? p.window_left : -1, kMods ? p.window_right : -1};
  const int n_tiles = mask.num_key_tiles(m0, kBlockM, kBlockN);
  const int n_first = kMods ? mask.first_key_tile(m0, kBlockN) : 0;  // > 0 only with a window
  // No row of this block sees a key: O = 0, LSE = -inf. (The plain kernel keeps the test
  // `n_tiles == 0`: `<= 0` made ptxas spill 96/172 bytes in the d256 kernel, 0 before.)
  if (kMods ? n_tiles <= n_first : n_tiles == 0) {
    tiles::zero_tile<typename Tr::QTile, kThreads>(gO, p.o_row_stride, rows_here, tid);
    if (gLse != nullptr) {
      for (int r = tid; r < rows_here; r += kThreads) gLse[r] = -INFINITY;
    }
    return;
  }

  // Prologue: Q and the last visible K tile.
  tiles::load_tile_async<typename Tr::QTile, kThreads>(sQ, gQ, p.q_row_stride, rows_here, tid);
  int n_block = n_tiles - 1;
  tiles::load_tile_async<typename Tr::KTile, kThreads>(
      sK, gK + int64_t(n_block) * kBlockN * p.k_row_stride, p.k_row_stride,
      seqlen_k - n_block * kBlockN, tid);
  prims::cp_async_commit();

  float o[Tr::kMTiles][Tr::kDTiles][4];
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt)
#pragma unroll
    for (int dt = 0; dt < Tr::kDTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
  OnlineSoftmax<Tr::kMTiles, Tr::kConditionalRescale> softmax;
  softmax.init();

  const int warp_row0 = warp * Tr::kWarpM;
  const float scale_log2 = p.softmax_scale_log2;

  // One key tile: S = Q K^T, mask, online softmax, O += P V. `sKn`/`sVn`: the tile's
  // buffers; `wait_v_then_issue_k` runs between the softmax and P V (see the pipeline).
  auto tile = [&](auto masked_tag, const T* sKn, const T* sVn, auto&& wait_v_then_issue_k) {
    constexpr bool kMasked = decltype(masked_tag)::value;
    float s[Tr::kMTiles][Tr::kNTiles][4];
    gemm_qk<Tr>(s, sQ, sKn, warp_row0, lane);
    if (kMods && p.softcap > 0.f) attn::apply_softcap(s, p.softcap, p.softcap_scale);
    if constexpr (kMasked) mask.apply(s, m0 + warp_row0, n_block * kBlockN, lane);
    softmax.update(s, o, scale_log2);
    uint32_t pa[Tr::kMTiles][Tr::kPSteps][4];
    pack_p<Tr>(pa, s);
    wait_v_then_issue_k();
    gemm_pv<Tr>(o, pa, sVn, lane);
  };
  auto load_k = [&](T* dst, int n) {
    tiles::load_tile_async<typename Tr::KTile, kThreads>(dst, gK + int64_t(n) * kBlockN * p.k_row_stride,
                                                         p.k_row_stride, seqlen_k - n * kBlockN, tid);
  };
  auto load_v = [&](T* dst, int n) {
    tiles::load_tile_async<typename Tr::VTile, kThreads>(dst, gV + int64_t(n) * kBlockN * p.v_row_stride,
                                                         p.v_row_stride, seqlen_k - n * kBlockN, tid);
  };

  //   wait K(n) - sync - issue V(n) - QK^T/softmax - wait V(n) - sync - issue K(n-1) - PV
  // (A double-buffered K/V variant with one barrier per tile measured 1-5% slower: the
  // second stage costs occupancy, and this overlap already hides the L2 latency.)
  auto step = [&](auto masked_tag) {
    prims::cp_async_wait<0>();
    __syncthreads();  // K(n) visible to all; every warp is done with V(n+1)
    load_v(sV, n_block);
    prims::cp_async_commit();
    tile(masked_tag, sK, sV, [&] {
      prims::cp_async_wait<0>();
      __syncthreads();  // V(n) visible to all; every warp is done with K(n)
      if (n_block > n_first) {
        load_k(sK, n_block - 1);
        prims::cp_async_commit();
      }
    });
  };
  for (; n_block >= n_first && mask.tile_needs_mask(n_block * kBlockN, kBlockN, m0); --n_block) {
    step(std::true_type{});
  }
  if constexpr (kMods) {
    // Sliding window: the last tiles of the walk need the left mask again.
    const int m_last = m0 + rows_here - 1;
    for (; n_block >= n_first && !mask.tile_needs_left_mask(n_block * kBlockN, m_last); --n_block) {
      step(std::false_type{});
    }
    for (; n_block >= n_first; --n_block) step(std::true_type{});
  } else {
    for (; n_block >= 0; --n_block) step(std::false_type{});
  }

  // Epilogue: normalize, stage O through shared memory (the Q tile: each warp overwrites
  // only its own rows, which only it has read), then coalesced 16-byte stores.
  float lse[Tr::kMTiles][2];
  softmax.finalize(o, scale_log2, lse);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt) {
    const int r = warp_row0 + mt * 16 + g;
#pragma unroll
    for (int dt = 0; dt < Tr::kDTiles; ++dt) {
      const int c = dt * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(sQ + Tr::QTile::offset(r, c)) = prims::pack2<T>(o[mt][dt][0], o[mt][dt][1]);
      *reinterpret_cast<uint32_t*>(sQ + Tr::QTile::offset(r + 8, c)) = prims::pack2<T>(o[mt][dt][2], o[mt][dt][3]);
    }
    if (gLse != nullptr && t == 0) {
      if (r < rows_here) gLse[r] = lse[mt][0];
      if (r + 8 < rows_here) gLse[r + 8] = lse[mt][1];
    }
  }
  __syncthreads();
  tiles::store_tile<typename Tr::QTile, kThreads>(gO, p.o_row_stride, sQ, rows_here, tid);
}

}  // namespace flashkit::fwd_sm80
