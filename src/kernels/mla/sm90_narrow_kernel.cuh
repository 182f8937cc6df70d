// Hopper (sm_90a) MLA decoding split kernel for few query rows per KV head (<= 32: h_q x s_q of
// DeepSeek's 16 or 32 query heads per GPU under tensor parallelism): the rows as the wgmma N dimension.
//
// The seesaw kernel (sm90_kernel.cuh) puts the query rows in the M dimension of its wgmmas, which is
// 64: at 16 rows three quarters of its tensor work is padding, and the tensor pipe is busy for more
// than half of each block's transfer time (mla.md "What is left"). Here every product is transposed:
//
//   S^T (64 tokens x R rows) = K (64 x 576) Q^T          wgmma m64nRk16, A = the K block (K-major),
//                                                         B = Q (R x 576, K-major); 36 k-steps
//   O^T (512 x R)           += V^T (512 x 64) P^T         wgmma m64nRk16 per 64 dims, A = the V block
//                                                         read MN-major (V is K's first 512 columns),
//                                                         B = P^T (R x 64 tokens, K-major, shared)
//
// with R = kRows = 16 or 32 (rows past rows_per_kv are zero in Q and never written), so a block costs
// R / 64 of the padded tensor work. The softmax runs along M: per row (an accumulator column), the
// block's max is reduced over a thread's two tokens, the warp's 16 (shuffles) and the warpgroup's four
// warps (shared memory, one named barrier); the row sums stay per thread until the piece ends.
//
// Two warpgroups share every block (two K buffers, blocks alternating between them): warpgroup 0 owns
// chunks 0-3 of a block (its part of Q K^T and the V of O^T's dims 0-255), warpgroup 1 chunks 4-8 (the
// rest of Q K^T, the V of dims 256-511); each loads, waits for and reloads only its own chunks (one lane,
// TMA boxes of 64 columns x 64 tokens, one mbarrier per chunk), reloading each as soon as its last reader
// is done. The two partial S^T are summed through shared memory (the same order in both warpgroups, so
// both hold the same S^T and compute the same softmax: no merge at the end), each warpgroup stores half of
// P^T, and each multiplies its own 256 dims. Q (R x 576) comes by cp.async at the piece's start.
//
// Pages of multiples of 64 tokens only (one box per chunk; the launcher makes the map, as for the
// seesaw kernel's kWholeBox form); bf16 / fp16 caches. Conventions as the seesaw kernel's: a box past
// the piece's end or on a page with a bad block id gets an out-of-range page coordinate (zeros) and
// its tokens are masked (bad ids also set the error bit); V rows of a block straddling the end are
// cleared in shared memory before the P V reads them; rows that saw no key: out 0, lse +inf (final)
// / -inf (partial); partials are fp32 O (normalized) and the natural-log LSE for the combine kernel.
//
// The kernel body exists only in the sm_90a compilation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/device_errors.cuh"
#include "kernels/mla_params.h"
#include "prims/cp_async.cuh"
#include "prims/mbarrier.cuh"
#include "prims/numeric.cuh"
#include "prims/tma.cuh"
#include "prims/wgmma.cuh"
#include "tiles/smem_swizzle.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKIT_MLA_NARROW_BODY 1
#else
#define FLASHKIT_MLA_NARROW_BODY 0
#endif

namespace flashkit::mla_sm90 {

template <typename T_, int kRows_>
struct NarrowTraits {
  using T = T_;
  static constexpr int kRows = kRows_;  // query rows per CTA: the wgmmas' N
  static_assert(kRows == 16 || kRows == 32, "n16 or n32 wgmmas");
  static constexpr int kNT = kRows / 8;    // accumulator column tiles
  static constexpr int kCols = kRows / 4;  // rows (accumulator columns) per thread: kNT x 2
  static constexpr int kBlockThreads = 256;
  static constexpr int kChunks = kMlaHeadDim / 64;    // 9
  static constexpr int kVChunks = kMlaHeadDimV / 64;  // 8
  static constexpr int kOwnV = kVChunks / 2;          // V chunks (64-dim tiles of O^T) per warpgroup
  using KTile = tiles::Swizzle128Tile<T, kMlaBlockN, kMlaHeadDim>;  // one K buffer
  using QTile = tiles::Swizzle128Tile<T, kRows, kMlaHeadDim>;
  using PTile = tiles::Swizzle128Tile<T, kRows, kMlaBlockN>;  // P^T: [row][token]
  static constexpr int kChunkBytes = KTile::kBlockBytes;     // 8192
  static_assert(kChunkBytes == 8192, "64 tokens x 128 bytes");

  static constexpr int kSmemK0 = 0;
  static constexpr int kSmemK1 = KTile::kBytes;
  static constexpr int kSmemQ = 2 * KTile::kBytes;
  static constexpr int kSmemP = kSmemQ + QTile::kBytes;    // P^T of the current block
  static constexpr int kSmemX = kSmemP + PTile::kBytes;    // float [parity][wg][kNT * 4][128]: partial S^T
  static constexpr int kXFloats = kNT * 4 * 128;
  static constexpr int kSmemRed = kSmemX + 2 * 2 * kXFloats * 4;     // float [wg][parity][warp][kRows]: block maxima
  static constexpr int kSmemSum = kSmemRed + 2 * 2 * 4 * kRows * 4;  // float [wg][warp][kRows]: row sums
  static constexpr int kSmemOk = kSmemSum + 2 * 4 * kRows * 4;       // int [wg][buffer]: the block is valid
  static constexpr int kSmemBar = kSmemOk + 16;                      // mbarriers [buffer][chunk]
  static constexpr int kSmemBytes = kSmemBar + 8 * 2 * kChunks + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 232448, "227 KB of shared memory per block");
  static_assert(kSmemP % 1024 == 0 && PTile::kBytes % 1024 == 0, "swizzled tiles on 1024-byte boundaries");
  // Epilogue: the normalized output rows staged in buffer 0, rows padded by 16 bytes (conflict-free
  // fragment stores), each warpgroup its 256 dims.
  static constexpr int kORowFloats = kMlaHeadDimV + 4;
  static_assert(kRows * kORowFloats * 4 <= KTile::kBytes, "the staged rows fit buffer 0");
};

namespace narrow {

enum : uint32_t { kErrBlockId = 4u, kErrSeqlen = 8u };  // flashkit/errors.h bits
constexpr float kInitMax = -1e30f;  // finite: a row that saw no key keeps scale 2^0 = 1
// Named barriers: 1 / 2 warpgroup 0 / 1 (128 threads), 3 both warpgroups after the partial S^T, 4 after
// P^T (ids as immediates: a register id makes ptxas count all 16 as used).
enum : int { kBarX = 3, kBarP = 4 };

__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

}  // namespace narrow

template <class Tr>
__global__ void __launch_bounds__(Tr::kBlockThreads, 1) mla_narrow_kernel(const __grid_constant__ MlaParams p) {
#if FLASHKIT_MLA_NARROW_BODY
  using T = typename Tr::T;
  constexpr int R = Tr::kRows, NT = Tr::kNT, KC = Tr::kCols, OV = Tr::kOwnV;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);

  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid / 128, 0), lt = tid % 128;
  const int warp = lt / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int kvh = blockIdx.y, part = blockIdx.z;
  auto wg_sync = [&] {  // this warpgroup's named barrier (the id an immediate in each branch)
    if (wg == 0) {
      prims::bar_sync(1, 128);
    } else {
      prims::bar_sync(2, 128);
    }
  };
  // Chunks of a block: warpgroup 0 owns 0-3 (its Q K^T part and its P V's V), warpgroup 1 owns 4-8 (4-7
  // its P V's V, 8 the RoPE part of Q K^T). Each warpgroup loads, waits for and reloads only its own.
  const int c_lo = wg == 0 ? 0 : OV, c_hi = wg == 0 ? OV : Tr::kChunks;
  const uint32_t k_base = prims::smem_addr(smem + Tr::kSmemK0);
  const uint32_t bar_base = prims::smem_addr(smem + Tr::kSmemBar);
  const uint32_t q_addr = prims::smem_addr(smem + Tr::kSmemQ);
  const uint32_t p_addr = prims::smem_addr(smem + Tr::kSmemP);
  float* sX = reinterpret_cast<float*>(smem + Tr::kSmemX);
  float* sRed = reinterpret_cast<float*>(smem + Tr::kSmemRed) + wg * (2 * 4 * R);
  float* sSum = reinterpret_cast<float*>(smem + Tr::kSmemSum) + wg * (4 * R);
  volatile int* sOk = reinterpret_cast<volatile int*>(smem + Tr::kSmemOk) + 2 * wg;
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);

  if (tid == 0) {
    for (int i = 0; i < 2 * Tr::kChunks; ++i) prims::mbarrier_init(bar_base + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    prims::tma_prefetch_desc(&p.kv_tmap);
  }
  __syncthreads();
  narrow::grid_wait();  // the metadata (and q) may come from the previous kernel

  const int32_t* sched = p.sched + int64_t(part) * kMlaSchedInts;
  const int begin_b = sched[0], begin_blk = sched[1], end_b_raw = sched[2], end_blk = sched[3];
  const int begin_split = sched[4];
  if (begin_b < 0 || begin_b >= p.batch) return;
  const int end_b = min(end_b_raw, p.batch - 1);
  const int rows_total = p.h_kv * p.rows_per_kv;
  const float scale_log2 = p.softmax_scale_log2;
  const uint64_t policy = prims::l2_evict_first_policy();

  // This thread's rows (accumulator columns): kc = 2 j + e <-> row 8 j + 2 t + e, in s[j][e] and s[j][e + 2]
  // (tokens g and g + 8 of the warp's 16) and in o[mt][j][e], o[mt][j][e + 2] (dims g and g + 8).
  auto col_row = [&](int kc) { return 8 * (kc / 2) + 2 * t + (kc % 2); };
  // Descriptors: the K-major operands (the K block, Q, P^T) step 32 bytes per k16 and one chunk per 64
  // columns; the V block, read MN-major, steps 16 tokens (2 KB) per k16 and one chunk per 64 dims.
  const uint64_t desc_k = prims::smem_desc_sw128(k_base, 16, 1024);
  const uint64_t desc_q = prims::smem_desc_sw128(q_addr, 16, 1024);
  const uint64_t desc_v = prims::smem_desc_sw128(k_base, Tr::kChunkBytes, 1024);
  const uint64_t desc_p = prims::smem_desc_sw128(p_addr, 16, 1024);
  constexpr int kBufDesc = Tr::KTile::kBytes >> 4;  // one buffer further, in descriptor units

  uint32_t bad = 0, phases = 0;  // bit i: the phase of buffer i's chunk barriers
  for (int b = begin_b; b <= end_b; ++b) {
    int len = p.seqlens_k[b];
    if (len < 0 || int64_t(len) > p.capacity) {
      bad |= narrow::kErrSeqlen;
      len = len < 0 ? 0 : int(p.capacity);
    }
    const int nb = (len + kMlaBlockN - 1) / kMlaBlockN;
    const int blk_begin = max(b == begin_b ? begin_blk : 0, 0);
    const int blk_end = min(b == end_b_raw ? end_blk : nb, nb);
    const int s_first = p.num_splits[b];
    const int n_pieces = p.num_splits[b + 1] - s_first;
    const int split = b == begin_b ? begin_split : 0;
    if (n_pieces <= 0 || split < 0 || split >= n_pieces) continue;  // not planned here
    const bool direct = n_pieces == 1;
    const int slot = s_first + split;
    if (!direct && (slot < 0 || slot >= p.max_partials)) continue;
    const int load_end = min(len, blk_end * kMlaBlockN);
    const int32_t* bt = p.block_table + int64_t(b) * p.bt_row_stride;

    // Page id of `block`'s first token (lane 0 of each warpgroup; -1 elsewhere and past the piece).
    auto page_id = [&](int block) -> int {
      const int tok = block * kMlaBlockN;
      return (lt == 0 && block < blk_end && tok < load_end) ? bt[p.page_div.div(tok)] : -1;
    };
    // Chunks [c0, c1) of block `block` into buffer `bi` (lane 0 of the warpgroup; id from page_id):
    // boxes of 64 columns x 64 tokens, one page each (pages of multiples of 64 tokens), one mbarrier per
    // chunk. A bad id: the out-of-range page coordinate (zeros), the error bit, and the block's tokens
    // masked: sOk[wg][bi], stored with the warpgroup's first copies of the block (`first`), before their
    // arrivals, and read after its chunks were waited for and before the partial-S^T barrier (after
    // which the first reload of the buffer may rewrite it).
    auto load_chunks = [&](int block, int id, int bi, int c0, int c1, bool first) {
      const int tok = block * kMlaBlockN;
      bool ok = lt == 0 && block < blk_end && tok < load_end;
      if (ok && (id < 0 || id >= p.num_pages)) {
        if (first && wg == 0) bad |= narrow::kErrBlockId;
        ok = false;
      }
      const int slot_in_page = tok - p.page_div.div(tok) * p.page_size;
      if (lt == 0 && first) sOk[bi] = ok ? 1 : 0;
      const uint32_t dst = k_base + bi * Tr::KTile::kBytes, bars = bar_base + 8 * Tr::kChunks * bi;
      for (int c = c0; c < c1; ++c) {
        prims::mbarrier_arrive_expect_tx_if(lt == 0, bars + 8 * c, Tr::kChunkBytes);
        prims::tma_load_4d_if(lt == 0, dst + c * Tr::kChunkBytes, &p.kv_tmap, c * 64, ok ? slot_in_page : 0, kvh,
                              ok ? id : p.num_pages, bars + 8 * c, policy);
      }
    };

    // Tokens each of this thread's rows sees: < lim (causal: len - (s_q - 1 - query token)), < load_end.
    int lim[KC];
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      const int r = col_row(kc);
      int vis = len;
      if (p.causal && r < p.rows_per_kv) vis = len - (p.s_q - 1 - r / p.ratio);
      lim[kc] = min(vis, load_end);
    }

    // The previous piece is done with shared memory (its staged rows were read, both buffers idle).
    prims::fence_proxy_async_smem();
    __syncthreads();
    if (blk_begin < blk_end) load_chunks(blk_begin, page_id(blk_begin), 0, c_lo, c_hi, true);
    if (blk_begin + 1 < blk_end) load_chunks(blk_begin + 1, page_id(blk_begin + 1), 1, c_lo, c_hi, true);
    // Q: R rows x 72 16-byte pieces from all threads, zeros past rows_per_kv.
    for (int i = tid; i < R * (kMlaHeadDim / 8); i += Tr::kBlockThreads) {
      const int r = i / (kMlaHeadDim / 8), col = (i % (kMlaHeadDim / 8)) * 8;
      const bool ok = r < p.rows_per_kv;
      const T* src = reinterpret_cast<const T*>(p.q);
      if (ok) {
        const int tq = r / p.ratio, hh = r - tq * p.ratio;
        src += int64_t(b) * p.q_batch_stride + int64_t(tq) * p.q_tok_stride +
               int64_t(kvh * p.ratio + hh) * p.q_head_stride + col;
      }
      prims::cp_async_16(sQ + Tr::QTile::offset(r, col), src, ok);
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    prims::fence_proxy_async_smem();
    __syncthreads();

    float o[OV][NT][4];  // O^T, this warpgroup's 256 dims
#pragma unroll
    for (int mt = 0; mt < OV; ++mt)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][j][e] = 0.f;
    float m[KC], l[KC];
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      m[kc] = narrow::kInitMax;
      l[kc] = 0.f;
    }

    int it = 0;
    for (int blk = blk_begin; blk < blk_end; ++blk, ++it) {
      const int bi = it & 1;
      const uint32_t ph = (phases >> bi) & 1u, bars = bar_base + 8 * Tr::kChunks * bi;
      const uint64_t dk = desc_k + bi * kBufDesc, dv = desc_v + bi * kBufDesc;
      const int next_id = page_id(blk + 2);  // (read now, used once this block's chunks are read)
      const bool has_next = blk + 2 < blk_end;
      // This warpgroup's part of S^T = K Q^T (64 tokens x R rows): its chunks x 4 k16 steps, each chunk
      // as soon as it has landed.
      float s[NT][4];
      prims::mbarrier_wait_sleep(bars + 8 * c_lo, ph);
      prims::wgmma_fence();
      prims::wgmma_m64nNk16_ss_ta<T, 0, true, R>(s, dk + ((c_lo * Tr::kChunkBytes) >> 4),
                                                 desc_q + ((c_lo * Tr::QTile::kBlockBytes) >> 4));
      for (int ks = 4 * c_lo + 1; ks < 4 * c_hi; ++ks) {  // (warpgroup-uniform bounds: 16 or 20 steps)
        const int c = ks / 4, st = ks % 4;
        if (st == 0) prims::mbarrier_wait_sleep(bars + 8 * c, ph);
        prims::wgmma_m64nNk16_ss_ta<T, 0, false, R>(s, dk + ((c * Tr::kChunkBytes + st * 32) >> 4),
                                                     desc_q + ((c * Tr::QTile::kBlockBytes + st * 32) >> 4));
      }
      prims::wgmma_commit();
      const bool blk_ok = sOk[bi] != 0;  // (this warpgroup's chunks of the block were waited for)
      prims::wgmma_wait<0>();
      prims::fence_operands(s);
      // V rows past the end of this warpgroup's V chunks: a box straddling load_end brought whatever
      // follows it (NaN in the tests), and 0 x NaN is NaN in the P V. (K's rows there only reached
      // masked scores; the max barrier below orders these stores before the P V.)
      const int r0 = load_end - blk * kMlaBlockN;
      if (r0 < kMlaBlockN) {  // (warpgroup-uniform)
        const uint32_t vb = k_base + bi * Tr::KTile::kBytes + wg * OV * Tr::kChunkBytes;
        for (int i = lt; i < (kMlaBlockN - r0) * OV * 8; i += 128) {
          const int row = r0 + i / (OV * 8), c = (i / 8) % OV, u = i % 8;
          asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(vb + c * Tr::kChunkBytes + row * 128 + u * 16),
                       "r"(0)
                       : "memory");
        }
        prims::fence_proxy_async_smem();
      }
      // The two partial S^T summed (a0 + a1 in both warpgroups: the same bits), through shared memory by
      // block parity (the next block's barrier orders this block's reads before the writes after it).
      float* xw = sX + (bi * 2 + wg) * Tr::kXFloats;
      const float* xr = sX + (bi * 2 + (1 - wg)) * Tr::kXFloats;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) xw[(j * 4 + e) * 128 + lt] = s[j][e];
      prims::bar_sync(narrow::kBarX, 256);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float x = xr[(j * 4 + e) * 128 + lt];
          s[j][e] = wg == 0 ? s[j][e] + x : x + s[j][e];
        }
      // Warpgroup 1's RoPE chunk has had its only reader: the next block's goes in.
      if (wg == 1 && has_next) load_chunks(blk + 2, next_id, bi, Tr::kVChunks, Tr::kChunks, true);

      // Scores in log2 units, masked (-inf) where a row does not see the token.
      const int tok0 = blk * kMlaBlockN + warp * 16 + g;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kc = 2 * j + (e % 2), tok = tok0 + 8 * (e / 2);
          s[j][e] = (blk_ok && tok < lim[kc]) ? s[j][e] * scale_log2 : -INFINITY;
        }
      // The block's max per row (both warpgroups hold the whole S^T and compute the same): this thread's
      // two tokens, the warp's 16 (lanes of equal t), the four warps (shared memory by block parity).
      float bm[KC];
#pragma unroll
      for (int kc = 0; kc < KC; ++kc) {
        const int j = kc / 2, e = kc % 2;
        float x = fmaxf(s[j][e], s[j][e + 2]);
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
        bm[kc] = x;
      }
      float* red = sRed + bi * (4 * R);
      if (g == 0) {
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) red[warp * R + col_row(kc)] = bm[kc];
      }
      wg_sync();
      float f[KC];
#pragma unroll
      for (int kc = 0; kc < KC; ++kc) {
        const int r = col_row(kc);
        const float x = fmaxf(fmaxf(red[r], red[R + r]), fmaxf(red[2 * R + r], red[3 * R + r]));
        const float m_new = fmaxf(m[kc], x);
        f[kc] = prims::exp2_approx(m[kc] - m_new);
        m[kc] = m_new;
      }
      // P = 2^(S - m), the row sums (per thread until the piece ends), this warpgroup's O^T rescaled,
      // P^T to shared memory ([row][token], 128-byte swizzled: the P V's K-major B operand): warpgroup w
      // stores the tokens of warps 2w, 2w + 1 (both hold the same P).
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = prims::exp2_approx(s[j][e] - m[2 * j + (e % 2)]);
#pragma unroll
      for (int kc = 0; kc < KC; ++kc) l[kc] = l[kc] * f[kc] + s[kc / 2][kc % 2] + s[kc / 2][kc % 2 + 2];
#pragma unroll
      for (int mt = 0; mt < OV; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[mt][j][e] *= f[2 * j + (e % 2)];
      if (warp / 2 == wg) {
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = 8 * j + 2 * t + (e % 2), tok = warp * 16 + g + 8 * (e / 2);
            const unsigned short v = static_cast<unsigned short>(prims::pack2<T>(s[j][e], 0.f) & 0xffffu);
            asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(p_addr + 2 * Tr::PTile::offset(r, tok)), "h"(v) : "memory");
          }
        prims::fence_proxy_async_smem();
      }
      prims::bar_sync(narrow::kBarP, 256);

      // This warpgroup's O^T += V^T P^T: its 4 chunks of 64 dims x 4 k16 steps of 16 tokens, one commit
      // group per two chunks, each pair reloaded with the next block once its group is done. (P^T is
      // rewritten only after the next block's partial-S^T barrier, which both warpgroups reach after
      // this P V's last wait.)
      prims::wgmma_fence();
#pragma unroll
      for (int mt = 0; mt < OV; ++mt) {
#pragma unroll
        for (int ks = 0; ks < kMlaBlockN / 16; ++ks)
          prims::wgmma_m64nNk16_ss_ta<T, 1, false, R>(
              o[mt], dv + (((wg * OV + mt) * Tr::kChunkBytes + ks * 2048) >> 4), desc_p + ((ks * 32) >> 4));
        if (mt % 2 == 1) prims::wgmma_commit();
      }
      prims::wgmma_wait<1>();
      if (has_next) load_chunks(blk + 2, next_id, bi, wg * OV, wg * OV + 2, wg == 0);
      prims::wgmma_wait<0>();
      if (has_next) load_chunks(blk + 2, next_id, bi, wg * OV + 2, wg * OV + 4, false);
#pragma unroll
      for (int mt = 0; mt < OV; ++mt) prims::fence_operands(o[mt]);
      phases ^= 1u << bi;
    }

    // Row sums (the same in both warpgroups): the warp's lanes of equal t, then the four warps.
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      l[kc] += __shfl_xor_sync(0xffffffffu, l[kc], 4);
      l[kc] += __shfl_xor_sync(0xffffffffu, l[kc], 8);
      l[kc] += __shfl_xor_sync(0xffffffffu, l[kc], 16);
    }
    if (g == 0) {
#pragma unroll
      for (int kc = 0; kc < KC; ++kc) sSum[warp * R + col_row(kc)] = l[kc];
    }
    wg_sync();
    float inv[KC];
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      const int r = col_row(kc);
      const float sum = sSum[r] + sSum[R + r] + sSum[2 * R + r] + sSum[3 * R + r];
      inv[kc] = sum > 0.f ? 1.f / sum : 0.f;
      if (wg == 0 && warp == 0 && g == 0 && r < p.rows_per_kv) {
        // natural-log LSE; a row that saw no key: +inf (final) / -inf (partial)
        const float lse = sum > 0.f ? (m[kc] + __log2f(sum)) * 0.69314718055994531f : (direct ? INFINITY : -INFINITY);
        const int tq = r / p.ratio, head = kvh * p.ratio + (r - tq * p.ratio);
        if (direct) {
          p.lse[(int64_t(b) * p.h_q + head) * p.s_q + tq] = lse;
        } else {
          p.part_lse[int64_t(slot) * rows_total + int64_t(kvh) * p.rows_per_kv + r] = lse;
        }
      }
    }
    // Both warpgroups' last P V have read the buffers: the normalized rows staged in buffer 0.
    __syncthreads();
    float* so = reinterpret_cast<float*>(smem + Tr::kSmemK0);  // [R][kORowFloats]
#pragma unroll
    for (int mt = 0; mt < OV; ++mt)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kc = 2 * j + (e % 2);
          so[col_row(kc) * Tr::kORowFloats + (wg * OV + mt) * 64 + warp * 16 + g + 8 * (e / 2)] = o[mt][j][e] * inv[kc];
        }
    __syncthreads();
    // The rows out: 4 values per thread and step (16-byte aligned rows: validate_mla_decode's rule for
    // out, the workspace's partial rows 2 KB apart).
    for (int i = tid; i < R * (kMlaHeadDimV / 4); i += Tr::kBlockThreads) {
      const int r = i / (kMlaHeadDimV / 4), c4 = (i % (kMlaHeadDimV / 4)) * 4;
      if (r >= p.rows_per_kv) continue;
      const float4 v = *reinterpret_cast<const float4*>(so + r * Tr::kORowFloats + c4);
      if (direct) {
        const int tq = r / p.ratio, head = kvh * p.ratio + (r - tq * p.ratio);
        T* out = reinterpret_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(tq) * p.o_tok_stride +
                 int64_t(head) * p.o_head_stride + c4;
        *reinterpret_cast<uint2*>(out) = make_uint2(prims::pack2<T>(v.x, v.y), prims::pack2<T>(v.z, v.w));
      } else {
        const int64_t prow = int64_t(slot) * rows_total + int64_t(kvh) * p.rows_per_kv + r;
        *reinterpret_cast<float4*>(p.part_o + prow * kMlaHeadDimV + c4) = v;
      }
    }
  }
  if (bad != 0) report_device_error(p.errors, bad);
#endif  // FLASHKIT_MLA_NARROW_BODY
}

}  // namespace flashkit::mla_sm90
