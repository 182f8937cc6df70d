// Paged-decode combine: merges the fp32 partial (O, LSE) of the splits of one
// (sequence, head-row group) into the final output, in a fixed order (deterministic):
//   lse = log(sum_s exp(lse_s)),   O = sum_s exp(lse_s - lse) * O_s
// Rows that saw no key (every lse_s = -inf) get O = 0 and LSE = -inf.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode/lse_merge.cuh"
#include "kernels/decode/plan_math.h"
#include "kernels/decode_params.h"
#include "prims/cp_async.cuh"
#include "prims/globaltimer.cuh"
#include "prims/numeric.cuh"

namespace flashkit::decode {

constexpr int kCombineThreads = 128;
constexpr int kMaxRows = 32;
constexpr int kCombineCols = 16;      // output columns per work pair
constexpr int kStageFloats = 8192;    // 32 KB of partial O staged per batch of splits
constexpr int kLseFloats = 2048;      // 8 KB of partial LSEs staged per batch of splits
static_assert(kStageFloats / kCombineCols == decode_math::kCombineStageRows,
              "plan_math.h's split cap counts the combine's staging rounds");

// Persistent: the CTAs loop over the (combine entry, 16-column group) pairs. Latency, not
// bandwidth, is what a combine costs (the partials were just written and sit in L2), so it
// is counted in dependent L2 round trips. Only the rows_valid rows the split kernel wrote
// are staged (4 of the 16 MMA rows at GQA 4), and every copy is a cp.async: the compiler
// does not keep more than a few plain load->store pairs of a loop in flight (v9's loops were
// 4 to 16 round trips per batch), cp.async keeps them all. With n splits of R valid rows:
//   group 0: the LSEs of the first kLseFloats / R splits,
//   group 1: the partial O of the first kStageFloats / (16 R) splits (16 columns each),
// both issued before the first wait, so a combine of up to 512 / R splits (the usual case:
// 128 at GQA 4) is one round trip. Larger ones loop over batches.
// Sums: each output (row, column pair) is shared by `lanes` (1, 2 or 4) adjacent threads that take the
// splits s = lane (mod kLanes) in order; a fixed shuffle tree adds their sums.
template <typename T>
__device__ __forceinline__ void combine_one(const DecodeParams& p, int4 entry, int cg, float* s_lse,
                                            float* s_o, float* s_l, float* s_w,
                                            unsigned long long* trace = nullptr) {
  // (trace builds: slot i of this CTA's trace record, see FLASHKIT_DECODE_TRACE)
  auto mark = [&](int i) {
    if (trace != nullptr) trace[i] = prims::globaltimer();
  };
  const int b = entry.x, hr = entry.y, first = entry.z, n = entry.w;
  if (b < 0 || b >= p.batch || hr < 0 || hr >= p.hr_count) return;
  if (first < 0 || n < 2 || int64_t(first + n) * p.hr_count > p.max_partials) return;
  const int kv_head = hr / p.row_groups;
  const int row0 = (hr % p.row_groups) * p.rows;
  const int rv = min(p.rows, p.ratio * p.s_q - row0);  // rows the split kernel wrote
  if (rv <= 0 || rv > kMaxRows) return;
  const int rows = p.rows;
  mark(2);
  auto slot = [&](int s) { return int64_t(first + s) * p.hr_count + hr; };
  const int tid = threadIdx.x;
  const int col0 = cg * kCombineCols;
  constexpr int kC4 = kCombineCols / 4;               // 16-byte chunks per row
  const int lse_batch = kLseFloats / rv;              // splits per LSE batch (>= 64)
  const int o_batch = kStageFloats / (rv * kCombineCols);  // splits per O batch (>= 16)
  const bool lse_resident = n <= lse_batch;           // phase 2 reads the LSEs from s_l

  auto stage_lse = [&](int s0, int ns) {
    for (int i = tid; i < ns * rv; i += kCombineThreads) {
      const int s = i / rv, r = i - (i / rv) * rv;
      prims::cp_async_4(s_l + i, p.ws.part_lse + slot(s0 + s) * rows + r, true);
    }
    prims::cp_async_commit();
  };
  auto stage_o = [&](int s0, int ns) {
    for (int i = tid; i < ns * rv * kC4; i += kCombineThreads) {
      const int sr = i / kC4, c4 = i - (i / kC4) * kC4;  // sr = s * rv + r
      const int s = sr / rv, r = sr - (sr / rv) * rv;
      prims::cp_async_16(s_o + i * 4, p.ws.part_o + (slot(s0 + s) * rows + r) * p.head_dim_v + col0 + c4 * 4, true);
    }
    prims::cp_async_commit();
  };

  // Phase 1: total LSE of each row (online over LSE batches), O batch 0 in flight meanwhile.
  // Row r has G = 32..4 threads (the largest power of two with G * rv <= 128, at most a
  // warp), thread r * G + k summing splits k, k + G, ... in order; a fixed xor butterfly
  // over the G lanes merges them (v10's one thread per row added 64 splits serially: 5 us).
  // One running sum per thread and rolled loops: the combine's code is fetched cold every
  // call after the split kernel streamed the cache through L2, so its size counts (v11).
  stage_lse(0, min(n, lse_batch));
  stage_o(0, min(n, o_batch));
  const int G = rv <= 4 ? 32 : (rv <= 8 ? 16 : (rv <= 16 ? 8 : 4));
  const int lr = tid / G, lk = tid % G;  // this thread's row (valid if < rv) and lane in it
  LseSum acc_lse;
  for (int s0 = 0; s0 < n; s0 += lse_batch) {
    const int ns = min(lse_batch, n - s0);
    if (s0 > 0) {
      __syncthreads();  // the previous LSE batch is consumed
      stage_lse(s0, ns);
      prims::cp_async_wait<0>();
    } else {
      prims::cp_async_wait<1>();  // the LSE group (O batch 0 may still be in flight)
    }
    __syncthreads();
    if (s0 == 0) mark(3);
    if (lr < rv) {
#pragma unroll 1
      for (int s = lk; s < ns; s += G) acc_lse.add(s_l[s * rv + lr]);
    }
  }
#pragma unroll 1
  for (int off = G / 2; off > 0; off /= 2) {  // (groups of G lanes are aligned in the warp)
    const float m2 = __shfl_xor_sync(0xffffffffu, acc_lse.m, off);
    const float l2 = __shfl_xor_sync(0xffffffffu, acc_lse.l, off);
    acc_lse.merge(m2, l2);
  }
  if (lr < rv && lk == 0) {
    const float lse = acc_lse.total();
    s_lse[lr] = lse;
    if (p.lse != nullptr && cg == 0) {
      const int R = row0 + lr;
      const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
      p.lse[(int64_t(b) * p.h_q + kv_head * p.ratio + hg) * p.s_q + t] = lse;
    }
  }

  mark(4);
  // Phase 2: output o = (row, column pair) of this CTA's 16 columns, kLanes threads each.
  constexpr int kPairs = kCombineCols / 2;
  const int outs = rv * kPairs;  // 32 .. 256
  const int lanes = outs >= kCombineThreads ? 1 : (outs >= 64 ? 2 : 4);  // power of 2, divides 32
  const int per_pass = kCombineThreads / lanes;  // outputs per pass of the CTA
  const int lane_k = tid % lanes;
  constexpr int kMaxOut = kMaxRows * kPairs / kCombineThreads;  // 2 per thread at 32 rows
  float2 acc[kMaxOut];
#pragma unroll
  for (int j = 0; j < kMaxOut; ++j) acc[j] = make_float2(0.f, 0.f);
  for (int s0 = 0; s0 < n; s0 += o_batch) {
    const int ns = min(o_batch, n - s0);
    if (s0 > 0) {
      __syncthreads();  // the previous O batch is consumed
      stage_o(s0, ns);
    }
    __syncthreads();  // s_lse visible (and, first batch, phase 1 done with s_l)
    for (int i = tid; i < ns * rv; i += kCombineThreads) {
      const int s = i / rv, r = i - (i / rv) * rv;
      const float lse = s_lse[r];
      const float x = lse_resident ? s_l[(s0 + s) * rv + r] : p.ws.part_lse[slot(s0 + s) * rows + r];
      s_w[i] = lse == -INFINITY ? 0.f : __expf(x - lse);
    }
    prims::cp_async_wait<0>();
    __syncthreads();
    if (s0 == 0) mark(5);
#pragma unroll
    for (int j = 0; j < kMaxOut; ++j) {
      const int o = tid / lanes + j * per_pass;
      if (o >= outs) continue;
      const int r = o / kPairs, c = (o - r * kPairs) * 2;
      for (int s = lane_k; s < ns; s += lanes) {
        const float w = s_w[s * rv + r];
        const float2 v = *reinterpret_cast<const float2*>(s_o + (s * rv + r) * kCombineCols + c);
        acc[j].x += w * v.x;
        acc[j].y += w * v.y;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxOut; ++j) {
    // Fixed tree over the `lanes` threads of an output (no-op for lanes = 1); every thread
    // of the warp takes part (lanes is uniform, groups are aligned inside the warp).
    for (int off = 1; off < lanes; off *= 2) {
      acc[j].x += __shfl_xor_sync(0xffffffffu, acc[j].x, off);
      acc[j].y += __shfl_xor_sync(0xffffffffu, acc[j].y, off);
    }
    const int o = tid / lanes + j * per_pass;
    if (o >= outs || lane_k != 0) continue;
    const int r = o / kPairs, c = (o - r * kPairs) * 2;
    const int R = row0 + r;
    const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
    T* dst = static_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(t) * p.o_tok_stride +
             int64_t(kv_head * p.ratio + hg) * p.o_head_stride + col0 + c;
    *reinterpret_cast<uint32_t*>(dst) = prims::pack2<T>(acc[j].x, acc[j].y);
  }
  mark(6);
}


template <typename T>
__global__ void __launch_bounds__(kCombineThreads) decode_combine_kernel(const DecodeParams p) {
  __shared__ float s_lse[kMaxRows];
  __shared__ __align__(16) float s_o[kStageFloats];
  __shared__ __align__(16) float s_l[kLseFloats];
  __shared__ float s_w[kStageFloats / kCombineCols];  // weights of the staged (split, row)
#ifdef FLASHKIT_DECODE_TRACE
  unsigned long long* trace = blockIdx.x < kTraceCombineCtas && threadIdx.x == 0
                                  ? p.ws.trace + int64_t(kTraceSplitCtas) * 8 + blockIdx.x * 8
                                  : nullptr;
  const unsigned long long trace_t0 = prims::globaltimer();
  int traced_pairs = 0;
#else
  unsigned long long* const trace = nullptr;
#endif
  // The plan's header and this CTA's first combine entry can be read before the wait (p.combine_prewait,
  // default 1; FLASHKIT_DECODE_COMBINE_PREWAIT=0 reads them after it): the plan kernel wrote them and
  // completed before any split CTA passed its own griddepcontrol.wait, and this grid is launched only
  // once every split CTA has passed it (its launch_dependents comes after the wait), so they are in
  // memory. Read at L2 (ld.global.cg: no L1 line of an earlier call). This takes two dependent L2
  // round trips (~0.9 us, the traced "entry read - released") off the call's critical path.
  // (Only the split kernel's partials need the wait.) The entry count is clamped to the workspace's
  // bound, so that no header, whatever wrote it, makes the loop read past the combine entries.
  const int col_groups = (p.head_dim_v + kCombineCols - 1) / kCombineCols;
  int work = 0;
  int4 first = make_int4(-1, -1, -1, 0);
  if (p.combine_prewait != 0) {
    work = min(__ldcg(&p.ws.header[kHdrNumCombines]), p.max_combines) * col_groups;
    if (int(blockIdx.x) < work) first = __ldcg(&p.ws.combines[blockIdx.x / col_groups]);
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr ((FLASHKIT_DECODE_EARLY_TRIGGER & 1) != 0) asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the split kernel's partials are complete
#endif
#ifdef FLASHKIT_DECODE_TRACE
  if (trace != nullptr) {
    trace[0] = trace_t0;
    trace[1] = prims::globaltimer();
  }
#endif
  if (p.combine_prewait == 0) {
    work = min(p.ws.header[kHdrNumCombines], p.max_combines) * col_groups;
    if (int(blockIdx.x) < work) first = p.ws.combines[blockIdx.x / col_groups];
  }
  for (int w = blockIdx.x; w < work; w += gridDim.x) {
    __syncthreads();  // shared buffers of the previous pair are consumed
    const int4 entry = w == int(blockIdx.x) ? first : p.ws.combines[w / col_groups];
    combine_one<T>(p, entry, w % col_groups, s_lse, s_o, s_l, s_w, w == int(blockIdx.x) ? trace : nullptr);
#ifdef FLASHKIT_DECODE_TRACE
    ++traced_pairs;
#endif
  }
#ifdef FLASHKIT_DECODE_TRACE
  if (trace != nullptr) {
    trace[6] = prims::globaltimer();  // CTA done (no pair: slots 2-5 stay 0)
    trace[7] = traced_pairs + 1ull;
  }
#endif
}

}  // namespace flashkit::decode
