// MLA decode: validation, workspace size, metadata (scheduler) and split + combine.
#include "flashkit/mla.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "api/attention_internal.h"  // FLASHKIT_EXPORT
#include "api/cuda_util.h"
#include "api/index_checks.h"
#include "api/validate_util.h"
#include "kernels/mla_params.h"
#include "launch/device_errors.h"
#include "launch/fwd_dispatch.h"
#include "launch/mla_dispatch.h"
#include "launch/mla_launch.h"

namespace flashkit {
namespace {
using namespace vutil;

constexpr int64_t kAlign = 256;
constexpr int64_t kMaxSq = 4;
constexpr int64_t kMaxRatio = 128;
constexpr int64_t kMaxParts = 65535;  // gridDim.z of the split kernel

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

struct WorkspaceLayout {
  int64_t part_o = 0, part_lse = 0, bytes = 0, max_partials = 0;
};

// part_o [B + num_parts, h_q * s_q, 512] fp32, then part_lse [B + num_parts, h_q * s_q] fp32,
// each starting at a multiple of 256 bytes.
WorkspaceLayout layout_of(int64_t B, int64_t s_q, int64_t h_q, int64_t num_parts) {
  WorkspaceLayout L;
  L.max_partials = B + num_parts;
  const int64_t rows = h_q * s_q;
  L.part_o = 0;
  L.part_lse = align_up(L.max_partials * rows * kMlaHeadDimV * 4);
  L.bytes = L.part_lse + align_up(L.max_partials * rows * 4);
  return L;
}

Status check_metadata_shapes(const TensorRef& sched, const TensorRef& splits, int64_t B,
                             const char* b_from) {
  FK_RETURN_IF_ERROR(check_ndim("tile_scheduler_metadata", sched, 2, "[num_parts, 8]"));
  FK_RETURN_IF_ERROR(check_sizes("tile_scheduler_metadata", sched));
  if (sched.shape[1] != kMlaSchedInts || sched.shape[0] < 1 || sched.shape[0] > kMaxParts) {
    return invalid("tile_scheduler_metadata", "expected shape [num_parts, 8] with num_parts in 1.." +
                                                  str(kMaxParts) + ", got " + sched.shape_str());
  }
  FK_RETURN_IF_ERROR(check_contiguous("tile_scheduler_metadata", sched));
  FK_RETURN_IF_ERROR(check_ndim("num_splits", splits, 1, "[B + 1]"));
  FK_RETURN_IF_ERROR(check_sizes("num_splits", splits));
  if (splits.shape[0] != B + 1) {
    return invalid("num_splits", "expected shape [" + str(B + 1) + "] (B + 1, B from " + b_from + "), got " +
                                     splits.shape_str());
  }
  return check_contiguous("num_splits", splits);
}

Status check_workspace_mla(const TensorRef& ws, int32_t device_id, int64_t need) {
  FK_RETURN_IF_ERROR(check_device("workspace", ws, device_id));
  if (ws.dtype != DType::kUInt8 && ws.dtype != DType::kInt32) {
    return invalid("workspace", std::string("expected dtype uint8 or int32, got ") + dtype_name(ws.dtype));
  }
  FK_RETURN_IF_ERROR(check_sizes("workspace", ws));
  FK_RETURN_IF_ERROR(check_contiguous("workspace", ws));
  FK_RETURN_IF_ERROR(check_data_ptr("workspace", ws, 16));
  const int64_t have = ws.numel() * dtype_size(ws.dtype);
  if (have < need) {
    return invalid("workspace", "has " + str(have) + " bytes, expected at least " + str(need) +
                                    " (mla_workspace_size)");
  }
  return Status::Ok();
}

}  // namespace

FLASHKIT_EXPORT int64_t mla_num_parts(int64_t num_sms, int64_t rows_per_kv, int64_t num_heads_kv) {
  const int64_t m_blocks = std::max<int64_t>(1, (rows_per_kv + kMlaBlockM - 1) / kMlaBlockM);
  const int64_t parts = num_sms / std::max<int64_t>(1, num_heads_kv) / m_blocks;
  return std::min(kMaxParts, std::max<int64_t>(1, parts));
}

FLASHKIT_EXPORT int64_t mla_workspace_size(int64_t batch, int64_t s_q, int64_t num_heads_q,
                                           int64_t num_parts) {
  if (batch < 0 || s_q < 0 || num_heads_q < 0 || num_parts < 0) return 0;
  return layout_of(batch, s_q, num_heads_q, num_parts).bytes;
}

FLASHKIT_EXPORT Status validate_mla_metadata(const MlaMetadataArgs& a) {
  const NamedTensor all[] = {{"seqlens_k", a.seqlens_k},
                            {"tile_scheduler_metadata", a.tile_scheduler_metadata},
                            {"num_splits", a.num_splits}};
  FK_RETURN_IF_ERROR(check_present_on_device(all));
  FK_RETURN_IF_ERROR(check_dtype("seqlens_k", a.seqlens_k, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_dtype("tile_scheduler_metadata", a.tile_scheduler_metadata, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_dtype("num_splits", a.num_splits, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_ndim("seqlens_k", a.seqlens_k, 1, "[B]"));
  FK_RETURN_IF_ERROR(check_sizes("seqlens_k", a.seqlens_k));
  FK_RETURN_IF_ERROR(check_contiguous("seqlens_k", a.seqlens_k));
  return check_metadata_shapes(a.tile_scheduler_metadata, a.num_splits, a.seqlens_k.shape[0], "seqlens_k");
}

FLASHKIT_EXPORT Status mla_metadata(const MlaMetadataArgs& a, cudaStream_t stream) {
  FK_RETURN_IF_ERROR(validate_mla_metadata(a));
  DeviceGuard guard(a.seqlens_k.device_id);
  if (!guard.ok()) return Status::Unsupported("cannot make the device of seqlens_k current");
  MlaMetadataParams p{};
  p.seqlens_k = static_cast<const int32_t*>(a.seqlens_k.data);
  p.sched = static_cast<int32_t*>(a.tile_scheduler_metadata.data);
  p.num_splits = static_cast<int32_t*>(a.num_splits.data);
  p.batch = int(a.seqlens_k.shape[0]);
  p.num_parts = int(a.tile_scheduler_metadata.shape[0]);
  return cuda_status(static_cast<cudaError_t>(launch_mla_metadata(p, stream)), "mla metadata launch");
}

FLASHKIT_EXPORT Status validate_mla_decode(const MlaDecodeArgs& a) {
  const NamedTensor all[] = {{"q", a.q},
                            {"kv_cache", a.kv_cache},
                            {"block_table", a.block_table},
                            {"seqlens_k", a.seqlens_k},
                            {"tile_scheduler_metadata", a.tile_scheduler_metadata},
                            {"num_splits", a.num_splits},
                            {"out", a.out},
                            {"lse", a.lse},
                            {"workspace", a.workspace}};
  FK_RETURN_IF_ERROR(check_present_on_device(all));
  if (a.q.dtype != DType::kFloat16 && a.q.dtype != DType::kBFloat16) {
    return invalid("q", std::string("expected dtype float16 or bfloat16, got ") + dtype_name(a.q.dtype));
  }
  // FlashMLA's FP8 cache: one byte per element (uint8 or float8_e4m3fn), 656 per token.
  const bool fp8 = a.kv_cache.dtype == DType::kUInt8 || a.kv_cache.dtype == DType::kFloat8E4M3FN;
  if (!fp8 && a.kv_cache.dtype != a.q.dtype) {
    return invalid("kv_cache", std::string("expected dtype ") + dtype_name(a.q.dtype) +
                                   " (same as q), or uint8 / float8_e4m3fn for FlashMLA's FP8 layout; got " +
                                   dtype_name(a.kv_cache.dtype));
  }
  FK_RETURN_IF_ERROR(check_dtype("out", a.out, a.q.dtype, " (same as q)"));
  FK_RETURN_IF_ERROR(check_dtype("lse", a.lse, DType::kFloat32, ""));
  FK_RETURN_IF_ERROR(check_dtype("block_table", a.block_table, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_dtype("seqlens_k", a.seqlens_k, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_dtype("tile_scheduler_metadata", a.tile_scheduler_metadata, DType::kInt32, ""));
  FK_RETURN_IF_ERROR(check_dtype("num_splits", a.num_splits, DType::kInt32, ""));

  FK_RETURN_IF_ERROR(check_ndim("q", a.q, 4, "[B, s_q, h_q, 576]"));
  FK_RETURN_IF_ERROR(check_ndim("kv_cache", a.kv_cache, 4,
                                 fp8 ? "[num_pages, page_size, h_kv, 656] (FP8 layout)" : "[num_pages, page_size, h_kv, 576]"));
  FK_RETURN_IF_ERROR(check_ndim("block_table", a.block_table, 2, "[B, max_pages]"));
  FK_RETURN_IF_ERROR(check_ndim("seqlens_k", a.seqlens_k, 1, "[B]"));
  FK_RETURN_IF_ERROR(check_ndim("out", a.out, 4, "[B, s_q, h_q, 512]"));
  FK_RETURN_IF_ERROR(check_ndim("lse", a.lse, 3, "[B, h_q, s_q]"));
  for (const NamedTensor& n : all) FK_RETURN_IF_ERROR(check_sizes(n.name, n.t));

  const int64_t B = a.q.shape[0], s_q = a.q.shape[1], h_q = a.q.shape[2];
  const int64_t P = a.kv_cache.shape[0], page = a.kv_cache.shape[1], h_kv = a.kv_cache.shape[2];
  if (a.q.shape[3] != kMlaHeadDim) {
    return invalid("q", "expected head dim 576 (512 latent + 64 RoPE), got " + str(a.q.shape[3]) +
                            " (shape " + a.q.shape_str() + ")");
  }
  if (fp8 && a.kv_cache.shape[3] != kMlaFp8TokenBytes) {
    return invalid("kv_cache", "FP8 layout (dtype " + std::string(dtype_name(a.kv_cache.dtype)) +
                                   "): expected 656 bytes per token (512 e4m3 + 4 fp32 scales + 64 bf16 RoPE), got " +
                                   str(a.kv_cache.shape[3]) + " (shape " + a.kv_cache.shape_str() + ")");
  }
  if (!fp8 && a.kv_cache.shape[3] != kMlaHeadDim) {
    return invalid("kv_cache", "expected head dim 576 (512 latent + 64 RoPE), got " +
                                   str(a.kv_cache.shape[3]) + " (shape " + a.kv_cache.shape_str() + ")");
  }
  if (a.head_dim_v != kMlaHeadDimV) {
    return invalid("head_dim_v", "expected 512 (V = the first 512 dims of the latent cache), got " +
                                     str(a.head_dim_v));
  }
  if (s_q < 1 || s_q > kMaxSq) {
    return invalid("q", "expected s_q (new tokens per sequence, dim 1) in 1.." + str(kMaxSq) + ", got " +
                            str(s_q));
  }
  if (h_kv < 1) return invalid("kv_cache", "expected h_kv >= 1 heads, got " + a.kv_cache.shape_str());
  if (h_q < 1 || h_q % h_kv != 0) {
    return Status::Invalid("q, kv_cache: h_q = " + str(h_q) + " must be a positive multiple of h_kv = " +
                           str(h_kv));
  }
  if (h_q / h_kv > kMaxRatio) {
    return Status::Invalid("q, kv_cache: h_q / h_kv = " + str(h_q / h_kv) + " query heads per KV head, expected 1.." +
                           str(kMaxRatio));
  }
  if (page < 1) return invalid("kv_cache", "expected page_size >= 1, got shape " + a.kv_cache.shape_str());
  if (a.block_table.shape[0] != B) {
    return invalid("block_table", "expected " + str(B) + " rows (B from q), got " + a.block_table.shape_str());
  }
  if (a.seqlens_k.shape[0] != B) {
    return invalid("seqlens_k", "expected shape [" + str(B) + "] (B from q), got " + a.seqlens_k.shape_str());
  }
  if (a.block_table.shape[1] * page > kMaxSize) {
    return invalid("block_table", "max_pages * page_size = " + str(a.block_table.shape[1] * page) +
                                      " tokens exceeds 2^31 - 1 (32-bit lengths)");
  }
  if (P > kMaxSize) return invalid("kv_cache", "expected num_pages < 2^31, got " + str(P));
  if (a.out.shape[0] != B || a.out.shape[1] != s_q || a.out.shape[2] != h_q || a.out.shape[3] != kMlaHeadDimV) {
    return invalid("out", "expected shape " + shape_of({B, s_q, h_q, kMlaHeadDimV}) + ", got " + a.out.shape_str());
  }
  if (a.lse.shape[0] != B || a.lse.shape[1] != h_q || a.lse.shape[2] != s_q) {
    return invalid("lse", "expected shape [B, h_q, s_q] = " + shape_of({B, h_q, s_q}) + ", got " +
                              a.lse.shape_str());
  }
  FK_RETURN_IF_ERROR(check_metadata_shapes(a.tile_scheduler_metadata, a.num_splits, B, "q"));
  FK_RETURN_IF_ERROR(check_qkvo_layout("q", a.q, false));
  if (fp8) {  // 16-byte loads: the byte strides and the pointer 16-byte aligned
    for (int i = 0; i < 3; ++i) {
      if (a.kv_cache.shape[i] > 1 && a.kv_cache.stride[i] % 16 != 0) {
        return invalid("kv_cache", "FP8 layout: stride of dim " + str(i) + " is " + str(a.kv_cache.stride[i]) +
                                       " bytes, expected a multiple of 16 (16-byte loads)");
      }
    }
    FK_RETURN_IF_ERROR(check_qkvo_layout("kv_cache", a.kv_cache, false));
  } else {
    FK_RETURN_IF_ERROR(check_qkvo_layout("kv_cache", a.kv_cache, false));
  }
  FK_RETURN_IF_ERROR(check_qkvo_layout("out", a.out, true));
  FK_RETURN_IF_ERROR(check_contiguous("lse", a.lse));
  FK_RETURN_IF_ERROR(check_contiguous("seqlens_k", a.seqlens_k));
  FK_RETURN_IF_ERROR(check_block_table_layout(a.block_table));
  const int64_t num_parts = a.tile_scheduler_metadata.shape[0];
  FK_RETURN_IF_ERROR(check_workspace_mla(a.workspace, a.q.device_id, mla_workspace_size(B, s_q, h_q, num_parts)));
  if (a.softmax_scale > 0.f && !std::isfinite(a.softmax_scale)) {
    return invalid("softmax_scale", "expected a finite value > 0 (or <= 0 / NaN for 1/sqrt(576)), got inf");
  }
  if (!mla_variant_compiled(a.q.dtype)) {
    return Status::NotCompiled(std::string("MLA decode for dtype ") + dtype_name(a.q.dtype) +
                               " is not compiled into this build of FlashKit");
  }
  return Status::Ok();
}

FLASHKIT_EXPORT const char* mla_split_kernel_family(DType dtype, bool fp8_kv_cache) {
  DeviceInfo dev;
  if (cached_device_info_status(&dev) != 0 || dev.cc_major < 8) return "";
  return mla_split_family(dtype, dev, fp8_kv_cache);
}

FLASHKIT_EXPORT Status mla_decode(const MlaDecodeArgs& a, cudaStream_t stream) {
  FK_RETURN_IF_ERROR(validate_mla_decode(a));
  DeviceGuard guard(a.q.device_id);
  if (!guard.ok()) return Status::Unsupported("cannot make the device of q current");
  const int64_t B = a.q.shape[0];
  if (B == 0) return Status::Ok();
  DeviceInfo dev;
  cudaError_t err = static_cast<cudaError_t>(cached_device_info_status(&dev));
  if (err != cudaSuccess) return Status::Unsupported(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  if (dev.cc_major < 8) {
    return Status::Unsupported("MLA decode needs compute capability 8.0 or newer (device has " +
                               str(dev.cc_major) + ".x)");
  }
  const bool fp8 = a.kv_cache.dtype == DType::kUInt8 || a.kv_cache.dtype == DType::kFloat8E4M3FN;
  const int smem = mla_split_smem_bytes(a.q.dtype, dev, fp8);
  if (smem > dev.smem_optin) {
    return Status::Unsupported("the portable MLA kernel needs " + str(smem) +
                               " bytes of shared memory per block, the device allows " + str(dev.smem_optin));
  }
  if (checks::check_requested(a.check_inputs, stream)) {
    FK_RETURN_IF_ERROR(checks::check_block_table(a.block_table, a.seqlens_k, a.kv_cache.shape[0],
                                                 a.kv_cache.shape[1], stream));
  }
  MlaParams p{};
  int64_t s[kMaxDims] = {0, 0, 0, 0};
  const int64_t s_q = a.q.shape[1], h_q = a.q.shape[2], h_kv = a.kv_cache.shape[2];
  const int64_t num_parts = a.tile_scheduler_metadata.shape[0];
  p.q = a.q.data, p.kv = a.kv_cache.data, p.o = a.out.data;
  p.lse = static_cast<float*>(a.lse.data);
  p.block_table = static_cast<const int32_t*>(a.block_table.data);
  p.seqlens_k = static_cast<const int32_t*>(a.seqlens_k.data);
  p.sched = static_cast<const int32_t*>(a.tile_scheduler_metadata.data);
  p.num_splits = static_cast<const int32_t*>(a.num_splits.data);
  const WorkspaceLayout L = layout_of(B, s_q, h_q, num_parts);
  char* ws = static_cast<char*>(a.workspace.data);
  p.part_o = reinterpret_cast<float*>(ws + L.part_o);
  p.part_lse = reinterpret_cast<float*>(ws + L.part_lse);
  effective_strides(a.q, s), p.q_batch_stride = s[0], p.q_tok_stride = s[1], p.q_head_stride = s[2];
  effective_strides(a.out, s), p.o_batch_stride = s[0], p.o_tok_stride = s[1], p.o_head_stride = s[2];
  effective_strides(a.kv_cache, s), p.kv_page_stride = s[0], p.kv_slot_stride = s[1], p.kv_head_stride = s[2];
  effective_strides(a.block_table, s), p.bt_row_stride = s[0];
  p.batch = int(B), p.s_q = int(s_q), p.h_q = int(h_q), p.h_kv = int(h_kv);
  p.ratio = int(h_q / h_kv);
  p.rows_per_kv = p.ratio * p.s_q;
  p.m_blocks = (p.rows_per_kv + kMlaBlockM - 1) / kMlaBlockM;
  p.page_size = int(a.kv_cache.shape[1]);
  p.max_pages = int(a.block_table.shape[1]);
  p.num_pages = int(a.kv_cache.shape[0]);
  p.capacity = int64_t(p.max_pages) * p.page_size;
  p.num_parts = int(num_parts);
  p.max_partials = int(L.max_partials);
  const float scale = a.softmax_scale > 0.f ? a.softmax_scale : static_cast<float>(1.0 / std::sqrt(double(kMlaHeadDim)));
  p.softmax_scale = scale;
  p.softmax_scale_log2 = static_cast<float>(double(scale) * 1.4426950408889634);
  p.causal = a.causal;
  p.kv_fp8 = fp8;
  p.errors = device_error_word(a.q.device_id);
  if (p.errors == nullptr) return Status::Cuda("mla_decode: the device error word is not available");
  FK_RETURN_IF_ERROR(cuda_status(static_cast<cudaError_t>(launch_mla_split_for(a.q.dtype, p, dev, stream)),
                                 "mla split launch"));
  return cuda_status(static_cast<cudaError_t>(launch_mla_combine_for(a.q.dtype, p, dev.cc_major >= 9, stream)),
                     "mla combine launch");
}

}  // namespace flashkit
