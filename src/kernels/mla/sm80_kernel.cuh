// Portable MLA split kernel (sm_80+, mma.sync, any page size): correct first, simple.
//
// Grid (m_blocks, h_kv, num_parts), 8 warps. A CTA walks its part's pieces (MlaSched): for
// each sequence b from begin_batch to end_batch, the 64-token blocks [blk0, blk1) of its
// piece. Shared memory holds the CTA's 64 query rows (sQ, 64 x 576) and one KV block (sK,
// 64 x 576; V is its first 512 columns), rows padded to 584 elements (1168 bytes, an odd
// multiple of 16: ldmatrix is conflict-free). Warp w: rows 16 * (w % 4) .. +16 of the
// m-block, output columns 256 * (w / 4) .. +256 (128 fp32 accumulators per thread); both
// warps of a row group compute the same S = Q K^T (the price of keeping O in registers).
//
// Per block: threads 0..63 resolve their token's cache offset through the block table (-1
// for a token at or past the length, or whose block id is outside [0, num_pages): never
// dereferenced, error bit kDeviceErrorBlockId), cp.async copies the rows (zero-filled
// where -1), then S (36 k-steps), masking (invalid tokens; causal: query token t sees keys
// j < len - (s_q - 1 - t)), online softmax in base 2 (scale * log2 e folded in), P V.
// kFp8: the cache is FlashMLA's FP8 layout (kMlaFp8TokenBytes per token, mla_params.h); each
// token's row is dequantized into sK in T (e4m3 -> fp16 exactly, times its fp32 group scale,
// rounded to T; the bf16 RoPE part converted to T) with 16-byte loads, and the rest of the
// kernel is unchanged. kFp8Async (GPUs with kSm80Fp8AsyncSmemBytes of shared memory per
// block: Hopper): the block's raw 656-byte tokens are copied by cp.async into a staging
// area one block ahead (block n+1's copy runs during block n's math; its block-table
// entries are loaded before block n's dequantization), and dequantized from shared memory.
// Results: a sequence with one piece writes out (T) and lse; otherwise the fp32 partial
// (normalized O and lse, natural log; -inf for a row that saw no key) goes to slot
// num_splits[b] + split. Rows that saw no key in a single piece: out 0, lse +inf.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/device_errors.cuh"
#include "kernels/mla_params.h"
#include "prims/cp_async.cuh"
#include "prims/fp8.cuh"
#include "prims/ldmatrix.cuh"
#include "prims/mma.cuh"
#include "prims/numeric.cuh"

namespace flashkit::mla {

constexpr int kSm80Threads = 256;
constexpr int kSm80Stride = kMlaHeadDim + 8;           // elements per shared row
constexpr int kSm80Chunks = kMlaHeadDim / 8;           // 16-byte chunks per row (72)
constexpr int kSm80TileBytes = kMlaBlockM * kSm80Stride * 2;
constexpr int kSm80SmemBytes = 2 * kSm80TileBytes + kMlaBlockN * 8;  // sQ, sK, token offsets
// kFp8Async: sQ, sK, two token-offset buffers (block n and n + 1), the raw FP8 block.
constexpr int kSm80Fp8RawBytes = kMlaBlockN * kMlaFp8TokenBytes;
constexpr int kSm80Fp8AsyncSmemBytes = 2 * kSm80TileBytes + 2 * kMlaBlockN * 8 + kSm80Fp8RawBytes;

// 16 e4m3 bytes (NoPE columns 16c .. 16c + 15 of a token) times `scale` as 16 T values.
template <typename T>
__device__ __forceinline__ void dequant_fp8x16(T* dst, const uint4 raw, float scale) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  uint32_t out[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) prims::e4m3x4_scaled<T>(w[k], scale, out[2 * k], out[2 * k + 1]);
  *reinterpret_cast<uint4*>(dst) = make_uint4(out[0], out[1], out[2], out[3]);
  *reinterpret_cast<uint4*>(dst + 8) = make_uint4(out[4], out[5], out[6], out[7]);
}

// 8 bf16 RoPE values as 8 T values.
template <typename T>
__device__ __forceinline__ void rope_bf16x8(T* dst, const uint4 raw) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    *reinterpret_cast<uint4*>(dst) = raw;
  } else {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    uint32_t out[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[k]));
      out[k] = prims::pack2<T>(f.x, f.y);
    }
    *reinterpret_cast<uint4*>(dst) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

template <typename T, bool kFp8 = false, bool kFp8Async = false>
__global__ void __launch_bounds__(kSm80Threads, 1) mla_split_sm80_kernel(const MlaParams p) {
  static_assert(kFp8 || !kFp8Async, "kFp8Async is a variant of the FP8 path");
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = reinterpret_cast<T*>(smem + kSm80TileBytes);
  int64_t* s_off = reinterpret_cast<int64_t*>(smem + 2 * kSm80TileBytes);  // kFp8Async: [2][64]
  [[maybe_unused]] unsigned char* sRaw = smem + 2 * kSm80TileBytes + 2 * kMlaBlockN * 8;  // kFp8Async
  const int mb = blockIdx.x, kvh = blockIdx.y, part = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int rg = warp & 3, ch = warp >> 2;
  const int g = lane >> 2, tq = lane & 3;

  const int32_t* sp = p.sched + int64_t(part) * kMlaSchedInts;
  const int begin_batch = sp[0], begin_block = sp[1], end_batch = sp[2], end_block = sp[3];
  const int begin_split = sp[4];
  if (begin_batch < 0 || begin_batch >= p.batch) return;
  const int last_batch = min(end_batch, p.batch - 1);
  const int row0 = mb * kMlaBlockM;
  const T* q_base = static_cast<const T*>(p.q);
  [[maybe_unused]] const T* kv = static_cast<const T*>(p.kv);  // (kFp8: bytes, read below)
  const uint32_t sQ_addr = prims::smem_addr(sQ), sK_addr = prims::smem_addr(sK);

  for (int b = begin_batch; b <= last_batch; ++b) {
    const int32_t len_raw = p.seqlens_k[b];
    const int64_t len = min(max(int64_t(len_raw), int64_t{0}), p.capacity);
    if (tid == 0 && len != int64_t(len_raw)) report_device_error(p.errors, kDeviceErrorSeqlensK);
    const int nblk_meta = len_raw > 0 ? int((int64_t(len_raw) + kMlaBlockN - 1) / kMlaBlockN) : 0;
    const int nblk = int((len + kMlaBlockN - 1) / kMlaBlockN);
    const int blk0 = max(b == begin_batch ? begin_block : 0, 0);
    const int blk1 = min(b == end_batch ? end_block : nblk_meta, nblk);
    const int split = b == begin_batch ? begin_split : 0;
    const int ns0 = p.num_splits[b];
    const int n_pieces = p.num_splits[b + 1] - ns0;
    if (n_pieces <= 0) continue;  // the combine kernel writes this sequence
    const bool direct = n_pieces == 1;
    const int64_t slot = int64_t(ns0) + split;
    if (!direct && (slot < 0 || slot >= p.max_partials || split < 0 || split >= n_pieces)) continue;

    // Per-row causal limit (keys j < lim): rows past rows_per_kv see nothing.
    int lim[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = row0 + rg * 16 + g + 8 * i;
      const int t = row / p.ratio;
      lim[i] = row >= p.rows_per_kv ? 0
               : p.causal         ? int(max(len - (p.s_q - 1 - t), int64_t{0}))
                                  : int(len);
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    float o[32][4];
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;

    if (blk0 < blk1) {
      __syncthreads();  // the previous sequence's sQ / sK reads are done
      for (int i = tid; i < kMlaBlockM * kSm80Chunks; i += kSm80Threads) {
        const int r = i / kSm80Chunks, c = i - r * kSm80Chunks;
        const int row = row0 + r;
        const bool ok = row < p.rows_per_kv;
        const int t = ok ? row / p.ratio : 0, head = kvh * p.ratio + (ok ? row % p.ratio : 0);
        const T* src = q_base + int64_t(b) * p.q_batch_stride + int64_t(t) * p.q_tok_stride +
                       int64_t(head) * p.q_head_stride + c * 8;
        prims::cp_async_16(sQ + r * kSm80Stride + c * 8, ok ? src : q_base, ok);
      }
      prims::cp_async_commit();
    }
    // Cache offset of this thread's token of block `blk` (threads 0..63): -1 at or past the
    // length, or for a block id outside [0, num_pages) (never dereferenced; error bit).
    auto token_offset = [&](int blk) -> int64_t {
      const int64_t j = int64_t(blk) * kMlaBlockN + tid;
      int64_t off = -1;
      if (j < len) {
        const int64_t page = j / p.page_size;
        const int32_t id = p.block_table[int64_t(b) * p.bt_row_stride + page];
        if (id >= 0 && id < p.num_pages) {
          off = int64_t(id) * p.kv_page_stride + (j - page * p.page_size) * p.kv_slot_stride +
                int64_t(kvh) * p.kv_head_stride;
        } else {
          report_device_error(p.errors, kDeviceErrorBlockId);
        }
      }
      return off;
    };
    [[maybe_unused]] const unsigned char* kvb = static_cast<const unsigned char*>(p.kv);
    // kFp8Async: the raw tokens of a block into sRaw (41 pieces of 16 bytes each; zeros for
    // a token with no valid slot: e4m3 0 times scale 0, RoPE 0).
    [[maybe_unused]] auto issue_raw = [&](const int64_t* offs) {
      constexpr int kRawChunks = kMlaFp8TokenBytes / 16;
      for (int i = tid; i < kMlaBlockN * kRawChunks; i += kSm80Threads) {
        const int r = i / kRawChunks, c = i - r * kRawChunks;
        const int64_t off = offs[r];
        prims::cp_async_16(sRaw + r * kMlaFp8TokenBytes + c * 16, off >= 0 ? kvb + off + c * 16 : kvb, off >= 0);
      }
      prims::cp_async_commit();
    };
    if constexpr (kFp8Async) {
      if (blk0 < blk1) {
        if (tid < kMlaBlockN) s_off[(blk0 & 1) * kMlaBlockN + tid] = token_offset(blk0);
        __syncthreads();
        issue_raw(s_off + (blk0 & 1) * kMlaBlockN);
      }
    }
    for (int blk = blk0; blk < blk1; ++blk) {
      const int64_t* offs = s_off + (kFp8Async ? (blk & 1) * kMlaBlockN : 0);  // this block's
      if constexpr (kFp8Async) {
        const bool has_next = blk + 1 < blk1;
        int64_t next_off = -1;
        if (tid < kMlaBlockN && has_next) next_off = token_offset(blk + 1);  // in flight during the dequant
        prims::cp_async_wait<0>();  // this block's raw tokens (and sQ)
        __syncthreads();            // ... visible; the previous block's math is done with sK and its offsets
        constexpr int kPieces = kMlaHeadDimV / 16 + (kMlaHeadDim - kMlaHeadDimV) / 8;
        for (int i = tid; i < kMlaBlockN * kPieces; i += kSm80Threads) {
          const int r = i / kPieces, c = i - r * kPieces;
          const unsigned char* tok = sRaw + r * kMlaFp8TokenBytes;
          T* dst = sK + r * kSm80Stride;
          if (c < kMlaHeadDimV / 16) {
            const float scale = reinterpret_cast<const float*>(tok + kMlaFp8ScaleOffset)[c / 8];
            dequant_fp8x16<T>(dst + c * 16, *reinterpret_cast<const uint4*>(tok + c * 16), scale);
          } else {
            const int rc = c - kMlaHeadDimV / 16;
            rope_bf16x8<T>(dst + kMlaHeadDimV + rc * 8,
                           *reinterpret_cast<const uint4*>(tok + kMlaFp8RopeOffset + rc * 16));
          }
        }
        if (tid < kMlaBlockN && has_next) s_off[((blk + 1) & 1) * kMlaBlockN + tid] = next_off;
        __syncthreads();  // sK ready, sRaw consumed, the next block's offsets visible
        if (has_next) issue_raw(s_off + ((blk + 1) & 1) * kMlaBlockN);
      } else {
        __syncthreads();  // sK and s_off of the previous block are consumed
        if (tid < kMlaBlockN) s_off[tid] = token_offset(blk);
        __syncthreads();
        if constexpr (kFp8) {
          // Per token 40 source pieces of 16 bytes: 32 of e4m3 (16 NoPE columns each), 8 of
          // bf16 RoPE (8 columns each). Tokens with no valid slot are zeros (P V reads them).
          constexpr int kPieces = kMlaHeadDimV / 16 + (kMlaHeadDim - kMlaHeadDimV) / 8;
          for (int i = tid; i < kMlaBlockN * kPieces; i += kSm80Threads) {
            const int r = i / kPieces, c = i - r * kPieces;
            const int64_t off = s_off[r];
            T* dst = sK + r * kSm80Stride;
            uint4 raw = make_uint4(0u, 0u, 0u, 0u);
            if (c < kMlaHeadDimV / 16) {
              float scale = 0.f;
              if (off >= 0) {
                raw = __ldg(reinterpret_cast<const uint4*>(kvb + off + c * 16));
                scale = __ldg(reinterpret_cast<const float*>(kvb + off + kMlaFp8ScaleOffset) + c / 8);
              }
              dequant_fp8x16<T>(dst + c * 16, raw, scale);
            } else {
              const int rc = c - kMlaHeadDimV / 16;
              if (off >= 0) raw = __ldg(reinterpret_cast<const uint4*>(kvb + off + kMlaFp8RopeOffset + rc * 16));
              rope_bf16x8<T>(dst + kMlaHeadDimV + rc * 8, raw);
            }
          }
          prims::cp_async_wait<0>();  // sQ (first block of a sequence)
        } else {
          for (int i = tid; i < kMlaBlockN * kSm80Chunks; i += kSm80Threads) {
            const int r = i / kSm80Chunks, c = i - r * kSm80Chunks;
            const int64_t off = s_off[r];
            prims::cp_async_16(sK + r * kSm80Stride + c * 8, off >= 0 ? kv + off + c * 8 : kv, off >= 0);
          }
          prims::cp_async_commit();
          prims::cp_async_wait<0>();
        }
        __syncthreads();
      }

      // S = Q K^T for this warp's 16 rows x 64 keys.
      float s[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      const uint32_t a_addr = sQ_addr + ((rg * 16 + (lane & 15)) * kSm80Stride + (lane >> 4) * 8) * 2;
      const uint32_t b_addr =
          sK_addr + (((lane & 7) + (lane >> 4) * 8) * kSm80Stride + ((lane >> 3) & 1) * 8) * 2;
#pragma unroll 4
      for (int kk = 0; kk < kMlaHeadDim / 16; ++kk) {
        uint32_t a[4];
        prims::ldmatrix_x4(a, a_addr + kk * 32);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t bf[4];
          prims::ldmatrix_x4(bf, b_addr + (np * 16 * kSm80Stride) * 2 + kk * 32);
          prims::mma_m16n8k16<T>(s[2 * np], a, bf[0], bf[1]);
          prims::mma_m16n8k16<T>(s[2 * np + 1], a, bf[2], bf[3]);
        }
      }
      // Mask, online softmax (base 2).
      const int key0 = blk * kMlaBlockN;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = nt * 8 + 2 * tq + e;
            const bool valid = offs[key] >= 0 && key0 + key < lim[i];
            const float x = valid ? s[nt][2 * i + e] * p.softmax_scale_log2 : -INFINITY;
            s[nt][2 * i + e] = x;
            mx = fmaxf(mx, x);
          }
        }
        mx = prims::quad_max(mx);
        const float m_new = fmaxf(m[i], mx);
        const float alpha = m_new == -INFINITY ? 1.f : prims::exp2_approx(m[i] - m_new);
        m[i] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float x = s[nt][2 * i + e];
            const float pr = m_new == -INFINITY ? 0.f : prims::exp2_approx(x - m_new);
            s[nt][2 * i + e] = pr;
            sum += pr;
          }
        }
        l[i] = l[i] * alpha + sum;
#pragma unroll
        for (int j = 0; j < 32; ++j) o[j][2 * i] *= alpha, o[j][2 * i + 1] *= alpha;
      }
      // O += P V (V = the first 512 columns of the block; this warp's 256 of them).
      const uint32_t v_addr = sK_addr + (((lane & 7) + ((lane >> 3) & 1) * 8) * kSm80Stride +
                                         ch * 256 + (lane >> 4) * 8) * 2;
#pragma unroll
      for (int kk = 0; kk < kMlaBlockN / 16; ++kk) {
        uint32_t a[4];
        a[0] = prims::pack2<T>(s[2 * kk][0], s[2 * kk][1]);
        a[1] = prims::pack2<T>(s[2 * kk][2], s[2 * kk][3]);
        a[2] = prims::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        a[3] = prims::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < 16; ++dp) {
          uint32_t bf[4];
          prims::ldmatrix_x4_trans(bf, v_addr + (kk * 16 * kSm80Stride + dp * 16) * 2);
          prims::mma_m16n8k16<T>(o[2 * dp], a, bf[0], bf[1]);
          prims::mma_m16n8k16<T>(o[2 * dp + 1], a, bf[2], bf[3]);
        }
      }
    }
    prims::cp_async_wait<0>();  // no copy into sQ stays in flight past this sequence

    // Epilogue: this thread's rows g and g + 8, columns ch * 256 + nt * 8 + 2 tq.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float lsum = prims::quad_sum(l[i]);
      const int row = row0 + rg * 16 + g + 8 * i;
      if (row >= p.rows_per_kv) continue;
      const bool empty = m[i] == -INFINITY || !(lsum > 0.f);
      const float inv = empty ? 0.f : 1.f / lsum;
      const float lse = empty ? (direct ? INFINITY : -INFINITY)
                              : (m[i] + log2f(lsum)) * 0.6931471805599453f;
      const int t = row / p.ratio, head = kvh * p.ratio + row % p.ratio;
      if (direct) {
        T* dst = static_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(t) * p.o_tok_stride +
                 int64_t(head) * p.o_head_stride + ch * 256 + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < 32; ++nt) {
          *reinterpret_cast<uint32_t*>(dst + nt * 8) =
              prims::pack2<T>(o[nt][2 * i] * inv, o[nt][2 * i + 1] * inv);
        }
        if (ch == 0 && tq == 0) p.lse[(int64_t(b) * p.h_q + head) * p.s_q + t] = lse;
      } else {
        const int64_t prow = slot * (int64_t(p.h_kv) * p.rows_per_kv) + int64_t(kvh) * p.rows_per_kv + row;
        float* dst = p.part_o + prow * kMlaHeadDimV + ch * 256 + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < 32; ++nt) {
          *reinterpret_cast<float2*>(dst + nt * 8) = make_float2(o[nt][2 * i] * inv, o[nt][2 * i + 1] * inv);
        }
        if (ch == 0 && tq == 0) p.part_lse[prow] = lse;
      }
    }
  }
}

}  // namespace flashkit::mla
