// Hopper dense attention forward, persistent variant: one CTA per SM walks the tiles of
// the grid order (attn::BlockInfo's) itself, and its producer warpgroup loads Q and every
// K/V tile of the next tile while the consumers still finish the current one, so a CTA's
// start (Q and the first K/V tiles: ~1-2 us from memory) and end (the O stores) no longer
// leave the tensor cores idle. Short sequences pay that once per 128-row tile: at S = 512
// a tile has only four key tiles of work (docs/kernels/fwd_sm90.md, "Persistent").
//
// The math is the TMA variant's (kernel.cuh, mainloop_pingpong with kOverlap): the same
// walk, the same MMAs, the same softmax, so the outputs are bitwise the same. What
// differs:
//  - every load is the producer's TMA: Q (one box per 64-column atom, 128 rows), then K(0),
//    V(0), K(1), V(1), ... of each tile in order; stage s of K/V is reused across tiles,
//    so the full/empty barrier phases run on per-CTA counters (k_it, v_it, q_it) that the
//    producer and the consumers advance identically;
//  - Q has a "full" and an "empty" barrier: the consumers release Q once their last
//    Q K^T has retired (before the last P V and the epilogue), and the producer's Q load
//    for the next tile goes out then;
//  - O is staged in a tile of its own (D 96/128/192) or, 8 rows per warp at a time, in the
//    last V stage of the tile (D 256: no room for a tile; the stage is released after it),
//    and stored as 16-byte chunks; staging it through the Q tile (the non-persistent
//    epilogue) would make the next Q wait for it;
//  - varlen: the first tile of the walk may run past the sequence's end into the next
//    sequence's rows (the TMA fills zeros only past the tensor). Its masked scores are
//    -inf (P = 0 exactly) but 0 x inf = NaN, so the consumers zero V's rows past the end in
//    shared memory before the first P V. K's rows there only reach masked scores.
//  - tile order: the walk goes over units (pairs of row blocks m, num_m_blocks - 1 - m of
//    one (batch, head): equal work under a causal mask); round r gives CTA c the unit
//    r * gridDim.x + c for even r and r * gridDim.x + gridDim.x - 1 - c for odd r. The
//    launcher numbers units head-major (p.sched_group = 1, launch/fwd_sched.h), so a pair's
//    units run side by side and its K/V is read from DRAM once.
#pragma once

#include "kernels/fwd_sm90/kernel.cuh"
#include "kernels/fwd_sm90/persistent_walk.h"
#include "prims/cluster.cuh"
#include "prims/globaltimer.cuh"
#include "prims/ldmatrix.cuh"
#include "prims/opaque.cuh"

namespace flashkit::fwd_sm90 {

// FLASHKIT_FWD_TRACE (diagnostic builds only; off, the kernel compiles to the same SASS): per CTA and walk step,
// %globaltimer at the points below, written over the LSE output (which the trace build does
// not write): u64 [gridDim.x][kTraceSteps][TraceLayout::kFields], fields
//   0 consumer wg0 tile begin   1 wg0 Q ready   2 wg0 K(0) ready   3 wg0 first S ready
//   4 wg0 last P V done         5 wg0 epilogue done
//   6..11 the same for wg1 (and 12..17 for wg2 with three warpgroups), then the producer's:
//   K(0) issued, Q issued, V(0) issued, step+1 (12..15 with two warpgroups, 18..21 with three;
//   16 fields per step with two warpgroups, 24 with three)
// FLASHKIT_FWD_TRACE 2: fields 1 and 2 (7, 8, ...) are epilogue points instead: O normalized, O
// staged in shared memory.
// Read it with scripts/dev/fwd_trace.py (call with return_lse=True and an LSE of >= the size).
#ifndef FLASHKIT_FWD_TRACE
#define FLASHKIT_FWD_TRACE 0
#endif
// FLASHKIT_FWD_TMA_STORE (tuning switch, fwd_sm90.md "TMA-store epilogue"): 1 = each
// warpgroup's 64 staged rows of O go out as one TMA store per 64-column atom, issued by one
// thread, instead of 16-byte loads and stores by the 128 threads (~1 us per tile, traced).
#ifndef FLASHKIT_FWD_TMA_STORE
#define FLASHKIT_FWD_TMA_STORE 1
#endif
// FLASHKIT_FWD_RS_Q (tuning switch, fwd_sm90.md "Q in registers at D 128"): 1 = at D 96 / 128 / 192 (fwd_rs_q)
// each consumer thread loads its Q A-fragments once per tile (ldmatrix) and Q K^T runs as register-A wgmmas: at D 128
// the tensor cores read 4 KB of K per k-step from shared memory instead of 2 KB of Q plus 4 KB of K (96 -> 64 B/clk
// of operand reads in the Q K^T phase, where the K / V TMA writes also land). 24 / 32 / 48 more registers per
// consumer thread through the main loop; Q's buffer is released as soon as the fragments are loaded (after a
// fence.proxy.async: docs/architecture.md). Default 1 since 2026-11-29 (four interleaved rounds on an H200: +0.5..3 %
// on 26 of 27 rows, none below the rounds' spread; outputs bitwise the SS build's).
#ifndef FLASHKIT_FWD_RS_Q
#define FLASHKIT_FWD_RS_Q 1
#endif
template <class Tr>
constexpr bool fwd_rs_q() {
  // D 128 / 96 (128-column tiles, n128 Q K^T) and D 192 (64-key tiles, n64 Q K^T), two consumer warpgroups
  return FLASHKIT_FWD_RS_Q != 0 &&
         ((Tr::kWarpGroups == 2 && Tr::kHeadDimPadded == 128 && Tr::kNChunks == 2 && FLASHKIT_FWD_WIDE_WGMMA != 0) ||
          (Tr::kWarpGroups == 2 && Tr::kHeadDim == 192 && Tr::kNChunks == 1));
  // (D 64's three-warpgroup kernel at its 160 registers per consumer: 104 / 152 bytes of spills with it, compile
  // probe 2026-11-29; not enabled)
}
// Q K^T with Q's A-fragments in registers (fwd_rs_q): K-major K as B, one n128 (n64) wgmma per k-step.
template <class Tr>
__device__ __forceinline__ void issue_qk_rs(float (&s)[1][Tr::kNTiles][4], const uint32_t (&qa)[Tr::kKSteps][4],
                                            uint64_t desc_k) {
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) {
    const uint64_t k_off = ((ks / 4) * Tr::KTile::kBlockBytes + (ks % 4) * 32) >> 4;
    if constexpr (Tr::kNChunks == 2) {
      prims::wgmma_m64n128k16_rs<typename Tr::T>(n128_block(s), qa[ks], desc_k + k_off, ks > 0 ? 1 : 0);
    } else {
      prims::wgmma_m64n64k16_rs<typename Tr::T>(n64_block(s, 0), qa[ks], desc_k + k_off, ks > 0 ? 1 : 0);
    }
  }
}
// This thread's A-fragments of Q (the warp's 16 rows from warp_row0, every k16 step) by ldmatrix from the
// 128-byte-swizzled Q tile: lanes 8i .. 8i + 7 address matrix i's rows (i: rows +0 / +8, columns +0 / +8). One
// address per lane, the k-steps by QTile::step_addr (the lane's chunk, 0 or 1, shares no bit with a step's even
// chunk); the caller passes opaque values, so ptxas does not keep a dozen addresses alive from the CTA's start
// (it did: 8 / 48 bytes of spills at D 128 with windows / D 192).
template <class Tr>
__device__ __forceinline__ void load_q_frags(uint32_t (&qa)[Tr::kKSteps][4], uint32_t q_addr, int warp_row0,
                                             int lane) {
  const int row = warp_row0 + (lane % 8) + ((lane / 8) % 2) * 8;
  const uint32_t base = q_addr + uint32_t(Tr::QTile::offset(row, (lane / 16) * 8) * int(sizeof(typename Tr::T)));
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) prims::ldmatrix_x4(qa[ks], Tr::QTile::step_addr(base, 0, ks * 16));
}
constexpr int kTraceSteps = 32;
template <class Tr>
struct TraceLayout {
  static constexpr int kFields = Tr::kWarpGroups == 2 ? 16 : 24;
  static constexpr int kProducer = 6 * Tr::kWarpGroups;  // K(0), Q, V(0), step + 1
};
template <class Tr>
__device__ __forceinline__ void trace_put(const FwdParams& p, int step, int field) {
  if constexpr (FLASHKIT_FWD_TRACE != 0) {
    if (p.lse == nullptr || step >= kTraceSteps) return;
    uint64_t* tr = reinterpret_cast<uint64_t*>(p.lse);
    tr[(int64_t(blockIdx.x) * kTraceSteps + step) * TraceLayout<Tr>::kFields + field] = prims::globaltimer();
  }
}

// Shared memory of the persistent kernel: the non-persistent layout, then (where it fits
// in the 227 KB of an SM: D 96/128/192, not 256) a tile for staging O, so the epilogue
// stores 16-byte chunks of whole rows while the next tile's Q loads into Q's tile.
template <class Tr>
struct PersistentSmem {
  static constexpr int kO = (Tr::kSmemBar + 8 * Tr::kNumBars + 1023) / 1024 * 1024;
  static constexpr int kWithO = kO + Tr::QTile::kBytes + 1024;
  static constexpr bool kStageO = kWithO <= 227 * 1024;
  static constexpr int kBytes = kStageO ? kWithO : Tr::kSmemBytes;
};

// The barriers: full/empty per K stage and per V stage, then Q's full and empty
// (kNumBars = 2 KS + 2 VS + 2, the non-persistent layout's count).
template <class Tr>
struct PersistentBars {
  static constexpr int KS = Tr::kKStages, VS = Tr::kVStages;
  uint32_t base;
  __device__ __forceinline__ uint32_t full_k(uint32_t it) const { return base + 8 * (it % KS); }
  __device__ __forceinline__ uint32_t empty_k(uint32_t it) const { return base + 8 * (KS + it % KS); }
  __device__ __forceinline__ uint32_t full_v(uint32_t it) const { return base + 8 * (2 * KS + it % VS); }
  __device__ __forceinline__ uint32_t empty_v(uint32_t it) const { return base + 8 * (2 * KS + VS + it % VS); }
  __device__ __forceinline__ uint32_t full_q() const { return base + 8 * (2 * KS + 2 * VS); }
  __device__ __forceinline__ uint32_t empty_q() const { return base + 8 * (2 * KS + 2 * VS + 1); }
};

// Named barriers: the turns are 1 .. kWarpGroups (warpgroup w waits on 1 + w and passes the
// turn to the next warpgroup, round the ring), then one per warpgroup for its epilogue, one
// for the varlen V-tail zeroing. (Two warpgroups keep the numbers they always had: 1-2, 3-4, 6;
// 7 is the D 256 epilogue's.)
template <class Tr>
struct PersistentNamedBars {
  static constexpr int kWG = Tr::kWarpGroups;
  static constexpr int kEpi = kWG == 2 ? 3 : 1 + kWG;
  static constexpr int kZeroV = kWG == 2 ? 6 : 2 + 2 * kWG;
  static_assert(kZeroV < 16 && (kWG == 2 || kZeroV != 7), "16 named barriers; 7 is D 256's");
  // the turn after warpgroup wg's
  __device__ __forceinline__ static int next_turn(int wg) {
    if constexpr (kWG == 2) {
      return 2 - wg;
    } else {
      return wg == kWG - 1 ? 1 : 2 + wg;
    }
  }
};

// The walk's unit and tile decode (persistent_tile_at, persistent_coords): kernels/fwd_sm90/persistent_walk.h.
// kCluster: CTAs 2k and 2k + 1 form cluster k, which takes the units as one CTA would, CTA rank r the unit's half r.
template <bool kCluster = false>
__device__ __forceinline__ bool persistent_tile(const FwdParams& p, int round, int& t) {
  return persistent_tile_at(p, round, int(gridDim.x) >> int(kCluster), int(blockIdx.x) >> int(kCluster), t);
}

// The block's mask: causal / none, or (kMods) with the call's window (softcaps are applied by
// Cta<Tr, true>::softmax_tile).
template <bool kMods, class BlockInfo>
__device__ __forceinline__ attn::Mask persistent_mask(const FwdParams& p, const BlockInfo& blk) {
  if constexpr (kMods) {
    return attn::Mask{blk.seqlen_q, blk.seqlen_k, p.causal, p.window_left, p.window_right};
  } else {
    return attn::Mask{blk.seqlen_q, blk.seqlen_k, p.causal};
  }
}

// The main loop of one tile (the ping-pong with the overlap inside each warpgroup, as in
// mainloop_pingpong<.., kTma = true>) with stage indices from the running counters. The
// turns (named barriers 1 and 2) alternate across tiles without a reset: warpgroup 1
// arrives on barrier 1 once before its first tile and warpgroup 0 takes the last arrival
// after its last one, so warpgroup 0 starts the next tile as soon as warpgroup 1 has
// issued its last P V, while warpgroup 1 still runs its epilogue.
//
// `skip` (three warpgroups only, 0 otherwise): the walk's first `skip` key tiles are masked for
// every row of this warpgroup (under a causal mask a 192-row block's first rows see fewer
// keys than its last; every tile when its rows lie past the sequence's end). The warpgroup
// still takes those turns, so the ring of turns stays in step, but issues no MMA there,
// releases the stages it does not read, and starts its walk (Q K^T only, then the softmax) at
// tile `skip`; the other warpgroups' MMAs go on the tensor cores in the meantime. A masked
// tile leaves the online softmax as it was, so the result is the same bits as walking it.
//
// kCluster: each K / V stage is written by both CTAs' producers (multicast halves), so the consumers release it to
// both: one arrival per warp on this CTA's empty barrier and on the peer's.
template <class Tr, bool kMods, bool kCluster, class Softmax>
__device__ __forceinline__ void mainloop_persistent(const Cta<Tr, kMods>& c, const PersistentBars<Tr>& b,
                                                    uint32_t kbase, uint32_t vbase, float (&o)[1][Tr::kDTiles][4],
                                                    Softmax& softmax,
                                                    const uint32_t (&qa)[fwd_rs_q<Tr>() ? Tr::kKSteps : 1][4],
                                                    int step = 0, int skip = 0) {
  constexpr bool kRsQ = fwd_rs_q<Tr>();
  const bool tr_lead = (c.tid % 128) == 0;  // (trace builds: one thread per warpgroup)
  auto release = [&](uint32_t bar) {  // (a K / V stage)
    if constexpr (kCluster) {
      __syncwarp();  // (every lane's MMAs that read the stage have retired)
      // (the peer's rank read here, not held through the loop: 8 bytes of spills at D 128 when it was)
      prims::mbarrier_arrive_pair_if(c.lane == 0, bar, prims::cluster_ctarank() ^ 1u);
    } else {
      prims::mbarrier_arrive(bar);
    }
  };
  constexpr int KS = Tr::kKStages, VS = Tr::kVStages;
  const int turn = 1 + c.wg, other_turn = PersistentNamedBars<Tr>::next_turn(c.wg);
  float s[1][Tr::kNTiles][4];
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
  uint32_t pa[Tr::kPSteps][4];
  auto qk = [&](uint64_t desc_kj) {
    if constexpr (kRsQ) {
      issue_qk_rs<Tr>(s, qa, desc_kj);
    } else {
      issue_qk<Tr>(s, c.desc_q, desc_kj);
    }
  };
  const int last = c.n_tiles - 1 - c.n_first;  // (kMods: a window's left edge ends the walk early)
  auto wait_k = [&](int j) { prims::mbarrier_wait(b.full_k(kbase + j), ((kbase + j) / KS) & 1); };
  auto wait_v = [&](int j) { prims::mbarrier_wait(b.full_v(vbase + j), ((vbase + j) / VS) & 1); };
  auto desc_k = [&](int j) { return c.desc_k(int((kbase + j) % KS)); };
  auto desc_v = [&](int j) { return c.desc_v(int((vbase + j) % VS)); };
  auto gate_open = [&] {
    if constexpr (fwd_gate_fence<Tr::kHeadDim>()) prims::fence_proxy_async_smem();
    prims::bar_sync(turn, 2 * 128);
    prims::fence_operands(o[0]);
    prims::wgmma_fence();
  };

  int first = 0;
  if constexpr (Tr::kWarpGroups == 3) {
    first = min(skip, last + 1);
    for (int j = 0; j < first; ++j) {  // turns without MMAs: K(j) and V(j - 1) are not read
      prims::bar_sync(turn, 2 * 128);
      prims::bar_arrive(other_turn, 2 * 128);
      release(b.empty_k(kbase + j));
      if (j >= 1) release(b.empty_v(vbase + j - 1));
    }
    if (first > last) {  // no key of the block for these rows: O = 0, the last turn passed too
      prims::bar_sync(turn, 2 * 128);
      prims::bar_arrive(other_turn, 2 * 128);
      if constexpr (!kRsQ) prims::mbarrier_arrive(b.empty_q());
      if constexpr (PersistentSmem<Tr>::kStageO) release(b.empty_v(vbase + last));
      return;
    }
  }
  wait_k(first);
  if (FLASHKIT_FWD_TRACE == 1 && tr_lead) trace_put<Tr>(c.p, step, 6 * c.wg + 2);
  gate_open();
  qk(desc_k(first));
  prims::wgmma_commit();
  prims::bar_arrive(other_turn, 2 * 128);
  prims::wgmma_wait<0>();
  if (FLASHKIT_FWD_TRACE && tr_lead) trace_put<Tr>(c.p, step, 6 * c.wg + 3);
  prims::fence_operands(o[0]);
  prims::fence_operands(s[0]);
  release(b.empty_k(kbase + first));
  if constexpr (Tr::kWarpGroups == 3) {
    if (first >= 1) release(b.empty_v(vbase + first - 1));  // (P V(first - 1) is skipped)
  }
  c.softmax_tile(first, s, o, softmax, pa);
  for (int j = first + 1; j <= last; ++j) {
    wait_k(j);
    wait_v(j - 1);
    gate_open();
    qk(desc_k(j));
    prims::wgmma_commit();
    prims::fence_operands(s[0]);
    prims::wgmma_fence();
    issue_pv<Tr>(o, pa, desc_v(j - 1));
    prims::wgmma_commit();
    prims::bar_arrive(other_turn, 2 * 128);
    prims::wgmma_wait<1>();
    prims::fence_operands(s[0]);
    release(b.empty_k(kbase + j));
    float corr[1][2];
    const bool moved = c.softmax_tile_p(j, s, softmax, corr);
    // (the basic-block boundary of mainloop_pingpong's overlap: never taken)
    if (c.p.batch < 0 && c.p.error_flag != nullptr) atomicOr(c.p.error_flag, 0u);
    prims::wgmma_wait<0>();
    prims::fence_operands(o[0]);
    prims::fence_operands(pa);
    release(b.empty_v(vbase + j - 1));
    softmax.rescale(o, corr, moved);
    pack_p<Tr>(pa, s);
  }
  // Every Q K^T of this warpgroup has retired: Q may be overwritten by the next tile's. (kRsQ: released when
  // the fragments were loaded.)
  if constexpr (!kRsQ) prims::mbarrier_arrive(b.empty_q());
  wait_v(last);
  gate_open();
  issue_pv<Tr>(o, pa, desc_v(last));
  prims::wgmma_commit();
  prims::bar_arrive(other_turn, 2 * 128);  // (the turns run on across tiles)
  prims::wgmma_wait<0>();
  prims::fence_operands(o[0]);
  if (FLASHKIT_FWD_TRACE && tr_lead) trace_put<Tr>(c.p, step, 6 * c.wg + 4);
  // (without a staging tile the epilogue stages O in V(last)'s stage and releases it then)
  if constexpr (PersistentSmem<Tr>::kStageO) release(b.empty_v(vbase + last));
}

// The producer: one thread issues, per tile, K(0), Q, V(0), then K(j), V(j) for j >= 1,
// each after the consumers released the buffer's previous contents.
// kCluster: the two CTAs of a cluster walk the two halves of one unit in step (same keys), and each producer loads
// half of every K / V tile (rank r: rows r * kBlockN / 2 ..) multicast into both CTAs' stage; each CTA's full barrier
// expects the whole tile, its empty barrier collects both CTAs' consumers (mainloop_persistent's release; the
// waits and arrivals at CTA scope, as CUTLASS's multicast pipelines: the stage's readers are wgmmas that retired).
template <class Tr, bool kMods, bool kCluster = false>
__device__ __forceinline__ void producer_persistent(const FwdParams& p, unsigned char* smem,
                                                    const PersistentBars<Tr>& b) {
  using T = typename Tr::T;
  constexpr int KS = Tr::kKStages, VS = Tr::kVStages;
  constexpr int kTileElems = Tr::KTile::kBytes / int(sizeof(T));
  if (threadIdx.x != Tr::kConsumerThreads) return;  // thread 0 of the producer warpgroup
  prims::tma_prefetch_desc(&p.q_tmap);
  prims::tma_prefetch_desc(&p.k_tmap);
  prims::tma_prefetch_desc(&p.v_tmap);
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);
  const uint32_t sq = prims::smem_addr(smem + Tr::kSmemQ);
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int rank = kCluster ? int(prims::cluster_ctarank()) : 0;
  uint32_t k_it = 0, v_it = 0, q_it = 0;
  int t;
  // (two steps per unit; kCluster: this CTA's half of each unit)
  for (int step = rank; persistent_tile<kCluster>(p, step >> 1, t); step += kCluster ? 2 : 1) {
    if (t >= p.num_tiles) continue;
    int x, m_block, z;
    if (!persistent_coords(p, t, step & 1, step >> 1, x, m_block, z)) continue;
    attn::BlockInfo<T, Tr::kBlockM> blk;
    if (!blk.init_at(p, x, m_block, z)) continue;
    const attn::Mask mask = persistent_mask<kMods>(p, blk);
    Cta<Tr, kMods> c{p, blk, mask};
    c.n_tiles = mask.num_key_tiles(blk.m0, Tr::kBlockM, Tr::kBlockN);
    c.n_first = kMods ? mask.first_key_tile(blk.m0, Tr::kBlockN) : 0;
    if (kMods ? c.n_tiles <= c.n_first : c.n_tiles == 0) continue;
    auto load_k = [&](int j) {
      if (k_it >= KS) prims::mbarrier_wait(b.empty_k(k_it), ((k_it / KS) & 1) ^ 1);
      if constexpr (kCluster) {
        c.load_tma_half(p.k_tmap, sK + (k_it % KS) * kTileElems, j, b.full_k(k_it), rank);
      } else {
        c.load_tma(p.k_tmap, sK + (k_it % KS) * kTileElems, j, b.full_k(k_it), true);
      }
      ++k_it;
    };
    auto load_v = [&](int j) {
      if (v_it >= VS) prims::mbarrier_wait(b.empty_v(v_it), ((v_it / VS) & 1) ^ 1);
      if constexpr (kCluster) {
        c.load_tma_half(p.v_tmap, sV + (v_it % VS) * kTileElems, j, b.full_v(v_it), rank);
      } else {
        c.load_tma(p.v_tmap, sV + (v_it % VS) * kTileElems, j, b.full_v(v_it), true);
      }
      ++v_it;
    };
    load_k(0);
    if (FLASHKIT_FWD_TRACE) trace_put<Tr>(p, step, TraceLayout<Tr>::kProducer + 0);
    if (FLASHKIT_FWD_TRACE) trace_put<Tr>(p, step, TraceLayout<Tr>::kProducer + 3);
    if (q_it >= 1) prims::mbarrier_wait(b.empty_q(), (q_it - 1) & 1);
    prims::mbarrier_arrive_expect_tx(b.full_q(), Tr::QTile::kBytes);
    const int row = (varlen ? blk.q_row0 : 0) + blk.m0;
#pragma unroll
    for (int a = 0; a < Tr::kHeadDimPadded / 64; ++a) {
      prims::tma_load_4d_nohint_if(true, sq + a * Tr::QTile::kBlockBytes, &p.q_tmap, a * 64, row, blk.head,
                                   varlen ? 0 : blk.batch, b.full_q());
    }
    ++q_it;
    if (FLASHKIT_FWD_TRACE) trace_put<Tr>(p, step, TraceLayout<Tr>::kProducer + 1);
    load_v(0);
    if (FLASHKIT_FWD_TRACE) trace_put<Tr>(p, step, TraceLayout<Tr>::kProducer + 2);
    for (int j = 1; j < c.n_tiles - c.n_first; ++j) {
      load_k(j);
      load_v(j);
    }
  }
}

// Varlen: V's rows past the sequence's end in the first tile of the walk (another
// sequence's rows) to zeros, by the 256 consumer threads, visible to the MMAs (async
// proxy) and to both warpgroups before either issues its first P V.
template <class Tr>
__device__ __forceinline__ void zero_v_tail(typename Tr::T* v_stage, int valid_rows, int ctid) {
  using T = typename Tr::T;
  constexpr int kChunksPerRow = Tr::kHeadDimPadded / 8;
  const int chunks = (Tr::kBlockN - valid_rows) * kChunksPerRow;
  for (int i = ctid; i < chunks; i += Tr::kConsumerThreads) {
    const int r = valid_rows + i / kChunksPerRow;
    const int col = (i % kChunksPerRow) * 8;
    *reinterpret_cast<uint4*>(v_stage + Tr::VTile::offset(r, col)) = make_uint4(0, 0, 0, 0);
  }
  prims::fence_proxy_async_smem();
  prims::bar_sync(PersistentNamedBars<Tr>::kZeroV, Tr::kConsumerThreads);
}

// One CTA per SM (the launcher sizes the grid), Tr::kProducer traits; kMods: windows and
// softcaps (as fwd_kernel's kMods: the walk starts at the window's first visible tile of the
// block, the softcap before the mask).
//
// kCluster (launch_persistent's, FLASHKIT_FWD_CLUSTER): clusters of two CTAs that share every K / V tile by TMA
// multicast (each loads half, producer_persistent), walking the two halves of each unit in step. Only where both
// halves see the same keys: no causal mask, no window, fixed lengths, an even number of row blocks.
template <class Tr, bool kMods = false, bool kCluster = false>
__global__ void __launch_bounds__(Tr::kThreads, 1) fwd_kernel_persistent(const __grid_constant__ FwdParams p) {
#if FLASHKIT_SM90_KERNEL_BODY
  static_assert(Tr::kProducer && Tr::kMinBlocks == 1, "the persistent kernel has a producer warpgroup");
  static_assert(!kCluster || (Tr::kWarpGroups == 2 && PersistentSmem<Tr>::kStageO && !kMods),
                "clusters: two consumer warpgroups, O's staging tile, no masks but the sequence's end");
  using T = typename Tr::T;
  constexpr int KS = Tr::kKStages, VS = Tr::kVStages;
  constexpr int kCThreads = Tr::kConsumerThreads;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  const int tid = threadIdx.x;
  PersistentBars<Tr> b{prims::smem_addr(smem + Tr::kSmemBar)};
  // (kCluster: a K / V stage is released by each consumer warp of both CTAs)
  constexpr uint32_t kStageReleases = kCluster ? 2 * (kCThreads / 32) : kCThreads;
  if (tid == 0) {
    for (int i = 0; i < KS; ++i) {
      prims::mbarrier_init(b.full_k(i), 1);
      prims::mbarrier_init(b.empty_k(i), kStageReleases);
    }
    for (int i = 0; i < VS; ++i) {
      prims::mbarrier_init(b.full_v(i), 1);
      prims::mbarrier_init(b.empty_v(i), kStageReleases);
    }
    prims::mbarrier_init(b.full_q(), 1);
    prims::mbarrier_init(b.empty_q(), kCThreads);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (kCluster) {  // (the peer's barriers are initialized before its multicasts and arrivals reach them)
    prims::cluster_sync();
  } else {
    __syncthreads();
  }
  const bool producer = __shfl_sync(0xffffffffu, tid / 128, 0) == Tr::kWarpGroups;
  if (producer) {
    prims::setmaxnreg_dec<Tr::kProducerRegs>();
    producer_persistent<Tr, kMods, kCluster>(p, smem, b);
    if constexpr (kCluster) {  // (neither CTA exits while the peer may still arrive on its barriers)
      __syncwarp();
      prims::cluster_sync();
    }
    return;
  }
  prims::setmaxnreg_inc<Tr::kConsumerRegs>();
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);
  // (the warpgroup through a shuffle: warp-uniform for the compiler, so that Q's
  // descriptor and its per-k-step offsets live in uniform registers)
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0), lane = tid % 32;
  const int warp_row0 = wg * 64 + ((tid % 128) / 32) * 16;
  const uint64_t desc_q = prims::smem_desc_sw128(prims::smem_addr(sQ) + wg * 64 * 128, 16, 1024);
  const uint64_t desc_k0 = prims::smem_desc_sw128(prims::smem_addr(sK), 16, 1024);
  const uint64_t desc_v0 = prims::smem_desc_sw128(prims::smem_addr(sV), Tr::VTile::kBlockBytes, 1024);
  const bool varlen_k = p.cu_seqlens_k != nullptr;
  uint32_t k_it = 0, v_it = 0, q_it = 0;
  if (wg == Tr::kWarpGroups - 1) prims::bar_arrive(1, 2 * 128);  // warpgroup 0 takes the first turn
  // (the producer's walk, step for step; these lines as one shared helper that fills the
  // BlockInfo made ptxas spill 100 B in this loop at D 256)
  int t;
  const int rank = kCluster ? int(prims::cluster_ctarank()) : 0;
  // (two steps per unit; kCluster: this CTA's half of each unit)
  for (int step = rank; persistent_tile<kCluster>(p, step >> 1, t); step += kCluster ? 2 : 1) {
    if (t >= p.num_tiles) continue;
    int x, m_block, z;
    if (!persistent_coords(p, t, step & 1, step >> 1, x, m_block, z)) continue;
    attn::BlockInfo<T, Tr::kBlockM> blk;
    if (!blk.init_at(p, x, m_block, z)) continue;
    const attn::Mask mask = persistent_mask<kMods>(p, blk);
    Cta<Tr, kMods> c{p, blk, mask};
    c.n_tiles = mask.num_key_tiles(blk.m0, Tr::kBlockM, Tr::kBlockN);
    c.n_first = kMods ? mask.first_key_tile(blk.m0, Tr::kBlockN) : 0;
    if (kMods ? c.n_tiles <= c.n_first : c.n_tiles == 0) {  // no row of this block sees a key: O = 0, LSE = -inf, no loads
      tiles::zero_tile<typename Tr::QTileIO, kCThreads>(blk.o, p.o_row_stride, blk.rows_here, tid);
      if (!FLASHKIT_FWD_TRACE && blk.lse != nullptr) {
        for (int r = tid; r < blk.rows_here; r += kCThreads) blk.lse[r] = -INFINITY;
      }
      attn::report_varlen_errors(p, blk.batch);
      continue;
    }
    if (FLASHKIT_FWD_TRACE && tid % 128 == 0) trace_put<Tr>(p, step, 6 * wg + 0);
    c.tid = tid;
    c.lane = lane;
    c.wg = wg;
    c.warp_row0 = warp_row0;
    c.sQ = sQ;
    c.sK = sK;
    c.sV = sV;
    c.desc_q = desc_q;
    c.desc_k0 = desc_k0;
    c.desc_v0 = desc_v0;
    const int tail = blk.seqlen_k - (c.n_tiles - 1) * Tr::kBlockN;  // valid rows of the walk's first tile
    // (kCluster: fixed lengths only, use_cluster; compiled, this cold path's address was the consumer's spilled value)
    if (!kCluster && varlen_k && tail < Tr::kBlockN) {
      prims::mbarrier_wait(b.full_v(v_it), (v_it / VS) & 1);
      zero_v_tail<Tr>(sV + (v_it % VS) * (Tr::VTile::kBytes / int(sizeof(T))), tail, tid);
    }
    prims::mbarrier_wait(b.full_q(), q_it & 1);
    if (FLASHKIT_FWD_TRACE == 1 && tid % 128 == 0) trace_put<Tr>(p, step, 6 * wg + 1);
    float o[1][Tr::kDTiles][4];
#pragma unroll
    for (int dt = 0; dt < Tr::kDTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[0][dt][e] = 0.f;
    attn::OnlineSoftmax<1, false> softmax;
    softmax.init();
    // (three warpgroups: the leading key tiles masked for all of this warpgroup's rows; all of
    // them where its rows lie past the sequence's end, e.g. warpgroup 2 of the last 192-row
    // block at S_q = 512, which would otherwise multiply zero rows of Q)
    int skip = 0;
    if constexpr (Tr::kWarpGroups == 3) {
      skip = 64 * wg >= blk.rows_here ? c.n_tiles - c.n_first
             : (kMods ? mask.has_right() : p.causal) ? c.n_tiles - mask.num_key_tiles(blk.m0 + 64 * wg, 64, Tr::kBlockN)
                                     : 0;
    }
    // fwd_rs_q: this thread's Q fragments, loaded once; Q's buffer is free for the next tile's then.
    uint32_t qa[fwd_rs_q<Tr>() ? Tr::kKSteps : 1][4];
    if constexpr (fwd_rs_q<Tr>()) {
      load_q_frags<Tr>(qa, prims::opaque(prims::smem_addr(sQ)), prims::opaque(warp_row0), prims::opaque(lane));
      // The ldmatrix reads are the generic proxy's and the next Q is written by TMA (the async proxy): the
      // fence orders them before the release (without it, 2 of 5 runs of the window / softcap varlen tests
      // read a few rows of the next tile's Q; fwd_sm90.md).
      prims::fence_proxy_async_smem();
      prims::mbarrier_arrive(b.empty_q());
    }
    mainloop_persistent<Tr, kMods, kCluster>(c, b, k_it, v_it, o, softmax, qa, step, skip);
    k_it += c.n_tiles - c.n_first;
    v_it += c.n_tiles - c.n_first;
    ++q_it;

    // Epilogue: normalize, then O by this warpgroup's 64 rows: staged in shared memory
    // (warpgroup barrier 3 + wg around it: the previous tile's reads are done before the
    // writes, the writes before the reads) and stored as 16-byte chunks of whole rows, or
    // (D 256: no room for the staging tile) packed pairs straight from the accumulators.
    float lse[1][2];
    softmax.finalize(o, p.softmax_scale_log2, lse);
    if (FLASHKIT_FWD_TRACE == 2 && tid % 128 == 0) trace_put<Tr>(p, step, 6 * wg + 1);
    const int g = lane / 4, tq = lane % 4;
    const int r = warp_row0 + g;
    if constexpr (PersistentSmem<Tr>::kStageO) {
      T* sO = reinterpret_cast<T*>(smem + PersistentSmem<Tr>::kO);
      // (the staging offsets depend on the lane only: opaque copies of r and tq per tile
      // keep ptxas from hoisting all of them out of the tile loop and holding them in
      // registers through the main loop: 96-188 bytes of spills at D 128/192)
      const int ro = prims::opaque(r), to = prims::opaque(tq);
      // A TMA store needs the warpgroup's rows whole inside O's map: always for fixed
      // lengths (the map clips at each sequence's end); varlen rows past this sequence
      // would be the next one's, so a partial varlen block stores with the threads.
      const bool tma_store = FLASHKIT_FWD_TMA_STORE != 0 && p.o_tma != 0 &&
                             (p.cu_seqlens_q == nullptr || blk.rows_here >= wg * 64 + 64);
      if (FLASHKIT_FWD_TMA_STORE != 0 && tid % 128 == 0) prims::bulk_wait_group_read<0>();  // the last store read sO
      prims::bar_sync(PersistentNamedBars<Tr>::kEpi + wg, 128);
      if constexpr (FLASHKIT_FWD_STSM_O != 0) {
        stage_o_rows_stsm<Tr>(prims::opaque(prims::smem_addr(sO)), o, prims::opaque(warp_row0), prims::opaque(lane));
      } else {
        stage_o_rows<Tr>(sO, o, ro, to);
      }
      if (tma_store) prims::fence_proxy_async_smem();
      prims::bar_sync(PersistentNamedBars<Tr>::kEpi + wg, 128);
      if (FLASHKIT_FWD_TRACE == 2 && tid % 128 == 0) trace_put<Tr>(p, step, 6 * wg + 2);
      if (tma_store) {
        if (tid % 128 == 0) {
          const int row = (p.cu_seqlens_q != nullptr ? blk.q_row0 : 0) + blk.m0 + wg * 64;
#pragma unroll
          for (int a = 0; a < Tr::kHeadDimPadded / 64; ++a) {
            prims::tma_store_4d(&p.o_tmap, prims::smem_addr(sO + Tr::QTile::offset(wg * 64, a * 64)), a * 64, row,
                                blk.head, p.cu_seqlens_q != nullptr ? 0 : blk.batch);
          }
          prims::bulk_commit_group();
        }
      } else {
        constexpr int kChunksPerRow = Tr::kHeadDim / 8;
        static_assert((64 * kChunksPerRow) % 128 == 0, "a warpgroup's rows split evenly over its threads");
        const int wt = prims::opaque(tid % 128);
#pragma unroll
        for (int i = 0; i < 64 * kChunksPerRow / 128; ++i) {
          const int ci = wt + i * 128;
          const int row = wg * 64 + ci / kChunksPerRow;
          const int col = (ci % kChunksPerRow) * 8;
          if (row < blk.rows_here) {
            *reinterpret_cast<uint4*>(blk.o + int64_t(row) * p.o_row_stride + col) =
                *reinterpret_cast<const uint4*>(sO + Tr::QTile::offset(row, col));
          }
        }
      }
    } else {
      // No room for a staging tile (D 256): each warp stages its 16 rows, 8 at a time, in
      // its 1/8 of V(last)'s stage (released after this), 16-byte chunks XOR-swizzled by the
      // row (conflict-free writes of the accumulator pairs and reads of whole rows), and
      // stores whole rows as 16-byte chunks.
      constexpr int kChunks = Tr::kHeadDim / 8;  // 16-byte chunks per row (= kDTiles)
      constexpr int kRowBytes = Tr::kHeadDim * int(sizeof(T));
      static_assert(kChunks == Tr::kDTiles && kChunks >= 8 && kChunks % 32 == 0, "whole chunks, one per lane");
      static_assert(8 * 8 * kRowBytes <= Tr::VTile::kBytes, "8 warps x 8 rows fit in a V stage");
      const uint32_t v_last = v_it - 1;  // (v_it already counts this tile's V tiles)
      // Both warpgroups' P V(last) read the whole stage: neither may write it before the
      // other's has retired (each passes this barrier after its own wgmma wait). Without
      // it warpgroup 0, one gate ahead, overwrote V under warpgroup 1's last P V (found
      // by the slow sanitizer runs; the normal-speed tests passed).
      prims::bar_sync(7, kCThreads);
      unsigned char* buf = smem + Tr::kSmemV + (v_last % VS) * Tr::VTile::kBytes + (tid / 32) * 8 * kRowBytes;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        // (opaque per half: see the staging tile's comment; shared offsets would be held
        // across both halves)
        const int go = prims::opaque(g), to = prims::opaque(tq), lo = prims::opaque(lane);
#pragma unroll
        for (int dt = 0; dt < Tr::kDTiles; ++dt) {
          *reinterpret_cast<uint32_t*>(buf + go * kRowBytes + ((dt ^ go) * 16) + to * 4) =
              prims::pack2<T>(o[0][dt][2 * half], o[0][dt][2 * half + 1]);
        }
        __syncwarp();
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int row = warp_row0 + half * 8 + k;
#pragma unroll
          for (int ch = lo; ch < kChunks; ch += 32) {
            const uint4 val = *reinterpret_cast<const uint4*>(buf + k * kRowBytes + ((ch ^ k) * 16));
            if (row < blk.rows_here) *reinterpret_cast<uint4*>(blk.o + int64_t(row) * p.o_row_stride + ch * 8) = val;
          }
        }
        __syncwarp();
      }
      prims::fence_proxy_async_smem();  // (the TMA writes the stage next)
      prims::mbarrier_arrive(b.empty_v(v_last));
    }
    if (!FLASHKIT_FWD_TRACE && blk.lse != nullptr && tq == 0) {
      if (r < blk.rows_here) blk.lse[r] = lse[0][0];
      if (r + 8 < blk.rows_here) blk.lse[r + 8] = lse[0][1];
    }
    if (FLASHKIT_FWD_TRACE && tid % 128 == 0) trace_put<Tr>(p, step, 6 * wg + 5);
    attn::report_varlen_errors(p, blk.batch);
  }
  if (wg == 0) prims::bar_sync(1, 2 * 128);  // the last warpgroup's last arrival (or its first)
  if (FLASHKIT_FWD_TMA_STORE != 0 && tid % 128 == 0) prims::bulk_wait_group<0>();  // O stores done before exit
  if constexpr (kCluster) {  // (the producer's side above)
    __syncwarp();
    prims::cluster_sync();
  }
#endif  // FLASHKIT_SM90_KERNEL_BODY
}

}  // namespace flashkit::fwd_sm90
