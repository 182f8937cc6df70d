// Hopper dense attention forward: FlashAttention-2's algorithm on warpgroup MMAs (wgmma).
//
// One CTA = kBlockM = 64 x kWarpGroups query rows of one (batch, head); warpgroup w owns
// 64 rows. Per key tile n (walking from the last visible tile to the first, so the tiles
// that need masking come first):
//
//   wait K(n) ─ sync ─ issue K(n-1), V(n-1) into the other stage
//     ─ S = Q K(n)^T   (wgmma, Q and K straight from shared memory)
//     ─ mask ─ online softmax ─ P packed to 16 bits in registers
//     ─ wait V(n) ─ sync ─ O += P V(n)   (wgmma, P from registers, V transposed by hardware)
//
// Two K/V stages filled by cp.async: the loads of tile n-1 overlap all the work of tile n.
// Unlike mma.sync (sm80 family), wgmma reads both operands of Q K^T and the B operand of
// P V from shared memory itself, so no ldmatrix traffic goes through the registers, and a
// warpgroup's 64 rows share one read of each K/V tile.
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
#include "kernels/attention_params.h"
#include "kernels/fwd_sm90/traits.cuh"
#include "prims/cp_async.cuh"
#include "prims/numeric.cuh"
#include "prims/wgmma.cuh"
#include "tiles/tile_copy.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKIT_SM90_KERNEL_BODY 1
#else
#define FLASHKIT_SM90_KERNEL_BODY 0
#endif

namespace flashkit::fwd_sm90 {

// The [8][4] accumulator block of one n64 wgmma inside a [kTiles][4] fragment array.
template <int kTiles>
__device__ __forceinline__ float (&n64_block(float (&acc)[1][kTiles][4], int chunk))[8][4] {
  return *reinterpret_cast<float(*)[8][4]>(&acc[0][chunk * 8][0]);
}

// S = Q K^T for the warpgroup's 64 rows: kKSteps x kNChunks wgmmas, one commit, one wait.
// Descriptors advance inside a 128-byte swizzle row by 32 bytes per k16 step, and by one
// atom column (kRows x 128 bytes) every 4 steps.
template <class Tr>
__device__ __forceinline__ void gemm_qk(float (&s)[1][Tr::kNTiles][4], uint64_t desc_q, uint64_t desc_k) {
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
  prims::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) {
    const uint64_t q_off = ((ks / 4) * Tr::QTile::kBlockBytes + (ks % 4) * 32) >> 4;
#pragma unroll
    for (int nc = 0; nc < Tr::kNChunks; ++nc) {
      const uint64_t k_off = ((ks / 4) * Tr::KTile::kBlockBytes + nc * 64 * 128 + (ks % 4) * 32) >> 4;
      prims::wgmma_m64n64k16_ss<typename Tr::T>(n64_block(s, nc), desc_q + q_off, desc_k + k_off,
                                                ks > 0 ? 1 : 0);
    }
  }
  prims::wgmma_commit();
  prims::wgmma_wait<0>();
  prims::fence_operands(s[0]);
}

// O += P V: P from registers (k16 step ps = S column tiles 2ps, 2ps+1), V as an MN-major
// operand: 16 keys of one atom column per wgmma, i.e. 16 rows x 128 bytes = 2048 bytes.
template <class Tr>
__device__ __forceinline__ void gemm_pv(float (&o)[1][Tr::kDTiles][4], const uint32_t (&pa)[Tr::kPSteps][4],
                                        uint64_t desc_v) {
  prims::fence_operands(o[0]);
  prims::wgmma_fence();
#pragma unroll
  for (int ps = 0; ps < Tr::kPSteps; ++ps) {
#pragma unroll
    for (int dc = 0; dc < Tr::kDChunks; ++dc) {
      const uint64_t v_off = (dc * Tr::VTile::kBlockBytes + ps * 16 * 128) >> 4;
      prims::wgmma_m64n64k16_rs_tnspb<typename Tr::T>(n64_block(o, dc), pa[ps], desc_v + v_off);
    }
  }
  prims::wgmma_commit();
  prims::wgmma_wait<0>();
  prims::fence_operands(o[0]);
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1) fwd_kernel(const FwdParams p) {
#if FLASHKIT_SM90_KERNEL_BODY
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kThreads = Tr::kThreads;
  static_assert(Tr::kStages == 2, "the pipeline below is written for two stages");

  // Swizzle atoms need 1024-byte alignment of the absolute shared address.
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);

  attn::BlockInfo<T, kBlockM> blk;
  if (!blk.init(p)) return;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int wg = tid / 128;
  const int warp_row0 = wg * 64 + ((tid % 128) / 32) * 16;  // this warp's 16 rows

  const attn::Mask mask{blk.seqlen_q, blk.seqlen_k, p.causal};
  const int n_tiles = mask.num_key_tiles(blk.m0, kBlockM, kBlockN);
  if (n_tiles == 0) {  // no row of this block sees a key: O = 0, LSE = -inf
    tiles::zero_tile<typename Tr::QTile, kThreads>(blk.o, p.o_row_stride, blk.rows_here, tid);
    if (blk.lse != nullptr) {
      for (int r = tid; r < blk.rows_here; r += kThreads) blk.lse[r] = -INFINITY;
    }
    return;
  }

  auto load_kv = [&](int n, int stage) {
    const int valid = blk.seqlen_k - n * kBlockN;
    tiles::load_tile_async<typename Tr::KTile, kThreads>(
        sK + stage * (Tr::KTile::kBytes / int(sizeof(T))), blk.k + int64_t(n) * kBlockN * p.k_row_stride, p.k_row_stride,
        valid, tid);
    prims::cp_async_commit();
    tiles::load_tile_async<typename Tr::VTile, kThreads>(
        sV + stage * (Tr::VTile::kBytes / int(sizeof(T))), blk.v + int64_t(n) * kBlockN * p.v_row_stride, p.v_row_stride,
        valid, tid);
    prims::cp_async_commit();
  };

  // Prologue: [Q + K(last)] and [V(last)] as two groups, so S can start before V lands.
  tiles::load_tile_async<typename Tr::QTile, kThreads>(sQ, blk.q, p.q_row_stride, blk.rows_here, tid);
  load_kv(n_tiles - 1, 0);

  // Descriptors of this warpgroup's Q rows and of stage 0 of K and V (8-row groups 1024
  // bytes apart; V's leading offset, one atom column, is unused at N = 64).
  const uint64_t desc_q = prims::smem_desc_sw128(prims::smem_addr(sQ) + wg * 64 * 128, 16, 1024);
  const uint64_t desc_k0 = prims::smem_desc_sw128(prims::smem_addr(sK), 16, 1024);
  const uint64_t desc_v0 = prims::smem_desc_sw128(prims::smem_addr(sV), Tr::VTile::kBlockBytes, 1024);

  float o[1][Tr::kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < Tr::kDTiles; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[0][dt][e] = 0.f;
  attn::OnlineSoftmax<1, false> softmax;
  softmax.init();
  const float scale_log2 = p.softmax_scale_log2;

  for (int i = 0; i < n_tiles; ++i) {
    const int n_block = n_tiles - 1 - i;
    const int stage = i % 2;
    prims::cp_async_wait<1>();  // K(n) landed (V(n) may still be in flight)
    prims::fence_proxy_async_smem();
    __syncthreads();  // K(n) visible to every wgmma; everyone is done with tile n+1's stage
    if (n_block > 0) {
      load_kv(n_block - 1, stage ^ 1);
    } else {  // keep the group count uniform: two empty groups
      prims::cp_async_commit();
      prims::cp_async_commit();
    }

    float s[1][Tr::kNTiles][4];
    gemm_qk<Tr>(s, desc_q, desc_k0 + ((stage * Tr::KTile::kBytes) >> 4));
    if (mask.tile_needs_mask(n_block * kBlockN, kBlockN, blk.m0)) {
      mask.apply(s, blk.m0 + warp_row0, n_block * kBlockN, lane);
    }
    softmax.update(s, o, scale_log2);
    uint32_t pa[Tr::kPSteps][4];
#pragma unroll
    for (int ps = 0; ps < Tr::kPSteps; ++ps) {
      pa[ps][0] = prims::pack2<T>(s[0][2 * ps][0], s[0][2 * ps][1]);
      pa[ps][1] = prims::pack2<T>(s[0][2 * ps][2], s[0][2 * ps][3]);
      pa[ps][2] = prims::pack2<T>(s[0][2 * ps + 1][0], s[0][2 * ps + 1][1]);
      pa[ps][3] = prims::pack2<T>(s[0][2 * ps + 1][2], s[0][2 * ps + 1][3]);
    }

    prims::cp_async_wait<2>();  // V(n) landed (K/V(n-1) may be in flight)
    prims::fence_proxy_async_smem();
    __syncthreads();
    gemm_pv<Tr>(o, pa, desc_v0 + ((stage * Tr::VTile::kBytes) >> 4));
  }

  // Epilogue: normalize, stage O through the Q tile (after every warpgroup is done reading
  // Q), then coalesced 16-byte stores.
  float lse[1][2];
  softmax.finalize(o, scale_log2, lse);
  __syncthreads();
  const int g = lane / 4, t = lane % 4;
  const int r = warp_row0 + g;
#pragma unroll
  for (int dt = 0; dt < Tr::kDTiles; ++dt) {
    const int c = dt * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(sQ + Tr::QTile::offset(r, c)) = prims::pack2<T>(o[0][dt][0], o[0][dt][1]);
    *reinterpret_cast<uint32_t*>(sQ + Tr::QTile::offset(r + 8, c)) = prims::pack2<T>(o[0][dt][2], o[0][dt][3]);
  }
  if (blk.lse != nullptr && t == 0) {
    if (r < blk.rows_here) blk.lse[r] = lse[0][0];
    if (r + 8 < blk.rows_here) blk.lse[r + 8] = lse[0][1];
  }
  __syncthreads();
  tiles::store_tile<typename Tr::QTile, kThreads>(blk.o, p.o_row_stride, sQ, blk.rows_here, tid);
#endif  // FLASHKIT_SM90_KERNEL_BODY
}

}  // namespace flashkit::fwd_sm90
