// Launcher of the Hopper (sm_90a, wgmma) forward kernel: the tile configuration of each
// head dim and the grid. Included only by the per-variant instantiation files in
// src/kernels/fwd_sm90/inst/, which each define one launch_fwd_sm90<dtype, head_dim>.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kernels/fwd_sm90/kernel.cuh"
#include "kernels/fwd_sm90/kernel_persistent.cuh"
#include "launch/cluster_launch.cuh"
#include "launch/element_type.cuh"
#include "launch/family_dispatch.h"
#include "launch/fwd_launch.h"
#include "launch/launch_common.cuh"
#include "launch/tma_encode.cuh"

namespace flashkit {

namespace fwd_sm90 {

// Tile configuration per head dim: FwdTraits<T, D, kBlockN, kKStages, kMinBlocks>
// (kBlockM = 128, two warpgroups). See docs/kernels/fwd_sm90.md for the measurements.
// d64 calls run three consumer warpgroups (D64Wg3Traits below) wherever the tensor maps can be made;
// the rest (FLASHKIT_FWD_NO_TMA=1, FLASHKIT_FWD_PERSISTENT=0 / FLASHKIT_FWD_D64_WG3=0, strides no map
// can describe) runs Config<T, 64> at one CTA per SM: 179-181 registers, no spills, no serialized
// wgmmas (the two-CTA form, FLASHKIT_FWD_D64_ONE_CTA=0, is capped at 128 registers: 16-40 bytes of
// spills and C7511; it was 10-20% faster before the producer warpgroup and 0.92-1.04x of the
// one-CTA kernel after it, fwd_sm90.md "d64 at one CTA per SM, again"). d192 (three swizzle atom columns) takes d256's
// shape. d96 runs d128's tiles with 32 zero columns (Tr::kPadded): a third more MMA work
// for Q K^T and P V than the data needs, still on wgmma.
template <typename T, int D> struct Config;
// FLASHKIT_FWD_D64_ONE_CTA (1 by default since 2026-11-27; 0 = the two-CTA kernel): the shape of the
// d64 calls the three-warpgroup kernel does not take; at 1 they run the producer warpgroup /
// persistent kernels of the other head dims where a map can be made, else the one-CTA cp.async kernel.
#ifndef FLASHKIT_FWD_D64_ONE_CTA
#define FLASHKIT_FWD_D64_ONE_CTA 1
#endif
// FLASHKIT_FWD_D64_BLOCK_N / FLASHKIT_FWD_D64_KSTAGES (A/B switches, fwd_sm90.md "d64 with
// 64-key tiles"): at 128 keys the two-CTA d64 kernel's wgmmas are serialized by ptxas for lack
// of registers (C7511: S, P and O of a 64 x 128 tile fill the 128-register cap); 64-key tiles
// need 127 registers and are not, yet measured 8.5% slower (H100, 2026-11-26): keep 128 / 3.
#ifndef FLASHKIT_FWD_D64_BLOCK_N
#define FLASHKIT_FWD_D64_BLOCK_N 128
#endif
#ifndef FLASHKIT_FWD_D64_KSTAGES
#define FLASHKIT_FWD_D64_KSTAGES 3
#endif
template <typename T> struct Config<T, 64>  {
  using Tr = FwdTraits<T, 64, FLASHKIT_FWD_D64_BLOCK_N, FLASHKIT_FWD_D64_KSTAGES, FLASHKIT_FWD_D64_ONE_CTA ? 1 : 2>;
};
// d64 with three consumer warpgroups (192 x 128 tiles, 4 K / 4 V stages, the persistent
// kernel; fwd_sm90.md "d64 with three consumer warpgroups"): every d64 call whose maps can be
// made, windows and softcaps included (its kMods instantiation), causal ones of any length
// (unlike D 128, whose persistent walk stops at 64 row blocks: here +12% at causal 16k). The
// rest runs Config<T, 64> above. FLASHKIT_FWD_D64_WG3=0 or FLASHKIT_FWD_PERSISTENT=0 (read once)
// keeps every d64 call off the three-warpgroup kernel.
#ifndef FLASHKIT_FWD_D64_WG3
#define FLASHKIT_FWD_D64_WG3 1
#endif
template <typename T>
using D64Wg3Traits = FwdTraits<T, 64, 128, 4, 1, true, 3>;
template <typename T> struct Config<T, 96>  { using Tr = FwdTraits<T, 96, 128, 3>; };  // padded to 128
template <typename T> struct Config<T, 128> { using Tr = FwdTraits<T, 128, 128, 3>; };
template <typename T> struct Config<T, 192> { using Tr = FwdTraits<T, 192, 64, 3>; };
template <typename T> struct Config<T, 256> { using Tr = FwdTraits<T, 256, 64, 3>; };

// TMA maps of K and V for the kTma kernel: dims (innermost first) head_dim, rows, h_kv,
// batch (varlen: rows = total_k, batch 1), boxes of 64 columns x kBlockN rows, 128-byte
// swizzle (the Swizzle128Tile layout), zeros outside the tensor. False when a tensor cannot
// be described (a stride that is 0, not a multiple of 16 bytes or >= 2^40, an unaligned
// base) or the driver has no encoder: the cp.async kernel runs then.
// box_rows: kBlockN, or half of it for the clusters' multicast halves (launch_persistent<.., true>).
template <class Tr>
bool make_kv_tensor_maps(FwdParams& p, int box_rows = Tr::kBlockN) {
  using T = typename Tr::T;
  const bool varlen = p.cu_seqlens_k != nullptr;
  const int64_t dims[4] = {p.head_dim, p.total_k, p.h_kv, varlen ? 1 : p.batch};
  return launch_util::make_tma_map_4d<T>(&p.k_tmap, p.k, dims, p.k_row_stride, p.k_head_stride, p.k_batch_stride,
                                         box_rows) &&
         launch_util::make_tma_map_4d<T>(&p.v_tmap, p.v, dims, p.v_row_stride, p.v_head_stride, p.v_batch_stride,
                                         box_rows);
}

// O's map alone (make_q_tensor_map's second half): o_tma = 1 where it can be made, else 0.
template <class Tr>
void make_o_tensor_map(FwdParams& p) {
  using T = typename Tr::T;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t dims[4] = {p.head_dim, p.total_q, p.h_q, varlen ? 1 : p.batch};
  p.o_tma = launch_util::make_tma_map_4d<T>(&p.o_tmap, p.o, dims, p.o_row_stride, p.o_head_stride, p.o_batch_stride,
                                            64);
}

// The persistent kernel's Q map: dims head_dim, rows, h_q, batch (varlen: total_q rows,
// batch 1), boxes of 64 columns x 128 rows; and O's for its TMA-store epilogue (boxes of 64
// rows: one warpgroup's), where FLASHKIT_FWD_TMA_STORE is on (macro, and not 0 in the
// environment) and O can be described (else o_tma = 0: the epilogue stores with the threads).
template <class Tr>
bool make_q_tensor_map(FwdParams& p) {
  using T = typename Tr::T;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t dims[4] = {p.head_dim, p.total_q, p.h_q, varlen ? 1 : p.batch};
  // FLASHKIT_FWD_TMA_STORE=0 (read once): thread stores (A/B runs)
  static const bool stores_off = dispatch::env_off("FLASHKIT_FWD_TMA_STORE");
  // FLASHKIT_FWD_REQUIRE_TMA=1 (the tests): an O map that was asked for and cannot be made fails the call (false,
  // as a Q map that cannot be made), instead of the thread stores' silent fallback
  static const bool require_tma = dispatch::env_flag("FLASHKIT_FWD_REQUIRE_TMA");
  p.o_tma = 0;
  if (FLASHKIT_FWD_TMA_STORE != 0 && !stores_off) {
    make_o_tensor_map<Tr>(p);
    if (require_tma && p.o_tma == 0) return false;
  }
  return launch_util::make_tma_map_4d<T>(&p.q_tmap, p.q, dims, p.q_row_stride, p.q_head_stride, p.q_batch_stride,
                                         Tr::kBlockM);
}

// Whether the non-persistent TMA kernel (fwd_kernel<.., kTma>: D 256 but causal S_q <= 512, and causal calls of more
// than 64 row blocks) stores O by TMA (fwd_sm90.md "TMA stores in the grid kernel"): one CTA per SM and a new CTA per
// tile, so the 16-byte thread stores of the staged tile (~1 us at D 128 in the persistent kernel's trace) delay the
// next CTA's start; a TMA store frees the SM once it has read the staging tile. The macro FLASHKIT_FWD_GRID_TMA_STORE
// is the default (1 since 2026-11-29: H200, FA3 sweep D 256, two interleaved rounds, +0.5 % geomean, +0.7..1.8 % at
// S 512 .. 2k, no row below the rounds' spread); the environment's FLASHKIT_FWD_GRID_TMA_STORE=1 / =0 (read once)
// turns it on / off. FLASHKIT_FWD_TMA_STORE=0 turns it off too.
#ifndef FLASHKIT_FWD_GRID_TMA_STORE
#define FLASHKIT_FWD_GRID_TMA_STORE 1
#endif
inline bool grid_tma_store_on() {
  static const bool on = !dispatch::env_off("FLASHKIT_FWD_TMA_STORE") && FLASHKIT_FWD_TMA_STORE != 0 &&
                         (FLASHKIT_FWD_GRID_TMA_STORE != 0 ? !dispatch::env_off("FLASHKIT_FWD_GRID_TMA_STORE")
                                                           : dispatch::env_flag("FLASHKIT_FWD_GRID_TMA_STORE"));
  return on;
}

// Whether the persistent kernel runs (kernel_persistent.cuh; measured on an H100,
// 2026-11-23, docs/kernels/fwd_sm90.md "Persistent"): where O has its staging tile
// (D 96/128/192: +2-20% at S <= 8k, the most at short sequences), except causal calls
// with more than 64 row blocks (S_q > 8k): the static walk balances the causal tiles'
// unequal work worse than the hardware's block scheduler (-7% at 16k; with the walk
// head-major since 2026-11-28, level). D 256 has no staging tile (O goes through the last V
// stage) and runs it only for causal calls of at most four row blocks (S_q <= 512) without a
// window or softcap: +5.2% at causal 512 on an H200 (fwd_sm90.md "D 256 causal S <= 512 on the
// persistent kernel"); at 1k +2.6% / -3.6% in two measurements, non-causal and longer calls
// 0-15% slower. FLASHKIT_FWD_PERSISTENT=1 / =0 (read once) forces it on wherever the maps can
// be made / off.
template <class Tr>
bool use_persistent(const FwdParams& p) {
  static const char* env = std::getenv("FLASHKIT_FWD_PERSISTENT");
  if (env != nullptr && env[0] == '1') return true;
  if (env != nullptr && env[0] == '0') return false;
  const int m_blocks = (p.seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM;
  if (!PersistentSmem<Tr>::kStageO) return p.causal && m_blocks <= 4 && !launch_util::fwd_needs_mods(p);
  return !p.causal || m_blocks <= 64;
}

// Whether a persistent call runs in clusters of two CTAs that share K / V by TMA multicast (fwd_kernel_persistent's
// kCluster; FA3's choice for D >= 128 without a mask): calls where both halves of a unit see the same keys (no
// causal mask, no window or softcap, fixed lengths) and every unit has both halves (an even number of row blocks),
// at D 96 / 128 / 192. The macro FLASHKIT_FWD_CLUSTER is the default (0: off until measured, fwd_sm90.md "K / V
// multicast in clusters of two"); the environment's FLASHKIT_FWD_CLUSTER=1 / =0 (read once) turns it on / off.
#ifndef FLASHKIT_FWD_CLUSTER
#define FLASHKIT_FWD_CLUSTER 0
#endif
template <class Tr>
constexpr bool cluster_capable() {
  return Tr::kWarpGroups == 2 && PersistentSmem<Tr>::kStageO && Tr::kHeadDim >= 96 && Tr::kHeadDim <= 192;
}
template <class Tr>
bool use_cluster(const FwdParams& p) {
  static const bool on = FLASHKIT_FWD_CLUSTER != 0 ? !dispatch::env_off("FLASHKIT_FWD_CLUSTER")
                                                   : dispatch::env_flag("FLASHKIT_FWD_CLUSTER");
  const int m_blocks = (p.seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM;
  return on && cluster_capable<Tr>() && !p.causal && !launch_util::fwd_needs_mods(p) && p.cu_seqlens_q == nullptr &&
         p.cu_seqlens_k == nullptr && m_blocks % 2 == 0 && p.total_k > 0;
}

// Clusters of two of Kernel that can be resident at once on `device` (its smem limit raised first), per device,
// asked once.
template <auto Kernel>
int max_pair_clusters(int device, int threads, int smem) {
  static int cached[16] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  if (device >= 0 && device < 16 && cached[device] >= 0) return cached[device];
  const int n = launch_util::max_active_clusters(Kernel, dim3(2), threads, size_t(smem), 2);
  if (device >= 0 && device < 16) cached[device] = n;
  return n;
}

// One CTA per SM over the tiles of the grid order (kernel_persistent.cuh); kCluster: one cluster of two per two SMs
// (as many as can be resident), cudaErrorNotSupported when none can.
template <class Tr, bool kMods = false, bool kCluster = false>
cudaError_t launch_persistent(const FwdParams& params, cudaStream_t stream, const DeviceInfo& dev) {
  constexpr auto kKernel = &fwd_kernel_persistent<Tr, kMods, kCluster>;
  constexpr int kSmem = PersistentSmem<Tr>::kBytes;
  cudaError_t err = launch_util::raise_smem_limit<kKernel>(dev.device, kSmem);
  if (err != cudaSuccess) return err;
  FwdParams p = params;
  dim3 grid;
  if (!launch_util::make_grid(p, Tr::kBlockM, dev.l2_bytes, int(sizeof(typename Tr::T)), &grid, true)) {
    return cudaErrorInvalidConfiguration;
  }
  // units of the walk: (batch, head) pairs x pairs of row blocks (the grid's empty slots are
  // not walked)
  if (!set_persistent_walk(p)) return cudaErrorInvalidConfiguration;
  const int64_t tiles = p.num_tiles;
  if constexpr (kCluster) {
    const int clusters = max_pair_clusters<kKernel>(dev.device, Tr::kThreads, kSmem);
    if (clusters < 1) return cudaErrorNotSupported;
    p.walk_rotate = 0;  // (no causal walk)
    const unsigned n = unsigned(std::min<int64_t>(tiles, std::min(clusters, std::max(1, dev.num_sms / 2))));
    return launch_util::launch_cluster(kKernel, dim3(2 * n), dim3(Tr::kThreads), size_t(kSmem), stream, 2, false, p);
  } else {
    const unsigned ctas = unsigned(std::min<int64_t>(tiles, std::max(1, dev.num_sms)));
    static const bool rotate_off = dispatch::env_off("FLASHKIT_FWD_WALK_ROTATE");
    p.walk_rotate = !rotate_off && launch_util::fwd_walk_rotate(p.causal, p.sched_group, (p.num_m_blocks + 1) / 2,
                                                                tiles, ctas);
    kKernel<<<ctas, Tr::kThreads, kSmem, stream>>>(p);
    return cudaGetLastError();
  }
}

}  // namespace fwd_sm90

// The head dims with one CTA per SM (96, 128, 192, 256) run the variant with a producer
// warpgroup that loads the K/V tiles with TMA (windows and softcaps: its kMods
// instantiations), and the softmax overlapped with P V inside each consumer warpgroup
// (docs/kernels/fwd_sm90.md: +6-10% over the cp.async kernel on an H100). The cp.async
// kernel runs the other calls, a call whose
// K/V cannot be described by a tensor map (a stride not a multiple of 16 bytes, an
// unaligned base), a call with no keys at all (nothing to load), and every call under
// FLASHKIT_FWD_NO_TMA=1 (read once). Of the TMA calls, the persistent kernel runs those
// use_persistent picks. FLASHKIT_FWD_REQUIRE_TMA=1 (tests) turns a failed map into an
// error instead of the fallback.
// FLASHKIT_FWD_MODS_CP_ASYNC=1 (read once) keeps windows / softcaps at D 96-256 on the
// cp.async kernel's kMods instantiation, as before 2026-11-27 (A/B runs); the mods check
// comes first, so calls without a window or softcap never read it.
inline bool mods_on_cp_async_env() {
  static const bool on = dispatch::env_flag("FLASHKIT_FWD_MODS_CP_ASYNC");
  return on;
}

template <typename Tag, int kHeadDim>
int launch_fwd_sm90(const FwdParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using Tr = typename fwd_sm90::Config<typename ElementOf<Tag>::type, kHeadDim>::Tr;
  const bool mods = launch_util::fwd_needs_mods(p);
  static const bool require_tma = dispatch::env_flag("FLASHKIT_FWD_REQUIRE_TMA");
  static const bool use_tma = require_tma || !dispatch::env_flag("FLASHKIT_FWD_NO_TMA");
  if constexpr (kHeadDim == 64 && FLASHKIT_FWD_D64_WG3 != 0) {
    using Tr3 = fwd_sm90::D64Wg3Traits<typename ElementOf<Tag>::type>;
    static const bool wg3_off = dispatch::env_off("FLASHKIT_FWD_D64_WG3");
    static const bool persistent_off = dispatch::env_off("FLASHKIT_FWD_PERSISTENT");
    static_assert(fwd_sm90::PersistentSmem<Tr3>::kStageO, "O's staging tile fits");
    if (!wg3_off && !persistent_off && use_tma && p.total_k > 0 && p.total_q > 0) {
      FwdParams q = p;
      if (fwd_sm90::make_kv_tensor_maps<Tr3>(q) && fwd_sm90::make_q_tensor_map<Tr3>(q)) {
        return mods ? fwd_sm90::launch_persistent<Tr3, true>(q, stream, dev)
                    : fwd_sm90::launch_persistent<Tr3>(q, stream, dev);
      }
      if (require_tma) return cudaErrorNotSupported;
    }
  }
  if constexpr (Tr::kMinBlocks == 1) {  // (a two-CTA d64 kernel, FLASHKIT_FWD_D64_ONE_CTA=0, has no producer warpgroup)
    using TrP = fwd_sm90::WithProducer<Tr>;
    // Windows and softcaps take the same kernels as the other calls, in their kMods
    // instantiations (since 2026-11-27; before, the cp.async kernel's: fwd_sm90.md
    // "Windows and softcaps on the TMA kernels").
    if (use_tma && p.total_k > 0 && !(mods && mods_on_cp_async_env())) {
      FwdParams q = p;
      if (fwd_sm90::make_kv_tensor_maps<TrP>(q)) {
        if (fwd_sm90::use_persistent<TrP>(p) && p.total_q > 0) {
          if constexpr (fwd_sm90::cluster_capable<TrP>()) {
            // (else, or where no cluster can be placed: one CTA per SM; FLASHKIT_FWD_REQUIRE_TMA=1, the tests: an
            // error instead)
            if (fwd_sm90::use_cluster<TrP>(p)) {
              FwdParams r = p;
              if (fwd_sm90::make_kv_tensor_maps<TrP>(r, TrP::kBlockN / 2) && fwd_sm90::make_q_tensor_map<TrP>(r)) {
                const cudaError_t e = fwd_sm90::launch_persistent<TrP, false, true>(r, stream, dev);
                if (e != cudaErrorNotSupported || require_tma) return e;
              } else if (require_tma) {
                return cudaErrorNotSupported;
              }
            }
          }
          if (fwd_sm90::make_q_tensor_map<TrP>(q)) {
            return mods ? fwd_sm90::launch_persistent<TrP, true>(q, stream, dev)
                        : fwd_sm90::launch_persistent<TrP>(q, stream, dev);
          }
          if (require_tma) return cudaErrorNotSupported;
        }
        q.o_tma = 0;
        if (fwd_sm90::grid_tma_store_on() && q.total_q > 0) {  // (no rows, no map: nothing to store)
          fwd_sm90::make_o_tensor_map<TrP>(q);
          if (require_tma && q.o_tma == 0) return cudaErrorNotSupported;  // (the tests: no silent fallback)
        }
        return mods ? launch_util::launch_fwd<&fwd_sm90::fwd_kernel<TrP, true, true>, TrP>(q, stream, dev.device,
                                                                                           dev.l2_bytes)
                    : launch_util::launch_fwd<&fwd_sm90::fwd_kernel<TrP, false, true>, TrP>(q, stream, dev.device,
                                                                                            dev.l2_bytes);
      }
      if (require_tma) return cudaErrorNotSupported;
    }
  }
  if (mods) {
    return launch_util::launch_fwd<&fwd_sm90::fwd_kernel<Tr, true>, Tr>(p, stream, dev.device, dev.l2_bytes);
  }
  return launch_util::launch_fwd<&fwd_sm90::fwd_kernel<Tr>, Tr>(p, stream, dev.device, dev.l2_bytes);
}

}  // namespace flashkit

// Defines launch_fwd_sm90<TAG, D> in an instantiation file.
#define FLASHKIT_INSTANTIATE_FWD_SM90(TAG, D)                                                  \
  template int flashkit::launch_fwd_sm90<flashkit::TAG, D>(const flashkit::FwdParams&,          \
                                                           const flashkit::DeviceInfo&, cudaStream_t);
