// Launcher of the Hopper backward (sm_90a): the shared pre/post launches
// (launch/bwd_prepost_launch.cuh) around the wgmma main kernel. Included only by
// src/kernels/bwd_sm90/inst/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>


#include "kernels/bwd_sm90/kernel.cuh"
#include "kernels/bwd_sm90/kernel_ks.cuh"
#include "kernels/bwd_sm90/kernel_ks_pair.cuh"
#include "kernels/bwd_sm90/kernel_pp.cuh"
#include "launch/bwd_gqa_split.h"
#include "launch/bwd_launch.h"
#include "launch/bwd_prepost_launch.cuh"
#include "launch/cluster_launch.cuh"
#include "launch/element_type.cuh"
#include "launch/family_dispatch.h"
#include "launch/launch_common.cuh"
#include "launch/tma_encode.cuh"

// Compile-time switch (an instantiation file's define; docs/kernels/bwd.md "A producer warpgroup at D 128"):
// 1 = D 128's fast and fixed-point TMA reduce-add kernels (not the GQA split) run with the producer warpgroup
// (BwdPpTraits' kProducer). 0 (default): not instantiated.
#ifndef FLASHKIT_BWD_PP_PRODUCER
#define FLASHKIT_BWD_PP_PRODUCER 0
#endif

namespace flashkit {

// One instantiation of the D 256 pair kernel (kernel_ks_pair.cuh): its shared-memory limit raised,
// then launched in clusters of two.
template <auto Kernel, class Kp>
cudaError_t launch_bwd_ks_pair(const BwdParams& q, dim3 grid, cudaStream_t stream, int device) {
  const cudaError_t err = launch_util::raise_smem_limit<Kernel>(device, Kp::kSmemBytes);
  if (err != cudaSuccess) return err;
  return launch_util::launch_cluster(Kernel, grid, dim3(Kp::kThreads), Kp::kSmemBytes, stream, 2, false, q);
}

// The chunked launch order (BwdParams::order_chunk, attn::make_bwd_cta; docs/kernels/bwd.md "Chunked
// launch order") for a one-CTA-per-key-block grid of n_blocks key blocks: under a right bound (causal,
// or a right window) the first key blocks of a group carry the most rows, and in the grid's order
// (key blocks fastest) the heaviest block of the last groups starts last and runs alone. Chunks of a
// few (batch, KV head) groups, key block first inside a chunk, start every chunk's heavy blocks
// together while the groups running at once stay few (key-major over all groups lost 22 % on MHA
// causal rows: their Q / dO no longer shared in L2). Only where no CTA waits for another (q.deterministic
// false: fast mode and the fixed-point deterministic kernels) and no cluster pairs neighbouring
// blockIdx.x. Measured (H200, 2026-11-29, FA3 sweep causal bwd, two interleaved rounds against main
// before the change; bwd.md "Chunked launch order"): chunks of 4 groups +0.8 / +2.2 / +2.2 % at D 128
// 2k / 4k / 8k, -0.3 / +1.2 / +3.6 % at D 64, but -0.6 % at 16k (four groups' Q, dO and dq_accum
// rows no longer fit the L2 together) and -1..-1.7 % at 512 / 1k (D 64); a second call, default
// against 0: D 128 +1.2 / +3.0 / +2.9 %, D 64 -0.2 / +1.9 / +3.7 %, GQA 8 level. So the ping-pong kernels
// (`pp`: D 64 / 96 / 128) take chunks of 4 where 2048 <= S_k <= 8192. The key-split kernel (`!pp`: D 192 /
// 256, which runs the causal calls below 4k keys at D 256; the pair kernel above keeps the grid's order),
// same call: chunks of 8 +1.3 / +3.1 / +3.6 % at D 256 512 / 1k / 2k (chunks of 4 +0.4 / +1.0 / +3.5 %), so
// chunks of 8 there up to 2048 keys (longer calls not measured on it). FLASHKIT_BWD_ORDER_CHUNK (read
// once): groups per chunk for every call this applies to, 0 = the grid's order.
inline int bwd_order_chunk(const BwdParams& q, int n_blocks, bool pp) {
  static const int env = dispatch::env_int("FLASHKIT_BWD_ORDER_CHUNK", -1);
  const int chunk = env >= 0 ? env
                    : pp      ? (q.seqlen_k >= 2048 && q.seqlen_k <= 8192 ? 4 : 0)
                              : (q.seqlen_k <= 2048 ? 8 : 0);
  if (chunk <= 0 || q.deterministic || !(q.causal || q.window_right >= 0)) return 0;
  if ((long long)n_blocks * q.h_kv * q.batch >= (1ll << 31)) return 0;  // (the kernel's linear index)
  return chunk < q.h_kv * q.batch ? chunk : q.h_kv * q.batch;  // (chunk x n_blocks then fits an int too)
}

// The D 64 / 128 ping-pong kernel over `n_blocks` key blocks: with a GQA split
// (q.gqa_split_log2 > 0) its split instantiation in clusters of 2^log2 CTAs along x (grid.x =
// n_blocks << log2), else (or where the device cannot place such a cluster: an SM-limited
// context) the plain one.
// TrPlain: the plain kernel's traits (its thread count; the producer-warpgroup prototype's, below).
template <auto Kernel, auto SplitKernel, class Tr, class TrPlain = Tr>
int launch_bwd_pp(BwdParams q, int n_blocks, cudaStream_t stream, int device) {
  if (q.gqa_split_log2 > 0) {
    q.dq_rotate = false;  // (the rotated walk needs a group resident at once; clusters may not be)
    const dim3 cgrid(unsigned(n_blocks) << q.gqa_split_log2, unsigned(q.h_kv), unsigned(q.batch));
    cudaError_t err = launch_util::raise_smem_limit<SplitKernel>(device, Tr::kSmemBytes);
    if (err == cudaSuccess) {
      err = launch_util::launch_cluster(SplitKernel, cgrid, dim3(Tr::kThreads), Tr::kSmemBytes, stream,
                                        1u << q.gqa_split_log2, false, q);
    }
    if (err != cudaErrorInvalidClusterSize && err != cudaErrorLaunchOutOfResources) return int(err);
    (void)cudaGetLastError();
    q.gqa_split_log2 = 0;
  }
  q.order_chunk = bwd_order_chunk(q, n_blocks, true);
  const dim3 grid(unsigned(n_blocks), unsigned(q.h_kv), unsigned(q.batch));
  return launch_util::launch_with_smem<Kernel>(q, grid, TrPlain::kThreads, TrPlain::kSmemBytes, stream, device);
}

// The Q and dO maps of the Hopper kernels (64-row boxes of 64 columns: the row blocks of the
// ping-pong and the key-split kernels; past the tensor's head_dim columns the boxes arrive as zeros).
template <typename T>
bool make_bwd_qdo_maps(const BwdParams& p, BwdParams& q) {
  const int64_t dims[4] = {p.head_dim, p.total_q, p.h_q, p.cu_seqlens_q != nullptr ? 1 : p.batch};
  return launch_util::make_tma_map_4d<T>(&q.q_tmap, p.q, dims, p.q_row_stride, p.q_head_stride, p.q_batch_stride,
                                         64) &&
         launch_util::make_tma_map_4d<T>(&q.do_tmap, p.dout, dims, p.do_row_stride, p.do_head_stride,
                                         p.do_batch_stride, 64);
}

// dq_accum's TMA map for the reduce-adds (fp32, or int32 for the fixed-point dQ; dims head_dim,
// h_q, rows, batch; varlen: total_q rows, batch 1; boxes of 32 columns x 16 rows).
inline bool make_bwd_dq_map(const BwdParams& p, BwdParams& q, bool int32) {
  const int64_t acc_dims[4] = {p.head_dim, p.h_q, p.cu_seqlens_q != nullptr ? p.total_q : p.seqlen_q,
                               p.cu_seqlens_q != nullptr ? 1 : p.batch};
  const int64_t acc_st[3] = {int64_t(p.head_dim) * 4, int64_t(p.h_q) * p.head_dim * 4,
                             int64_t(p.seqlen_q) * p.h_q * p.head_dim * 4};
  return launch_util::make_tma_map_f32_reduce(&q.dq_tmap, p.dq_accum, acc_dims, acc_st, 16, int32);
}

// The key-split kernel (kernel_ks.cuh) of traits Ks for q: its softcap instantiation when q has one.
// (The chunked launch order where it applies, bwd_order_chunk.)
template <class Ks, bool kDqTma = false, bool kFixed = false>
int launch_bwd_ks(const BwdParams& p, dim3 grid, cudaStream_t stream, int device) {
  using bwd_sm90::bwd_ks_kernel;
  BwdParams q = p;
  q.order_chunk = bwd_order_chunk(q, int(grid.x), false);
  if (q.softcap > 0.f) {
    return launch_util::launch_with_smem<&bwd_ks_kernel<Ks, true, kDqTma, kFixed>>(q, grid, Ks::kThreads, Ks::kSmemBytes,
                                                                                  stream, device);
  }
  return launch_util::launch_with_smem<&bwd_ks_kernel<Ks, false, kDqTma, kFixed>>(q, grid, Ks::kThreads, Ks::kSmemBytes,
                                                                                 stream, device);
}

// The pair kernel (kernel_ks_pair.cuh) of traits Kp over q's key blocks (an even grid), its softcap
// instantiation when q has one. A device that cannot place a cluster of two (an SM-limited context)
// returns cudaErrorInvalidClusterSize / cudaErrorLaunchOutOfResources, which the callers answer with the
// one-CTA kernel (the error is not sticky; they clear it).
template <class Kp, bool kDet = false, bool kFixed = false>
cudaError_t launch_bwd_ks_pair_for(const BwdParams& q, cudaStream_t stream, int device) {
  const int n_blocks = (q.seqlen_k + Kp::kBlockN - 1) / Kp::kBlockN;
  const dim3 grid(unsigned(2 * ((n_blocks + 1) / 2)), unsigned(q.h_kv), unsigned(q.batch));
  using bwd_sm90::bwd_ks_pair_kernel;
  if (q.softcap > 0.f) return launch_bwd_ks_pair<&bwd_ks_pair_kernel<Kp, true, kDet, kFixed>, Kp>(q, grid, stream, device);
  return launch_bwd_ks_pair<&bwd_ks_pair_kernel<Kp, false, kDet, kFixed>, Kp>(q, grid, stream, device);
}
inline bool bwd_cluster_unplaced(cudaError_t err) {
  return err == cudaErrorInvalidClusterSize || err == cudaErrorLaunchOutOfResources;
}

// The GQA split's cluster size (log2) for a ping-pong launch of n_blocks key blocks: bwd_gqa_split.h's
// table at `table_head_dim` (measured at D 64 / 128), or FLASHKIT_BWD_GQA_SPLIT (read once): unset, "t" (or
// any non-number) the table; 0 or 1 never; n >= 2 wherever the group allows, up to n CTAs.
inline int bwd_pp_split_log2(const BwdParams& p, int table_head_dim, bool det, int n_blocks, int num_sms) {
  static const int split_env = dispatch::env_int("FLASHKIT_BWD_GQA_SPLIT", -1);
  int cap = split_env;
  if (split_env < 0) {
    const bool right = p.causal || p.window_right >= 0;
    const long long base_ctas = (long long)n_blocks * p.h_kv * p.batch;
    cap = launch_util::bwd_gqa_split_default(table_head_dim, det, right, p.h_ratio, p.seqlen_k, base_ctas, num_sms);
  }
  return launch_util::bwd_gqa_split_log2(cap, p.h_ratio);
}

// D 96 (the ping-pong kernel on D 128's tiles, pp_traits.cuh) and D 192 (the key-split kernel and
// its pair kernel on D 256's, ks_traits.cuh): the fast mode's kernels (TMA loads and dQ
// reduce-adds where the maps can be made, else cp.async and per-thread reds; softcaps included)
// and the deterministic mode's fixed-point instantiation (D 96: without a softcap). What these
// two head dims do not instantiate runs on the portable family (its own pre / post launches):
// deterministic calls that cannot take the fixed-point path (a D 96 softcap;
// FLASHKIT_BWD_DET_TURNS=1), and the A/B switches FLASHKIT_BWD_SM90_V1 / FLASHKIT_BWD_D256_V1
// (docs/kernels/bwd.md "D 96 and 192 on the Hopper kernels").
template <typename Tag, int kD>
int launch_bwd_sm90_padded(const BwdParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  static_assert(kD == 96 || kD == 192, "the padded head dims");
  static const bool det_turns = dispatch::env_flag("FLASHKIT_BWD_DET_TURNS");
  static const bool dq_reds = dispatch::env_off("FLASHKIT_BWD_DQ_TMA");
  static const bool no_tma = dispatch::env_flag("FLASHKIT_BWD_NO_TMA");
  static const bool v1 = dispatch::env_flag(kD == 96 ? "FLASHKIT_BWD_SM90_V1" : "FLASHKIT_BWD_D256_V1");
  const bool fixed = p.deterministic && !det_turns && !v1 && (kD == 192 || p.softcap <= 0.f) &&
                     p.dq_exp != nullptr && p.dq_kvbound != nullptr;
  BwdParams base = p;
  if (fixed) base.dq_fixed = make_bwd_qdo_maps<T>(p, base) && make_bwd_dq_map(p, base, true);
  if (v1 || (p.deterministic && !base.dq_fixed)) return launch_bwd_sm80<Tag, kD>(p, dev, stream);
  return launch_util::launch_bwd_with_prepost<T, kD>(base, stream, [&]() -> int {
    BwdParams q = base;
    // fast mode: TMA loads and reduce-adds where the maps can be made (the fixed-point path made its own)
    const bool tma =
        base.dq_fixed || (!no_tma && !dq_reds && make_bwd_qdo_maps<T>(p, q) && make_bwd_dq_map(p, q, false));
    q.deterministic = false;  // (fixed point: the fast kernel's walk, no turns)
    if constexpr (kD == 96) {
      using Pp = bwd_sm90::BwdPpTraits<T, kD>;
      const int n_blocks = (p.seqlen_k + Pp::kBlockN - 1) / Pp::kBlockN;
      const dim3 grid(unsigned(n_blocks), unsigned(p.h_kv), unsigned(p.batch));
      if (p.softcap > 0.f) {  // (fast mode only: cp.async and per-thread reds, as D 128's softcap kernel)
        return launch_util::launch_with_smem<&bwd_sm90::bwd_pp_kernel<Pp, true>>(q, grid, Pp::kThreads, Pp::kSmemBytes,
                                                                                 stream, dev.device);
      }
      if (!tma) {
        return launch_util::launch_with_smem<&bwd_sm90::bwd_pp_kernel<Pp>>(q, grid, Pp::kThreads, Pp::kSmemBytes,
                                                                           stream, dev.device);
      }
      // the GQA split by D 128's table (the fixed-point kernels take the fast mode's choice, as at D 128)
      q.gqa_split_log2 = bwd_pp_split_log2(p, 128, false, n_blocks, dev.num_sms);
      using bwd_sm90::bwd_pp_kernel;
      if (base.dq_fixed) {
        return launch_bwd_pp<&bwd_pp_kernel<Pp, false, true, true, false, false, true>,
                             &bwd_pp_kernel<Pp, false, true, true, false, true, true>, Pp>(q, n_blocks, stream, dev.device);
      }
      return launch_bwd_pp<&bwd_pp_kernel<Pp, false, true, true>, &bwd_pp_kernel<Pp, false, true, true, false, true>, Pp>(
          q, n_blocks, stream, dev.device);
    } else {
      using Ks = bwd_sm90::BwdKsTraits<T, kD>;
      const dim3 grid(unsigned((p.seqlen_k + Ks::kBlockN - 1) / Ks::kBlockN), unsigned(p.h_kv), unsigned(p.batch));
      q.dq_rotate = false;
      // The pair kernel (kernel_ks_pair.cuh), not varlen. Measured at D 192 against the key-split kernel
      // (H200, 2026-11-28, dims sweep, two interleaved rounds; docs/kernels/bwd.md "D 96 and 192 on the
      // Hopper kernels"): fast mode without a mask +3.4 / +1.2 / +1.4 / +3.7 % at S 2k / 4k / 8k / 16k (level
      // at 1k, -1.5 % at 512), causal +1.6 / +1.5 % at 8k / 16k (-0.8 % at 4k, -2..-8 % below); the
      // fixed-point deterministic mode level or slower on every row (-1 .. -9 %). Those were the pair kernel's
      // cluster-scope barriers; with its CTA-scope ones (FLASHKIT_BWD_PAIR_CTA_SCOPE, default 1), remeasured
      // (H200, 2026-11-29, two interleaved rounds, every call on the pairs against the rule above): fast mode
      // without a mask +8.5 / +12 % at 512 / 1k, causal +3 / +9 / +11 % at 1k / 2k / 4k (-0.8 % at 512); the
      // fixed point without a mask +4..7.5 % at 512 .. 4k, causal +3 / +4 % at 2k / 4k (-4 / -2 % at 512 / 1k).
      // So: fast mode from 512 keys without a mask and from 1k with one; the fixed point from 512 without a
      // mask and from 2k with one. FLASHKIT_BWD_KS_PAIR (read once): 1 = whenever it can run (the fixed point
      // included), 0 = never.
      static const bool ks_pair_on = dispatch::env_flag("FLASHKIT_BWD_KS_PAIR");
      static const bool ks_pair_off = dispatch::env_off("FLASHKIT_BWD_KS_PAIR");
      const bool unmasked = !p.causal && p.window_left < 0 && p.window_right < 0;
      const bool pair_rule = p.seqlen_k >= (unmasked ? 512 : (base.dq_fixed ? 2048 : 1024));
      if (tma && p.cu_seqlens_q == nullptr && !ks_pair_off && (ks_pair_on || pair_rule)) {
        using Kp = bwd_sm90::BwdKsPairTraits<T, kD>;
        const cudaError_t err = base.dq_fixed ? launch_bwd_ks_pair_for<Kp, false, true>(q, stream, dev.device)
                                              : launch_bwd_ks_pair_for<Kp>(q, stream, dev.device);
        if (!bwd_cluster_unplaced(err)) return int(err);
        (void)cudaGetLastError();  // (the one-CTA kernel below)
      }
      if (base.dq_fixed) return launch_bwd_ks<Ks, true, true>(q, grid, stream, dev.device);
      if (tma) return launch_bwd_ks<Ks, true>(q, grid, stream, dev.device);
      return launch_bwd_ks<Ks>(q, grid, stream, dev.device);
    }
  });
}

template <typename Tag, int kD>
int launch_bwd_sm90_native(const BwdParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  using Tr = bwd_sm90::BwdTraits<T, kD>;
  static_assert(Tr::kBlockM % kBwdSemBlockM == 0, "dq counters are sized for 32-row blocks");
  if constexpr (kD == 64 || kD == 128) {
    static_assert(bwd_sm90::BwdPpTraits<T, kD>::kBlockM % kBwdSemBlockM == 0, "dq counters: 32-row blocks");
  }
  // The Q and dO maps (64-row boxes of 64 columns: the row blocks of the ping-pong and the
  // key-split kernels).
  static_assert(Tr::kBlockM == 64, "64-row blocks");
  auto make_qdo_maps = [&](BwdParams& q) { return make_bwd_qdo_maps<T>(p, q); };
  auto make_dq_map = [&](BwdParams& q, bool int32 = false) { return make_bwd_dq_map(p, q, int32); };
  // FLASHKIT_BWD_DQ_TMA=0 (read once): the fast mode's dQ by per-thread reds (A/B runs).
  static const bool dq_reds = dispatch::env_off("FLASHKIT_BWD_DQ_TMA");
  // Deterministic mode: dQ in fixed point (BwdParams::dq_fixed; the kFixed instantiations of
  // kernel_pp.cuh at D 64 / 128 and of kernel_ks.cuh / kernel_ks_pair.cuh at D 256,
  // docs/kernels/bwd.md "Deterministic dQ in fixed point"), decided here because the pre and post
  // kernels take part. FLASHKIT_BWD_DET_TURNS=1 (read once) keeps the turns of the kDet
  // instantiations below (A/B runs); so do the switches that leave the TMA kernels.
  static const bool det_turns = dispatch::env_flag("FLASHKIT_BWD_DET_TURNS");
  BwdParams base = p;
  if constexpr (kD == 64 || kD == 128) {
    static const bool fixed_off = dispatch::env_flag("FLASHKIT_BWD_SM90_V1") || dispatch::env_flag("FLASHKIT_BWD_DET_V1") ||
                                  dispatch::env_flag("FLASHKIT_BWD_PP_DET") || dispatch::env_flag("FLASHKIT_BWD_NO_TMA") ||
                                  det_turns;
    if (p.deterministic && !fixed_off && p.softcap <= 0.f && p.dq_exp != nullptr && p.dq_kvbound != nullptr) {
      base.dq_fixed = make_qdo_maps(base) && make_dq_map(base, true);
    }
  } else if constexpr (kD == 256) {
    // D 256: the key-split and pair kernels' kFixed instantiations (softcaps included: the bound
    // holds, softcap's derivative is at most 1), where the fast mode's TMA reduce-adds run.
    static const bool fixed_off = dispatch::env_flag("FLASHKIT_BWD_D256_V1") || det_turns;
    if (p.deterministic && !fixed_off && !dq_reds && p.dq_exp != nullptr && p.dq_kvbound != nullptr) {
      base.dq_fixed = make_dq_map(base, true) && (FLASHKIT_BWD_KS_TMA_LOADS == 0 || make_qdo_maps(base));
    }
  }
  return launch_util::launch_bwd_with_prepost<T, kD>(base, stream, [&]() -> int {
    if constexpr (kD == 64 || kD == 128) {
      // D 64/128: the ping-pong kernel (kernel_pp.cuh) unless FLASHKIT_BWD_SM90_V1=1 (read
      // once) asks for the lockstep v1 kernel (kept for A/B runs). Deterministic mode: the
      // TMA kernel's deterministic instantiation (below); FLASHKIT_BWD_DET_V1=1 keeps v1 and
      // FLASHKIT_BWD_PP_DET=1 the ping-pong kernel's turns around per-thread reds (both read
      // once, kept for A/B runs; docs/kernels/bwd.md).
      static const bool v1 = dispatch::env_flag("FLASHKIT_BWD_SM90_V1");
      static const bool pp_det = dispatch::env_flag("FLASHKIT_BWD_PP_DET");
      using Pp = bwd_sm90::BwdPpTraits<T, kD>;
      // The ping-pong kernel's TMA maps: Q and dO (boxes of its row blocks), and dq_accum's for
      // the reduce-adds (fp32, dims head_dim, h_q, rows, batch; varlen: total_q rows, batch 1).
      // Deterministic mode at D 64/128: the TMA reduce-add kernel's deterministic instantiation
      // (turns released after the next softmax; the walk rotated without a mask when a (batch, KV head)
      // group's key blocks can all be resident at once: its CTAs then wait on each other in
      // both directions) where the maps can be made; FLASHKIT_BWD_DET_V1=1 (read once) keeps v1.
      static const bool det_v1 = dispatch::env_flag("FLASHKIT_BWD_DET_V1");
      // FLASHKIT_BWD_NO_TMA=1 (read once): the cp.async copies (fast mode), v1 (deterministic).
      static const bool no_tma = dispatch::env_flag("FLASHKIT_BWD_NO_TMA");
      // D 64 with 128-row blocks (pp_traits.cuh, kRowSplit) for the TMA reduce-add kernels, fast
      // and deterministic. Measured against the 64-row kernel (H100, 2026-11-27, env A/B, two
      // rounds, FA3 sweep D 64; docs/kernels/bwd.md): fast +5.8% (+1.7..8.2%, every row up),
      // deterministic +14.3% (+6.8..18.5%). FLASHKIT_BWD_D64_M128=0 (read once) keeps 64 rows.
      static const bool d64_m128 = !dispatch::env_off("FLASHKIT_BWD_D64_M128");
      using Pp128 = bwd_sm90::BwdPpTraits<T, 64, 128>;
      // The producer-warpgroup prototype (FLASHKIT_BWD_PP_PRODUCER, compile time, default 0; pp_traits.cuh,
      // bwd-redesign.md 5.2): D 128's fast and fixed-point TMA kernels with a third, loading warpgroup.
      using PpProducer = bwd_sm90::BwdPpTraits<T, (kD == 128 ? 128 : 64), 64, kD == 128>;
      // GQA: the group's query heads split over a cluster of CTAs per key block
      // (BwdParams::gqa_split_log2, kernel_pp.cuh's kSplit instantiations: each CTA walks h_ratio /
      // split heads, dK / dV summed through distributed shared memory in rank order). By default
      // where measured to pay (bwd_gqa_split.h's table: under a causal mask, D 128 +20..37% fast and
      // +13..39% deterministic, D 64 fast +7..15%; H100, 2026-11-27, docs/kernels/bwd.md "GQA: the
      // group split"). FLASHKIT_BWD_GQA_SPLIT (read once): unset, "t" (or any non-number) that table;
      // 0 or 1 never; n >= 2 wherever the group allows, up to n CTAs (the largest power of two
      // <= min(n, 8) dividing h_ratio; A/B runs and tests).
      auto split_log2 = [&](bool det) {
        return bwd_pp_split_log2(p, kD, det, (p.seqlen_k + Pp::kBlockN - 1) / Pp::kBlockN, dev.num_sms);
      };
      if (base.dq_fixed) {  // (maps made above; no turns, so no rotated walk and no residency rule)
        BwdParams q = base;
        q.deterministic = false;  // the main kernel is the fast one (its walk, its pairing) plus kFixed
        q.gqa_split_log2 = split_log2(false);
        const int n_blocks = (p.seqlen_k + Pp::kBlockN - 1) / Pp::kBlockN;
        if constexpr (kD == 64) {
          if (d64_m128) {
            return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<Pp128, false, true, true, false, false, true>,
                                 &bwd_sm90::bwd_pp_kernel<Pp128, false, true, true, false, true, true>, Pp128>(
                q, n_blocks, stream, dev.device);
          }
        }
#if FLASHKIT_BWD_PP_PRODUCER
        if constexpr (kD == 128) {
          return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<PpProducer, false, true, true, false, false, true>,
                               &bwd_sm90::bwd_pp_kernel<Pp, false, true, true, false, true, true>, Pp, PpProducer>(
              q, n_blocks, stream, dev.device);
        }
#endif
        return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<Pp, false, true, true, false, false, true>,
                             &bwd_sm90::bwd_pp_kernel<Pp, false, true, true, false, true, true>, Pp>(q, n_blocks, stream,
                                                                                                  dev.device);
      }
      if (p.deterministic && !v1 && !det_v1 && !pp_det && !no_tma && p.softcap <= 0.f) {
        BwdParams q = p;
        if (make_qdo_maps(q) && make_dq_map(q)) {
          // The rotated walk needs a group's CTAs all resident (kernel_pp.cuh, det_wait; when
          // they cannot be, the kernel gives the order up rather than hang and reports
          // kDeviceErrorDetOrder). FLASHKIT_BWD_DET_ROTATE=0 (read once) keeps the ascending
          // order, whose CTAs only wait for earlier-launched ones: for GPUs shared with other
          // kernels (overlapped collectives) or under an SM limit.
          static const bool no_rotate = dispatch::env_off("FLASHKIT_BWD_DET_ROTATE");
          const int n_blocks = (p.seqlen_k + Pp::kBlockN - 1) / Pp::kBlockN;
          // Measured (H100, 2026-11-27, env A/B against the ascending order, docs/kernels/bwd.md):
          // D 128 +3..15% up to 8k and level at 16k (128 key blocks); D 64 +6..11% up to 4k but
          // -1.5% at 8k and -3.6% at 16k (64 / 128 blocks) with 64-row blocks, so that kernel rotates
          // only up to SMs / 4. D 64's 128-row kernel (H100, 2026-11-27, limit 33 / 132, two rounds):
          // 8k rotated +9.4%, 16k rotated -3.0%, so it rotates up to SMs / 2 (64 blocks at 8k).
          // FLASHKIT_BWD_DET_ROTATE_MAX (read once; A/B runs): the largest key-block count rotated.
          static const int rotate_max_env = dispatch::env_int("FLASHKIT_BWD_DET_ROTATE_MAX", -1);
          const int rotate_max = rotate_max_env >= 0 ? (rotate_max_env < dev.num_sms ? rotate_max_env : dev.num_sms)
                                 : kD == 64           ? (d64_m128 ? dev.num_sms / 2 : dev.num_sms / 4)
                                                      : dev.num_sms;
          // (launch_bwd_pp turns the rotation off when it splits)
          q.gqa_split_log2 = split_log2(true);
          q.dq_rotate = !no_rotate && !p.causal && p.window_left < 0 && p.window_right < 0 && n_blocks <= rotate_max;
          if constexpr (kD == 64) {
            if (d64_m128) {
              return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<Pp128, false, true, true, true>,
                                   &bwd_sm90::bwd_pp_kernel<Pp128, false, true, true, true, true>, Pp128>(
                  q, n_blocks, stream, dev.device);
            }
          }
          return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<Pp, false, true, true, true>,
                               &bwd_sm90::bwd_pp_kernel<Pp, false, true, true, true, true>, Pp>(q, n_blocks, stream,
                                                                                                dev.device);
        }
      }
      if (!v1 && (!p.deterministic || pp_det)) {
        const dim3 grid(unsigned((p.seqlen_k + Pp::kBlockN - 1) / Pp::kBlockN), unsigned(p.h_kv), unsigned(p.batch));
        if (p.softcap > 0.f) {
          return launch_util::launch_with_smem<&bwd_sm90::bwd_pp_kernel<Pp, true>>(p, grid, Pp::kThreads,
                                                                                   Pp::kSmemBytes, stream, dev.device);
        }
        // Q and dO by TMA where the maps can be made (not with FLASHKIT_BWD_NO_TMA=1;
        // FLASHKIT_BWD_REQUIRE_TMA=1, tests: a failed map is an error, the dq_accum map of
        // the fast mode's reduce-adds included).
        static const bool require_tma = dispatch::env_flag("FLASHKIT_BWD_REQUIRE_TMA");
        if (!no_tma) {
          BwdParams q = p;
          if (make_qdo_maps(q)) {
            // Fast mode: dQ by TMA reduce-adds (FLASHKIT_BWD_DQ_TMA=0: the per-thread reds).
            if (!p.deterministic && !dq_reds && make_dq_map(q)) {
              q.gqa_split_log2 = split_log2(false);
              const int n_blocks = (p.seqlen_k + Pp::kBlockN - 1) / Pp::kBlockN;
              if constexpr (kD == 64) {
                if (d64_m128) {
                  return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<Pp128, false, true, true>,
                                       &bwd_sm90::bwd_pp_kernel<Pp128, false, true, true, false, true>, Pp128>(
                      q, n_blocks, stream, dev.device);
                }
              }
#if FLASHKIT_BWD_PP_PRODUCER
              if constexpr (kD == 128) {
                return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<PpProducer, false, true, true>,
                                     &bwd_sm90::bwd_pp_kernel<Pp, false, true, true, false, true>, Pp, PpProducer>(
                    q, n_blocks, stream, dev.device);
              }
#endif
              return launch_bwd_pp<&bwd_sm90::bwd_pp_kernel<Pp, false, true, true>,
                                   &bwd_sm90::bwd_pp_kernel<Pp, false, true, true, false, true>, Pp>(q, n_blocks, stream,
                                                                                                     dev.device);
            }
            if (require_tma && !p.deterministic && !dq_reds) return int(cudaErrorNotSupported);
            return launch_util::launch_with_smem<&bwd_sm90::bwd_pp_kernel<Pp, false, true>>(
                q, grid, Pp::kThreads, Pp::kSmemBytes, stream, dev.device);
          }
          if (require_tma) return int(cudaErrorNotSupported);
        }
        return launch_util::launch_with_smem<&bwd_sm90::bwd_pp_kernel<Pp>>(p, grid, Pp::kThreads, Pp::kSmemBytes,
                                                                           stream, dev.device);
      }
    }
    const dim3 grid(unsigned((p.seqlen_k + Tr::kBlockN - 1) / Tr::kBlockN), unsigned(p.h_kv), unsigned(p.batch));
    if constexpr (kD == 256) {
      // D 256: the key-split kernel (kernel_ks.cuh), softcapped and deterministic calls
      // included, unless FLASHKIT_BWD_D256_V1=1 (read once) asks for the role-split kernel
      // below (kept for A/B runs).
      static const bool d256_v1 = dispatch::env_flag("FLASHKIT_BWD_D256_V1");
      if (!d256_v1) {
        using Ks = bwd_sm90::BwdKsTraits<T, kD>;
        static_assert(Ks::kBlockN == Tr::kBlockN && Ks::kBlockM == Tr::kBlockM, "same grid and dq turns");
        // Deterministic mode without a mask: the rotated walk (kernel_ks.cuh) when a (batch, KV
        // head) group's key blocks fit on half the SMs (one CTA per SM). Measured (H100,
        // 2026-11-27, docs/kernels/bwd.md): +8..18% at S_k 512..4k (up to 64 key blocks), but
        // -5.6% at 8k (128 blocks on 132 SMs: a group straddles the waves and its first CTAs wait
        // for its last). FLASHKIT_BWD_DET_ROTATE=0 (read once) keeps the ascending order.
        static const bool ks_no_rotate = dispatch::env_off("FLASHKIT_BWD_DET_ROTATE");
        BwdParams pk = p;
        const int ks_blocks = (p.seqlen_k + Ks::kBlockN - 1) / Ks::kBlockN;
        pk.dq_rotate = p.deterministic && !ks_no_rotate && !p.causal && p.window_left < 0 && p.window_right < 0 &&
                       2 * ks_blocks <= dev.num_sms;
        // Fast mode on pairs of CTAs that exchange dS (kernel_ks_pair.cuh; not varlen, not
        // deterministic) where it measured faster than the key-split kernel (H100, 2026-11-27,
        // FA3 sweep D 256, docs/kernels/bwd.md): S_k >= 4096, or >= 1024 without a mask
        // (+2..7%); shorter, it lost 2..5% (its union walks and cluster launch). With the pair kernel's
        // CTA-scope barriers (FLASHKIT_BWD_PAIR_CTA_SCOPE, default 1), remeasured (H200, 2026-11-29, two
        // interleaved rounds, every call on the pairs against this rule's 2026-11-27 form): without a mask
        // +6.1 % at 512 (fixed point +4.4 %), causal +4.8 % at 2k (fixed point +3.5 %), level at 1k, causal
        // 512 -2.9 % (-4 %). So now: S_k >= 2048, or >= 512 without a mask; the fast mode and the
        // fixed-point deterministic mode alike. The switch FLASHKIT_BWD_KS_PAIR (read once): 1 = whenever
        // it can run, 0 = never.
        static const bool ks_pair_on = dispatch::env_flag("FLASHKIT_BWD_KS_PAIR");
        static const bool ks_pair_off = dispatch::env_off("FLASHKIT_BWD_KS_PAIR");
        // Deterministic calls on the pairs (one dq turn per pair, BwdCta::dq_turn_pair; ascending
        // without a mask, descending under a right bound; no rotated walk). Measured against the
        // key-split kernel's deterministic mode (2026-11-27, docs/kernels/bwd.md), H100 / H200:
        // causal 4k..16k +2..7% / +1..2%; without a mask 4k +9 / +7%, 8k +2 / 0%, 16k -1 / -4%;
        // level at 1k / 2k. So: S_k >= 4096, and without a mask only up to 8192.
        // FLASHKIT_BWD_KS_PAIR_DET (read once): 1 = wherever the pairs run, 0 = never. dk / dv are
        // bitwise the key-split kernel's ascending / descending walk's; dq differs from it in the
        // order of its fp32 sums.
        static const bool ks_pair_det_on = dispatch::env_flag("FLASHKIT_BWD_KS_PAIR_DET");
        static const bool ks_pair_det_off = dispatch::env_off("FLASHKIT_BWD_KS_PAIR_DET");
        const bool unmasked = !p.causal && p.window_left < 0 && p.window_right < 0;
        const bool ks_pair_det =
            !ks_pair_det_off && (ks_pair_det_on || (p.seqlen_k >= 4096 && (!unmasked || p.seqlen_k <= 8192)));
        const bool ks_pair = !ks_pair_off && (ks_pair_on || p.seqlen_k >= 2048 || (unmasked && p.seqlen_k >= 512));
        if (base.dq_fixed) {  // the fast mode's choice of kernel, without turns (maps made above)
          BwdParams q = base;
          q.dq_rotate = false;
          // the fast kernels' walks and pairing (make_bwd_cta orders a deterministic grid's key
          // blocks otherwise, and the pair kernel's partner must follow the same order)
          q.deterministic = false;
          if (ks_pair && p.cu_seqlens_q == nullptr) {
            const cudaError_t err = launch_bwd_ks_pair_for<bwd_sm90::BwdKsPairTraits<T, kD>, false, true>(q, stream,
                                                                                                         dev.device);
            if (!bwd_cluster_unplaced(err)) return int(err);
            (void)cudaGetLastError();
          }
          return launch_bwd_ks<Ks, true, true>(q, grid, stream, dev.device);
        }
        if (ks_pair && !dq_reds && (!p.deterministic || ks_pair_det) && p.cu_seqlens_q == nullptr) {
          BwdParams q = p;
          if (make_dq_map(q) && make_qdo_maps(q)) {
            using Kp = bwd_sm90::BwdKsPairTraits<T, kD>;
            const cudaError_t err = p.deterministic ? launch_bwd_ks_pair_for<Kp, true>(q, stream, dev.device)
                                                    : launch_bwd_ks_pair_for<Kp>(q, stream, dev.device);
            if (!bwd_cluster_unplaced(err)) return int(err);
            (void)cudaGetLastError();  // (the one-CTA kernel below)
          }
        }
        // dQ by TMA reduce-adds and Q/dO by TMA loads where the maps can be made
        // (FLASHKIT_BWD_DQ_TMA=0: per-thread reds and cp.async), in deterministic mode with the
        // same turns (bitwise the same sums).
        if (!dq_reds) {
          BwdParams q = pk;
          if (make_dq_map(q) && (FLASHKIT_BWD_KS_TMA_LOADS == 0 || make_qdo_maps(q))) {
            return launch_bwd_ks<Ks, true>(q, grid, stream, dev.device);
          }
        }
        return launch_bwd_ks<Ks>(pk, grid, stream, dev.device);
      }
    }
    if (p.softcap > 0.f) {
      return launch_util::launch_with_smem<&bwd_sm90::bwd_kernel<Tr, true>>(p, grid, Tr::kThreads, Tr::kSmemBytes,
                                                                            stream, dev.device);
    }
    if constexpr (Tr::kSplitD) {
      // D 256: S^T/dP^T split between the warpgroups unless FLASHKIT_BWD_D256_DUP=1 (read
      // once) asks for the first version's duplicated S^T/dP^T (kept for A/B runs).
      static const bool dup = dispatch::env_flag("FLASHKIT_BWD_D256_DUP");
      if (dup) {
        return launch_util::launch_with_smem<&bwd_sm90::bwd_kernel<Tr, false, true>>(p, grid, Tr::kThreads,
                                                                                      Tr::kSmemBytes, stream, dev.device);
      }
    }
    return launch_util::launch_with_smem<&bwd_sm90::bwd_kernel<Tr>>(p, grid, Tr::kThreads, Tr::kSmemBytes, stream,
                                                                    dev.device);
  });
}

// The Hopper backward for head dim kD: D 64 / 128 / 256 natively, D 96 / 192 on the padded tiles.
template <typename Tag, int kD>
int launch_bwd_sm90(const BwdParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  if constexpr (kD == 96 || kD == 192) {
    return launch_bwd_sm90_padded<Tag, kD>(p, dev, stream);
  } else {
    return launch_bwd_sm90_native<Tag, kD>(p, dev, stream);
  }
}

}  // namespace flashkit

#define FLASHKIT_INSTANTIATE_BWD_SM90(TAG, D)                                                  \
  template int flashkit::launch_bwd_sm90<flashkit::TAG, D>(const flashkit::BwdParams&,          \
                                                           const flashkit::DeviceInfo&, cudaStream_t);
