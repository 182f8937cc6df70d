// Hopper dense attention forward: FlashAttention-2's algorithm on warpgroup MMAs (wgmma),
// with FlashAttention-3's ping-pong schedule between two warpgroups.
//
// One CTA = 128 query rows of one (batch, head); each of its two warpgroups owns 64 rows.
// Key tiles are walked from the last visible one to the first (the tiles that need
// masking come first). Per warpgroup, gate j issues one batch of MMAs:
//
//   O += P(j-1) V(j-1)   (wgmma: P from registers, V from shared memory, MN-major)
//   S  = Q K(j)^T        (wgmma: Q and K from shared memory)
//
// then waits for it, masks, runs the online softmax on S and packs P(j) to 16 bits. The
// two warpgroups pass their gates in turn (named barriers), so while one runs its softmax
// the other's MMAs keep the tensor cores busy.
//
// Loads: every thread cp.async-copies part of each K/V tile into 128-byte-swizzled stages
// (K: 3 stages, V: 2) and its copies' completion arrives on the stage's "full" mbarrier;
// after its MMAs on a stage each thread arrives on its "empty" mbarrier. No CTA-wide
// barrier in the loop. The kTma variant copies every tile but the first with the TMA unit
// (one thread issues one box per 64-column atom; the MLA kernel gained 40% from the same
// change: the other threads no longer spend issue slots and registers on copies); the
// first tile of the walk, the only one that can run past the sequence's end (whose rows
// must read as zeros), keeps the cp.async copies and has its own "full" barriers. Unlike mma.sync (sm80 family), wgmma reads Q, K and V from shared
// memory itself for the whole 64-row warpgroup: no ldmatrix traffic through registers.
//
// The kernel body exists only in the sm_90a compilation (wgmma is not in sm_80 or in
// the portable PTX); the dispatcher only launches it on compute capability 9.0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention_common/block_info.cuh"
#include "kernels/attention_common/mask.cuh"
#include "kernels/attention_common/online_softmax.cuh"
#include "kernels/attention_common/softcap.cuh"
#include "kernels/attention_params.h"
#include "kernels/fwd_sm90/traits.cuh"
#include "prims/cp_async.cuh"
#include "prims/mbarrier.cuh"
#include "prims/numeric.cuh"
#include "prims/tma.cuh"
#include "prims/wgmma.cuh"
#include "tiles/tile_copy.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKIT_SM90_KERNEL_BODY 1
#else
#define FLASHKIT_SM90_KERNEL_BODY 0
#endif

// FLASHKIT_FWD_GATE_FENCE (tuning switch; fwd_sm90.md "The gates' proxy fence"): 0 = the TMA kernels' gates
// fence.proxy.async (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S per gate and warp) only where a wgmma first reads a tile that
// cp.async wrote: the persistent kernel never (every Q / K / V tile is TMA's), the producer-warpgroup kernel at the
// gates that first read Q + K(0) and V(0). The fence is the cp.async kernel's, whose every tile is a generic-proxy
// write; the other generic writes into shared memory that the async proxy reads (V's varlen tail, O's staging, D 256's
// O in V(last)) carry their own fence. 1 = every gate fences. 2 (default since 2026-11-29) = 0 at D 64 / 128, 1 at
// the other head dims: three interleaved rounds on an H200 put D 128 at +0..2.7 % (7 of 12 rows above the rounds'
// spread, none below) and D 64 at -0.3..+1.3 %, while D 96 / 256 each had a 16k row 1.1 % below it (fwd_sm90.md).
#ifndef FLASHKIT_FWD_GATE_FENCE
#define FLASHKIT_FWD_GATE_FENCE 2
#endif

namespace flashkit::fwd_sm90 {

// Whether the gates of head dim kHeadDim's TMA kernels fence the proxies (FLASHKIT_FWD_GATE_FENCE above).
template <int kHeadDim>
constexpr bool fwd_gate_fence() {
  return FLASHKIT_FWD_GATE_FENCE == 1 || (FLASHKIT_FWD_GATE_FENCE == 2 && kHeadDim != 64 && kHeadDim != 128);
}

// The [8][4] accumulator block of one n64 wgmma inside a [kTiles][4] fragment array.
template <int kTiles>
__device__ __forceinline__ float (&n64_block(float (&acc)[1][kTiles][4], int chunk))[8][4] {
  return *reinterpret_cast<float(*)[8][4]>(&acc[0][chunk * 8][0]);
}

// Wide wgmmas (tuning switch, fwd_sm90.md "wide wgmmas"): 1 = Q K^T as one m64n128 per k-step
// where kBlockN = 128 and P V as one m64n128 / m64n192 / m64n256 where the padded head dim is 128 / 192 / 256;
// 0 = every wgmma m64n64 on shifted descriptors (the shape up to 2026-11-26).
#ifndef FLASHKIT_FWD_WIDE_WGMMA
#define FLASHKIT_FWD_WIDE_WGMMA 1
#endif
// P V at D = 192 as one m64n192 per k-step (fwd_sm90.md "n192 P V at D 192"); 0 = three n64s.
#ifndef FLASHKIT_FWD_N192_PV
#define FLASHKIT_FWD_N192_PV 1
#endif

template <int kTiles>
__device__ __forceinline__ float (&n128_block(float (&acc)[1][kTiles][4]))[16][4] {
  static_assert(kTiles == 16, "a whole 128-column fragment");
  return *reinterpret_cast<float(*)[16][4]>(&acc[0][0][0]);
}
template <int kTiles>
__device__ __forceinline__ float (&n192_block(float (&acc)[1][kTiles][4]))[24][4] {
  static_assert(kTiles == 24, "a whole 192-column fragment");
  return *reinterpret_cast<float(*)[24][4]>(&acc[0][0][0]);
}
template <int kTiles>
__device__ __forceinline__ float (&n256_block(float (&acc)[1][kTiles][4]))[32][4] {
  static_assert(kTiles == 32, "a whole 256-column fragment");
  return *reinterpret_cast<float(*)[32][4]>(&acc[0][0][0]);
}

// S = Q K^T for the warpgroup's 64 rows: kKSteps x kNChunks wgmmas (issue only; the caller
// fences, commits and waits). Descriptors advance inside a 128-byte swizzle row by 32 bytes
// per k16 step, and by one atom column (kRows x 128 bytes) every 4 steps. At kBlockN = 128
// one m64n128 per k-step: the K tile's 128 rows are one run of 8-row groups (sbo 1024).
template <class Tr>
__device__ __forceinline__ void issue_qk(float (&s)[1][Tr::kNTiles][4], uint64_t desc_q, uint64_t desc_k) {
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) {
    const uint64_t q_off = ((ks / 4) * Tr::QTile::kBlockBytes + (ks % 4) * 32) >> 4;
    if constexpr (FLASHKIT_FWD_WIDE_WGMMA && Tr::kNChunks == 2) {
      const uint64_t k_off = ((ks / 4) * Tr::KTile::kBlockBytes + (ks % 4) * 32) >> 4;
      prims::wgmma_m64n128k16_ss<typename Tr::T>(n128_block(s), desc_q + q_off, desc_k + k_off, ks > 0 ? 1 : 0);
    } else {
#pragma unroll
      for (int nc = 0; nc < Tr::kNChunks; ++nc) {
        const uint64_t k_off = ((ks / 4) * Tr::KTile::kBlockBytes + nc * 64 * 128 + (ks % 4) * 32) >> 4;
        prims::wgmma_m64n64k16_ss<typename Tr::T>(n64_block(s, nc), desc_q + q_off, desc_k + k_off,
                                                  ks > 0 ? 1 : 0);
      }
    }
  }
}

// O += P V: P from registers (k16 step ps = S column tiles 2ps, 2ps+1), V as an MN-major
// operand: 16 keys of one atom column per n64 wgmma, i.e. 16 rows x 128 bytes = 2048 bytes;
// the wide forms cover 2 or 4 atom columns, VTile::kBlockBytes apart (the descriptor's lbo).
template <class Tr>
__device__ __forceinline__ void issue_pv(float (&o)[1][Tr::kDTiles][4], const uint32_t (&pa)[Tr::kPSteps][4],
                                         uint64_t desc_v) {
#pragma unroll
  for (int ps = 0; ps < Tr::kPSteps; ++ps) {
    if constexpr (FLASHKIT_FWD_WIDE_WGMMA && Tr::kDChunks == 2) {
      prims::wgmma_m64n128k16_rs_tnspb<typename Tr::T>(n128_block(o), pa[ps], desc_v + ((ps * 16 * 128) >> 4));
    } else if constexpr (FLASHKIT_FWD_WIDE_WGMMA && FLASHKIT_FWD_N192_PV && Tr::kDChunks == 3) {
      prims::wgmma_m64n192k16_rs_tnspb<typename Tr::T>(n192_block(o), pa[ps], desc_v + ((ps * 16 * 128) >> 4));
    } else if constexpr (FLASHKIT_FWD_WIDE_WGMMA && Tr::kDChunks == 4) {
      prims::wgmma_m64n256k16_rs_tnspb<typename Tr::T>(n256_block(o), pa[ps], desc_v + ((ps * 16 * 128) >> 4));
    } else {
#pragma unroll
      for (int dc = 0; dc < Tr::kDChunks; ++dc) {
        const uint64_t v_off = (dc * Tr::VTile::kBlockBytes + ps * 16 * 128) >> 4;
        prims::wgmma_m64n64k16_rs_tnspb<typename Tr::T>(n64_block(o, dc), pa[ps], desc_v + v_off);
      }
    }
  }
}

// P (fp32 scores after the softmax) packed to 16 bits: k16 step ps of P V takes the S
// column tiles 2ps and 2ps+1 (the register A operand layout of wgmma).
template <class Tr>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[Tr::kPSteps][4], const float (&s)[1][Tr::kNTiles][4]) {
  using T = typename Tr::T;
#pragma unroll
  for (int ps = 0; ps < Tr::kPSteps; ++ps) {
    pa[ps][0] = prims::pack2<T>(s[0][2 * ps][0], s[0][2 * ps][1]);
    pa[ps][1] = prims::pack2<T>(s[0][2 * ps][2], s[0][2 * ps][3]);
    pa[ps][2] = prims::pack2<T>(s[0][2 * ps + 1][0], s[0][2 * ps + 1][1]);
    pa[ps][3] = prims::pack2<T>(s[0][2 * ps + 1][2], s[0][2 * ps + 1][3]);
  }
}

// FLASHKIT_FWD_STSM_O (tuning switch, fwd_sm90.md "Tile decode by multiply-high, O staged by
// stmatrix"): 1 = the epilogues stage O with stmatrix.x4 (stage_o_rows_stsm; the persistent
// kernel's since 2026-11-27), 0 = with 4-byte stores (stage_o_rows).
#ifndef FLASHKIT_FWD_STSM_O
#define FLASHKIT_FWD_STSM_O 1
#endif
// FLASHKIT_FWD_STSM_O_FLAT (tuning switch; fwd_sm90.md: +1.8% at D 256, +4% at S 512): the same
// in the non-persistent kernels' epilogue (D 256 and the long causal calls); 0 keeps the 4-byte
// stores there.
#ifndef FLASHKIT_FWD_STSM_O_FLAT
#define FLASHKIT_FWD_STSM_O_FLAT 1
#endif

// This thread's rows r and r + 8 of O (the accumulator layout: column pair 2 tq of every
// 8-column tile), packed to 16 bits, into a 128-byte-swizzled tile of kBlockM rows (the
// epilogues stage O there before whole-row stores).
template <class Tr>
__device__ __forceinline__ void stage_o_rows(typename Tr::T* tile, const float (&o)[1][Tr::kDTiles][4], int r,
                                             int tq) {
  using T = typename Tr::T;
#pragma unroll
  for (int dt = 0; dt < Tr::kDTiles; ++dt) {
    const int col = dt * 8 + 2 * tq;
    *reinterpret_cast<uint32_t*>(tile + Tr::QTile::offset(r, col)) = prims::pack2<T>(o[0][dt][0], o[0][dt][1]);
    *reinterpret_cast<uint32_t*>(tile + Tr::QTile::offset(r + 8, col)) = prims::pack2<T>(o[0][dt][2], o[0][dt][3]);
  }
}

// The same rows of a warp (16 rows from warp_row0) with stmatrix: the accumulator's 8-column
// tiles 2 j and 2 j + 1 of rows 0-7 and 8-15 are exactly the four 8 x 8 matrices of one
// stmatrix.x4 (lane l addresses row l % 8 of matrix l / 8: rows + 8 for odd matrices,
// columns + 8 for matrices 2 and 3). kDTiles / 2 instructions instead of 2 kDTiles 4-byte
// stores (D 128: 8 instead of 32). The lane's chunk within its atom is 0 or 1 and the steps
// are 16 columns, so step_addr's conditions hold. `tile` is the tile's shared address.
template <class Tr>
__device__ __forceinline__ void stage_o_rows_stsm(uint32_t tile, const float (&o)[1][Tr::kDTiles][4], int warp_row0,
                                                  int lane) {
  using T = typename Tr::T;
  static_assert(Tr::kDTiles % 2 == 0, "pairs of 8-column tiles");
  const int mat = lane / 8;
  const int row = warp_row0 + lane % 8 + 8 * (mat % 2);
  const uint32_t a0 = tile + uint32_t(sizeof(T)) * uint32_t(Tr::QTile::offset(row, 8 * (mat / 2)));
#pragma unroll
  for (int j = 0; j < Tr::kDTiles / 2; ++j) {
    const uint32_t addr = Tr::QTile::step_addr(a0, 0, 16 * j);
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(prims::pack2<T>(o[0][2 * j][0], o[0][2 * j][1])),
                 "r"(prims::pack2<T>(o[0][2 * j][2], o[0][2 * j][3])),
                 "r"(prims::pack2<T>(o[0][2 * j + 1][0], o[0][2 * j + 1][1])),
                 "r"(prims::pack2<T>(o[0][2 * j + 1][2], o[0][2 * j + 1][3]))
                 : "memory");
  }
}

// Padded head dims (96 -> 128): zeros in the padding columns of Q, of every K stage and of
// every V stage, written once (the copies never touch them), so they add nothing to
// Q K^T and leave O's data columns alone. Made visible to the async proxy by the writer's
// fence (the main loop's first CTA barrier follows).
template <class Tr>
__device__ __forceinline__ void zero_padding(unsigned char* smem, int tid) {
  using T = typename Tr::T;
  constexpr int kPadChunks = (Tr::kHeadDimPadded - Tr::kHeadDim) / 8;  // 16-byte chunks per row
  constexpr int kRows = Tr::kBlockM + Tr::kKStages * Tr::kBlockN + Tr::kVStages * Tr::kBlockN;
  for (int i = tid; i < kRows * kPadChunks; i += Tr::kConsumerThreads) {
    const int r = i / kPadChunks;
    const int col = Tr::kHeadDim + (i % kPadChunks) * 8;
    T* tile;
    int row;
    if (r < Tr::kBlockM) {
      tile = reinterpret_cast<T*>(smem + Tr::kSmemQ);
      row = r;
    } else if (r < Tr::kBlockM + Tr::kKStages * Tr::kBlockN) {
      const int k = r - Tr::kBlockM;
      tile = reinterpret_cast<T*>(smem + Tr::kSmemK + (k / Tr::kBlockN) * Tr::KTile::kBytes);
      row = k % Tr::kBlockN;
    } else {
      const int v = r - Tr::kBlockM - Tr::kKStages * Tr::kBlockN;
      tile = reinterpret_cast<T*>(smem + Tr::kSmemV + (v / Tr::kBlockN) * Tr::VTile::kBytes);
      row = v % Tr::kBlockN;
    }
    // (Q's and K's, V's tiles share the swizzled layout; the offsets only differ in rows.)
    const int off = r < Tr::kBlockM ? Tr::QTile::offset(row, col) : Tr::KTile::offset(row, col);
    *reinterpret_cast<uint4*>(tile + off) = make_uint4(0, 0, 0, 0);
  }
  prims::fence_proxy_async_smem();
}

// Per-CTA state of the main loop.
template <class Tr, bool kMods>
struct Cta {
  using T = typename Tr::T;
  const FwdParams& p;
  const attn::BlockInfo<T, Tr::kBlockM>& blk;
  const attn::Mask& mask;
  int n_tiles, n_first, tid, lane, wg, warp_row0;  // the walk: key tiles n_tiles-1 .. n_first; tid, wg: consumer
  T *sQ, *sK, *sV;
  uint64_t desc_q, desc_k0, desc_v0;

  // Tile j of the walk (j = 0 is the last visible key tile) as a key-block index.
  __device__ __forceinline__ int key_block(int j) const { return n_tiles - 1 - j; }
  __device__ __forceinline__ void load_k(int j, int stage) const {
    const int n = key_block(j);
    tiles::load_tile_async<typename Tr::KTileIO, Tr::kConsumerThreads>(
        sK + stage * (Tr::KTile::kBytes / int(sizeof(T))), blk.k + int64_t(n) * Tr::kBlockN * p.k_row_stride,
        p.k_row_stride, blk.seqlen_k - n * Tr::kBlockN, tid);
  }
  __device__ __forceinline__ void load_v(int j, int stage) const {
    const int n = key_block(j);
    tiles::load_tile_async<typename Tr::VTileIO, Tr::kConsumerThreads>(
        sV + stage * (Tr::VTile::kBytes / int(sizeof(T))), blk.v + int64_t(n) * Tr::kBlockN * p.v_row_stride,
        p.v_row_stride, blk.seqlen_k - n * Tr::kBlockN, tid);
  }
  // Tile j (j >= 1: whole tiles inside the sequence) by the TMA unit, issued by `issuer`
  // only (predicated copies, no branch), completing on `bar` (which the issuer arms with
  // the tile's bytes first). Boxes of 64 columns x kBlockN rows of the maps in p; columns
  // past the head dim (D 96, 192's padding) arrive as zeros.
  __device__ __forceinline__ void load_tma(const TmaDesc& map, T* stage_base, int j, uint32_t bar, bool issuer) const {
    static_assert(Tr::KTile::kBytes == Tr::VTile::kBytes, "K and V tiles have one shape");
    prims::mbarrier_arrive_expect_tx_if(issuer, bar, Tr::KTile::kBytes);
    const uint32_t dst = prims::smem_addr(stage_base);
    const int row = blk.k_row0 + key_block(j) * Tr::kBlockN;
    const int head_kv = p.div_h_ratio.div(blk.head);
    const int batch = p.cu_seqlens_k != nullptr ? 0 : blk.batch;
#pragma unroll
    for (int a = 0; a < Tr::kHeadDimPadded / 64; ++a) {
      prims::tma_load_4d_nohint_if(issuer, dst + a * Tr::KTile::kBlockBytes, &map, a * 64, row, head_kv, batch, bar);
    }
  }
  // The same tile from a cluster of two (the persistent kernel's kCluster; fixed lengths): this CTA (rank r) arms its
  // `bar` with the whole tile and loads rows r * kBlockN / 2 .. of it (maps with half-height boxes), multicast into
  // the same stage of both CTAs, completing on each one's `bar`; the peer loads the other half. (The 128-byte swizzle
  // repeats every 8 rows: the halves make the layout of one full box.) The barrier is armed after the copies are
  // issued: the peer's half may complete its bytes on `bar` before this CTA arms it anyway (the tx-count goes
  // negative, and the phase cannot complete before this arrival, its only one), and armed last the byte count needs
  // no register through the copies (the producer's 24: 4 bytes of spills at D 96 / 128 / 192 armed first).
  __device__ __forceinline__ void load_tma_half(const TmaDesc& map, T* stage_base, int j, uint32_t bar, int rank) const {
    constexpr int kHalfRows = Tr::kBlockN / 2;
    static_assert(kHalfRows % 8 == 0, "whole 8-row swizzle atoms per half");
    const uint32_t dst = prims::smem_addr(stage_base) + uint32_t(rank * kHalfRows * 128);
    const int row = blk.k_row0 + key_block(j) * Tr::kBlockN + rank * kHalfRows;
    const int head_kv = p.div_h_ratio.div(blk.head);
#pragma unroll
    for (int a = 0; a < Tr::kHeadDimPadded / 64; ++a) {
      prims::tma_load_4d_multicast(dst + a * Tr::KTile::kBlockBytes, &map, a * 64, row, head_kv, blk.batch, bar,
                                   uint16_t(0x3));
    }
    prims::mbarrier_arrive_expect_tx(bar, Tr::KTile::kBytes);
  }
  __device__ __forceinline__ uint64_t desc_k(int stage) const { return desc_k0 + ((stage * Tr::KTile::kBytes) >> 4); }
  __device__ __forceinline__ uint64_t desc_v(int stage) const { return desc_v0 + ((stage * Tr::VTile::kBytes) >> 4); }
  // Mask (where the tile needs it), online softmax, P to 16 bits.
  template <class Softmax>
  __device__ __forceinline__ void softmax_tile(int j, float (&s)[1][Tr::kNTiles][4], float (&o)[1][Tr::kDTiles][4],
                                               Softmax& softmax, uint32_t (&pa)[Tr::kPSteps][4]) const {
    const int n0 = key_block(j) * Tr::kBlockN;
    if (kMods && p.softcap > 0.f) attn::apply_softcap(s, p.softcap, p.softcap_scale);
    if (mask.tile_needs_mask(n0, Tr::kBlockN, blk.m0) ||
        (kMods && mask.tile_needs_left_mask(n0, blk.m0 + blk.rows_here - 1))) {
      mask.apply(s, blk.m0 + warp_row0, n0, lane);
    }
    softmax.update(s, o, p.softmax_scale_log2);
    pack_p<Tr>(pa, s);
  }
  // The same without touching O or P's registers (both still read by P V(j-1)): the
  // rescale factors come back, the caller packs P after the wait.
  template <class Softmax>
  __device__ __forceinline__ bool softmax_tile_p(int j, float (&s)[1][Tr::kNTiles][4], Softmax& softmax,
                                                 float (&corr)[1][2]) const {
    const int n0 = key_block(j) * Tr::kBlockN;
    if (kMods && p.softcap > 0.f) attn::apply_softcap(s, p.softcap, p.softcap_scale);
    if (mask.tile_needs_mask(n0, Tr::kBlockN, blk.m0) ||
        (kMods && mask.tile_needs_left_mask(n0, blk.m0 + blk.rows_here - 1))) {
      mask.apply(s, blk.m0 + warp_row0, n0, lane);
    }
    return softmax.update_p(s, p.softmax_scale_log2, corr);
  }
};

// Ping-pong main loop. The two warpgroups take turns issuing their MMAs ("gates", named
// barriers 1 and 2), so one warpgroup's softmax runs while the other's MMAs keep the
// tensor cores busy (FlashAttention-3, Shah et al. 2024, section 3.1). Gate j issues
// P V(j-1) and Q K(j)^T as one batch; the last gate issues P V(last) alone.
//
// Loads are decoupled from compute by mbarriers instead of CTA barriers: each thread's
// cp.async completion arrives on the stage's "full" barrier (all 256 threads copy part of
// every tile), and each thread arrives on the stage's "empty" barrier once its MMAs on it
// are done. K(j+2) is loaded right after gate j (K has kKStages = 3 stages, so that stage
// was last read at gate j-1 by both warpgroups: nobody waits), V(j+1) after the softmax
// of tile j (its stage was read by P V(j-1) at gate j).
template <class Tr, bool kMods, bool kTma, class Softmax>
__device__ __forceinline__ void mainloop_pingpong(const Cta<Tr, kMods>& c, uint32_t bars, float (&o)[1][Tr::kDTiles][4],
                                                  Softmax& softmax) {
  constexpr int KS = Tr::kKStages, VS = Tr::kVStages;
  // The overlap needs a second P in registers: not at D 64 (2 CTAs per SM, 128 registers).
  constexpr bool kOverlap = kTma && Tr::kMinBlocks == 1;
  static_assert(KS >= 3 && VS == 2, "K(j+2) must not overwrite a stage the other warpgroup may read");
  static_assert(kTma == Tr::kProducer, "the TMA tiles are issued by the producer warpgroup");
  auto full_k = [&](int st) { return bars + 8 * st; };
  auto empty_k = [&](int st) { return bars + 8 * (KS + st); };
  auto full_v = [&](int st) { return bars + 8 * (2 * KS + st); };
  auto empty_v = [&](int st) { return bars + 8 * (2 * KS + VS + st); };
  // kTma: tile 0's cp.async copies arrive on these (256 arrivals); the stages' full
  // barriers then see the TMA tiles 1, 2, ... only (one arrival with the byte count).
  const uint32_t full0_k = bars + 8 * (2 * KS + 2 * VS), full0_v = full0_k + 8;
  // Tile j's K lives in stage j % KS, V in j % 2. Without TMA tile j is the (j / KS)-th use
  // of its K stage's full barrier (parity (j / KS) & 1); with TMA tile 0 has its own
  // barrier, so tile j >= 1 is the ((j - 1) / KS)-th (KS = 3: stages 1, 2, 0 first see
  // tiles 1, 2, 3), and likewise ((j - 1) / VS) for V.
  // kTma: the producer warpgroup issues tiles j >= 1 (producer_loop); the consumers copy
  // tile 0 only. Without TMA every consumer thread copies and waits.
  constexpr bool k_waiter = true, v_waiter = true;
  // issue_k / issue_v: tile j >= 1 (cp.async kernel), issue_k0 / issue_v0: tile 0.
  auto issue_k0 = [&] {
    c.load_k(0, 0);
    prims::cp_async_mbarrier_arrive(kTma ? full0_k : full_k(0));
  };
  auto issue_v0 = [&] {
    c.load_v(0, 0);
    prims::cp_async_mbarrier_arrive(kTma ? full0_v : full_v(0));
  };
  auto issue_k = [&](int j) {
    c.load_k(j, j % KS);
    prims::cp_async_mbarrier_arrive(full_k(j % KS));
  };
  auto issue_v = [&](int j) {
    c.load_v(j, j % VS);
    prims::cp_async_mbarrier_arrive(full_v(j % VS));
  };
  issue_k0();  // (its arrival also covers the Q copies issued before)
  issue_v0();
  if (!kTma && c.n_tiles - c.n_first > 1) {
    issue_k(1);
    issue_v(1);
  }

  const int turn = 1 + c.wg, other_turn = 2 - c.wg;
  if (c.wg == 1) prims::bar_arrive(1, 2 * 128);  // warpgroup 0 goes first
  float s[1][Tr::kNTiles][4];
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
  uint32_t pa[Tr::kPSteps][4];
  const int last = c.n_tiles - 1 - c.n_first;

  // The wgmma issues must not sit under data-dependent branches: ptxas then serializes
  // every wgmma of the kernel (C7520, measured 1.5x slower). So the first gate (Q K(0)^T
  // only) and the last (P V(last) only) are peeled off the loop.
  // (Selects, not branches, in the waits: they sit among wgmma issues.)
  auto wait_k = [&](int j) {
    if constexpr (kTma) {
      prims::mbarrier_wait(j == 0 ? full0_k : full_k(j % KS), j == 0 ? 0 : ((j - 1) / KS) & 1);
    } else {
      prims::mbarrier_wait(full_k(j % KS), (j / KS) & 1);
    }
  };
  auto wait_v = [&](int j) {
    if constexpr (kTma) {
      prims::mbarrier_wait(j == 0 ? full0_v : full_v(j % VS), j == 0 ? 0 : ((j - 1) / VS) & 1);
    } else {
      prims::mbarrier_wait(full_v(j % VS), (j / VS) & 1);
    }
  };
  // cp_tiles: this gate's wgmmas read a tile that cp.async wrote (kTma: Q and K(0) at the first gate, V(0) at the
  // next; every gate without kTma)
  auto gate_open = [&](bool cp_tiles) {
    if constexpr (fwd_gate_fence<Tr::kHeadDim>() || !kTma) {
      prims::fence_proxy_async_smem();
    } else {
      if (cp_tiles) prims::fence_proxy_async_smem();
    }
    prims::bar_sync(turn, 2 * 128);
    prims::fence_operands(o[0]);
    prims::wgmma_fence();
  };
  // After the MMAs of tile j's Q K^T (and of tile j-1's P V) are done: free their stages,
  // prefetch K(j+2), then the softmax of tile j, then prefetch V(j+1).
  auto after_gate = [&](int j) {
    prims::wgmma_wait<0>();
    prims::fence_operands(o[0]);
    prims::fence_operands(s[0]);
    prims::mbarrier_arrive(empty_k(j % KS));
    if (j > 0) prims::mbarrier_arrive(empty_v((j - 1) % VS));
    if (!kTma && j + 2 <= last) {
      const int jk = j + 2;
      if (jk >= KS && k_waiter) prims::mbarrier_wait(empty_k(jk % KS), ((jk - KS) / KS) & 1);
      __syncwarp();
      issue_k(jk);
    }
    c.softmax_tile(j, s, o, softmax, pa);
    if (!kTma && j >= 1 && j + 1 <= last) {
      const int jv = j + 1;  // its stage held V(j-1), read at this gate
      if (v_waiter) prims::mbarrier_wait(empty_v(jv % VS), ((jv - VS) / VS) & 1);
      __syncwarp();
      issue_v(jv);
    }
  };

  wait_k(0);
  gate_open(true);
  issue_qk<Tr>(s, c.desc_q, c.desc_k(0));
  prims::wgmma_commit();
  prims::bar_arrive(other_turn, 2 * 128);
  after_gate(0);
  // Intra-warpgroup overlap (kOverlap, FlashAttention-3 section 3.2): Q K(j)^T and
  // P V(j-1) go out as two commit groups, Q K^T first; the softmax of tile j (max, exp2,
  // sums: fp32 on S) starts as soon as Q K(j)^T is done (wait<1>) while P V(j-1) still
  // runs; O's rescale and P(j)'s packing into the A registers wait until P V(j-1) has
  // retired (wait<0>), as in FA3 (writing P into a second register buffer during the
  // P V made ptxas serialize every wgmma, C7513).
  auto after_gate_overlap = [&](int j) {
    prims::wgmma_wait<1>();
    prims::fence_operands(s[0]);
    prims::mbarrier_arrive(empty_k(j % KS));
    float corr[1][2];
    const bool moved = c.softmax_tile_p(j, s, softmax, corr);
    // A basic-block boundary: without it ptxas hoists the wait below to the top of its
    // block, above the softmax, and the overlap is gone (SASS: no MUFU.EX2 between the two
    // WARPGROUP.DEPBARs). The branch is never taken (batch >= 1 here). Not a trap: a trap
    // in the consumers' setmaxnreg region makes ptxas compile it at the entry's 168
    // registers (spills).
    if (c.p.batch < 0 && c.p.error_flag != nullptr) atomicOr(c.p.error_flag, 0u);
    prims::wgmma_wait<0>();
    prims::fence_operands(o[0]);
    prims::fence_operands(pa);  // P(j-1) stays intact until its P V retired
    prims::mbarrier_arrive(empty_v((j - 1) % VS));
    softmax.rescale(o, corr, moved);
    pack_p<Tr>(pa, s);
  };
  for (int j = 1; j <= last; ++j) {
    wait_k(j);
    wait_v(j - 1);
    gate_open(j == 1);
    if constexpr (kOverlap) {
      issue_qk<Tr>(s, c.desc_q, c.desc_k(j % KS));
      prims::wgmma_commit();
      // A pipeline stage of its own (warpgroup.arrive) for P V: with both in one, ptxas sees
      // the softmax define S (an input of the stage's Q K^T) before the stage ends and
      // serializes every wgmma (C7513).
      prims::fence_operands(s[0]);
      prims::wgmma_fence();
      issue_pv<Tr>(o, pa, c.desc_v((j - 1) % VS));
      prims::wgmma_commit();
      prims::bar_arrive(other_turn, 2 * 128);
      after_gate_overlap(j);
    } else {
      issue_pv<Tr>(o, pa, c.desc_v((j - 1) % VS));
      issue_qk<Tr>(s, c.desc_q, c.desc_k(j % KS));
      prims::wgmma_commit();
      prims::bar_arrive(other_turn, 2 * 128);
      after_gate(j);
    }
  }
  wait_v(last);
  gate_open(last == 0);
  issue_pv<Tr>(o, pa, c.desc_v(last % VS));
  prims::wgmma_commit();
  // Warpgroup 1 skips its arrival after the last gate: it gave warpgroup 0 one at the start.
  if (c.wg == 0) prims::bar_arrive(other_turn, 2 * 128);
  prims::wgmma_wait<0>();
  prims::fence_operands(o[0]);
}

// The mbarriers of the main loop: full/empty per K and V stage, and (kTma) the full
// barriers of tile 0's cp.async copies. cp.async barriers count the 256 consumer threads'
// arrivals, empty barriers their releases; a TMA stage's full barrier one arrival (the
// producer's expect_tx) plus the bytes. Thread 0 of the CTA initializes; every thread of
// the CTA (producer included) passes the barrier that follows.
template <class Tr, bool kTma>
__device__ __forceinline__ void init_barriers(uint32_t bars) {
  constexpr int KS = Tr::kKStages, VS = Tr::kVStages;
  if (threadIdx.x == 0) {
    for (int i = 0; i < Tr::kNumBars; ++i) {
      const bool tma_full = kTma && (i < KS || (i >= 2 * KS && i < 2 * KS + VS));
      prims::mbarrier_init(bars + 8 * i, tma_full ? 1 : Tr::kConsumerThreads);
    }
    // The initialized barriers visible to the TMA unit (async proxy) before its first
    // complete_tx (as the MLA kernel does).
    if (kTma) asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// The producer warpgroup of the TMA variant (FlashAttention-3 section 3.1's warp
// specialization): one thread issues K(j) and V(j) for j = 1 .. last in order, each once
// the consumers released its stage's previous tile (K: Q K(j - KS)^T of both warpgroups,
// V: P V(j - 2)); tile 0 is the consumers' cp.async (it may run past the sequence end).
// The consumers never wait on an "empty" barrier. K(j) then has about two gates of lead
// (its stage frees at gate j - 2, it is read at gate j), V(j) one.
template <class Tr, bool kMods>
__device__ __forceinline__ void producer_loop(const Cta<Tr, kMods>& c, uint32_t bars) {
  constexpr int KS = Tr::kKStages, VS = Tr::kVStages;
  constexpr int kTileElems = Tr::KTile::kBytes / int(sizeof(typename Tr::T));
  if (threadIdx.x != Tr::kConsumerThreads) return;  // thread 0 of the producer warpgroup
  prims::tma_prefetch_desc(&c.p.k_tmap);
  prims::tma_prefetch_desc(&c.p.v_tmap);
  const int last = c.n_tiles - 1 - c.n_first;
  for (int j = 1; j <= last; ++j) {
    if (j >= KS) prims::mbarrier_wait(bars + 8 * (KS + j % KS), ((j - KS) / KS) & 1);
    c.load_tma(c.p.k_tmap, c.sK + (j % KS) * kTileElems, j, bars + 8 * (j % KS), true);
    if (j >= VS) prims::mbarrier_wait(bars + 8 * (2 * KS + VS + j % VS), ((j - VS) / VS) & 1);
    c.load_tma(c.p.v_tmap, c.sV + (j % VS) * kTileElems, j, bars + 8 * (2 * KS + j % VS), true);
  }
}

// kMods: the instantiation for a sliding window, a non-causal right bound or a softcap
// (kept apart so the plain kernel's registers stay as they were: d64 spilled 28/36
// bytes instead of 16/16 with the window and cap code in it).
// kTma: K/V tiles after the first by the TMA unit, issued by a producer warpgroup
// (Tr::kProducer: threads 256..383; the consumer warpgroups are threads 0..255 and run
// everything else; setmaxnreg moves the producer's registers to them). Maps in p.k_tmap / p.v_tmap, made by the launcher; __grid_constant__
// so that their parameter-space address is usable.
template <class Tr, bool kMods = false, bool kTma = false>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) fwd_kernel(const __grid_constant__ FwdParams p) {
#if FLASHKIT_SM90_KERNEL_BODY
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kThreads = Tr::kThreads;  // the launch (exit paths before the role split)
  constexpr int kCThreads = Tr::kConsumerThreads;

  // Swizzle atoms need 1024-byte alignment of the absolute shared address.
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);

  attn::BlockInfo<T, kBlockM> blk;
  if (!blk.init(p)) return;
  const attn::Mask mask = kMods ? attn::Mask{blk.seqlen_q, blk.seqlen_k, p.causal, p.window_left, p.window_right}
                                : attn::Mask{blk.seqlen_q, blk.seqlen_k, p.causal};
  const int tid = threadIdx.x;
  Cta<Tr, kMods> c{p, blk, mask};
  c.n_tiles = mask.num_key_tiles(blk.m0, kBlockM, kBlockN);
  c.n_first = kMods ? mask.first_key_tile(blk.m0, kBlockN) : 0;  // > 0 only with a window
  // No row of this block sees a key: O = 0, LSE = -inf (the plain kernel keeps its old
  // test, see fwd_sm80).
  if (kMods ? c.n_tiles <= c.n_first : c.n_tiles == 0) {
    // (the consumers' 256 threads: the tile's chunks need not split over 384)
    if (tid < kCThreads) tiles::zero_tile<typename Tr::QTileIO, kCThreads>(blk.o, p.o_row_stride, blk.rows_here, tid);
    if (blk.lse != nullptr) {
      for (int r = tid; r < blk.rows_here; r += kThreads) blk.lse[r] = -INFINITY;
    }
    attn::report_varlen_errors(p, blk.batch);
    return;
  }
  // (the warpgroup index through a shuffle: warp-uniform for the compiler)
  const bool producer = Tr::kProducer && __shfl_sync(0xffffffffu, tid / 128, 0) == 2;
  const int ctid = tid;  // consumer thread index
  c.tid = ctid;
  c.lane = tid % 32;
  c.wg = __shfl_sync(0xffffffffu, ctid / 128, 0);  // (warp-uniform for the compiler: Q's descriptor in uniform registers)
  c.warp_row0 = c.wg * 64 + ((ctid % 128) / 32) * 16;  // this warp's 16 rows
  c.sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  c.sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  c.sV = reinterpret_cast<T*>(smem + Tr::kSmemV);
  // Descriptors of this warpgroup's Q rows and of stage 0 of K and V (8-row groups 1024
  // bytes apart; V's leading offset, one atom column, is unused at N = 64).
  c.desc_q = prims::smem_desc_sw128(prims::smem_addr(c.sQ) + c.wg * 64 * 128, 16, 1024);
  c.desc_k0 = prims::smem_desc_sw128(prims::smem_addr(c.sK), 16, 1024);
  c.desc_v0 = prims::smem_desc_sw128(prims::smem_addr(c.sV), Tr::VTile::kBlockBytes, 1024);

  if (!producer) {
    if constexpr (Tr::kPadded) zero_padding<Tr>(smem, ctid);
    tiles::load_tile_async<typename Tr::QTileIO, kCThreads>(c.sQ, blk.q, p.q_row_stride, blk.rows_here, ctid);
  }
  const uint32_t bars = prims::smem_addr(smem + Tr::kSmemBar);
  init_barriers<Tr, kTma>(bars);
  if (producer) {  // (never with !kProducer)
    if constexpr (Tr::kProducer) prims::setmaxnreg_dec<Tr::kProducerRegs>();
    producer_loop(c, bars);
  } else {
    if constexpr (Tr::kProducer) prims::setmaxnreg_inc<Tr::kConsumerRegs>();

  float o[1][Tr::kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < Tr::kDTiles; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[0][dt][e] = 0.f;
  attn::OnlineSoftmax<1, false> softmax;
  softmax.init();
  mainloop_pingpong<Tr, kMods, kTma>(c, bars, o, softmax);

  // Epilogue: normalize, stage O through this warpgroup's rows of the Q tile (once all of
  // its MMAs are done: named barrier 3 + wg), then coalesced 16-byte stores of the block, or
  // (kTma, p.o_tma: the launcher's FLASHKIT_FWD_GRID_TMA_STORE) one TMA store per 64-column
  // atom of the warpgroup's 64 rows, as the persistent kernel's epilogue. The choice is the
  // CTA's (both warpgroups alike: the thread stores sync the consumers on named barrier 5): a
  // varlen block with fewer than kBlockM rows stores with the threads (rows past its sequence
  // are the next one's; the map clips only fixed lengths at each sequence's end).
  const bool tma_store = kTma && p.o_tma != 0 && (p.cu_seqlens_q == nullptr || blk.rows_here >= kBlockM);
  float lse[1][2];
  softmax.finalize(o, p.softmax_scale_log2, lse);
  prims::bar_sync(3 + c.wg, 128);
  const int g = c.lane / 4, t = c.lane % 4;
  const int r = c.warp_row0 + g;
  if constexpr (FLASHKIT_FWD_STSM_O != 0 && FLASHKIT_FWD_STSM_O_FLAT != 0) {
    stage_o_rows_stsm<Tr>(prims::opaque(prims::smem_addr(c.sQ)), o, prims::opaque(c.warp_row0), prims::opaque(c.lane));
  } else {
    stage_o_rows<Tr>(c.sQ, o, r, t);
  }
  if (blk.lse != nullptr && t == 0) {
    if (r < blk.rows_here) blk.lse[r] = lse[0][0];
    if (r + 8 < blk.rows_here) blk.lse[r + 8] = lse[0][1];
  }
  if (tma_store) {
    prims::fence_proxy_async_smem();  // (the staged rows, generic writes, before the TMA unit reads them)
    prims::bar_sync(3 + c.wg, 128);
    if (ctid % 128 == 0) {
      const int row = (p.cu_seqlens_q != nullptr ? blk.q_row0 : 0) + blk.m0 + c.wg * 64;
#pragma unroll
      for (int a = 0; a < Tr::kHeadDimPadded / 64; ++a) {
        prims::tma_store_4d(&p.o_tmap, prims::smem_addr(c.sQ + Tr::QTile::offset(c.wg * 64, a * 64)), a * 64, row,
                            blk.head, p.cu_seqlens_q != nullptr ? 0 : blk.batch);
      }
      prims::bulk_commit_group();
      // Before the CTA exits (its shared memory goes to the next CTA): the stores' reads of it. The writes complete
      // with the grid, as CUTLASS's and FA3's TMA-store epilogues leave them; not waiting for them frees the SM
      // sooner, which is the point here (one CTA per SM, a new one per tile).
      prims::bulk_wait_group_read<0>();
    }
    attn::report_varlen_errors(p, blk.batch);
    return;
  }
  if constexpr (Tr::kProducer) {
    prims::bar_sync(5, kCThreads);  // the consumers only (the producer warp is done)
  } else {
    __syncthreads();
  }
  tiles::store_tile<typename Tr::QTileIO, kCThreads>(blk.o, p.o_row_stride, c.sQ, blk.rows_here, ctid);
  attn::report_varlen_errors(p, blk.batch);
  }  // consumers
#endif  // FLASHKIT_SM90_KERNEL_BODY
}

}  // namespace flashkit::fwd_sm90
