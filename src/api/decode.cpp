// Paged decode: validation, workspace layout, plan / run / append entry points.
#include "flashkit/decode.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/attention_internal.h"  // FLASHKIT_EXPORT
#include "api/decode_internal.h"
#include "api/index_checks.h"
#include "api/cuda_util.h"
#include "api/validate_util.h"
#include "kernels/decode/plan_math.h"
#include "kernels/decode_params.h"
#include "launch/decode_dispatch.h"
#include "launch/decode_launch.h"
#include "launch/device_errors.h"
#include "launch/family_dispatch.h"  // env_off
#include "launch/fwd_dispatch.h"

namespace flashkit {
namespace {
using namespace vutil;

constexpr int kDecodeHeadDims[] = {64, 128, 256};
constexpr int64_t kMaxSq = 16;
// The balanced plan's shortest split, in tokens. 128 since 2026-11-27 (H100, env A/B of
// FLASHKIT_DECODE_MIN_CHUNK, graph timing, docs/kernels/decode.md "Shortest split"): against
// 256, B 1 GQA 32/8 2k -31%, 4k -13%, 1k -8%, B 4 1k -17% (bf16; the 8-bit caches alike or more),
// long or large-batch calls unchanged (their splits are longer anyway); 64 was mixed.
constexpr int kMinChunk = 128;
// The shortest split where the balanced target is at most 32 tokens per CTA (the total work
// is tiny: B 1 GQA 32/8 at 1k tokens). H100, 2026-11-27, the min-chunk runs above: 64 against
// 128 at B 1 1k bf16 10.0 vs 11.9 us, FP8 10.3 vs 13.8; at 2k (62 tokens per CTA) 64 lost
// (11.4 vs 10.8), so the rule stops short of it. docs/kernels/decode.md "Shortest split".
constexpr int kMinChunkTiny = 64;
// The most splits the split kernel's fused merge takes (fused_max_splits() below says why).
constexpr int kFusedMaxSplits = 4;
// Balanced plans of at most this many (sequence, KV head) pairs over a 16-bit cache take 16-row items
// (make_dims).
constexpr int64_t kTinyPairs = 16;
constexpr int64_t kAlign = 256;

bool decode_head_dim_ok(int64_t d) {
  for (int x : kDecodeHeadDims) {
    if (d == x) return true;
  }
  return false;
}

// Sizes shared by plan and run.
struct Dims {
  int64_t B = 0, s_q = 0, h_q = 0, h_kv = 0, d = 0, dv = 0;
  int quant = 0;  // 0: 16-bit cache, 1: int8, 2: fp8 e4m3
  int64_t ratio = 0, rows = 0, row_groups = 0, hr = 0;
  int64_t split_size = 0, max_seqlen_k = 0;
};

Dims make_dims(int64_t B, int64_t s_q, int64_t h_q, int64_t h_kv, int64_t d, int64_t dv,
               int64_t split_size, int64_t max_seqlen_k, int quant) {
  Dims m;
  m.quant = quant;
  m.B = B, m.s_q = s_q, m.h_q = h_q, m.h_kv = h_kv, m.d = d, m.dv = dv;
  m.ratio = h_kv > 0 ? h_q / h_kv : 0;
  // Item rows: 32 where a head's rows (ratio x s_q) need more than 16 and the O tile fits, except
  // in tiny grids of a 16-bit cache: with at most kTinyPairs (sequence, KV head) pairs and 17..32
  // rows, two 16-row items per pair. There the combine's work per split grows with the rows (B 1 64/8
  // s_q 4: 19 us of combine at 32 rows) and the second item's K/V re-read stays in L2. Measured (H100,
  // 2026-11-27, docs/kernels/decode.md "Rows per item in tiny grids"), bf16: B 1 64/8 s_q 4 at 4k
  // 25.9 -> 17.0 us, 8k 29.9 -> 22.4, 16k 38.9 -> 34.1, 64k 102.8 -> 106.7; B 2 8k 35.7 -> 34.6; B 1
  // 32/8 s_q 8 4k 26.1 -> 17.2. The 8-bit caches keep 32 rows (FP8 B 1 64k s_q 4 79.1 -> 92.4: each
  // item dequantizes the K/V again), and so do larger grids (8+ sequences of 8 KV heads: 16-row items
  // 4-15% slower, 35-60% at 64 rows). Balanced plans only: with a caller-fixed split size a
  // sequence's bits must not depend on the batch (the rows decide the fused merge's reach and its
  // order of sums), so there the rows never depend on B. FLASHKIT_DECODE_MAX_ROWS (read once; A/B
  // runs): 16 = 16-row items everywhere, 32 = no tiny-grid rule.
  static const int max_rows_env = [] {
    const char* e = std::getenv("FLASHKIT_DECODE_MAX_ROWS");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v == 16 || v == 32 ? v : 0;
  }();
  const int64_t rows_needed = m.ratio * s_q;
  int max_rows = 32;
  if (max_rows_env != 0) {
    max_rows = max_rows_env;
  } else if (quant == 0 && split_size == 0 && B * h_kv <= kTinyPairs && rows_needed <= 32) {
    max_rows = 16;
  }
  m.rows = decode_rows_per_item(int(rows_needed), int(d), max_rows);
  m.row_groups = (m.ratio * s_q + m.rows - 1) / m.rows;
  m.hr = h_kv * m.row_groups;
  m.split_size = split_size, m.max_seqlen_k = max_seqlen_k;
  return m;
}

// Checks on the sizes alone (shared by plan and run).
Status check_dims(const Dims& m, const char* q_name) {
  if (m.B < 0) return invalid(q_name, "expected batch size B >= 0, got " + str(m.B));
  if (m.s_q < 1 || m.s_q > kMaxSq) {
    return invalid(q_name, "expected s_q (new tokens per sequence) in 1.." + str(kMaxSq) + ", got " + str(m.s_q));
  }
  if (m.h_q < 1) return invalid(q_name, "expected H_q >= 1 heads, got " + str(m.h_q));
  if (m.h_kv < 1) return invalid("k_cache", "expected H_kv >= 1 heads, got " + str(m.h_kv));
  if (m.h_q % m.h_kv != 0) {
    return Status::Invalid("q, k_cache: H_q = " + str(m.h_q) + " must be a multiple of H_kv = " +
                           str(m.h_kv) + " (GQA/MQA)");
  }
  if (!decode_head_dim_ok(m.d)) {
    return invalid(q_name, "head_dim D = " + str(m.d) + " is not supported by decode (supported: 64, 128, 256)");
  }
  if (m.dv != m.d) {
    return invalid("v_cache", "head_dim D_v = " + str(m.dv) + " must equal D = " + str(m.d) + " for decode");
  }
  if (m.split_size < 0 || m.split_size % 64 != 0) {
    return invalid("split_size", "expected 0 (balanced) or a positive multiple of 64 tokens, got " +
                                     str(m.split_size));
  }
  if (m.split_size > (int64_t{1} << 30)) {
    return invalid("split_size", "expected <= 2^30, got " + str(m.split_size));
  }
  if (m.max_seqlen_k < 0 || m.max_seqlen_k > kMaxSize) {
    return invalid("max_seqlen_k", "expected 0..2^31-1, got " + str(m.max_seqlen_k));
  }
  if (m.split_size > 0 && m.max_seqlen_k == 0) {
    return invalid("max_seqlen_k", "expected > 0 (an upper bound of the lengths) with a fixed split_size");
  }
  return Status::Ok();
}

struct Layout {
  int64_t header = 0, items = 0, combines = 0, first_partial = 0, num_splits = 0, item_base = 0, counters = 0;
  int64_t part_o = 0, part_lse = 0, trace = 0, bytes = 0;
  int64_t max_items = 0, max_combines = 0, max_partials = 0;
  int target_ctas = 0;
};

// 0 for a 16-bit cache, 1 for int8, 2 for fp8 e4m3, -1 for anything else.
int quant_of(DType cache, DType q) {
  if (cache == q || cache == DType::kInvalid) return 0;
  if (cache == DType::kInt8) return 1;
  if (cache == DType::kFloat8E4M3FN) return 2;
  return -1;
}

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Workspace layout; see kernels/decode/plan_kernel.cuh for the bounds.
Status make_layout(const Dims& m, int target_ctas, Layout* out) {
  Layout L;
  L.target_ctas = target_ctas;
  if (m.split_size > 0) {
    const int64_t nmax = std::max<int64_t>(1, (m.max_seqlen_k + m.split_size - 1) / m.split_size);
    L.max_items = m.hr * m.B * nmax;
    L.max_partials = nmax > 1 ? L.max_items : 0;
    L.max_combines = nmax > 1 ? m.hr * m.B : 0;
  } else {
    L.max_items = m.hr * m.B + target_ctas;
    L.max_partials = 2 * int64_t(target_ctas) + m.hr;
    L.max_combines = int64_t(target_ctas) + m.hr;
  }
  if (m.B == 0) L.max_items = L.max_partials = L.max_combines = 0;
  if (L.max_items > kMaxSize || L.max_partials * m.rows * m.dv > (int64_t{1} << 40)) {
    return invalid("split_size", "the plan would need " + str(L.max_items) +
                                     " work items (> 2^31): use a larger split_size or 0");
  }
  int64_t off = 0;
  auto take = [&](int64_t bytes) {
    const int64_t at = off;
    off = align_up(off + bytes);
    return at;
  };
  L.header = take(kHeaderInts * 4);
  L.items = take(L.max_items * int64_t(sizeof(DecodeItem)));
  L.combines = take(L.max_combines * 16);
  L.first_partial = take(m.B * 4);
  L.num_splits = take(m.B * 4);
  L.item_base = take(m.B * 4);
  L.counters = take(m.B * m.hr * 4);
  L.part_o = take(L.max_partials * m.rows * m.dv * 4);
  L.part_lse = take(L.max_partials * m.rows * 4);
#ifdef FLASHKIT_DECODE_TRACE
  L.trace = take(kTraceWords * 8);  // last: the host reads the workspace's tail
#endif
  L.bytes = off;
  *out = L;
  return Status::Ok();
}

// Target CTAs of the plan on the current device: SMs x resident split CTAs. Cached per
// (device, head dim, rows): the occupancy query costs microseconds, a decode step a few.
Status target_ctas_for(const Dims& m, int* target) {
  DeviceInfo dev;
  cudaError_t err = static_cast<cudaError_t>(cached_device_info_status(&dev));
  if (err != cudaSuccess) return Status::Unsupported(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  if (dev.cc_major < 8) {
    return Status::Unsupported("decode needs compute capability 8.0 or newer (device has " +
                               str(dev.cc_major) + ".x)");
  }
  constexpr int kDevices = 64;
  // [device][d 64/128/256][rows 16/32][quant]; 0 = unknown
  static std::atomic<int> cache[kDevices][3][2][3];
  const int di = m.d == 64 ? 0 : (m.d == 128 ? 1 : 2), ri = m.rows == 32 ? 1 : 0;
  const bool cacheable = dev.device >= 0 && dev.device < kDevices;
  if (cacheable) {
    const int t = cache[dev.device][di][ri][m.quant].load(std::memory_order_relaxed);
    if (t > 0) {
      *target = t;
      return Status::Ok();
    }
  }
  int per_sm = 0;
  err = static_cast<cudaError_t>(decode_blocks_per_sm(int(m.d), int(m.rows), m.quant, dev, &per_sm));
  if (err != cudaSuccess) return cuda_status(err, "decode occupancy query");
  // FLASHKIT_DECODE_WAVES (read once, default 1): plan for this many waves of split CTAs.
  static const int waves = [] {
    const char* e = std::getenv("FLASHKIT_DECODE_WAVES");
    const int w = e != nullptr ? std::atoi(e) : 0;
    return w >= 1 && w <= 16 ? w : 1;
  }();
  *target = std::max(1, dev.num_sms * std::max(per_sm, 1) * waves);
  if (cacheable) cache[dev.device][di][ri][m.quant].store(*target, std::memory_order_relaxed);
  return Status::Ok();
}

Status check_workspace(const TensorRef& ws, int32_t device_id, int64_t need) {
  FK_RETURN_IF_ERROR(check_device("workspace", ws, device_id));
  if (ws.dtype != DType::kInt32) {
    return invalid("workspace", std::string("expected dtype int32, got ") + dtype_name(ws.dtype));
  }
  FK_RETURN_IF_ERROR(check_contiguous("workspace", ws));
  FK_RETURN_IF_ERROR(check_data_ptr("workspace", ws, 16));
  const int64_t have = ws.numel() * dtype_size(ws.dtype);
  if (need >= 0 && have < need) {
    return invalid("workspace", "has " + str(have) + " bytes, the plan needs " + str(need) +
                                    " (decode_workspace_size)");
  }
  return Status::Ok();
}

// The balanced plan's shortest splits in tokens (DecodeParams::min_chunk / min_chunk_tiny).
void shortest_splits(int* min_chunk_out, int* min_chunk_tiny_out) {
  // FLASHKIT_DECODE_MIN_CHUNK (read once; A/B runs): the balanced plan's shortest split in
  // tokens, rounded up to whole 64-token tiles (default kMinChunk). Larger only means fewer
  // splits, so the workspace bounds of plan_kernel.cuh hold for any value.
  static const int min_chunk = [] {
    const char* e = std::getenv("FLASHKIT_DECODE_MIN_CHUNK");
    const long v = e != nullptr ? std::atol(e) : 0;
    return v >= 64 && v <= (1L << 20) ? int((v + 63) / 64 * 64) : kMinChunk;
  }();
  // FLASHKIT_DECODE_MIN_CHUNK_TINY (read once; A/B runs): min_chunk_tiny (default kMinChunkTiny;
  // with FLASHKIT_DECODE_MIN_CHUNK set and this one not, that value for both).
  static const int min_chunk_tiny = [] {
    const char* e = std::getenv("FLASHKIT_DECODE_MIN_CHUNK_TINY");
    const long v = e != nullptr ? std::atol(e) : 0;
    if (v >= 64 && v <= (1L << 20)) return int((v + 63) / 64 * 64);
    return std::getenv("FLASHKIT_DECODE_MIN_CHUNK") != nullptr ? min_chunk : kMinChunkTiny;
  }();
  *min_chunk_out = min_chunk;
  *min_chunk_tiny_out = min_chunk_tiny;
}

// Sequences of more splits than DecodeParams::fused_max_splits are merged by the combine kernel
// even where their partials fit the split kernel's fused merge: the merging CTA works through
// n x rows x D_v floats alone, on the call's critical path, while the combine kernel spreads them
// over (head row, 16 columns) CTAs. Measured (H100, 2026-11-27; docs/kernels/decode.md "Fused merge
// up to 4 splits"): fused faster at n 2..4 with B >= 8 (B 16 4k FP8 56.4 vs 60.3 us), the combine
// faster at every n >= 5 (B 1 768 tokens FP8 13.0 -> 10.1 us). FLASHKIT_DECODE_FUSED_MAX_SPLITS
// (read once; A/B runs) overrides it. Either way the workspace bounds hold: combine entries are
// counted for every split sequence.
int fused_max_splits() {
  static const int v = [] {
    const char* e = std::getenv("FLASHKIT_DECODE_FUSED_MAX_SPLITS");
    const long x = e != nullptr ? std::atol(e) : 0;
    return x >= 1 && x <= (1L << 20) ? int(x) : kFusedMaxSplits;
  }();
  return v;
}

// DecodeParams::split_cap: 1 (plan_math.h split_cap) unless FLASHKIT_DECODE_SPLIT_CAP=0 (A/B runs).
// Capping only lowers the split counts, so the workspace bounds hold either way.
int split_cap_on() {
  static const bool off = dispatch::env_off("FLASHKIT_DECODE_SPLIT_CAP");
  return off ? 0 : 1;
}

// DecodeParams::combine_prewait: 1 (combine_kernel.cuh says why it is safe) unless
// FLASHKIT_DECODE_COMBINE_PREWAIT=0 (A/B runs).
int combine_prewait_on() {
  static const bool off = dispatch::env_off("FLASHKIT_DECODE_COMBINE_PREWAIT");
  return off ? 0 : 1;
}

// DecodeParams from validated args and a layout (workspace may be null: sizes only).
DecodeParams make_params(const DecodeArgs& a, const Dims& m, const Layout& L) {
  DecodeParams p{};
  int64_t s[kMaxDims] = {0, 0, 0, 0};
  auto eff = [&](const TensorRef& t) { effective_strides(t, s); };
  p.q = a.q.data, p.k_cache = a.k_cache.data, p.v_cache = a.v_cache.data, p.o = a.out.data;
  p.lse = a.lse.defined() ? static_cast<float*>(a.lse.data) : nullptr;
  p.block_table = static_cast<const int32_t*>(a.block_table.data);
  p.seqlens_k = static_cast<const int32_t*>(a.seqlens_k.data);
  if (m.quant != 0 && a.k_scale.defined() && a.v_scale.defined()) {
    p.k_scale = static_cast<const float*>(a.k_scale.data);
    p.v_scale = static_cast<const float*>(a.v_scale.data);
    eff(a.k_scale), p.ks_page_stride = s[0], p.ks_slot_stride = s[1], p.ks_head_stride = s[2];
    eff(a.v_scale), p.vs_page_stride = s[0], p.vs_slot_stride = s[1], p.vs_head_stride = s[2];
  }
  eff(a.q), p.q_batch_stride = s[0], p.q_tok_stride = s[1], p.q_head_stride = s[2];
  eff(a.out), p.o_batch_stride = s[0], p.o_tok_stride = s[1], p.o_head_stride = s[2];
  eff(a.k_cache), p.k_page_stride = s[0], p.k_slot_stride = s[1], p.k_head_stride = s[2];
  eff(a.v_cache), p.v_page_stride = s[0], p.v_slot_stride = s[1], p.v_head_stride = s[2];
  eff(a.block_table), p.bt_row_stride = s[0];
  p.batch = int(m.B), p.s_q = int(m.s_q), p.h_q = int(m.h_q), p.h_kv = int(m.h_kv), p.ratio = int(m.ratio);
  p.head_dim = int(m.d), p.head_dim_v = int(m.dv);
  p.page_size = int(a.k_cache.shape[1]);
  p.page_div = prims::FastDiv::make(p.page_size);
  p.max_pages = int(a.block_table.shape[1]);
  p.num_pages = int(a.k_cache.shape[0]);
  p.capacity = int64_t(p.max_pages) * p.page_size;
  if (m.quant != 0 && p.k_scale != nullptr) {  // the narrow 8-bit kernels' 32-bit offsets (K / V rows in 16-byte units)
    using decode_math::off32_units;
    p.off32 = off32_units(p.num_pages, p.page_size, p.k_page_stride, p.k_slot_stride, 16, &p.k_page_u, &p.k_slot_u) &&
              off32_units(p.num_pages, p.page_size, p.v_page_stride, p.v_slot_stride, 16, &p.v_page_u, &p.v_slot_u) &&
              off32_units(p.num_pages, p.page_size, p.ks_page_stride, p.ks_slot_stride, 1, &p.ks_page_u, &p.ks_slot_u) &&
              off32_units(p.num_pages, p.page_size, p.vs_page_stride, p.vs_slot_stride, 1, &p.vs_page_u, &p.vs_slot_u);
  }
  p.rows = int(m.rows), p.row_groups = int(m.row_groups), p.hr_count = int(m.hr);
  const float scale = a.softmax_scale > 0.f ? a.softmax_scale
                                            : static_cast<float>(1.0 / std::sqrt(double(m.d)));
  p.softmax_scale = scale;
  p.softmax_scale_log2 = static_cast<float>(double(scale) * 1.4426950408889634);
  p.causal = a.causal;
  p.split_size = int(m.split_size);
  shortest_splits(&p.min_chunk, &p.min_chunk_tiny);
  p.fused_max_splits = fused_max_splits();
  p.split_cap = split_cap_on();
  p.combine_prewait = combine_prewait_on();
  p.target_ctas = L.target_ctas;
  p.max_items = int(L.max_items), p.max_combines = int(L.max_combines), p.max_partials = int(L.max_partials);
  if (a.workspace.defined()) {
    char* base = static_cast<char*>(a.workspace.data);
    p.ws.header = reinterpret_cast<int32_t*>(base + L.header);
    p.ws.items = reinterpret_cast<DecodeItem*>(base + L.items);
    p.ws.combines = reinterpret_cast<int4*>(base + L.combines);
    p.ws.first_partial = reinterpret_cast<int32_t*>(base + L.first_partial);
    p.ws.num_splits = reinterpret_cast<int32_t*>(base + L.num_splits);
    p.ws.item_base = reinterpret_cast<int32_t*>(base + L.item_base);
    p.ws.counters = reinterpret_cast<int32_t*>(base + L.counters);
    p.ws.part_o = reinterpret_cast<float*>(base + L.part_o);
    p.ws.part_lse = reinterpret_cast<float*>(base + L.part_lse);
#ifdef FLASHKIT_DECODE_TRACE
    p.ws.trace = reinterpret_cast<unsigned long long*>(base + L.trace);
#endif
  }
  return p;
}

Dims dims_of(const DecodeArgs& a) {
  const int64_t max_seqlen = a.split_size > 0 && a.max_seqlen_k == 0
                                 ? a.block_table.shape[1] * a.k_cache.shape[1]
                                 : a.max_seqlen_k;
  return make_dims(a.q.shape[0], a.q.shape[1], a.q.shape[2], a.k_cache.shape[2], a.q.shape[3],
                   a.v_cache.shape[3], a.split_size, max_seqlen, std::max(0, quant_of(a.k_cache.dtype, a.q.dtype)));
}

// A quantized (one byte per value) cache: last dim contiguous, other strides multiples of 16
// values (16-byte copies), 16-byte aligned pointer.
Status check_quant_cache_layout(const char* name, const TensorRef& t) {
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] <= 1) continue;
    if (t.stride[i] < 0) return invalid(name, "expected non-negative strides, got " + strides_str(t));
    if (i == t.ndim - 1 && t.stride[i] != 1) {
      return invalid(name, "expected the last dimension to be contiguous (stride 1), got strides " + strides_str(t));
    }
    if (i < t.ndim - 1 && t.stride[i] % 16 != 0) {
      return invalid(name, "stride of dim " + str(i) + " is " + str(t.stride[i]) +
                               " values, expected a multiple of 16 for a one-byte cache (16-byte copies)");
    }
  }
  FK_RETURN_IF_ERROR(check_span(name, t));
  return check_data_ptr(name, t, 16);
}

// Scales of a quantized cache: float32 [num_pages, page_size, H_kv], any non-negative strides.
Status check_scales(const char* name, const TensorRef& t, int32_t device_id, int64_t P, int64_t page,
                    int64_t H) {
  if (!t.defined()) return invalid(name, "required with an int8 / float8_e4m3fn cache (fp32 [num_pages, page_size, H_kv])");
  FK_RETURN_IF_ERROR(check_device(name, t, device_id));
  FK_RETURN_IF_ERROR(check_dtype(name, t, DType::kFloat32, ""));
  FK_RETURN_IF_ERROR(check_ndim(name, t, 3, "[num_pages, page_size, H_kv]"));
  FK_RETURN_IF_ERROR(check_sizes(name, t));
  if (t.shape[0] != P || t.shape[1] != page || t.shape[2] != H) {
    return invalid(name, "expected shape " + shape_of({P, page, H}) + " (the cache's), got " + t.shape_str());
  }
  for (int i = 0; i < 3; ++i) {
    if (t.shape[i] > 1 && t.stride[i] < 0) return invalid(name, "expected non-negative strides, got " + strides_str(t));
  }
  FK_RETURN_IF_ERROR(check_span(name, t));
  return check_data_ptr(name, t, 4);
}

Status validate_decode_impl(const DecodeArgs& a, bool need_workspace) {
  // (the workspace's device is checked with its size and layout, by check_workspace)
  const NamedTensor all[] = {{"q", a.q},
                            {"k_cache", a.k_cache},
                            {"v_cache", a.v_cache},
                            {"block_table", a.block_table},
                            {"seqlens_k", a.seqlens_k},
                            {"out", a.out},
                            {"lse", a.lse, false},
                            {"workspace", a.workspace, need_workspace}};
  FK_RETURN_IF_ERROR(check_present_on_device(all, "workspace"));
  if (a.q.dtype != DType::kFloat16 && a.q.dtype != DType::kBFloat16) {
    return invalid("q", std::string("expected dtype float16 or bfloat16, got ") + dtype_name(a.q.dtype));
  }
  const int quant = quant_of(a.k_cache.dtype, a.q.dtype);
  if (quant < 0) {
    return invalid("k_cache", std::string("expected dtype ") + dtype_name(a.q.dtype) +
                                  " (same as q), int8 or float8_e4m3fn, got " + dtype_name(a.k_cache.dtype));
  }
  FK_RETURN_IF_ERROR(check_dtype("v_cache", a.v_cache, a.k_cache.dtype, " (same as k_cache)"));
  FK_RETURN_IF_ERROR(check_dtype("out", a.out, a.q.dtype, " (same as q)"));
  if (quant == 0 && (a.k_scale.defined() || a.v_scale.defined())) {
    return invalid(a.k_scale.defined() ? "k_scale" : "v_scale",
                   "given, but the cache is not quantized (scales go with int8 / float8_e4m3fn caches)");
  }
  if (a.lse.defined()) FK_RETURN_IF_ERROR(check_dtype("lse", a.lse, DType::kFloat32, ""));
  FK_RETURN_IF_ERROR(check_dtype("block_table", a.block_table, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_dtype("seqlens_k", a.seqlens_k, DType::kInt32, ""));

  FK_RETURN_IF_ERROR(check_ndim("q", a.q, 4, "[B, s_q, H_q, D]"));
  FK_RETURN_IF_ERROR(check_ndim("k_cache", a.k_cache, 4, "[num_pages, page_size, H_kv, D]"));
  FK_RETURN_IF_ERROR(check_ndim("v_cache", a.v_cache, 4, "[num_pages, page_size, H_kv, D_v]"));
  FK_RETURN_IF_ERROR(check_ndim("block_table", a.block_table, 2, "[B, max_pages]"));
  FK_RETURN_IF_ERROR(check_ndim("seqlens_k", a.seqlens_k, 1, "[B]"));
  FK_RETURN_IF_ERROR(check_ndim("out", a.out, 4, "[B, s_q, H_q, D_v]"));
  if (a.lse.defined()) FK_RETURN_IF_ERROR(check_ndim("lse", a.lse, 3, "[B, H_q, s_q]"));
  for (const NamedTensor& n : all) {
    if (n.t.defined()) FK_RETURN_IF_ERROR(check_sizes(n.name, n.t));
  }

  const Dims m = dims_of(a);
  FK_RETURN_IF_ERROR(check_dims(m, "q"));
  const int64_t P = a.k_cache.shape[0], page = a.k_cache.shape[1];
  if (page < 1) return invalid("k_cache", "expected page_size >= 1, got shape " + a.k_cache.shape_str());
  if (a.k_cache.shape[3] != m.d) {
    return invalid("k_cache", "expected head_dim D = " + str(m.d) + " (from q), got " + str(a.k_cache.shape[3]));
  }
  if (a.v_cache.shape[0] != P || a.v_cache.shape[1] != page || a.v_cache.shape[2] != m.h_kv) {
    return invalid("v_cache", "expected [num_pages, page_size, H_kv] = " + shape_of({P, page, m.h_kv}) +
                                  " (from k_cache), got " + a.v_cache.shape_str());
  }
  if (a.block_table.shape[0] != m.B) {
    return invalid("block_table", "expected " + str(m.B) + " rows (B from q), got " + a.block_table.shape_str());
  }
  if (a.seqlens_k.shape[0] != m.B) {
    return invalid("seqlens_k", "expected shape [" + str(m.B) + "] (B from q), got " + a.seqlens_k.shape_str());
  }
  if (a.block_table.shape[1] * page > kMaxSize) {
    return invalid("block_table", "max_pages * page_size = " + str(a.block_table.shape[1] * page) +
                                      " tokens exceeds 2^31 - 1 (32-bit lengths)");
  }
  if (a.out.shape[0] != m.B || a.out.shape[1] != m.s_q || a.out.shape[2] != m.h_q || a.out.shape[3] != m.dv) {
    return invalid("out", "expected shape " + shape_of({m.B, m.s_q, m.h_q, m.dv}) + ", got " + a.out.shape_str());
  }
  if (a.lse.defined() && (a.lse.shape[0] != m.B || a.lse.shape[1] != m.h_q || a.lse.shape[2] != m.s_q)) {
    return invalid("lse", "expected shape [B, H_q, s_q] = " + shape_of({m.B, m.h_q, m.s_q}) + ", got " +
                              a.lse.shape_str());
  }

  FK_RETURN_IF_ERROR(check_qkvo_layout("q", a.q, false));
  if (quant == 0) {
    FK_RETURN_IF_ERROR(check_qkvo_layout("k_cache", a.k_cache, false));
    FK_RETURN_IF_ERROR(check_qkvo_layout("v_cache", a.v_cache, false));
  } else {
    FK_RETURN_IF_ERROR(check_quant_cache_layout("k_cache", a.k_cache));
    FK_RETURN_IF_ERROR(check_quant_cache_layout("v_cache", a.v_cache));
    FK_RETURN_IF_ERROR(check_scales("k_scale", a.k_scale, a.q.device_id, P, page, m.h_kv));
    FK_RETURN_IF_ERROR(check_scales("v_scale", a.v_scale, a.q.device_id, P, page, m.h_kv));
  }
  FK_RETURN_IF_ERROR(check_qkvo_layout("out", a.out, true));
  if (a.lse.defined()) FK_RETURN_IF_ERROR(check_contiguous("lse", a.lse));
  FK_RETURN_IF_ERROR(check_contiguous("seqlens_k", a.seqlens_k));
  FK_RETURN_IF_ERROR(check_block_table_layout(a.block_table));
  if (a.workspace.defined()) FK_RETURN_IF_ERROR(check_workspace(a.workspace, a.q.device_id, -1));
  if (a.softmax_scale > 0.f && !std::isfinite(a.softmax_scale)) {
    return invalid("softmax_scale", "expected a finite value > 0 (or <= 0 / NaN for 1/sqrt(D)), got inf");
  }
  if (!decode_variant_compiled(a.q.dtype, int(m.d), quant)) {
    return Status::NotCompiled(std::string("decode for dtype ") + dtype_name(a.q.dtype) + " and head_dim " +
                               str(m.d) + (quant ? std::string(" over a ") + dtype_name(a.k_cache.dtype) + " cache" : "") +
                               " is not compiled into this build of FlashKit");
  }
  return Status::Ok();
}

Dims dims_of(const DecodePlanArgs& a) {
  return make_dims(a.batch, a.s_q, a.num_heads_q, a.num_heads_kv, a.head_dim,
                   a.head_dim_v > 0 ? a.head_dim_v : a.head_dim, a.split_size, a.max_seqlen_k,
                   std::max(0, quant_of(a.kv_dtype, DType::kInvalid)));
}

Status validate_plan_sizes(const DecodePlanArgs& a) {
  if (quant_of(a.kv_dtype, DType::kInvalid) < 0) {
    return invalid("kv_dtype", std::string("expected int8, float8_e4m3fn or invalid (a 16-bit cache), got ") +
                                   dtype_name(a.kv_dtype));
  }
  if (a.num_heads_kv < 1) return invalid("num_heads_kv", "expected >= 1, got " + str(a.num_heads_kv));
  if (a.batch > kMaxSize) return invalid("batch", "expected < 2^31, got " + str(a.batch));
  return check_dims(dims_of(a), "q");
}

}  // namespace

FLASHKIT_EXPORT Status validate_decode_plan(const DecodePlanArgs& a) {
  FK_RETURN_IF_ERROR(validate_plan_sizes(a));
  if (!a.seqlens_k.defined()) return invalid("seqlens_k", "required tensor is missing (ndim == 0)");
  if (!a.workspace.defined()) return invalid("workspace", "required tensor is missing (ndim == 0)");
  FK_RETURN_IF_ERROR(check_device("seqlens_k", a.seqlens_k, a.seqlens_k.device_id));
  FK_RETURN_IF_ERROR(check_dtype("seqlens_k", a.seqlens_k, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_ndim("seqlens_k", a.seqlens_k, 1, "[B]"));
  if (a.seqlens_k.shape[0] != a.batch) {
    return invalid("seqlens_k", "expected shape [" + str(a.batch) + "] (batch), got " + a.seqlens_k.shape_str());
  }
  FK_RETURN_IF_ERROR(check_contiguous("seqlens_k", a.seqlens_k));
  return check_workspace(a.workspace, a.seqlens_k.device_id, -1);
}

FLASHKIT_EXPORT Status validate_decode(const DecodeArgs& a) { return validate_decode_impl(a, false); }

namespace detail {

// Self-planned split CTAs (kernels/decode/self_plan.cuh; docs/kernels/decode.md "Self-planned split
// CTAs"): only the one-call form launches the plan kernel just before the split kernel, which is what
// makes the split CTAs' reads before their wait safe. Read per call, so that the tests and A/B runs can
// compare the forms in one process.
FLASHKIT_EXPORT int decode_self_plan_mode(bool plan_first, int cc_major, int64_t batch) {
  if (!plan_first || cc_major < 9 || batch > kSelfPlanMaxBatch) return 0;
  const char* e = std::getenv("FLASHKIT_DECODE_SELF_PLAN");
  if (e == nullptr) return 1;
  if (std::strcmp(e, "verify") == 0) return 2;
  return e[0] == '0' ? 0 : 1;
}
FLASHKIT_EXPORT Status decode_plan_limits(const DecodePlanArgs& a, int target_ctas, DecodePlanLimits* out) {
  FK_RETURN_IF_ERROR(validate_plan_sizes(a));
  if (target_ctas < 1) return invalid("target_ctas", "expected >= 1, got " + str(target_ctas));
  const Dims m = dims_of(a);
  Layout L;
  FK_RETURN_IF_ERROR(make_layout(m, target_ctas, &L));
  out->hr = m.hr;
  shortest_splits(&out->min_chunk, &out->min_chunk_tiny);
  out->fused_max_splits = fused_max_splits();
  out->split_cap = split_cap_on();
  out->h_kv = m.h_kv;
  out->rows_max = std::min(m.rows, m.ratio * m.s_q);
  out->head_dim_v = m.dv;
  out->max_items = L.max_items;
  out->max_partials = L.max_partials;
  out->max_combines = L.max_combines;
  return Status::Ok();
}
}  // namespace detail

FLASHKIT_EXPORT Status decode_workspace_size(const DecodePlanArgs& a, int device, int64_t* bytes) {
  FK_RETURN_IF_ERROR(validate_plan_sizes(a));
  DeviceGuard guard(device);
  if (!guard.ok()) return Status::Unsupported("cannot make CUDA device " + str(device) + " current");
  const Dims m = dims_of(a);
  int target = 0;
  FK_RETURN_IF_ERROR(target_ctas_for(m, &target));
  Layout L;
  FK_RETURN_IF_ERROR(make_layout(m, target, &L));
  *bytes = L.bytes;
  return Status::Ok();
}

FLASHKIT_EXPORT Status decode_plan(const DecodePlanArgs& a, cudaStream_t stream) {
  FK_RETURN_IF_ERROR(validate_decode_plan(a));
  DeviceGuard guard(a.seqlens_k.device_id);
  if (!guard.ok()) return Status::Unsupported("cannot make the device of seqlens_k current");
  const Dims m = dims_of(a);
  int target = 0;
  FK_RETURN_IF_ERROR(target_ctas_for(m, &target));
  Layout L;
  FK_RETURN_IF_ERROR(make_layout(m, target, &L));
  FK_RETURN_IF_ERROR(check_workspace(a.workspace, a.seqlens_k.device_id, L.bytes));
  if (m.B == 0) return Status::Ok();
  DecodeArgs run;  // only the parts make_params reads for the plan
  run.seqlens_k = a.seqlens_k;
  run.workspace = a.workspace;
  DecodeParams p = make_params(run, m, L);
  // The plan clamps lengths to the block table at run time; here any int32 length is
  // accepted (capacity = 2^31 - 1), only negative ones are flagged.
  p.capacity = kMaxSize;
  p.errors = device_error_word(a.seqlens_k.device_id);
  if (p.errors == nullptr) return Status::Cuda("decode: the device error word is not available");
  return cuda_status(static_cast<cudaError_t>(launch_decode_plan(p, stream)), "decode plan launch");
}

namespace {

Status run_impl(const DecodeArgs& a, cudaStream_t stream, bool plan_first) {
  FK_RETURN_IF_ERROR(validate_decode_impl(a, true));
  DeviceGuard guard(a.q.device_id);
  if (!guard.ok()) return Status::Unsupported("cannot make the device of q current");
  const Dims m = dims_of(a);
  int target = 0;
  FK_RETURN_IF_ERROR(target_ctas_for(m, &target));
  Layout L;
  FK_RETURN_IF_ERROR(make_layout(m, target, &L));
  FK_RETURN_IF_ERROR(check_workspace(a.workspace, a.q.device_id, L.bytes));
  if (m.B == 0) return Status::Ok();
  if (checks::check_requested(a.check_inputs, stream)) {
    FK_RETURN_IF_ERROR(checks::check_block_table(a.block_table, a.seqlens_k, a.k_cache.shape[0],
                                                 a.k_cache.shape[1], stream));
  }
  DecodeParams p = make_params(a, m, L);
  p.errors = device_error_word(a.q.device_id);
  if (p.errors == nullptr) return Status::Cuda("decode: the device error word is not available");
  if (plan_first) {
    DecodeParams pp = p;
    pp.capacity = kMaxSize;
    FK_RETURN_IF_ERROR(cuda_status(static_cast<cudaError_t>(launch_decode_plan(pp, stream)), "decode plan launch"));
  }
  DeviceInfo dev;
  FK_RETURN_IF_ERROR(cuda_status(static_cast<cudaError_t>(cached_device_info_status(&dev)), "device query"));
  p.self_plan = detail::decode_self_plan_mode(plan_first, dev.cc_major, m.B);
  FK_RETURN_IF_ERROR(cuda_status(static_cast<cudaError_t>(launch_decode_split_for(a.q.dtype, m.quant, p, dev, stream)),
                                 "decode split launch"));
  if (L.max_combines > 0) {
    FK_RETURN_IF_ERROR(cuda_status(static_cast<cudaError_t>(launch_decode_combine_for(a.q.dtype, p, dev.cc_major >= 9, stream)),
                                   "decode combine launch"));
  }
  return Status::Ok();
}

}  // namespace

FLASHKIT_EXPORT Status decode_run(const DecodeArgs& a, cudaStream_t stream) { return run_impl(a, stream, false); }

FLASHKIT_EXPORT Status decode(const DecodeArgs& a, cudaStream_t stream) { return run_impl(a, stream, true); }

FLASHKIT_EXPORT Status validate_append_kv(const AppendKVArgs& a) {
  const NamedTensor all[] = {{"k_new", a.k_new},
                            {"v_new", a.v_new},
                            {"k_cache", a.k_cache},
                            {"v_cache", a.v_cache},
                            {"block_table", a.block_table},
                            {"seqlens_k", a.seqlens_k}};
  FK_RETURN_IF_ERROR(check_present_on_device(all));
  const int quant = quant_of(a.k_cache.dtype, a.k_new.dtype);
  if (a.k_new.dtype != DType::kFloat16 && a.k_new.dtype != DType::kBFloat16) {
    return invalid("k_new", std::string("expected dtype float16 or bfloat16, got ") + dtype_name(a.k_new.dtype));
  }
  if (quant < 0) {
    return invalid("k_cache", std::string("expected dtype ") + dtype_name(a.k_new.dtype) +
                                  " (same as k_new), int8 or float8_e4m3fn, got " + dtype_name(a.k_cache.dtype));
  }
  FK_RETURN_IF_ERROR(check_dtype("v_cache", a.v_cache, a.k_cache.dtype, " (same as k_cache)"));
  FK_RETURN_IF_ERROR(check_dtype("v_new", a.v_new, a.k_new.dtype, " (same as k_new)"));
  if (quant == 0 && (a.k_scale.defined() || a.v_scale.defined())) {
    return invalid(a.k_scale.defined() ? "k_scale" : "v_scale",
                   "given, but the cache is not quantized (scales go with int8 / float8_e4m3fn caches)");
  }
  FK_RETURN_IF_ERROR(check_dtype("block_table", a.block_table, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_dtype("seqlens_k", a.seqlens_k, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_ndim("k_new", a.k_new, 4, "[B, s_new, H_kv, D]"));
  FK_RETURN_IF_ERROR(check_ndim("v_new", a.v_new, 4, "[B, s_new, H_kv, D_v]"));
  FK_RETURN_IF_ERROR(check_ndim("k_cache", a.k_cache, 4, "[num_pages, page_size, H_kv, D]"));
  FK_RETURN_IF_ERROR(check_ndim("v_cache", a.v_cache, 4, "[num_pages, page_size, H_kv, D_v]"));
  FK_RETURN_IF_ERROR(check_ndim("block_table", a.block_table, 2, "[B, max_pages]"));
  FK_RETURN_IF_ERROR(check_ndim("seqlens_k", a.seqlens_k, 1, "[B]"));
  for (const NamedTensor& n : all) FK_RETURN_IF_ERROR(check_sizes(n.name, n.t));
  const int64_t B = a.k_new.shape[0], s_new = a.k_new.shape[1], H = a.k_cache.shape[2];
  const int64_t D = a.k_cache.shape[3], Dv = a.v_cache.shape[3];
  if (a.k_cache.shape[1] < 1) return invalid("k_cache", "expected page_size >= 1, got shape " + a.k_cache.shape_str());
  if (a.v_cache.shape[0] != a.k_cache.shape[0] || a.v_cache.shape[1] != a.k_cache.shape[1] || a.v_cache.shape[2] != H) {
    return invalid("v_cache", "expected [num_pages, page_size, H_kv] = " +
                                  shape_of({a.k_cache.shape[0], a.k_cache.shape[1], H}) + " (from k_cache), got " +
                                  a.v_cache.shape_str());
  }
  if (D % 8 != 0 || Dv % 8 != 0) {
    return invalid("k_cache", "head dims must be multiples of 8 (16-byte rows), got D = " + str(D) + ", D_v = " + str(Dv));
  }
  if (a.k_new.shape[2] != H || a.k_new.shape[3] != D) {
    return invalid("k_new", "expected shape " + shape_of({B, s_new, H, D}) + ", got " + a.k_new.shape_str());
  }
  if (a.v_new.shape[0] != B || a.v_new.shape[1] != s_new || a.v_new.shape[2] != H || a.v_new.shape[3] != Dv) {
    return invalid("v_new", "expected shape " + shape_of({B, s_new, H, Dv}) + ", got " + a.v_new.shape_str());
  }
  if (a.block_table.shape[0] != B) return invalid("block_table", "expected " + str(B) + " rows (B from k_new)");
  if (a.seqlens_k.shape[0] != B) return invalid("seqlens_k", "expected shape [" + str(B) + "] (B from k_new)");
  if (a.block_table.shape[1] * a.k_cache.shape[1] > kMaxSize) {
    return invalid("block_table", "max_pages * page_size exceeds 2^31 - 1");
  }
  FK_RETURN_IF_ERROR(check_qkvo_layout("k_new", a.k_new, false));
  FK_RETURN_IF_ERROR(check_qkvo_layout("v_new", a.v_new, false));
  if (quant == 0) {
    FK_RETURN_IF_ERROR(check_qkvo_layout("k_cache", a.k_cache, true));
    FK_RETURN_IF_ERROR(check_qkvo_layout("v_cache", a.v_cache, true));
  } else {
    FK_RETURN_IF_ERROR(check_quant_cache_layout("k_cache", a.k_cache));
    FK_RETURN_IF_ERROR(check_quant_cache_layout("v_cache", a.v_cache));
    FK_RETURN_IF_ERROR(check_scales("k_scale", a.k_scale, a.k_new.device_id, a.k_cache.shape[0], a.k_cache.shape[1], H));
    FK_RETURN_IF_ERROR(check_scales("v_scale", a.v_scale, a.k_new.device_id, a.k_cache.shape[0], a.k_cache.shape[1], H));
  }
  FK_RETURN_IF_ERROR(check_contiguous("seqlens_k", a.seqlens_k));
  return check_block_table_layout(a.block_table);
}

FLASHKIT_EXPORT Status append_kv(const AppendKVArgs& a, cudaStream_t stream) {
  FK_RETURN_IF_ERROR(validate_append_kv(a));
  if (a.k_new.numel() == 0 && a.v_new.numel() == 0) return Status::Ok();
  DeviceGuard guard(a.k_new.device_id);
  if (!guard.ok()) return Status::Unsupported("cannot make the device of k_new current");
  AppendParams p{};
  int64_t s[kMaxDims] = {0, 0, 0, 0};
  auto eff = [&](const TensorRef& t) { effective_strides(t, s); };
  p.k_new = a.k_new.data, p.v_new = a.v_new.data, p.k_cache = a.k_cache.data, p.v_cache = a.v_cache.data;
  p.block_table = static_cast<const int32_t*>(a.block_table.data);
  p.seqlens_k = static_cast<const int32_t*>(a.seqlens_k.data);
  eff(a.k_new), p.kn_batch_stride = s[0], p.kn_tok_stride = s[1], p.kn_head_stride = s[2];
  eff(a.v_new), p.vn_batch_stride = s[0], p.vn_tok_stride = s[1], p.vn_head_stride = s[2];
  eff(a.k_cache), p.k_page_stride = s[0], p.k_slot_stride = s[1], p.k_head_stride = s[2];
  eff(a.v_cache), p.v_page_stride = s[0], p.v_slot_stride = s[1], p.v_head_stride = s[2];
  eff(a.block_table), p.bt_row_stride = s[0];
  p.batch = int(a.k_new.shape[0]), p.s_new = int(a.k_new.shape[1]), p.h_kv = int(a.k_cache.shape[2]);
  p.head_dim = int(a.k_cache.shape[3]), p.head_dim_v = int(a.v_cache.shape[3]);
  p.page_size = int(a.k_cache.shape[1]), p.max_pages = int(a.block_table.shape[1]);
  p.num_pages = int(a.k_cache.shape[0]);
  p.elem_bytes = dtype_size(a.k_cache.dtype);
  p.errors = device_error_word(a.k_new.device_id);
  if (p.errors == nullptr) return Status::Cuda("append_kv: the device error word is not available");
  DeviceInfo dev;
  FK_RETURN_IF_ERROR(cuda_status(static_cast<cudaError_t>(cached_device_info_status(&dev)), "device query"));
  const int quant = quant_of(a.k_cache.dtype, a.k_new.dtype);
  if (quant != 0) {
    p.k_scale = static_cast<float*>(a.k_scale.data);
    p.v_scale = static_cast<float*>(a.v_scale.data);
    eff(a.k_scale), p.ks_page_stride = s[0], p.ks_slot_stride = s[1], p.ks_head_stride = s[2];
    eff(a.v_scale), p.vs_page_stride = s[0], p.vs_slot_stride = s[1], p.vs_head_stride = s[2];
    return cuda_status(static_cast<cudaError_t>(launch_decode_append_quant_for(a.k_new.dtype, quant, p, dev.num_sms, stream)),
                       "append_kv launch");
  }
  return cuda_status(static_cast<cudaError_t>(launch_decode_append(p, dev.num_sms, stream)), "append_kv launch");
}

}  // namespace flashkit
