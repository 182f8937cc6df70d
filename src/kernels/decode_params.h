// Plain-data parameters of the paged-decode kernels (plan, split, combine, append).
// Filled by the API layer from validated TensorRefs; strides are in elements.
//
// Work decomposition. The query rows of one KV head (the H_q / H_kv query heads of its
// GQA group times the s_q new tokens, row = head_in_group * s_q + token) form the M
// dimension of the MMAs; they are cut into `row_groups` groups of kRows rows (16 or 32).
// A "head-row" hr = kv_head * row_groups + row_group names one such group. Each
// sequence's KV range is cut into `n_splits` chunks of `chunk` tokens; one work item =
// (sequence, hr, split), one CTA each. Sequences with one split write the output
// directly; the others write fp32 partial O and LSE, merged by the combine kernel.
#pragma once

#include <cstdint>

#include <vector_types.h>  // int4

#include "prims/fastdiv.h"

namespace flashkit {

// One work item of the split kernel, written by the plan kernel.
struct alignas(32) DecodeItem {
  int32_t batch;
  int32_t hr;       // kv_head * row_groups + row_group
  int32_t t_begin;  // token range [t_begin, t_end) of this split (clamped again at run time)
  int32_t t_end;
  int32_t partial;  // partial-result slot, or -1 when the sequence has a single split
  int32_t split;    // index of the split within its sequence
  int32_t len;      // the sequence's length as planned (clamped to [0, capacity] at run time)
  int32_t merge_n;  // n_splits when the split CTA that finishes last merges them (fused_merge), else 0
};

// Split sequences whose partials are small enough are merged by the split CTA that
// finishes last (per-(sequence, head-row) arrival counters), not by the combine kernel:
// n_splits * R * D_v fp32 values (R = valid rows of a head-row group) staged in the freed
// K/V ring, one round trip, no kernel boundary. The plan and the split kernel decide with
// the same rule, from the sequence's own split count (batch invariance is kept). (constexpr:
// callable from device code under --expt-relaxed-constexpr.)
// Programmatic-dependent-launch trigger points (tuning switch, decode.md v11): bit 0 = the
// combine kernel lets the next kernel get resident from its start (the next split waits in
// griddepcontrol.wait all the same), bit 1 = the split kernel triggers right after its own
// wait instead of at its epilogue.
#ifndef FLASHKIT_DECODE_EARLY_TRIGGER
#define FLASHKIT_DECODE_EARLY_TRIGGER 1  // bit 0: +0.5-1.5% on most rows (v10 trigger sweep)
#endif

// FLASHKIT_DECODE_TRACE (diagnostics; undefined by default, and then nothing below exists
// and the kernels are unchanged): the split and combine kernels write %globaltimer points
// per CTA into a tail of the workspace that the host reads back
// (scripts/dev/decode_trace.py). Split CTA c < kTraceSplitCtas, 8 u64 at c * 8: start,
// after griddepcontrol.wait, tile 0 ready, loop done, own result written, fused merge done
// (last arriver only), (smid | n_tiles << 16 | merge_n << 40), item index + 1. Combine
// CTA c < kTraceCombineCtas, 8 u64 after the split region: start, after the wait, then in
// its first pair: entry read, LSEs landed, LSE total done, partial O landed, pair done;
// last: pairs merged + 1.
#ifdef FLASHKIT_DECODE_TRACE
constexpr int kTraceSplitCtas = 8192;
constexpr int kTraceCombineCtas = 2048;
constexpr int64_t kTraceWords = int64_t(kTraceSplitCtas) * 8 + int64_t(kTraceCombineCtas) * 8;
#endif

// Calls of at most this many sequences may be self-planned (DecodeParams::self_plan): one warp
// of a split CTA computes the whole plan (kernels/decode/self_plan.cuh).
constexpr int kSelfPlanMaxBatch = 32;

constexpr int kFusedMergeFloats = 7168;  // 28 KB: fits the smallest ring (8-bit D 128, 2 stages: 32 KB)
constexpr int kFusedMergeRows = 128;     // n * R <= kFusedMergeFloats / 64 = 112
// max_splits: DecodeParams::fused_max_splits (4 unless FLASHKIT_DECODE_FUSED_MAX_SPLITS; api/decode.cpp).
constexpr bool fused_merge(int n_splits, int rows_max, int head_dim_v, int max_splits) {
  return n_splits >= 2 && n_splits <= max_splits && int64_t(n_splits) * rows_max * head_dim_v <= kFusedMergeFloats;
}

// Workspace layout (offsets in bytes from the workspace base, 256-byte aligned), computed
// on the host from (B, hr, target CTAs, limits); see api/decode.cpp.
struct DecodeWorkspace {
  int32_t* header;       // [kHeaderInts]: counts written by the plan kernel
  DecodeItem* items;     // [max_items]
  int4* combines;        // [max_combines]: (batch, hr, first partial, splits) of the sequences
                         // whose splits the combine kernel merges (one read, no dependent ones)
  int32_t* first_partial;  // [B]: first partial split row of b (see part_o), -1 if unsplit
  int32_t* num_splits;   // [B]
  int32_t* item_base;    // [B]: index of b's first item divided by hr_count
  int32_t* counters;     // [B][hr_count]: arrivals of fused-merge splits (zeroed by the plan,
                         // reset by the merging CTA, so a plan serves any number of runs)
  // Partial results of split sequences: slot (first_partial[b] + split) * hr_count + hr.
  float* part_o;         // [max_partials][rows][D_v]
  float* part_lse;       // [max_partials][rows]
#ifdef FLASHKIT_DECODE_TRACE
  unsigned long long* trace;  // [kTraceWords] (see FLASHKIT_DECODE_TRACE)
#endif
};

struct DecodeParams {
  const void* __restrict__ q;        // [B, s_q, H_q, D]
  const void* __restrict__ k_cache;  // [num_pages, page_size, H_kv, D] (any strides)
  const void* __restrict__ v_cache;  // [num_pages, page_size, H_kv, D_v]
  void* __restrict__ o;              // [B, s_q, H_q, D_v]
  float* __restrict__ lse;           // [B, H_q, s_q] or nullptr
  const int32_t* __restrict__ block_table;  // [B, max_pages] (row stride bt_row_stride)
  const int32_t* __restrict__ seqlens_k;    // [B]
  // Quantized caches (int8 / fp8 e4m3): fp32 scales per token and head,
  // [num_pages, page_size, H_kv] (any strides); nullptr for 16-bit caches.
  const float* __restrict__ k_scale;
  const float* __restrict__ v_scale;
  int64_t ks_page_stride, ks_slot_stride, ks_head_stride;
  int64_t vs_page_stride, vs_slot_stride, vs_head_stride;

  int64_t q_batch_stride, q_tok_stride, q_head_stride;
  int64_t o_batch_stride, o_tok_stride, o_head_stride;
  int64_t k_page_stride, k_slot_stride, k_head_stride;
  int64_t v_page_stride, v_slot_stride, v_head_stride;
  int64_t bt_row_stride;

  int batch, s_q, h_q, h_kv, ratio;  // ratio = h_q / h_kv
  int head_dim, head_dim_v;
  int page_size, max_pages, num_pages;
  prims::FastDiv page_div;  // page_size as a multiply-high divisor: the split kernel's per-tile lookups
  int64_t capacity;  // max_pages * page_size: longest length the block table can describe
  int rows;          // kRows of the kernel configuration (16 or 32)
  int row_groups;    // ceil(ratio * s_q / rows)
  int hr_count;      // h_kv * row_groups

  float softmax_scale, softmax_scale_log2;
  bool causal;

  // Plan inputs: split_size > 0 fixes the chunk (batch invariance); 0 = balanced from the
  // total work over target_ctas. max_items / max_combines / max_partials bound what the
  // plan may write (the workspace was sized for them).
  int split_size;
  int min_chunk;       // shortest split of the balanced plan (tokens, a multiple of 64)
  int min_chunk_tiny;  // ... where the total work is at most half a tile per CTA (B 1, ~1k)
  int target_ctas;
  int combine_prewait;   // 1: the combine reads the plan's header / its first entry before griddepcontrol.wait
  int split_cap;         // 1: short balanced calls of many rows cap their splits (plan_math.h split_cap)
  int fused_max_splits;  // sequences of more splits go to the combine kernel (api/decode.cpp: 4)
  int self_plan;         // 1: split CTAs compute their item from seqlens_k (decode/self_plan.cuh; sm_90, one-call form)
  int max_items, max_combines, max_partials;

  DecodeWorkspace ws;
  uint32_t* errors;  // sticky device error word (flashkit/errors.h bits)

  // The narrow 8-bit kernels' 32-bit offset rings (decode/plan_math.h off32_units): K / V page and slot strides in
  // 16-byte units, the scales' in elements; off32 = 0 where an offset of this cache may not fit in 32 bits (such
  // calls take the 16-row kernels).
  uint32_t k_page_u, k_slot_u, v_page_u, v_slot_u, ks_page_u, ks_slot_u, vs_page_u, vs_slot_u;
  int off32;
};

// Header slots written by the plan kernel.
enum DecodeHeader : int {
  kHdrNumItems = 0,
  kHdrNumCombines = 1,
  kHdrChunk = 2,
  kHdrTotalTokens = 3,  // sum of clamped lengths (for tests and diagnostics)
  kHdrBatch = 4,        // B and hr_count the plan was made for (checked by the run)
  kHdrHrCount = 5,
  kHdrTargetCtas = 6,   // the plan's target CTAs (differs between cache kinds): checked too
  kHeaderInts = 8,
};

// Device error bits used by the decode kernels (same values as flashkit/errors.h).
enum DecodeErrorBits : uint32_t {
  kDecodeErrBlockId = 4u,   // a block id used by a sequence is outside [0, num_pages)
  kDecodeErrSeqlen = 8u,    // seqlens_k[b] < 0 or > max_pages * page_size
  kDecodeErrAppend = 16u,   // append: a new token has no valid slot
  kDecodeErrPlan = 32u,     // the workspace was not planned for this call's sizes
};

// Parameters of the append kernel: writes k_new/v_new [B, s_new, H_kv, D] into the slots
// of positions seqlens_k[b] - s_new + t.
struct AppendParams {
  // Quantized caches: the scale of every written (token, head) row goes here.
  float* __restrict__ k_scale;
  float* __restrict__ v_scale;
  int64_t ks_page_stride, ks_slot_stride, ks_head_stride;
  int64_t vs_page_stride, vs_slot_stride, vs_head_stride;
  const void* __restrict__ k_new;
  const void* __restrict__ v_new;
  void* __restrict__ k_cache;
  void* __restrict__ v_cache;
  const int32_t* __restrict__ block_table;
  const int32_t* __restrict__ seqlens_k;
  int64_t kn_batch_stride, kn_tok_stride, kn_head_stride;
  int64_t vn_batch_stride, vn_tok_stride, vn_head_stride;
  int64_t k_page_stride, k_slot_stride, k_head_stride;
  int64_t v_page_stride, v_slot_stride, v_head_stride;
  int64_t bt_row_stride;
  int batch, s_new, h_kv, head_dim, head_dim_v;
  int page_size, max_pages, num_pages;
  int elem_bytes;
  uint32_t* errors;
};

}  // namespace flashkit
