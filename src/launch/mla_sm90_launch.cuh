// Launcher of the Hopper MLA split kernel. Included only by the instantiation files
// src/kernels/mla/inst/mla_sm90_<dtype>.cu (the launcher, the cp.async and one-box-per-page
// kernels) and mla_sm90_<dtype>_box64.cu (the kernel for pages of >= 64 tokens).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/mla/sm90_kernel.cuh"
#include "launch/element_type.cuh"
#include "launch/family_dispatch.h"  // env_off, env_flag, env_int
#include "launch/launch_common.cuh"
#include "launch/mla_launch.h"
#include "launch/pdl_launch.cuh"
#include "launch/tma_encode.cuh"

namespace flashkit {
namespace mla_sm90 {

inline int gcd_int(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// TMA boxes of 64 columns x gcd(page_size, 64) tokens: one box never crosses a page or a
// 64-token block. Page sizes that are not multiples of 16 (boxes of < 16 rows: too many
// copies per block) and caches the map cannot describe keep the cp.async loads (0).
//
// Pages of 16 and 32 tokens also get the run map (MlaParams::kv_tmap_run): boxes of one page x
// 64 / page_size consecutive page ids, which land in shared memory exactly as one 64-row box does
// (rows of 128 bytes, one after another, the same swizzle). The kernel uses it for every block
// whose pages have consecutive ids: 9 copies per block instead of 36 / 18. Measured (mla.md "Page
// runs"): page 16 / page 64 time, median over FlashMLA's matrix, 1.043 -> 1.008 (H100, v17); page
// 32, three interleaved rounds of the dev harness at v21: -1.8..-2.0 % where compute-bound and
// -0.2..-0.4 % elsewhere on an H200, -0.1..-0.8 % on an H100 (at v17, before the page-16/32
// kernel lost its whole-box path, it had been ~2 % slower there). FLASHKIT_MLA_PAGE_RUNS (read
// once, A/B runs): 0 leaves the map out, 16 makes it for page 16 only.
//
// The cache maps' L2 promotion: 256 bytes; 128 at <= 32 query rows per KV head with pages of
// 32 tokens or >= 64 and at <= 64 with pages of 16 (below). A cache row is 1152 bytes (9
// chunks of 128), so a 256-byte promotion of one chunk's request also covers a neighbouring chunk,
// which its own box requests again (FlashMLA's CUTLASS maps promote to 128). Measured (H200,
// 2026-11-28, mla.md's version ladder, the row after v23): at h_q 16 s_q 1 128 bytes took 3 % less
// time in the dev harness (0.559 / 0.560 against 0.577 / 0.578 ms at 16k, two rounds) and 0.3-1.2 %
// less on 5 of the bench's 6 rows; at 64 rows and more it was 0.5-1.4 % slower at 16k tokens and
// 128 x 2 at 4k; at v9 none / 128 / 256 had measured the same. At 32 rows (h_q 16 s_q 2, h_q 32 s_q 1;
// H200, 2026-11-29, mla.md "L2 promotion at 32 rows"): 0.5-2.6 % less time on all 8 of the bench's rows.
// Pages of 16 tokens (16-row boxes; H200,
// 2026-11-28, mla.md "Scattered pages", dev harness, consecutive ids): 128 bytes 0.1-1.6 % faster at
// 16-64 rows per KV head (4k-16k), level at 128 rows, 0.9 % slower at 256: 128 there up to 64 rows.
// Pages of 32 tokens (H200, 2026-11-29, mla.md "L2 promotion at 32 rows", the bench's rows, two
// interleaved rounds): 128 bytes 0.2-3.5 % faster at 16 / 32 rows (h_q 16 s_q 1 16k 575.0 -> 554.7 us),
// at 64 rows -1.5..+0.5 % (faster at 4k, level or slower at 16k): 128 up to 32 rows, as at 64.
// FLASHKIT_MLA_L2_PROMO (read once: 0, 64, 128 or 256) overrides the choice for A/B runs.
// FP8 caches (`fp8`) keep the 16-row limit at whole boxes: at 32 rows 128 and 256 bytes measured level
// (H200, 2026-11-29; that kernel streams at ~1.5 TB/s, bound by its dequantization).
inline CUtensorMapL2promotion mla_kv_l2_promotion(int rows_per_kv, int box, bool fp8 = false) {
  static const int forced = dispatch::env_int("FLASHKIT_MLA_L2_PROMO", -1);
  // at most this many rows per KV head: 128 bytes
  const int rows_128 = box == kMlaBlockN ? (fp8 ? 16 : 32) : box == 32 ? 32 : box == 16 ? 64 : 0;
  const int v = forced >= 0 ? forced : (rows_per_kv <= rows_128 ? 128 : 256);
  return v == 0     ? CU_TENSOR_MAP_L2_PROMOTION_NONE
         : v == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
         : v == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                    : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
}

template <typename T>
int make_kv_tensor_map(MlaParams& p) {
  p.tma_run_pages = 0;
  const int box = gcd_int(p.page_size, kMlaBlockN);
  if (box < 16) return 0;
  const int64_t dims[4] = {kMlaHeadDim, p.page_size, p.h_kv, p.num_pages};
  const CUtensorMapL2promotion promo = mla_kv_l2_promotion(p.rows_per_kv, box);
  if (!launch_util::make_tma_map_4d<T>(&p.kv_tmap, p.kv, dims, p.kv_slot_stride, p.kv_head_stride,
                                       p.kv_page_stride, box, 1, promo)) {
    return 0;
  }
  static const int runs_max = [] {  // the largest page size that gets a run map
    const int v = dispatch::env_int("FLASHKIT_MLA_PAGE_RUNS", 32);
    return v == 0 ? 0 : (v == 16 ? 16 : 32);
  }();
  if (box == p.page_size && box <= runs_max && box < kMlaBlockN &&
      launch_util::make_tma_map_4d<T>(&p.kv_tmap_run, p.kv, dims, p.kv_slot_stride, p.kv_head_stride,
                                      p.kv_page_stride, box, kMlaBlockN / box, promo)) {
    p.tma_run_pages = kMlaBlockN / box;
  }
  return box;
}

// FlashMLA's FP8 cache ([num_pages, page_size, h_kv, 656] bytes: 512 e4m3, 4 fp32 scales, 64 bf16
// RoPE values per token) for the kFp8 kernel (pages of multiples of 64 tokens): kv_tmap gives the
// RoPE chunk (128 bytes from byte 528 x 64 tokens, 128-byte swizzle: it lands as a bf16 chunk),
// kv_tmap_run the raw bytes of two e4m3 chunks (128 bytes x 64 tokens, unswizzled), kv_tmap_scales the
// scales (16 bytes from byte 512 x 64 tokens). False when a map cannot describe the cache.
inline bool make_fp8_tensor_maps(MlaParams& p) {
  const int64_t dims[4] = {kMlaFp8TokenBytes, p.page_size, p.h_kv, p.num_pages};
  const CUtensorMapL2promotion promo = mla_kv_l2_promotion(p.rows_per_kv, kMlaBlockN, true);
  const cuuint32_t rope_box[4] = {128, kMlaBlockN, 1, 1};
  const cuuint32_t raw_box[4] = {128, kMlaBlockN, 1, 1};
  const cuuint32_t scale_box[4] = {16, kMlaBlockN, 1, 1};
  p.tma_run_pages = 0;
  return launch_util::make_tma_map_u8_4d(&p.kv_tmap, p.kv, dims, p.kv_slot_stride, p.kv_head_stride,
                                         p.kv_page_stride, rope_box, CU_TENSOR_MAP_SWIZZLE_128B, promo) &&
         launch_util::make_tma_map_u8_4d(&p.kv_tmap_run, p.kv, dims, p.kv_slot_stride, p.kv_head_stride,
                                         p.kv_page_stride, raw_box, CU_TENSOR_MAP_SWIZZLE_NONE, promo) &&
         launch_util::make_tma_map_u8_4d(&p.kv_tmap_scales, p.kv, dims, p.kv_slot_stride, p.kv_head_stride,
                                         p.kv_page_stride, scale_box, CU_TENSOR_MAP_SWIZZLE_NONE, promo);
}

// Q and out by TMA (MlaParams::q_tmap / o_tmap): a box of 64 columns x bh heads x 64 / bh tokens is
// one m-block's 64 rows of a chunk when the query heads per KV head (ratio) are a multiple of 64
// (bh = 64, one token) or divide 64 (bh = ratio, 64 / ratio tokens; Q's rows past s_q are
// zero-filled, as the cp.async path leaves them; out's are clipped, not written). q spans 576
// columns; out's 512 are stored so by the pieces that write a sequence's final output. Other
// ratios, and layouts a map cannot describe, keep cp.async / the row copies. Returns bh, or 0.
// `off`: FLASHKIT_MLA_Q_TMA=0 / FLASHKIT_MLA_O_TMA=0 (read once by the two callers; A/B runs).
template <typename T>
int make_rows_tensor_map(const MlaParams& p, MlaTmaDesc* map, const void* ptr, int cols, int64_t head_stride,
                         int64_t tok_stride, int64_t batch_stride, bool off) {
  if (off || p.ratio <= 0) return 0;
  int bh;
  if (p.ratio % kMlaBlockM == 0) {
    bh = kMlaBlockM;
  } else if (kMlaBlockM % p.ratio == 0) {
    bh = p.ratio;
  } else {
    return 0;
  }
  const int64_t dims[4] = {cols, p.h_q, p.s_q, p.batch};
  return launch_util::make_tma_map_4d_box<T>(map, ptr, dims, head_stride, tok_stride, batch_stride, bh,
                                             kMlaBlockM / bh, 1)
             ? bh
             : 0;
}

template <typename T>
void make_q_tensor_map(MlaParams& p) {
  static const bool off = dispatch::env_off("FLASHKIT_MLA_Q_TMA");
  p.q_tma_heads =
      make_rows_tensor_map<T>(p, &p.q_tmap, p.q, kMlaHeadDim, p.q_head_stride, p.q_tok_stride, p.q_batch_stride, off);
}

template <typename T>
void make_o_tensor_map(MlaParams& p) {
  static const bool off = dispatch::env_off("FLASHKIT_MLA_O_TMA");
  p.o_tma_heads =
      make_rows_tensor_map<T>(p, &p.o_tmap, p.o, kMlaHeadDimV, p.o_head_stride, p.o_tok_stride, p.o_batch_stride, off);
}

template <class Tr>
cudaError_t launch(const MlaParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr auto kernel = &mla_split_kernel<Tr>;
  cudaError_t err = launch_util::raise_smem_limit<kernel>(dev.device, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  // Programmatic dependent launch: the kernel waits (griddepcontrol.wait) before it reads
  // anything, so its prologue overlaps the previous kernel's tail.
  return launch_util::launch_pdl(kernel, dim3(p.m_blocks, p.h_kv, p.num_parts), dim3(Tr::kBlockThreads),
                                 Tr::kSmemBytes, stream, true, p);
}

// The whole-block-box kernels (pages of >= 64 tokens) are compiled in their own files
// (inst/mla_sm90_<dtype>_box64.cu), in parallel with the others.
extern template cudaError_t launch<Traits<__nv_bfloat16, true, true>>(const MlaParams&, const DeviceInfo&,
                                                                      cudaStream_t);
extern template cudaError_t launch<Traits<__half, true, true>>(const MlaParams&, const DeviceInfo&, cudaStream_t);
// The FP8-cache kernel (bf16 q): inst/mla_sm90_bf16_fp8.cu.
extern template cudaError_t launch<Traits<__nv_bfloat16, true, true, true>>(const MlaParams&, const DeviceInfo&,
                                                                            cudaStream_t);

}  // namespace mla_sm90

// FLASHKIT_MLA_NO_TMA=1 (read once) forces the cp.async loads (for comparisons).
template <typename Tag>
int launch_mla_split_sm90(const MlaParams& params, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  if (params.batch <= 0 || params.num_parts <= 0) return cudaSuccess;
  static const bool no_tma = dispatch::env_flag("FLASHKIT_MLA_NO_TMA");
  MlaParams p = params;
  if (p.kv_fp8) {
    // FlashMLA's FP8 cache: the kFp8 kernel for bf16 q and pages of multiples of 64 tokens (the
    // RoPE part is bf16, its chunk lands by TMA as it is); anything else is left to the portable
    // kernel (the dispatcher's fallback).
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {
      if (no_tma || p.page_size % kMlaBlockN != 0 || !mla_sm90::make_fp8_tensor_maps(p)) {
        return kMlaLaunchNotHandled;
      }
      p.tma_box_rows = kMlaBlockN;
      p.tma_boxes = 1;
      static const int ablate = dispatch::env_int("FLASHKIT_MLA_FP8_ABLATE", 0);  // development only
      p.fp8_ablate = ablate;
      p.page_div = prims::FastDiv::make(p.page_size);
      mla_sm90::make_q_tensor_map<T>(p);
      mla_sm90::make_o_tensor_map<T>(p);
      return mla_sm90::launch<mla_sm90::Traits<T, true, true, true>>(p, dev, stream);
    } else {
      return kMlaLaunchNotHandled;
    }
  }
  p.tma_box_rows = no_tma ? 0 : mla_sm90::make_kv_tensor_map<T>(p);
  p.tma_boxes = p.tma_box_rows > 0 ? kMlaBlockN / p.tma_box_rows : 0;
  p.page_div = prims::FastDiv::make(p.page_size);
  p.q_tma_heads = 0;
  p.o_tma_heads = 0;
  if (p.tma_box_rows > 0) {
    mla_sm90::make_q_tensor_map<T>(p);
    mla_sm90::make_o_tensor_map<T>(p);
  }
  if (p.tma_box_rows == kMlaBlockN) return mla_sm90::launch<mla_sm90::Traits<T, true, true>>(p, dev, stream);
  if (p.tma_box_rows > 0) return mla_sm90::launch<mla_sm90::Traits<T, true>>(p, dev, stream);
  return mla_sm90::launch<mla_sm90::Traits<T, false>>(p, dev, stream);
}

#if FLASHKIT_MLA_TRACE
// Development only (scripts/dev/mla_sm90_check.cu): copies the trace points out. The trace
// arrays are __device__ variables, one copy per translation unit, so the readers of the page >= 64
// kernel's file (which defines FLASHKIT_MLA_TRACE_TU_BOX64) carry a _box64 suffix.
#ifdef FLASHKIT_MLA_TRACE_TU_BOX64
#define FLASHKIT_MLA_TRACE_FN(name) name##_box64
#elif defined(FLASHKIT_MLA_TRACE_TU_FP8)
#define FLASHKIT_MLA_TRACE_FN(name) name##_fp8
#else
#define FLASHKIT_MLA_TRACE_FN(name) name
#endif
int FLASHKIT_MLA_TRACE_FN(mla_sm90_trace_read)(unsigned long long* dst, int n, bool clear) {
  const int total = mla_sm90::kTraceCtas * 2 * mla_sm90::kTracePairs * mla_sm90::kTracePoints;
  if (n > total) n = total;
  if (cudaMemcpyFromSymbol(dst, mla_sm90::g_mla_trace, sizeof(unsigned long long) * n) != cudaSuccess) return -1;
  if (clear) {
    static unsigned long long zeros[mla_sm90::kTraceCtas * 2 * mla_sm90::kTracePairs * mla_sm90::kTracePoints] = {};
    cudaMemcpyToSymbol(mla_sm90::g_mla_trace, zeros, sizeof(zeros));
  }
  return n;
}
// CTA start / end times ([kTraceMaxCtas][2]) and the traced CTAs' pieces
// ([kTraceCtas][kTracePieces][5] times, [kTraceCtas][kTracePieces] pair counts); cleared after.
int FLASHKIT_MLA_TRACE_FN(mla_sm90_trace_read_pieces)(unsigned long long* cta, unsigned long long* piece, int* pairs) {
  using namespace mla_sm90;
  if (cudaMemcpyFromSymbol(cta, g_mla_cta, sizeof(unsigned long long) * kTraceMaxCtas * 2) != cudaSuccess) return -1;
  cudaMemcpyFromSymbol(piece, g_mla_piece, sizeof(unsigned long long) * kTraceCtas * kTracePieces * kTracePiecePoints);
  cudaMemcpyFromSymbol(pairs, g_mla_piece_pairs, sizeof(int) * kTraceCtas * kTracePieces);
  static unsigned long long z[kTraceMaxCtas * 2] = {};
  cudaMemcpyToSymbol(g_mla_cta, z, sizeof(z));
  cudaMemcpyToSymbol(g_mla_piece, z, sizeof(unsigned long long) * kTraceCtas * kTracePieces * kTracePiecePoints);
  return 0;
}
#endif

}  // namespace flashkit

#define FLASHKIT_INSTANTIATE_MLA_SM90_BOX64(T)                                                                \
  template cudaError_t flashkit::mla_sm90::launch<flashkit::mla_sm90::Traits<T, true, true>>(                  \
      const flashkit::MlaParams&, const flashkit::DeviceInfo&, cudaStream_t);

#define FLASHKIT_INSTANTIATE_MLA_SM90_FP8(T)                                                                  \
  template cudaError_t flashkit::mla_sm90::launch<flashkit::mla_sm90::Traits<T, true, true, true>>(            \
      const flashkit::MlaParams&, const flashkit::DeviceInfo&, cudaStream_t);

#define FLASHKIT_INSTANTIATE_MLA_SM90(TAG)                                                  \
  template int flashkit::launch_mla_split_sm90<flashkit::TAG>(const flashkit::MlaParams&,   \
                                                              const flashkit::DeviceInfo&, cudaStream_t);
