// Paged-decode split kernel (Flash-Decoding over a paged KV cache), sm_80 and newer.
//
// One CTA per work item (b, hr, split) of the plan (see kernels/decode_params.h). Per
// KV tile n of the item's chunk (kBlockN tokens):
//
//   wait tile n ─ sync ─ issue loads of tile n+S-1 ─ offsets of tile n+S (block-table
//   entry loaded last iteration; load the entry of tile n+S+1) ─ S = Q K^T (16 keys per
//   warp) ─ mask (last tile / bad pages only) ─ online softmax ─ O += P V
//
// Device-side index data is never trusted: lengths are clamped to the block table's
// capacity, block ids outside [0, num_pages) are never dereferenced (their tokens are
// masked out) and both set a bit of the sticky device error word. Tokens past the end of
// a sequence are zero-filled, never read, and masked, so NaN/Inf in unused cache slots
// cannot reach the result.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention_common/online_softmax.cuh"
#include "kernels/decode/lse_merge.cuh"
#include "kernels/decode/self_plan.cuh"
#include "kernels/decode/traits.cuh"
#include "kernels/decode_params.h"
#include "prims/cp_async.cuh"
#include "prims/fp8.cuh"
#include "prims/globaltimer.cuh"
#include "prims/ldmatrix.cuh"
#include "prims/mma.cuh"
#include "prims/numeric.cuh"

namespace flashkit::decode {

// Cache hints of the K/V stream (tuning switch, docs/kernels/decode.md): bit 0 = L2 256-byte
// prefetch, bit 1 = evict-first policy.
#ifndef FLASHKIT_DECODE_L2HINT
#define FLASHKIT_DECODE_L2HINT 2  // evict-first: +1% at B=64, +4% at B=1 (decode.md v6)
#endif
constexpr bool kKvPrefetch256 = (FLASHKIT_DECODE_L2HINT & 1) != 0;
constexpr bool kKvEvictFirst = (FLASHKIT_DECODE_L2HINT & 2) != 0;
// FLASHKIT_DECODE_QUANT_HINT (tuning switch, decode.md v11): 1 = the 8-bit caches' K/V copies
// carry the evict-first hint too at D 128 (B 16 8k FP8 -4.6% time, B 1 64k -5%).
#ifndef FLASHKIT_DECODE_QUANT_HINT
#define FLASHKIT_DECODE_QUANT_HINT 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool kQuantHintArch = true;
#else
constexpr bool kQuantHintArch = false;  // sm_80 code: see the 8-bit kernels' copies below
#endif

// Quantized caches compute both MMAs in fp16 whatever q's dtype (every int8 and e4m3 value
// is an fp16 value; q is converted once, exactly within fp16's range, clamped outside it). Four cache bytes of
// one 32-bit word as two fp16 pairs (bytes 0-1 -> lo, 2-3 -> hi): e4m3 by the hardware
// conversion (prims::e4m3x4_to_f16x2x2), int8 by the magic-number trick (0x64uu is the fp16
// 1024 + uu: bias the byte to unsigned, place it, subtract 1152). Before sm_89 cuda_fp8.hpp
// emulates the e4m3 conversion in software (slower; Hopper and Ada have the instruction).
// kBiased (int8 only): leave the 1152 in (the fp16 values are x + 1152, exact): the caller removes it after the
// MMA (FLASHKIT_DECODE_INT8_BIAS, decode.md "int8 without the bias subtraction").
template <int kQuant, bool kBiased = false>
__device__ __forceinline__ void bytes4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  if constexpr (kQuant == 2) {
    prims::e4m3x4_to_f16x2x2(w, lo, hi);
  } else if constexpr (kBiased) {
    const uint32_t u = w ^ 0x80808080u;
    lo = __byte_perm(u, 0x64646464u, 0x4140);
    hi = __byte_perm(u, 0x64646464u, 0x4342);
  } else {
    const uint32_t u = w ^ 0x80808080u;
    const uint32_t l = __byte_perm(u, 0x64646464u, 0x4140);
    const uint32_t h = __byte_perm(u, 0x64646464u, 0x4342);
    const __half2 bias = __half2half2(__ushort_as_half(0x6480));  // 1152
    const __half2 lh = __hsub2(*reinterpret_cast<const __half2*>(&l), bias);
    const __half2 hh = __hsub2(*reinterpret_cast<const __half2*>(&h), bias);
    lo = *reinterpret_cast<const uint32_t*>(&lh);
    hi = *reinterpret_cast<const uint32_t*>(&hh);
  }
}

// The 8-bit kernels' V operand words of one 32-dim group `grp`: the lane's 32-bit words of key rows 2tq (v_even)
// and 2tq + 1 (v_odd) at dims 32 grp + 4g .. + 3, and of rows 2tq + 8, 2tq + 9, as fp16 pairs per dim: b0[d] =
// dim 32 grp + 4g + d of keys (2tq, 2tq + 1), b1[d] = of keys (2tq + 8, 2tq + 9). The 16-row form uses them as
// B fragments (one n8 tile per d), the narrow form as A fragments (two m16 tiles per group).
template <class KVTile, int kQuant, bool kBiased = false>
__device__ __forceinline__ void v_key_pairs(uint32_t v_even, uint32_t v_odd, int grp, uint32_t (&b0)[4],
                                            uint32_t (&b1)[4]) {
  const uint32_t w0 = prims::lds_u32(KVTile::step_addr(v_even, 0, grp * 32));
  const uint32_t w1 = prims::lds_u32(KVTile::step_addr(v_odd, 0, grp * 32));
  const uint32_t w2 = prims::lds_u32(KVTile::step_addr(v_even, 8, grp * 32));
  const uint32_t w3 = prims::lds_u32(KVTile::step_addr(v_odd, 8, grp * 32));
  bytes4_to_f16x2<kQuant, kBiased>(__byte_perm(w0, w1, 0x5140), b0[0], b0[1]);  // bytes 0, 1 of each word
  bytes4_to_f16x2<kQuant, kBiased>(__byte_perm(w0, w1, 0x7362), b0[2], b0[3]);  // bytes 2, 3
  bytes4_to_f16x2<kQuant, kBiased>(__byte_perm(w2, w3, 0x5140), b1[0], b1[1]);
  bytes4_to_f16x2<kQuant, kBiased>(__byte_perm(w2, w3, 0x7362), b1[2], b1[3]);
}

// FLASHKIT_DECODE_PREWAIT_PREFETCH (default on since 2026-11-26: B 1 bf16 16k -18% time, 64k
// -5%, FP8 64k -3%; decode.md "Pre-wait prefetch"; 0 turns it off): in calls
// with at most FLASHKIT_DECODE_PREWAIT_MAX_BATCH sequences the split CTAs are resident for
// several us before griddepcontrol.wait releases them (the previous call's combine), then
// spend 4-7 us on three dependent trips (item, block table, K/V) before their first tile. With
// the switch on, each CTA uses that idle time to read the item its slot held in the plan last
// written to the workspace, the block-table entries of that item's first kStages tiles, and
// prefetch those tiles' K/V rows (and scales) into L2. Everything read here may be stale or
// being rewritten by the kernel before (the plan kernel, a block-table upload, an append); it
// only picks prefetch addresses, each checked to lie inside the cache, so a wrong guess costs
// bandwidth, never a result. After the wait the kernel reads all of it again, properly.
#ifndef FLASHKIT_DECODE_PREWAIT_PREFETCH
#define FLASHKIT_DECODE_PREWAIT_PREFETCH 1
#endif
#ifndef FLASHKIT_DECODE_PREWAIT_MAX_BATCH
#define FLASHKIT_DECODE_PREWAIT_MAX_BATCH 4
#endif
// Tiles prefetched per CTA before the wait (0 = the kernel's kStages): FLASHKIT_DECODE_PREWAIT_TILES
// for the 16-bit caches, FLASHKIT_DECODE_PREWAIT_TILES_Q for the 8-bit ones (half the bytes a tile).
#ifndef FLASHKIT_DECODE_PREWAIT_TILES
#define FLASHKIT_DECODE_PREWAIT_TILES 0
#endif
#ifndef FLASHKIT_DECODE_PREWAIT_TILES_Q
#define FLASHKIT_DECODE_PREWAIT_TILES_Q 0
#endif
template <class Tr>
__device__ __forceinline__ void prewait_prefetch(const DecodeParams& p) {
  using TC = typename Tr::TC;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kRowBytes = Tr::kHeadDim * int(sizeof(TC));
  const int tid = threadIdx.x;
  if (tid >= kBlockN || int(blockIdx.x) >= p.max_items || p.page_size <= 0 || p.row_groups <= 0) return;
  const DecodeItem item = p.ws.items[blockIdx.x];
  if (item.batch < 0 || item.batch >= p.batch || item.hr < 0 || item.hr >= p.hr_count) return;
  const int64_t t_end = min(min(int64_t(max(item.len, 0)), p.capacity), int64_t(item.t_end));
  const int64_t t_begin = max(int64_t(item.t_begin), int64_t(0));
  const int kv_head = item.hr / p.row_groups;
  const int32_t* bt_row = p.block_table + int64_t(item.batch) * p.bt_row_stride;
  const char* k_base = static_cast<const char*>(p.k_cache) + int64_t(kv_head) * p.k_head_stride * int64_t(sizeof(TC));
  const char* v_base = static_cast<const char*>(p.v_cache) + int64_t(kv_head) * p.v_head_stride * int64_t(sizeof(TC));
  constexpr int kSet = Tr::kQuant != 0 ? FLASHKIT_DECODE_PREWAIT_TILES_Q : FLASHKIT_DECODE_PREWAIT_TILES;
  constexpr int kTiles = kSet > 0 ? kSet : Tr::kStages;
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
    const int64_t tok = t_begin + int64_t(tile) * kBlockN + tid;  // < capacity: a block-table entry
    if (tok >= t_end) break;
    const int page = bt_row[tok / p.page_size];
    if (page < 0 || page >= p.num_pages) continue;
    const int64_t in_page = tok % p.page_size;
    const char* kr = k_base + (int64_t(page) * p.k_page_stride + in_page * p.k_slot_stride) * int64_t(sizeof(TC));
    const char* vr = v_base + (int64_t(page) * p.v_page_stride + in_page * p.v_slot_stride) * int64_t(sizeof(TC));
#pragma unroll
    for (int c = 0; c < kRowBytes; c += 128) {
      prims::prefetch_l2(kr + c);
      prims::prefetch_l2(vr + c);
    }
    if constexpr (Tr::kQuant != 0) {
      prims::prefetch_l2(p.k_scale + int64_t(kv_head) * p.ks_head_stride + int64_t(page) * p.ks_page_stride +
                         in_page * p.ks_slot_stride);
      prims::prefetch_l2(p.v_scale + int64_t(kv_head) * p.vs_head_stride + int64_t(page) * p.vs_page_stride +
                         in_page * p.vs_slot_stride);
    }
  }
}

// Clamped length of sequence b (the same rule in the plan, split and combine kernels).
__device__ __forceinline__ int clamped_len(const DecodeParams& p, int b) {
  const int len = p.seqlens_k[b];
  return len < 0 ? 0 : (int64_t(len) > p.capacity ? int(p.capacity) : len);
}

// FLASHKIT_DECODE_IGNORE_SRC (tuning switch, decode.md "Where the split kernel's instructions go"; default 1 since
// it was measured, H200 2026-11-28: the 8-bit kernels 2-7% faster, the 16-bit ones unchanged): 1 = the K/V tile
// copies (and the 8-bit scale copies) zero-fill by cp.async's ignore-src predicate instead of a src-size
// register (prims::cp_async_16_stream / cp_async_4), which ptxas lowers without the per-copy integer chain;
// 0 = the src-size form. (The source address keeps its select: without it, ptxas (CUDA 13.0) put the bf16 /
// fp16 D 128 kernel's cache-policy descriptor in an odd uniform register, the form that faults;
// scripts/check_ldgsts_desc.sh.)
#ifndef FLASHKIT_DECODE_IGNORE_SRC
#define FLASHKIT_DECODE_IGNORE_SRC 1
#endif
// FLASHKIT_DECODE_QFAST (tuning switch, the narrow 8-bit kernels; bits): 1 = tiles whose 64 rows are all valid (inside
// the item, no bad page: known before the copies) are copied without the zero-fill predicate (no per-copy predicate or
// address select); 2 = the offset ring's products as unsigned 32 x 64-bit multiplies (page and slot are >= 0 there).
#ifndef FLASHKIT_DECODE_QFAST
#define FLASHKIT_DECODE_QFAST 3
#endif
// FLASHKIT_DECODE_META_SPLIT (tuning switch, the narrow 8-bit kernels): 1 = the offset ring of a tile is written by
// all four warps, warps 0-1 the K and K-scale offsets of its 64 tokens, warps 2-3 the V and V-scale ones (and the
// scale copies split the same way), instead of warps 0-1 doing all four (the busiest schedulers' extra work).
#ifndef FLASHKIT_DECODE_META_SPLIT
#define FLASHKIT_DECODE_META_SPLIT 1
#endif
// FLASHKIT_DECODE_INT8_BIAS (tuning switch, the narrow int8 kernels): 1 = K and V operands as x + 1152 (the
// magic-number fp16 without its subtraction); S^T's accumulators start at -1152 * (row sum of q) and O^T's bias,
// 1152 * (sum of P), is accumulated by one MMA of ones per tile and removed at the merge.
#ifndef FLASHKIT_DECODE_INT8_BIAS
#define FLASHKIT_DECODE_INT8_BIAS 1
#endif
// FLASHKIT_DECODE_QK_CHAINS (tuning switch, narrow 8-bit form): accumulators of S^T = K Q^T over the k-steps.
#ifndef FLASHKIT_DECODE_QK_CHAINS
#define FLASHKIT_DECODE_QK_CHAINS 1
#endif
// FLASHKIT_DECODE_Q_NOSELECT (tuning switch, the narrow 8-bit kernels with ignore-src): 1 = the K/V tile copies'
// source address without the select (an ignored source is never read; in the 16-row 8-bit kernels it costs 128 ->
// 142 registers); scripts/check_ldgsts_desc.sh must stay clean.
#ifndef FLASHKIT_DECODE_Q_NOSELECT
#define FLASHKIT_DECODE_Q_NOSELECT 1
#endif
// FLASHKIT_DECODE_QMINBLOCKS (tuning switch): minimum resident CTAs per SM asked of ptxas for
// the 8-bit-cache kernels (their occupancy is register-limited: 128 registers = 4 CTAs/SM).
// Unset = no second bound (an explicit 1 changes ptxas's choice: 148 registers at D 128).
#ifdef FLASHKIT_DECODE_QMINBLOCKS
#define FLASHKIT_DECODE_SPLIT_BOUNDS __launch_bounds__(Tr::kThreads, Tr::kQuant ? FLASHKIT_DECODE_QMINBLOCKS : 1)
#else
#define FLASHKIT_DECODE_SPLIT_BOUNDS __launch_bounds__(Tr::kThreads)
#endif
#ifdef FLASHKIT_DECODE_TRACE
// Thread 0 of split CTA blockIdx.x writes slot `i` (see FLASHKIT_DECODE_TRACE).
#define FLASHKIT_DTRACE(i, value)                                                                     \
  do {                                                                                               \
    if (threadIdx.x == 0 && blockIdx.x < kTraceSplitCtas) p.ws.trace[blockIdx.x * 8 + (i)] = (value); \
  } while (0)
#endif

template <class Tr>
__global__ void FLASHKIT_DECODE_SPLIT_BOUNDS decode_split_kernel(const DecodeParams p) {
  using T = typename Tr::T;
  using TC = typename Tr::TC;
  constexpr int kQuant = Tr::kQuant;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kStages = Tr::kStages;
  constexpr int kOffSlots = Tr::kOffSlots;
  constexpr int kRows = Tr::kRows;
  constexpr int kMTiles = Tr::kMTiles;
  constexpr int kD = Tr::kHeadDim;
  constexpr int kThreads = Tr::kThreads;
  constexpr int kNT = Tr::kNTiles;
  constexpr int kWarpKeys = Tr::kWarpKeys;
  constexpr int kMetaWarps = Tr::kMetaWarps;
  using KVTile = typename Tr::KVTile;
  using QTile = typename Tr::QTile;

#ifdef FLASHKIT_DECODE_TRACE
  const unsigned long long trace_t0 = prims::globaltimer();
#endif
  DecodeItem item;
  int num_items;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Self-planned (self_plan.cuh): the item from seqlens_k, no wait before the K/V stream.
  const bool self_planned = p.self_plan != 0;
  if (self_planned) {
    num_items = self_plan_item(p, int(blockIdx.x), item);
    if (p.self_plan == 2) {  // verify (tests): the plan kernel's item and count must be the same
      asm volatile("griddepcontrol.wait;" ::: "memory");
      const DecodeItem w = p.ws.items[blockIdx.x];
      const int planned = p.ws.header[kHdrNumItems];
      const bool same = planned == num_items &&
                        (int(blockIdx.x) >= num_items ||
                         (w.batch == item.batch && w.hr == item.hr && w.t_begin == item.t_begin && w.t_end == item.t_end &&
                          w.partial == item.partial && w.split == item.split && w.len == item.len && w.merge_n == item.merge_n));
      if (!same && threadIdx.x == 0) atomicOr(p.errors, uint32_t(kDecodeErrPlan));
    }
    if (int(blockIdx.x) >= num_items) {
      asm volatile("griddepcontrol.wait;" ::: "memory");  // the split grid never completes before the plan
      return;
    }
  } else
#else
  constexpr bool self_planned = false;
#endif
  {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (FLASHKIT_DECODE_PREWAIT_PREFETCH != 0) {
      if (p.batch <= FLASHKIT_DECODE_PREWAIT_MAX_BATCH) prewait_prefetch<Tr>(p);
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");  // the plan (if launched just before) is done
    if constexpr ((FLASHKIT_DECODE_EARLY_TRIGGER & 2) != 0) asm volatile("griddepcontrol.launch_dependents;");
#endif
    // Header and item are independent loads: both in flight before either is used.
    num_items = p.ws.header[kHdrNumItems];
    const int hdr_batch = p.ws.header[kHdrBatch];
    const int hdr_hr = p.ws.header[kHdrHrCount];
    const int hdr_target = p.ws.header[kHdrTargetCtas];
    item = p.ws.items[blockIdx.x];
    if (int(blockIdx.x) >= num_items) return;
    // A workspace that was not planned for these dims is a caller error: never index with it.
    if (hdr_batch != p.batch || hdr_hr != p.hr_count || hdr_target != p.target_ctas || item.batch < 0 ||
        item.batch >= p.batch || item.hr < 0 || item.hr >= p.hr_count || item.partial >= p.max_partials) {
      if (threadIdx.x == 0) atomicOr(p.errors, uint32_t(kDecodeErrPlan));
      return;
    }
  }
#ifdef FLASHKIT_DECODE_TRACE
  FLASHKIT_DTRACE(0, trace_t0);
  FLASHKIT_DTRACE(1, prims::globaltimer());
  FLASHKIT_DTRACE(7, blockIdx.x + 1ull);
#endif

  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  TC* sK = reinterpret_cast<TC*>(smem + Tr::kSmemK);
  TC* sV = reinterpret_cast<TC*>(smem + Tr::kSmemV);
  int64_t* sOffKs = reinterpret_cast<int64_t*>(smem + Tr::kSmemOffScale);  // quantized only
  int64_t* sOffVs = sOffKs + Tr::kOffSlots * Tr::kBlockN;
  float* sScale = reinterpret_cast<float*>(smem + Tr::kSmemScale);          // [stage][k|v][token]
  int64_t* sOffK = reinterpret_cast<int64_t*>(smem + Tr::kSmemOffK);
  int64_t* sOffV = reinterpret_cast<int64_t*>(smem + Tr::kSmemOffV);
  int* sBad = reinterpret_cast<int*>(smem + Tr::kSmemBad);
  // 32-bit rings (Tr::kOff32, the narrow form): the same slots, the first half of each ring's bytes.
  [[maybe_unused]] uint32_t* sOffK32 = reinterpret_cast<uint32_t*>(sOffK);
  [[maybe_unused]] uint32_t* sOffV32 = reinterpret_cast<uint32_t*>(sOffV);
  [[maybe_unused]] uint32_t* sOffKs32 = reinterpret_cast<uint32_t*>(sOffKs);
  [[maybe_unused]] uint32_t* sOffVs32 = reinterpret_cast<uint32_t*>(sOffVs);

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int b = item.batch;
  // The planned length, clamped to what the block table can describe (the plan kernel
  // already flagged lengths outside [0, capacity]).
  const int len = int(min(int64_t(max(item.len, 0)), p.capacity));
  const int t_end = min(len, item.t_end);
  const int t_begin = min(max(item.t_begin, 0), t_end);
  const int n_tiles = (t_end - t_begin + kBlockN - 1) / kBlockN;
  const int kv_head = item.hr / p.row_groups;
  const int row0 = (item.hr % p.row_groups) * kRows;
  const int rows_valid = min(kRows, p.ratio * p.s_q - row0);

  const TC* k_base = static_cast<const TC*>(p.k_cache) + int64_t(kv_head) * p.k_head_stride;
  const TC* v_base = static_cast<const TC*>(p.v_cache) + int64_t(kv_head) * p.v_head_stride;
  const float* ks_base = p.k_scale + int64_t(kv_head) * p.ks_head_stride;  // quantized only
  const float* vs_base = p.v_scale + int64_t(kv_head) * p.vs_head_stride;
  const int32_t* bt_row = p.block_table + int64_t(b) * p.bt_row_stride;

  // --- block table -> per-token element offsets (threads 0..kBlockN-1, one token each) ---
  // page_of: the block id of this thread's token of `tile` (-1 past the chunk's end).
  // tok / page_size: a multiply-high for the 16-bit caches; the 8-bit kernels keep the
  // division, because holding the FastDiv's fields took them from 128 to 143 registers
  // (4 -> 3 CTAs per SM).
  constexpr bool kFastCopy = kQuant != 0 && (FLASHKIT_DECODE_QFAST & 1) != 0;
  constexpr bool kFastMeta = kQuant != 0 && (FLASHKIT_DECODE_QFAST & 2) != 0;
  auto page_index = [&](int tok) -> int {
    if constexpr (kQuant != 0) {
      // Powers of two (FastDiv mul == 1): a shift, read at use (128 registers kept, D 128).
      return p.page_div.mul == 1u ? tok >> p.page_div.shift : tok / p.page_size;
    } else {
      return p.page_div.div(tok);
    }
  };
  constexpr bool kSplitMeta = Tr::kNarrow && kFastMeta && kThreads == 2 * kBlockN && FLASHKIT_DECODE_META_SPLIT != 0;
  // 32-bit offsets (FLASHKIT_DECODE_OFF32, traits.cuh): K / V rows in 16-byte units, scales in elements,
  // decode_math::kOff32None for a slot without a valid token; the launch takes this form only where p.off32 says every
  // offset of the cache fits.
  // (Not in the sm_80 code at D 256: there ptxas gave the FP8 kernel 168 registers and 28 bytes of spills; with
  // 64-bit rings 198 and none. One CTA per SM by shared memory on sm_80 either way.)
  constexpr bool kOff32 = kSplitMeta && Tr::kOff32 && (kQuantHintArch || kD <= 128);
  const int mtid = kSplitMeta ? tid % kBlockN : tid;  // the token of a tile this thread looks up
  [[maybe_unused]] const bool v_half = kSplitMeta && tid >= kBlockN;
  auto page_of = [&](int tile) -> int {
    const int tok = t_begin + tile * kBlockN + mtid;
    return (tile < n_tiles && tok < t_end) ? bt_row[page_index(tok)] : -1;
  };
  // Writes the offsets of `tile` into its ring slot; a block id out of range is never
  // dereferenced: offset -1 (zero-filled and masked) and the error bit.
  auto write_offsets = [&](int tile, int page) {
    const int slot = tile % kOffSlots;
    const int tok = t_begin + tile * kBlockN + mtid;
    const bool in_range = tile < n_tiles && tok < t_end;
    const bool ok = page >= 0 && page < p.num_pages;
    if constexpr (kSplitMeta) {  // K and K scale (warps 0-1) or V and V scale (warps 2-3) of token mtid
      if constexpr (kOff32) {
        uint32_t o_kv = decode_math::kOff32None, o_sc = decode_math::kOff32None;
        if (in_range && ok) {
          const int in_page = tok - page_index(tok) * p.page_size;
          const uint32_t pg = uint32_t(page), ip = uint32_t(in_page);
          o_kv = v_half ? pg * p.v_page_u + ip * p.v_slot_u : pg * p.k_page_u + ip * p.k_slot_u;
          o_sc = v_half ? pg * p.vs_page_u + ip * p.vs_slot_u : pg * p.ks_page_u + ip * p.ks_slot_u;
        }
        (v_half ? sOffV32 : sOffK32)[slot * kBlockN + mtid] = o_kv;
        (v_half ? sOffVs32 : sOffKs32)[slot * kBlockN + mtid] = o_sc;
      } else {
        int64_t o_kv = -1, o_sc = -1;
        if (in_range && ok) {
          const int in_page = tok - page_index(tok) * p.page_size;
          const uint64_t pg = uint32_t(page), ip = uint32_t(in_page);
          auto off = [&](int64_t page_stride, int64_t slot_stride) {
            return int64_t(pg * uint64_t(page_stride) + ip * uint64_t(slot_stride));
          };
          o_kv = v_half ? off(p.v_page_stride, p.v_slot_stride) : off(p.k_page_stride, p.k_slot_stride);
          o_sc = v_half ? off(p.vs_page_stride, p.vs_slot_stride) : off(p.ks_page_stride, p.ks_slot_stride);
        }
        (v_half ? sOffV : sOffK)[slot * kBlockN + mtid] = o_kv;
        (v_half ? sOffVs : sOffKs)[slot * kBlockN + mtid] = o_sc;
      }
      if (!v_half) {
        const bool bad = __any_sync(0xffffffffu, in_range && !ok);
        if (lane == 0) {
          sBad[slot * kMetaWarps + warp] = bad;
          if (bad) atomicOr(p.errors, uint32_t(kDecodeErrBlockId));
        }
      }
      return;
    }
    int64_t ok_k = -1, ok_v = -1, ok_ks = -1, ok_vs = -1;
    if (in_range && ok) {
      const int in_page = tok - page_index(tok) * p.page_size;
      if constexpr (kFastMeta) {
        // page and in_page are >= 0 here: zero-extended, the same bits as the signed products.
        const uint64_t pg = uint32_t(page), ip = uint32_t(in_page);
        auto off = [&](int64_t page_stride, int64_t slot_stride) {
          return int64_t(pg * uint64_t(page_stride) + ip * uint64_t(slot_stride));
        };
        ok_k = off(p.k_page_stride, p.k_slot_stride);
        ok_v = off(p.v_page_stride, p.v_slot_stride);
        ok_ks = off(p.ks_page_stride, p.ks_slot_stride);
        ok_vs = off(p.vs_page_stride, p.vs_slot_stride);
      } else {
        ok_k = int64_t(page) * p.k_page_stride + int64_t(in_page) * p.k_slot_stride;
        ok_v = int64_t(page) * p.v_page_stride + int64_t(in_page) * p.v_slot_stride;
        if constexpr (kQuant != 0) {
          ok_ks = int64_t(page) * p.ks_page_stride + int64_t(in_page) * p.ks_slot_stride;
          ok_vs = int64_t(page) * p.vs_page_stride + int64_t(in_page) * p.vs_slot_stride;
        }
      }
    }
    sOffK[slot * kBlockN + tid] = ok_k;
    sOffV[slot * kBlockN + tid] = ok_v;
    if constexpr (kQuant != 0) {
      sOffKs[slot * kBlockN + tid] = ok_ks;
      sOffVs[slot * kBlockN + tid] = ok_vs;
    }
    const bool bad = __any_sync(0xffffffffu, in_range && !ok);
    if (lane == 0) {
      sBad[slot * kMetaWarps + warp] = bad;
      if (bad) atomicOr(p.errors, uint32_t(kDecodeErrBlockId));
    }
  };

  // --- K/V tile loads: thread -> (row, 16-byte chunk), rows at a fixed step ---
  constexpr int kChunksPerRow = kD * int(sizeof(TC)) / 16;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  constexpr int kPasses = kBlockN / kRowsPerPass;
  static_assert(kThreads % kChunksPerRow == 0 && kBlockN % kRowsPerPass == 0, "even tile split");
  const int ld_row = tid / kChunksPerRow;
  const int ld_col = (tid % kChunksPerRow) * (16 / int(sizeof(TC)));
  // (Quantized caches: hinted copies at D 128 on sm_90 only (FLASHKIT_DECODE_QUANT_HINT). At
  // D 64 and 256, and in the sm_80 code of the int8 D 128 kernels, ptxas (CUDA 13.0) gives the
  // hinted LDGSTS of the 8-bit kernels an odd uniform register as its 64-bit cache-policy
  // descriptor (desc[UR1]); on Hopper such a kernel faults with an illegal instruction.
  // scripts/check_ldgsts_desc.sh (a CTest) scans the built library for that form. decode.md v11.)
  constexpr bool kEvictFirst = kKvEvictFirst && (kQuant == 0 || (kQuantHintArch && FLASHKIT_DECODE_QUANT_HINT != 0 && kD == 128));
  const uint64_t kv_policy = kEvictFirst ? prims::l2_evict_first_policy() : 0;
  // Ring entries, 32-bit (kOff32) or 64-bit: K (v = false) or V row `idx`'s entry, the scale entry of token mtid (K or V
  // by v_half), whether an entry holds a valid token, and the thread's 16 bytes of a row (ld_col) from its entry.
  auto kv_entry = [&](bool v, int idx) {
    if constexpr (kOff32) {
      return (v ? sOffV32 : sOffK32)[idx];
    } else {
      return (v ? sOffV : sOffK)[idx];
    }
  };
  [[maybe_unused]] auto scale_entry = [&](int idx) {
    if constexpr (kOff32) {
      return (v_half ? sOffVs32 : sOffKs32)[idx];
    } else {
      return (v_half ? sOffVs : sOffKs)[idx];
    }
  };
  auto entry_ok = [](auto e) -> bool {
    if constexpr (kOff32) {
      return e != decode_math::kOff32None;
    } else {
      return e >= 0;
    }
  };
  auto row_at = [&](const TC* base, auto e) -> const TC* {
    if constexpr (kOff32) {
      return prims::add_units<16>(base + ld_col, e);
    } else {
      return base + e + ld_col;
    }
  };
  auto load_tile = [&](int tile) {
    if (tile < n_tiles) {
      const int stage = tile % kStages;
      const int slot = tile % kOffSlots;
      TC* dk = sK + stage * KVTile::kElems;
      TC* dv = sV + stage * KVTile::kElems;
      if constexpr (kFastCopy) {
        // Every row inside the item and no bad page in the tile (the offsets were written with the bad flags): the
        // copies need no zero fill.
        bool bad_tile = false;
#pragma unroll
        for (int w = 0; w < kMetaWarps; ++w) bad_tile |= sBad[slot * kMetaWarps + w] != 0;
        if (t_begin + (tile + 1) * kBlockN <= t_end && !bad_tile) {
          if constexpr (kSplitMeta) {  // thread tid: K scale of token tid (warps 0-1) or V scale of tid - 64
            prims::cp_async_4_always(sScale + stage * 2 * kBlockN + tid,
                                     (v_half ? vs_base : ks_base) + scale_entry(slot * kBlockN + mtid));
          } else if (tid < kBlockN) {
            float* sc = sScale + stage * 2 * kBlockN;
            const float* src_ks = ks_base + sOffKs[slot * kBlockN + tid];
            const float* src_vs = vs_base + sOffVs[slot * kBlockN + tid];
            prims::cp_async_4_always(sc + tid, src_ks);
            prims::cp_async_4_always(sc + kBlockN + tid, src_vs);
          }
          // All sources first, then the copies back to back (ptxas pads each group of LDGSTS, not each one).
          const TC* src_k[kPasses];
          const TC* src_v[kPasses];
#pragma unroll
          for (int i = 0; i < kPasses; ++i) {
            const int r = ld_row + i * kRowsPerPass;
            src_k[i] = row_at(k_base, kv_entry(false, slot * kBlockN + r));
            src_v[i] = row_at(v_base, kv_entry(true, slot * kBlockN + r));
          }
#pragma unroll
          for (int i = 0; i < kPasses; ++i) {
            const int r = ld_row + i * kRowsPerPass;
            prims::cp_async_16_stream_always<kKvPrefetch256, kEvictFirst>(dk + KVTile::offset(r, ld_col), src_k[i],
                                                                           kv_policy);
            prims::cp_async_16_stream_always<kKvPrefetch256, kEvictFirst>(dv + KVTile::offset(r, ld_col), src_v[i],
                                                                           kv_policy);
          }
          prims::cp_async_commit();
          return;
        }
      }
      if constexpr (kSplitMeta) {  // as the full-tile path, zero-filled where the slot is not valid
        const auto os = scale_entry(slot * kBlockN + mtid);
        const float* sbase = v_half ? vs_base : ks_base;
        prims::cp_async_4<FLASHKIT_DECODE_IGNORE_SRC != 0>(sScale + stage * 2 * kBlockN + tid,
                                                           entry_ok(os) ? sbase + os : sbase, entry_ok(os));
      } else if constexpr (kQuant != 0) {
        if (tid < kBlockN) {  // the stage's per-token scales (0 where the slot is not valid)
          const int64_t oks = sOffKs[slot * kBlockN + tid];
          const int64_t ovs = sOffVs[slot * kBlockN + tid];
          float* sc = sScale + stage * 2 * kBlockN;
          prims::cp_async_4<FLASHKIT_DECODE_IGNORE_SRC != 0>(sc + tid, oks >= 0 ? ks_base + oks : ks_base, oks >= 0);
          prims::cp_async_4<FLASHKIT_DECODE_IGNORE_SRC != 0>(sc + kBlockN + tid, ovs >= 0 ? vs_base + ovs : vs_base,
                                                             ovs >= 0);
        }
      }
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int r = ld_row + i * kRowsPerPass;
        // (With ignore-src an ignored source is never read: the 8-bit narrow form needs no select. The 16-bit narrow
        // kernels keep it: without, ptxas (CUDA 13.0) gave 16 of their hinted copies an odd uniform descriptor
        // register, desc[UR1], which faults on Hopper with an illegal instruction; see the note on kQuantHintArch.)
        constexpr bool kNoSelect =
            Tr::kNarrow && kQuant != 0 && FLASHKIT_DECODE_IGNORE_SRC != 0 && FLASHKIT_DECODE_Q_NOSELECT != 0;
        if constexpr (kSplitMeta) {
          const auto ek = kv_entry(false, slot * kBlockN + r), ev = kv_entry(true, slot * kBlockN + r);
          const bool k_ok = entry_ok(ek), v_ok = entry_ok(ev);
          prims::cp_async_16_stream<kKvPrefetch256, kEvictFirst, FLASHKIT_DECODE_IGNORE_SRC != 0>(
              dk + KVTile::offset(r, ld_col), (kNoSelect || k_ok) ? row_at(k_base, ek) : k_base, k_ok, kv_policy);
          prims::cp_async_16_stream<kKvPrefetch256, kEvictFirst, FLASHKIT_DECODE_IGNORE_SRC != 0>(
              dv + KVTile::offset(r, ld_col), (kNoSelect || v_ok) ? row_at(v_base, ev) : v_base, v_ok, kv_policy);
          continue;
        }
        const int64_t ok = sOffK[slot * kBlockN + r];
        const int64_t ov = sOffV[slot * kBlockN + r];
        prims::cp_async_16_stream<kKvPrefetch256, kEvictFirst, FLASHKIT_DECODE_IGNORE_SRC != 0>(
            dk + KVTile::offset(r, ld_col), (kNoSelect || ok >= 0) ? k_base + ok + ld_col : k_base, ok >= 0, kv_policy);
        prims::cp_async_16_stream<kKvPrefetch256, kEvictFirst, FLASHKIT_DECODE_IGNORE_SRC != 0>(
            dv + KVTile::offset(r, ld_col), (kNoSelect || ov >= 0) ? v_base + ov + ld_col : v_base, ov >= 0, kv_policy);
      }
    }
    prims::cp_async_commit();  // always: keeps the group count per iteration uniform
  };

  // --- prologue: Q rows, offsets of tiles 0..S-1, loads of tiles 0..S-2 ---
  {
    constexpr int kQChunksPerRow = kD * int(sizeof(T)) / 16;
    constexpr int kQChunks = kRows * kQChunksPerRow;
    for (int c = tid; c < kQChunks; c += kThreads) {
      const int r = c / kQChunksPerRow;
      const int col = (c % kQChunksPerRow) * (16 / int(sizeof(T)));
      const int R = row0 + r;
      const bool valid = r < rows_valid;
      const T* src = static_cast<const T*>(p.q);
      if (valid) {
        const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
        src += int64_t(b) * p.q_batch_stride + int64_t(t) * p.q_tok_stride +
               int64_t(kv_head * p.ratio + hg) * p.q_head_stride + col;
      }
      prims::cp_async_16(sQ + QTile::offset(r, col), src, valid);
    }
  }
  int next_page = -1;
  if (kSplitMeta || tid < kBlockN) {
    int pages[kStages];
#pragma unroll
    for (int j = 0; j < kStages; ++j) pages[j] = page_of(j);
    next_page = page_of(kStages);
#pragma unroll
    for (int j = 0; j < kStages; ++j) write_offsets(j, pages[j]);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) load_tile(j);  // Q rides in tile 0's group

  if constexpr (kQuant != 0 || Tr::kNarrow) {
    // Q landed before it is read outside the tile loop: the 8-bit kernels' permute below, the narrow form's
    // fragments (registers for the whole item).
    prims::cp_async_wait<kStages - 2>();  // tile 0's group, with Q
    __syncthreads();
  }
  if constexpr (kQuant != 0) {
    // Q to fp16, each 16-column k-step permuted so that a lane's K fragment is one 32-bit
    // word of its key row: fragment k positions 2tq, 2tq+1 hold dims 4tq, 4tq+1 and
    // 2tq+8, 2tq+9 hold dims 4tq+2, 4tq+3 (S = Q K^T is unchanged by a common permutation
    // of the summed dimension). In 32-bit pairs: words 0,2,4,6 then 1,3,5,7 of the step.
    for (int c = tid; c < kRows * (kD / 16); c += kThreads) {
      const int r = c / (kD / 16), k0 = (c % (kD / 16)) * 16;
      uint4* q16 = reinterpret_cast<uint4*>(sQ + QTile::offset(r, k0));
      const uint4 a = q16[0], bq = q16[1];
      uint32_t w[8] = {a.x, a.y, a.z, a.w, bq.x, bq.y, bq.z, bq.w};
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {  // clamped to fp16's range: never inf (NaN scores)
          const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
          w[i] = prims::pack2<__half>(fminf(fmaxf(f.x, -65504.f), 65504.f), fminf(fmaxf(f.y, -65504.f), 65504.f));
        }
      }
      q16[0] = make_uint4(w[0], w[2], w[4], w[6]);
      q16[1] = make_uint4(w[1], w[3], w[5], w[7]);
    }
    __syncthreads();
  }

  // Per-row visibility limit (causal: query token t sits at position len - s_q + t).
  const int g = lane / 4, tq = lane % 4;
  int row_limit[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int R = row0 + mt * 16 + g + 8 * h;
      row_limit[mt][h] = p.causal ? len - p.s_q + R % p.s_q : len - 1;
    }
  }
  // Tiles whose keys all lie below this position need no mask (besides bad pages).
  const int mask_from = p.causal ? min(t_end, len - p.s_q + 1) : t_end;

  float o[kMTiles][Tr::kDTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int dt = 0; dt < Tr::kDTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
  attn::OnlineSoftmax<kMTiles, true> softmax;
  softmax.init();
  [[maybe_unused]] float v_ref = 0.f;  // quantized caches: the warp's running maximum V scale (O's unit)
  const float scale_log2 = p.softmax_scale_log2;

  // ldmatrix lane addresses (see prims/ldmatrix.cuh and the sm80 forward kernel):
  //   A (Q, 16x16): row lane%16, column 8*(lane/16)
  //   B (K, two n8 key tiles x k16): key lane%8 + 8*(lane/16), column 8*((lane/8)%2)
  //   B (V^T via .trans, k16 keys x two n8 column tiles): key lane%8 + 8*((lane/8)%2), column 8*(lane/16)
  constexpr int kElt = int(sizeof(T));
  const uint32_t q_addr = prims::smem_addr(sQ + QTile::offset(lane % 16, (lane / 16) * 8));
  const uint32_t k_addr0 = prims::smem_addr(
      sK + KVTile::offset(warp * kWarpKeys + (lane % 8) + (lane / 16) * 8, ((lane / 8) % 2) * 8));
  const uint32_t v_addr0 = prims::smem_addr(
      sV + KVTile::offset(warp * kWarpKeys + (lane % 8) + ((lane / 8) % 2) * 8, (lane / 16) * 8));

  // Narrow form (Tr::kNarrow: items of at most 8 rows; decode.md "The narrow form of the 8-bit kernels"): the keys
  // are the MMAs' M dimension and query rows 0-7 their N. S^T (16 keys x 8 rows per warp) =
  // K Q^T takes K as the A operand (lane (g, tq): keys g and g + 8, one 32-bit word each per k-step, the same
  // words as the 16-row form's B operand) and Q^T as B, held in registers for the whole item (ldmatrix of the
  // permuted fp16 Q: lane (g, tq) gets row g, k positions 2tq, 2tq+1 and 2tq+8, 2tq+9). O^T (dims x 8 rows) =
  // V^T P^T takes V^T as A (from the same byte permutes as the 16-row form's V operand, v_key_pairs) and P^T as
  // B, the S^T fragments transposed by movmatrix. A lane holds rows 2tq and 2tq + 1 (e = 0, 1) of keys g and
  // g + 8: st[e] (key g), st[e + 2] (key g + 8); row reductions run over g (shuffles 4, 8, 16).
  // ot[2 grp + m][c]: row 2tq + (c & 1), dim 32 grp + 4g + 2m + (c >> 1).
  // 16-bit caches (FLASHKIT_DECODE_NARROW16; decode.md "The narrow form for the 16-bit caches"): no byte permutes.
  // The 16-row form's ldmatrix.x4 of the warp's 16 keys (matrices keys 0-7 / k 0-7, keys 0-7 / k 8-15, keys 8-15 /
  // k 0-7, keys 8-15 / k 8-15) is K's A fragment with its middle registers swapped, and its ldmatrix.x4.trans of V
  // likewise V^T's (keys 0-7 / dims 0-7, keys 8-15 / dims 0-7, keys 0-7 / dims 8-15, keys 8-15 / dims 8-15); Q
  // stays in T and the MMAs run in T. ot[m][c]: row 2tq + (c & 1), dim 16m + g + 8 (c >> 1).
  // Whether the tile starting at key0 (offset slot `slot`) has masked keys: past the causal limit of some row or
  // the item's end, or on a bad page.
  auto needs_mask = [&](int key0, int slot) {
    bool bad_tile = false;
#pragma unroll
    for (int w = 0; w < kMetaWarps; ++w) bad_tile |= sBad[slot * kMetaWarps + w] != 0;
    return key0 + kBlockN > mask_from || bad_tile;
  };
  constexpr bool kNarrow = Tr::kNarrow;
  [[maybe_unused]] uint32_t nqb[kNarrow ? Tr::kKSteps : 1][2];
  [[maybe_unused]] float ot[kNarrow ? kD / 16 : 1][4];
  [[maybe_unused]] float nmax[2] = {-INFINITY, -INFINITY}, nsum[2] = {0.f, 0.f};
  [[maybe_unused]] int nlimit[2] = {0, 0};
  constexpr bool kBias = kNarrow && kQuant == 1 && FLASHKIT_DECODE_INT8_BIAS != 0;
  [[maybe_unused]] constexpr uint32_t kOnes[4] = {0x3C003C00u, 0x3C003C00u, 0x3C003C00u, 0x3C003C00u};  // fp16 1.0
  [[maybe_unused]] float kbias[2] = {0.f, 0.f};        // -1152 * row sum of q, rows 2tq + e
  [[maybe_unused]] float obias[4] = {0.f, 0.f, 0.f, 0.f};  // sum of P^T per row (c0: row 2tq, c1: row 2tq + 1)
  if constexpr (kNarrow) {
    const uint32_t qn_addr = prims::smem_addr(sQ + QTile::offset(lane % 8, (lane / 8) * 8));
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ks += 2) {
      uint32_t r4[4];
      prims::ldmatrix_x4(r4, qn_addr + QTile::offset(0, ks * 16) * kElt);
      nqb[ks][0] = r4[0];
      nqb[ks][1] = r4[1];
      nqb[ks + 1][0] = r4[2];
      nqb[ks + 1][1] = r4[3];
    }
#pragma unroll
    for (int m = 0; m < kD / 16; ++m)
#pragma unroll
      for (int c = 0; c < 4; ++c) ot[m][c] = 0.f;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int R = row0 + 2 * tq + e;
      nlimit[e] = p.causal ? len - p.s_q + R % p.s_q : len - 1;
    }
    if constexpr (kBias) {  // row sums of the fp16 q the MMAs use: ones (16 x 16) times Q^T
      float qs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int ks = 0; ks < Tr::kKSteps; ++ks) prims::mma_m16n8k16<__half>(qs, kOnes, nqb[ks][0], nqb[ks][1]);
      kbias[0] = -1152.f * qs[0];
      kbias[1] = -1152.f * qs[1];
    }
  }

  for (int tile = 0; tile < n_tiles; ++tile) {
    prims::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile visible; all warps done with tile-1 (its stage and offset slot)
#ifdef FLASHKIT_DECODE_TRACE
    if (tile == 0) FLASHKIT_DTRACE(2, prims::globaltimer());
#endif
    load_tile(tile + kStages - 1);
    if (kSplitMeta || tid < kBlockN) {
      write_offsets(tile + kStages, next_page);
      next_page = page_of(tile + kStages + 1);
    }

    const int stage = tile % kStages;
    const int slot = tile % kOffSlots;
    const uint32_t k_addr = k_addr0 + stage * KVTile::kBytes;
    const uint32_t v_addr = v_addr0 + stage * KVTile::kBytes;

    if constexpr (kNarrow) {
      const int kk0 = warp * kWarpKeys + g;  // the lane's keys: kk0 and kk0 + 8
      const uint32_t kn_addr =
          prims::smem_addr(sK + stage * KVTile::kElems + KVTile::offset(kk0, 4 * tq));
      // FLASHKIT_DECODE_QK_CHAINS independent accumulators over the k-steps (summed after): shorter dependent
      // HMMA chain per tile (tuning switch, decode.md "Two QK chains").
      constexpr int kChains = FLASHKIT_DECODE_QK_CHAINS;
      float st_c[kChains][4];
#pragma unroll
      for (int c = 0; c < kChains; ++c) st_c[c][0] = st_c[c][1] = st_c[c][2] = st_c[c][3] = 0.f;
      if constexpr (kBias) st_c[0][0] = st_c[0][2] = kbias[0], st_c[0][1] = st_c[0][3] = kbias[1];
      if constexpr (kQuant != 0) {
#pragma unroll
        for (int ks = 0; ks < Tr::kKSteps; ++ks) {
          const uint32_t w0 = prims::lds_u32(KVTile::step_addr(kn_addr, 0, ks * 16));
          const uint32_t w1 = prims::lds_u32(KVTile::step_addr(kn_addr, 8, ks * 16));
          uint32_t a[4];
          bytes4_to_f16x2<kQuant, kBias>(w0, a[0], a[2]);
          bytes4_to_f16x2<kQuant, kBias>(w1, a[1], a[3]);
          prims::mma_m16n8k16<__half>(st_c[ks % kChains], a, nqb[ks][0], nqb[ks][1]);
        }
      } else {
#pragma unroll
        for (int ks = 0; ks < Tr::kKSteps; ++ks) {
          uint32_t kb[4];
          prims::ldmatrix_x4(kb, KVTile::step_addr(k_addr, 0, ks * 16));
          const uint32_t a[4] = {kb[0], kb[2], kb[1], kb[3]};
          prims::mma_m16n8k16<T>(st_c[ks % kChains], a, nqb[ks][0], nqb[ks][1]);
        }
      }
      float st[4] = {st_c[0][0], st_c[0][1], st_c[0][2], st_c[0][3]};
#pragma unroll
      for (int c = 1; c < kChains; ++c) st[0] += st_c[c][0], st[1] += st_c[c][1], st[2] += st_c[c][2], st[3] += st_c[c][3];
      [[maybe_unused]] const float* vsc = sScale + stage * 2 * kBlockN + kBlockN;
      if constexpr (kQuant != 0) {
        const float* ksc = sScale + stage * 2 * kBlockN;
        const float f0 = ksc[kk0], f1 = ksc[kk0 + 8];
        st[0] *= f0, st[1] *= f0, st[2] *= f1, st[3] *= f1;
      }
      const int key0 = t_begin + tile * kBlockN;
      if (needs_mask(key0, slot)) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int kt = kk0 + 8 * h;
          const bool usable = entry_ok(kv_entry(false, slot * kBlockN + kt));
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (!usable || key0 + kt > nlimit[e]) st[2 * h + e] = -INFINITY;
          }
        }
      }
      // Online softmax of rows 2tq + e (the same rule as attn::OnlineSoftmax, conditional rescale included).
      float corr[2];
      bool moved = false;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float mx = fmaxf(st[e], st[e + 2]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float old_max = nmax[e];
        const bool move = (mx - old_max) * scale_log2 > attn::OnlineSoftmax<1>::kRescaleThreshold;
        const float new_max = move ? mx : old_max;
        corr[e] = move ? prims::exp2_approx((old_max - new_max) * scale_log2) : 1.f;
        moved |= move;
        nmax[e] = new_max;
        const float max_scaled = new_max == -INFINITY ? 0.f : new_max * scale_log2;
        st[e] = prims::exp2_approx(fmaf(st[e], scale_log2, -max_scaled));
        st[e + 2] = prims::exp2_approx(fmaf(st[e + 2], scale_log2, -max_scaled));
        nsum[e] = fmaf(nsum[e], corr[e], st[e] + st[e + 2]);
      }
      // V scales relative to the warp's running maximum (as the 16-row form), folded into O's rescale.
      bool v_grows = false;
      [[maybe_unused]] float vm = 0.f;
      if constexpr (kQuant != 0) {
        vm = vsc[warp * kWarpKeys + lane % kWarpKeys];
#pragma unroll
        for (int off = kWarpKeys / 2; off > 0; off /= 2) vm = fmaxf(vm, __shfl_xor_sync(0xffffffffu, vm, off));
        v_grows = vm > v_ref;
      }
      if (__any_sync(0xffffffffu, moved) || v_grows) {
        const float fv = v_grows ? v_ref / vm : 1.f;  // 0 while v_ref is 0 (O is 0 then)
        const float c0 = corr[0] * fv, c1 = corr[1] * fv;
#pragma unroll
        for (int m = 0; m < kD / 16; ++m) {
          ot[m][0] *= c0, ot[m][1] *= c1, ot[m][2] *= c0, ot[m][3] *= c1;
        }
        if constexpr (kBias) obias[0] *= c0, obias[1] *= c1;
      }
      if constexpr (kQuant == 0) {
        // P^T operand (keys 2tq, 2tq + 1 (b0) and 2tq + 8, 2tq + 9 (b1) of row g) in T; V^T by ldmatrix.trans.
        const uint32_t pb0 = prims::movmatrix_trans(prims::pack2<T>(st[0], st[1]));
        const uint32_t pb1 = prims::movmatrix_trans(prims::pack2<T>(st[2], st[3]));
#pragma unroll
        for (int m = 0; m < kD / 16; ++m) {
          uint32_t vb[4];
          prims::ldmatrix_x4_trans(vb, KVTile::step_addr(v_addr, 0, m * 16));
          const uint32_t a[4] = {vb[0], vb[2], vb[1], vb[3]};
          prims::mma_m16n8k16<T>(ot[m], a, pb0, pb1);
        }
      } else {
        if (v_grows) v_ref = vm;
        const float inv_ref = v_ref > 1e-30f ? 1.f / v_ref : 0.f;
        const float f0 = vsc[kk0] * inv_ref, f1 = vsc[kk0 + 8] * inv_ref;
        // P^T operand: keys 2tq, 2tq + 1 (b0) and 2tq + 8, 2tq + 9 (b1) of row g.
        const uint32_t pb0 = prims::movmatrix_trans(prims::pack2<__half>(st[0] * f0, st[1] * f0));
        const uint32_t pb1 = prims::movmatrix_trans(prims::pack2<__half>(st[2] * f1, st[3] * f1));
        if constexpr (kBias) prims::mma_m16n8k16<__half>(obias, kOnes, pb0, pb1);  // sum of the fp16 P^T per row
        const TC* vst = sV + stage * KVTile::kElems;
        const int vrow = warp * kWarpKeys + 2 * tq;
        const uint32_t v_even = prims::smem_addr(vst + KVTile::offset(vrow, 4 * g));
        const uint32_t v_odd = prims::smem_addr(vst + KVTile::offset(vrow + 1, 4 * g));
#pragma unroll
        for (int grp = 0; grp < kD / 32; ++grp) {
          uint32_t b0[4], b1[4];  // dim 32 grp + 4g + d: keys 2tq, 2tq + 1 (b0[d]) and 2tq + 8, 2tq + 9 (b1[d])
          v_key_pairs<KVTile, kQuant, kBias>(v_even, v_odd, grp, b0, b1);
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            const uint32_t a[4] = {b0[2 * m], b0[2 * m + 1], b1[2 * m], b1[2 * m + 1]};
            prims::mma_m16n8k16<__half>(ot[2 * grp + m], a, pb0, pb1);
          }
        }
      }
    } else {  // the 16-row form

    // S = Q K^T for this warp's kWarpKeys keys.
    float s[kMTiles][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
    // Multiplies each key's column of `x` (the warp's C fragments) by its per-key factor.
    auto scale_keys = [&](float(&x)[kMTiles][kNT][4], const float* factor) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float f = factor[warp * kWarpKeys + nt * 8 + 2 * tq + e];
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            x[mt][nt][e] *= f;
            x[mt][nt][e + 2] *= f;
          }
        }
      }
    };
    // Quantized: the K operand straight from the 8-bit tile. Lane (g, tq) needs key g of the
    // n8 tile, dims 4tq .. 4tq+3 of the k16 step (Q's k-steps were permuted to match): one word.
    // Lane (g, tq)'s word of key row warp * kWarpKeys + g, k-step 0 (other rows and steps by
    // KVTile::step_addr: row steps of 8, chunk steps that share no bit with chunk 0).
    [[maybe_unused]] const uint32_t kq_addr =
        prims::smem_addr(sK + stage * KVTile::kElems + KVTile::offset(warp * kWarpKeys + g, 4 * tq));
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ++ks) {
      uint32_t qa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        prims::ldmatrix_x4(qa[mt], q_addr + QTile::offset(mt * 16, ks * 16) * kElt);
      }
      if constexpr (kQuant == 0) {
#pragma unroll
        for (int kp = 0; kp < kNT / 2; ++kp) {
          uint32_t kb[4];
          prims::ldmatrix_x4(kb, KVTile::step_addr(k_addr, kp * 16, ks * 16));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            prims::mma_m16n8k16<T>(s[mt][2 * kp], qa[mt], kb[0], kb[1]);
            prims::mma_m16n8k16<T>(s[mt][2 * kp + 1], qa[mt], kb[2], kb[3]);
          }
        }
      } else {
        // One 32-bit word per key row and k-step: dims 4tq..4tq+3 (Q was permuted to match).
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const uint32_t w = prims::lds_u32(KVTile::step_addr(kq_addr, nt * 8, ks * 16));
          uint32_t b0, b1;
          bytes4_to_f16x2<kQuant>(w, b0, b1);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) prims::mma_m16n8k16<__half>(s[mt][nt], qa[mt], b0, b1);
        }
      }
    }
    // Scores of dequantized keys: times each key's K scale.
    if constexpr (kQuant != 0) scale_keys(s, sScale + stage * 2 * kBlockN);

    const int key0 = t_begin + tile * kBlockN;
    if (needs_mask(key0, slot)) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kt = warp * kWarpKeys + nt * 8 + 2 * tq + (e & 1);
          const int kp = key0 + kt;
          const bool usable = sOffK[slot * kBlockN + kt] >= 0;  // in range and a valid page
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            if (!usable || kp > row_limit[mt][e >> 1]) s[mt][nt][e] = -INFINITY;
          }
        }
      }
    }

    softmax.update(s, o, scale_log2);

    // P times each key's V scale (after the softmax: its sums use the unscaled P), relative
    // to the warp's running maximum V scale v_ref, so that the fp16 P stays within the
    // softmax's bound (P <= 2^8 with its conditional rescale) whatever the scales' magnitude; O is kept in units of v_ref (rescaled when it grows,
    // like the softmax's running max) and multiplied by it at the merge.
    if constexpr (kQuant != 0) {
      const float* vsc = sScale + stage * 2 * kBlockN + kBlockN;
      float vm = vsc[warp * kWarpKeys + lane % kWarpKeys];
#pragma unroll
      for (int off = kWarpKeys / 2; off > 0; off /= 2) vm = fmaxf(vm, __shfl_xor_sync(0xffffffffu, vm, off));
      if (vm > v_ref) {
        const float f = v_ref / vm;  // 0 while v_ref is 0 (o is 0 then)
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int dt = 0; dt < Tr::kDTiles; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][dt][e] *= f;
        v_ref = vm;
      }
      const float inv_ref = v_ref > 1e-30f ? 1.f / v_ref : 0.f;  // (0 and denormal-tiny scales: P' = 0)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float f = vsc[warp * kWarpKeys + nt * 8 + 2 * tq + e] * inv_ref;
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            s[mt][nt][e] *= f;
            s[mt][nt][e + 2] *= f;
          }
        }
      }
    }
    // O += P V: the C fragments of two n8 key tiles are the A fragment of one k16 step.
    using TP = std::conditional_t<kQuant == 0, T, __half>;  // P and V's MMA type
#pragma unroll
    for (int ps = 0; ps < Tr::kPSteps; ++ps) {
      uint32_t pa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        pa[mt][0] = prims::pack2<TP>(s[mt][2 * ps][0], s[mt][2 * ps][1]);
        pa[mt][1] = prims::pack2<TP>(s[mt][2 * ps][2], s[mt][2 * ps][3]);
        pa[mt][2] = prims::pack2<TP>(s[mt][2 * ps + 1][0], s[mt][2 * ps + 1][1]);
        pa[mt][3] = prims::pack2<TP>(s[mt][2 * ps + 1][2], s[mt][2 * ps + 1][3]);
      }
      if constexpr (kQuant == 0) {
#pragma unroll
        for (int dp = 0; dp < Tr::kDTiles / 2; ++dp) {
          uint32_t vb[4];
          prims::ldmatrix_x4_trans(vb, KVTile::step_addr(v_addr, ps * 16, dp * 16));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            prims::mma_m16n8k16<T>(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
            prims::mma_m16n8k16<T>(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
          }
        }
      } else {
        // B fragment of V (k16 keys x n8 dims): lane (g, tq) holds one dim of keys 2tq, 2tq+1
        // (b0) and 2tq+8, 2tq+9 (b1). With O's columns permuted inside each group of 32
        // dims (n8 tile 4 grp + d, column j <-> dim 32 grp + 4 j + d), the four tiles of a
        // group take their bytes from one 32-bit word per key row (dims 32 grp + 4g ..+3):
        // 4 loads, 4 byte permutes and 8 conversions for 4 tiles. The merge below undoes
        // the permutation (a thread ends up with dims 32 grp + 8 tq .. + 7).
        // Lane (g, tq)'s words of key rows 2tq (even) and 2tq + 1 (odd) of the step, dims
        // 4g..4g+3 of group 0; rows +8 and groups (32 dims: 2 chunks) by step_addr (the
        // lane's chunk g / 4 is 0 or 1, the groups' chunk steps are even).
        const TC* vst = sV + stage * KVTile::kElems;
        const int vrow = warp * kWarpKeys + ps * 16 + 2 * tq;
        const uint32_t v_even = prims::smem_addr(vst + KVTile::offset(vrow, 4 * g));
        const uint32_t v_odd = prims::smem_addr(vst + KVTile::offset(vrow + 1, 4 * g));
#pragma unroll
        for (int grp = 0; grp < kD / 32; ++grp) {
          uint32_t b0[4], b1[4];
          v_key_pairs<KVTile, kQuant>(v_even, v_odd, grp, b0, b1);
#pragma unroll
          for (int d = 0; d < 4; ++d) {
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) prims::mma_m16n8k16<__half>(o[mt][4 * grp + d], pa[mt], b0[d], b1[d]);
          }
        }
      }
    }
    }  // the 16-row form
  }

  // --- merge the 4 warps' partial softmax states (fixed order: deterministic) ---
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Self-planned CTAs wait for the plan here, before their first global write (and before the
  // trigger, which the combine's reads before its own wait rely on).
  if (self_planned) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (self_planned || (FLASHKIT_DECODE_EARLY_TRIGGER & 2) == 0) asm volatile("griddepcontrol.launch_dependents;");  // the combine may get resident
#else
  (void)self_planned;
#endif
  prims::cp_async_wait<0>();
  __syncthreads();  // every load landed and every warp is done: the rings are free
#ifdef FLASHKIT_DECODE_TRACE
  {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    FLASHKIT_DTRACE(3, prims::globaltimer());
    FLASHKIT_DTRACE(6, smid | (static_cast<unsigned long long>(n_tiles) << 16) |
                           (static_cast<unsigned long long>(item.merge_n) << 40));
  }
#endif
  float* sMax = reinterpret_cast<float*>(smem + Tr::kSmemStats);
  float* sSum = sMax + Tr::kNWarps * kRows;
  float* sO = reinterpret_cast<float*>(smem + Tr::kSmemK);
  if constexpr (kNarrow) {
    // Rows 0-7 (rows 8-15 of the item tile are never valid here: rows_valid <= 8).
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float sum = nsum[e];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      if (g == 0) {
        sMax[warp * kRows + 2 * tq + e] = nmax[e];
        sSum[warp * kRows + 2 * tq + e] = sum;
      }
    }
  } else {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = prims::quad_sum(softmax.row_sum[mt][h]);
      if (tq == 0) {
        const int r = mt * 16 + g + 8 * h;
        sMax[warp * kRows + r] = softmax.row_max[mt][h];
        sSum[warp * kRows + r] = sum;
      }
    }
  }
  }
  __syncthreads();
  // Row max over warps, in raw score units; -inf when no warp saw a key of the row.
  auto merged_max = [&](int r) {
    float m = sMax[r];
#pragma unroll
    for (int w = 1; w < Tr::kNWarps; ++w) m = fmaxf(m, sMax[w * kRows + r]);
    return m;
  };
  if constexpr (kNarrow) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int r = 2 * tq + e;
      const float m_all = merged_max(r);
      const float m_own = nmax[e];
      const float f = m_own == -INFINITY ? 0.f : prims::exp2_approx((m_own - m_all) * scale_log2);
      if constexpr (kQuant == 0) {  // ot[m]: dims 16m + g (c 0, 1) and 16m + g + 8 (c 2, 3)
        float* dst = sO + (warp * kRows + r) * Tr::kMergeStride + g;
#pragma unroll
        for (int m = 0; m < kD / 16; ++m) {
          dst[16 * m] = ot[m][e] * f;
          dst[16 * m + 8] = ot[m][e + 2] * f;
        }
      } else {
        const float fv = f * v_ref;
        float* dst = sO + (warp * kRows + r) * Tr::kMergeStride + 4 * g;
        const float ob = kBias ? 1152.f * obias[e] : 0.f;  // V's bias (x + 1152) times the row's sum of P
#pragma unroll
        for (int grp = 0; grp < kD / 32; ++grp) {
          *reinterpret_cast<float4*>(dst + grp * 32) =
              make_float4((ot[2 * grp][e] - ob) * fv, (ot[2 * grp][e + 2] - ob) * fv, (ot[2 * grp + 1][e] - ob) * fv,
                          (ot[2 * grp + 1][e + 2] - ob) * fv);
        }
      }
    }
  } else {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = mt * 16 + g + 8 * h;
      const float m_all = merged_max(r);
      const float m_own = softmax.row_max[mt][h];
      const float f = m_own == -INFINITY ? 0.f : prims::exp2_approx((m_own - m_all) * scale_log2);
      if constexpr (kQuant == 0) {
        float* dst = sO + (warp * kRows + r) * Tr::kMergeStride + 2 * tq;
#pragma unroll
        for (int dt = 0; dt < Tr::kDTiles; ++dt) {
          *reinterpret_cast<float2*>(dst + dt * 8) = make_float2(o[mt][dt][2 * h] * f, o[mt][dt][2 * h + 1] * f);
        }
      } else {  // permuted columns (see the P V step): o[4 grp + d][2h + e] is dim 32 grp + 8 tq + 4 e + d
        const float fv = f * v_ref;
        float* dst = sO + (warp * kRows + r) * Tr::kMergeStride + 8 * tq;
#pragma unroll
        for (int grp = 0; grp < kD / 32; ++grp) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            *reinterpret_cast<float4*>(dst + grp * 32 + 4 * e) =
                make_float4(o[mt][4 * grp][2 * h + e] * fv, o[mt][4 * grp + 1][2 * h + e] * fv,
                            o[mt][4 * grp + 2][2 * h + e] * fv, o[mt][4 * grp + 3][2 * h + e] * fv);
          }
        }
      }
    }
  }
  }
  __syncthreads();

  const bool split = item.partial >= 0;
  // Row sums rescaled to the merged max; 0 when the row saw no key.
  auto merged_sum = [&](int r, float m_all) {
    float l = 0.f;
#pragma unroll
    for (int w = 0; w < Tr::kNWarps; ++w) {
      const float mw = sMax[w * kRows + r];
      if (mw != -INFINITY) l += sSum[w * kRows + r] * prims::exp2_approx((mw - m_all) * scale_log2);
    }
    return l;
  };
  // Final output of row r (8 columns from col) and its LSE.
  auto store_out = [&](int r, int col, const float(&acc)[8]) {
    const int R = row0 + r;
    const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
    T* dst = static_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(t) * p.o_tok_stride +
             int64_t(kv_head * p.ratio + hg) * p.o_head_stride + col;
    uint4 packed;
    packed.x = prims::pack2<T>(acc[0], acc[1]);
    packed.y = prims::pack2<T>(acc[2], acc[3]);
    packed.z = prims::pack2<T>(acc[4], acc[5]);
    packed.w = prims::pack2<T>(acc[6], acc[7]);
    *reinterpret_cast<uint4*>(dst) = packed;
  };
  auto store_lse = [&](int r, float lse) {
    if (p.lse == nullptr) return;
    const int R = row0 + r;
    const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
    p.lse[(int64_t(b) * p.h_q + kv_head * p.ratio + hg) * p.s_q + t] = lse;
  };
  constexpr int kOutChunks = kRows * (kD / 8);  // 8 columns per chunk
  for (int c = tid; c < kOutChunks; c += kThreads) {
    const int r = c / (kD / 8);
    const int col = (c % (kD / 8)) * 8;
    if (r >= rows_valid) continue;
    const float m_all = merged_max(r);
    const float l = merged_sum(r, m_all);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
#pragma unroll
    for (int w = 0; w < Tr::kNWarps; ++w) {
      const float* src = sO + (w * kRows + r) * Tr::kMergeStride + col;
      const float4 a = *reinterpret_cast<const float4*>(src);
      const float4 bq = *reinterpret_cast<const float4*>(src + 4);
      acc[0] += a.x, acc[1] += a.y, acc[2] += a.z, acc[3] += a.w;
      acc[4] += bq.x, acc[5] += bq.y, acc[6] += bq.z, acc[7] += bq.w;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] *= inv;
    if (split) {
      float* dst = p.ws.part_o + (int64_t(item.partial) * p.rows + r) * p.head_dim_v + col;
      *reinterpret_cast<float4*>(dst) = make_float4(acc[0], acc[1], acc[2], acc[3]);
      *reinterpret_cast<float4*>(dst + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
      store_out(r, col, acc);
    }
  }
  if (tid < rows_valid) {
    const int r = tid;
    const float m_all = merged_max(r);
    const float l = merged_sum(r, m_all);
    const float lse = l > 0.f ? (m_all * scale_log2 + __log2f(l)) * 0.69314718055994531f : -INFINITY;
    if (split) {
      p.ws.part_lse[int64_t(item.partial) * p.rows + r] = lse;
    } else {
      store_lse(r, lse);
    }
  }
#ifdef FLASHKIT_DECODE_TRACE
  FLASHKIT_DTRACE(4, prims::globaltimer());
#endif
  if (!split || item.merge_n < 2) return;

  // --- fused merge: the split CTA of (b, hr) that finishes last merges the n partials ---
  // (threadfence pattern: every thread fences its partial writes, one atomic per CTA; the
  // last arrival resets the counter for the next run and fences before reading the others.)
  const int n = item.merge_n;
  const int first = item.partial / p.hr_count - item.split;  // partial = (first + split) * hr_count + hr
  const int rv = rows_valid;
  if (first < 0 || int64_t(first + n) * p.hr_count > p.max_partials || n * rv * kD > kFusedMergeFloats ||
      n * rv > kFusedMergeRows) {
    if (tid == 0) atomicOr(p.errors, uint32_t(kDecodeErrPlan));  // not a plan of this kernel
    return;
  }
  __threadfence();
  __syncthreads();  // (also: every thread is done with sO and the stats)
  int* s_last = reinterpret_cast<int*>(smem + Tr::kSmemStats);
  if (tid == 0) {
    int* counter = p.ws.counters + int64_t(b) * p.hr_count + item.hr;
    const int arrived = atomicAdd(counter, 1) + 1;
    if (arrived == n) atomicExch(counter, 0);
    *s_last = arrived == n;
  }
  __syncthreads();
  if (*s_last == 0) return;
  __threadfence();
  // Stage the n partials (rv rows, all kD columns) in the freed ring: one round trip.
  float* mO = reinterpret_cast<float*>(smem + Tr::kSmemK);  // [n][rv][kD]
  float* mL = mO + kFusedMergeFloats;                          // [n][rv]: LSEs, then weights
  float* mT = mL + kFusedMergeRows;                            // [rv]: total LSE per row
  auto slot_row = [&](int s, int r) { return (int64_t(first + s) * p.hr_count + item.hr) * p.rows + r; };
  constexpr int kC4 = kD / 4;
  for (int i = tid; i < n * rv * kC4; i += kThreads) {
    const int sr = i / kC4, c4 = i - (i / kC4) * kC4;
    const int s = sr / rv, r = sr - (sr / rv) * rv;
    prims::cp_async_16(mO + i * 4, p.ws.part_o + slot_row(s, r) * p.head_dim_v + c4 * 4, true);
  }
  prims::cp_async_commit();
  for (int i = tid; i < n * rv; i += kThreads) {
    const int s = i / rv, r = i - (i / rv) * rv;
    mL[i] = __ldcg(p.ws.part_lse + slot_row(s, r));  // L2: written by other CTAs of this grid
  }
  prims::cp_async_wait<0>();
  __syncthreads();
  if (tid < rv) {
    LseSum acc_lse;
    for (int s = 0; s < n; ++s) acc_lse.add(mL[s * rv + tid]);
    const float lse = acc_lse.total();
    mT[tid] = lse;
    store_lse(tid, lse);
  }
  __syncthreads();
  for (int i = tid; i < n * rv; i += kThreads) {
    const float lse = mT[i % rv];
    mL[i] = lse == -INFINITY ? 0.f : __expf(mL[i] - lse);
  }
  __syncthreads();
  for (int c = tid; c < rv * (kD / 8); c += kThreads) {
    const int r = c / (kD / 8);
    const int col = (c % (kD / 8)) * 8;
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    for (int s = 0; s < n; ++s) {  // split order: deterministic
      const float w = mL[s * rv + r];
      const float* src = mO + (s * rv + r) * kD + col;
      const float4 a = *reinterpret_cast<const float4*>(src);
      const float4 bq = *reinterpret_cast<const float4*>(src + 4);
      acc[0] += w * a.x, acc[1] += w * a.y, acc[2] += w * a.z, acc[3] += w * a.w;
      acc[4] += w * bq.x, acc[5] += w * bq.y, acc[6] += w * bq.z, acc[7] += w * bq.w;
    }
    store_out(r, col, acc);
  }
#ifdef FLASHKIT_DECODE_TRACE
  FLASHKIT_DTRACE(5, prims::globaltimer());
#endif
}

}  // namespace flashkit::decode
