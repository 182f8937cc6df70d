// Plain-data parameters of the MLA decoding kernels (metadata, split, combine).
// Filled by the API layer (src/api/mla.cpp) from validated TensorRefs; strides in elements.
//
// MLA (DeepSeek multi-head latent attention, absorbed form): one latent vector per cached
// token, head_dim 576 (512 "NoPE" + 64 RoPE dims); K is the whole vector, V its first 512
// dims; h_kv KV heads (1 in DeepSeek's models), each shared by ratio = h_q / h_kv query
// heads. Per KV head the query rows are row = t * ratio + hh (t < s_q the query token,
// hh < ratio the head within the group), FlashMLA's order; they are cut into m-blocks of
// 64 rows (kMlaBlockM).
//
// Work decomposition (FlashMLA's tile scheduler): the KV range of every sequence is cut into
// blocks of kMlaBlockN = 64 tokens. The metadata kernel gives each of `num_parts` "SM parts"
// an equal share of sum_b (blocks_b + kMlaFixedOverhead), in batch order, and records per
// part (MlaSched): first batch and block, last batch and end block, and the split index of
// its first piece. num_splits[b + 1] - num_splits[b] is the number of pieces of sequence b
// (0 for an empty one). Grid of the split kernel: (m_blocks, h_kv, num_parts); a CTA walks
// its part's pieces; a sequence with one piece writes out/lse directly, the others write
// fp32 partials at slot num_splits[b] + split, merged by the combine kernel, which also
// writes out = 0 / lse = +inf for sequences with no piece (FlashMLA's convention for rows
// that see no key).
#pragma once

#include <cstdint>

#include "kernels/tma_desc.h"
#include "prims/fastdiv.h"

namespace flashkit {

constexpr int kMlaHeadDim = 576;
constexpr int kMlaHeadDimV = 512;
constexpr int kMlaBlockM = 64;          // query rows per CTA
constexpr int kMlaBlockN = 64;          // tokens per KV block (any page size)
constexpr int kMlaFixedOverhead = 5;    // scheduler cost of starting a sequence, in blocks
constexpr int kMlaSchedInts = 8;        // ints per part in tile_scheduler_metadata
constexpr int kMlaFp8TokenBytes = 656;  // FP8 cache: 512 e4m3 + 4 fp32 scales + 64 bf16 RoPE
constexpr int kMlaFp8ScaleOffset = 512;  // bytes into the token
constexpr int kMlaFp8RopeOffset = 528;

// One row of tile_scheduler_metadata [num_parts, 8] int32. A part with no work has
// begin_batch >= batch.
struct MlaSched {
  int32_t begin_batch;
  int32_t begin_block;  // first 64-token block in begin_batch
  int32_t end_batch;    // last batch, inclusive
  int32_t end_block;    // one past the last block in end_batch
  int32_t begin_split;  // split index of begin_batch's piece
  int32_t pad[3];
};

struct MlaMetadataParams {
  const int32_t* __restrict__ seqlens_k;  // [B]
  int32_t* __restrict__ sched;            // [num_parts, 8]
  int32_t* __restrict__ num_splits;       // [B + 1] prefix counts
  int batch;
  int num_parts;
};

// The TMA map of the latent cache, filled by the Hopper launcher (launch/mla_sm90_launch.cuh).
using MlaTmaDesc = TmaDesc;

struct MlaParams {
  const void* __restrict__ q;    // [B, s_q, h_q, 576]
  const void* __restrict__ kv;   // [num_pages, page_size, h_kv, 576] (V = first 512 dims)
  void* __restrict__ o;          // [B, s_q, h_q, 512]
  float* __restrict__ lse;       // [B, h_q, s_q] contiguous
  const int32_t* __restrict__ block_table;  // [B, max_pages], row stride bt_row_stride
  const int32_t* __restrict__ seqlens_k;    // [B]
  const int32_t* __restrict__ sched;        // [num_parts, 8] (MlaSched)
  const int32_t* __restrict__ num_splits;   // [B + 1]
  float* __restrict__ part_o;    // [max_partials, h_kv * rows_per_kv, 512]
  float* __restrict__ part_lse;  // [max_partials, h_kv * rows_per_kv]

  int64_t q_batch_stride, q_tok_stride, q_head_stride;
  int64_t o_batch_stride, o_tok_stride, o_head_stride;
  int64_t kv_page_stride, kv_slot_stride, kv_head_stride;
  int64_t bt_row_stride;

  int batch, s_q, h_q, h_kv, ratio;  // ratio = h_q / h_kv
  int rows_per_kv;                   // ratio * s_q
  int m_blocks;                      // ceil(rows_per_kv / 64)
  int page_size, max_pages, num_pages;
  int64_t capacity;                  // max_pages * page_size
  int num_parts;
  int max_partials;                  // slots in part_o / part_lse (B + num_parts)

  float softmax_scale, softmax_scale_log2;
  bool causal;
  // FlashMLA's FP8 latent cache: kv is bytes, [num_pages, page_size, h_kv, 656] with per
  // token 512 e4m3 values (the NoPE part), 4 fp32 scales (one per 128 of them:
  // value = e4m3 * scale) and 64 bf16 RoPE values; kv strides are then in bytes. Read by the
  // Hopper kernel for bf16 q at pages of multiples of 64 tokens (Traits kFp8_), else by the
  // portable one.
  bool kv_fp8;
  uint32_t* errors;  // sticky device error word (bits 4: block id, 8: seqlen)

  // Hopper kernel only (set by its launcher): TMA map of kv as [num_pages, page_size, h_kv,
  // 576] with boxes of 64 columns x tma_box_rows tokens; tma_box_rows = 0: cp.async loads.
  int tma_box_rows;
  MlaTmaDesc kv_tmap;
  // Pages of 16 / 32 tokens: a second map of the same cache whose boxes span tma_run_pages = 4 / 2
  // consecutive page ids, so a 64-token block whose pages have consecutive ids (a run) is one
  // copy per chunk instead of 4 / 2. 0: no such map (other page sizes, or FLASHKIT_MLA_PAGE_RUNS=0;
  // FLASHKIT_MLA_PAGE_RUNS=16 makes it for page 16 only, for A/B runs).
  int tma_run_pages;
  MlaTmaDesc kv_tmap_run;
  // FP8 cache (sm90_kernel.cuh Traits kFp8_): boxes of the 16 scale bytes of 64 tokens (kv_tmap: the
  // RoPE chunk, kv_tmap_run: two e4m3 chunks).
  MlaTmaDesc kv_tmap_scales;
  // Hopper kernel with TMA K loads only (set by its launcher): TMA map of q as 4-D (576 columns,
  // h_q heads, s_q tokens, B) with boxes of 64 columns x q_tma_heads heads x 64 / q_tma_heads
  // tokens, i.e. one m-block's 64 rows of one chunk (rows past s_q are zero-filled). 0: Q by
  // cp.async (a query-head ratio that is neither a multiple nor a divisor of 64, a layout the
  // map cannot describe, or FLASHKIT_MLA_Q_TMA=0).
  int q_tma_heads;
  MlaTmaDesc q_tmap;
  // The same for out ([B, s_q, h_q, 512]: 512 columns x heads x tokens x batch, boxes of 64
  // columns x o_tma_heads heads x 64 / o_tma_heads tokens): a piece that writes its sequence's
  // final output stages it in the 128-byte-swizzled layout and stores it with 8 TMA copies
  // instead of 64 row copies. 0: row copies (as q_tma_heads, or FLASHKIT_MLA_O_TMA=0).
  int o_tma_heads;
  MlaTmaDesc o_tmap;
  // Hopper kernel only (set by its launcher): page_size as a multiply-high divisor, and
  // 64 / tma_box_rows (the boxes, one per page, of a 64-token block; 0 without TMA), so the
  // per-pair page lookups divide by neither at run time.
  prims::FastDiv page_div;
  int tma_boxes;
  // Development only (FLASHKIT_MLA_FP8_ABLATE, read once by the launcher; timing, results wrong):
  // 1 = the FP8 kernel's converters arrive on the chunk barriers without converting.
  int fp8_ablate;
};

}  // namespace flashkit
