// FlashInfer batch decode with a paged KV cache, CUDA-core kernel: what
// flashinfer.BatchDecodeWithPagedKVCacheWrapper runs by default (use_tensor_cores=False,
// backend "auto" on sm90, no CUDA graph). Plan and run follow FlashInfer 0.7.2.post1's
// csrc/batch_decode.cu (BatchDecodeWithPagedKVCachePlan / ...Run); the kernel is the one
// instantiated by the rendered batch_decode_kernel.cu (FlashInfer's batch_decode_kernel_inst
// template). One query token per request.
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/pos_enc.cuh>
#include <flashinfer/utils.cuh>

#include "batch_decode_config.inc"
#include "fi_peer_common.h"

namespace flashinfer {
template <uint32_t HEAD_DIM, PosEncodingMode POS_ENCODING_MODE, typename AttentionVariant,
          typename Params>
cudaError_t BatchDecodeWithPagedKVCacheDispatched(Params params, typename Params::DTypeO* tmp_v,
                                                  float* tmp_s, bool enable_pdl,
                                                  cudaStream_t stream);
}  // namespace flashinfer

using Variant = DefaultAttention<false, false, false, false>;  // = the config's variant_name
using fipeer::Handle;

FI_EXPORT const char* fi_last_error() { return fipeer::last_error().c_str(); }

FI_EXPORT const char* fi_describe() {
  return "flashinfer 0.7.2.post1 BatchDecodeWithPagedKVCache (CUDA cores, fa2 decode), "
         "bf16, head_dim 128, NHD, no RoPE/window/soft-cap";
}

FI_EXPORT int fi_create(int hq, int hkv, int d, int page, size_t fws, size_t iws, void** out) {
  return fipeer::guarded([&] { *out = fipeer::create_handle(hq, hkv, d, page, fws, iws); });
}

FI_EXPORT int fi_destroy(void* h) {
  return fipeer::guarded([&] { fipeer::destroy_handle(static_cast<Handle*>(h)); });
}

FI_EXPORT int fi_plan(void* handle, const int32_t* kv_indptr_host, const int32_t* kv_len_host,
                      int batch_size, int q_len, int causal, void* stream) {
  (void)kv_len_host;
  (void)causal;
  return fipeer::guarded([&] {
    auto* h = static_cast<Handle*>(handle);
    fipeer::require(q_len == 1, "the CUDA-core decode kernel takes one query token per request");
    DecodePlanInfo plan_info;
    auto st = cudaSuccess;
    // DecodePlan reads the indptr through a non-const pointer; it does not write it.
    auto* indptr = const_cast<int32_t*>(kv_indptr_host);
    DISPATCH_GQA_GROUP_SIZE(h->num_qo_heads / h->num_kv_heads, GROUP_SIZE, {
      auto work_estimation_func =
          BatchDecodeWithPagedKVCacheWorkEstimationDispatched<GROUP_SIZE, HEAD_DIM_QK,
                                                              POS_ENCODING_MODE, Variant, Params>;
      st = DecodePlan<HEAD_DIM_QK, POS_ENCODING_MODE, Variant, Params>(
          h->float_ws, h->float_ws_bytes, h->int_ws, h->pinned_ws, h->int_ws_bytes, plan_info,
          indptr, batch_size, h->num_qo_heads, h->page_size, /*enable_cuda_graph=*/false,
          static_cast<cudaStream_t>(stream), work_estimation_func);
    });
    fipeer::check(st, "DecodePlan");
    h->plan_info = plan_info.ToVector();
    h->batch_size = batch_size;
    h->q_len = 1;
    h->planned = true;
  });
}

FI_EXPORT int fi_run(void* handle, void* q, int64_t q_stride_n, int64_t q_stride_h,
                     void* k_cache, void* v_cache, const int64_t* kv_strides, void* kv_indices,
                     void* kv_indptr, void* last_page_len, void* qo_indptr, void* o, float* lse,
                     double sm_scale, int enable_pdl, void* stream) {
  (void)qo_indptr;
  return fipeer::guarded([&] {
    auto* h = static_cast<Handle*>(handle);
    fipeer::require(h->planned, "fi_run before fi_plan");
    DecodePlanInfo plan_info;
    plan_info.FromVector(h->plan_info);
    paged_kv_t<DTypeKV, IdType> paged_kv(
        h->num_kv_heads, h->page_size, HEAD_DIM_QK, h->batch_size, QKVLayout::kNHD,
        static_cast<DTypeKV*>(k_cache), static_cast<DTypeKV*>(v_cache), kv_strides, kv_strides,
        static_cast<IdType*>(kv_indices), static_cast<IdType*>(kv_indptr),
        static_cast<IdType*>(last_page_len));
    Params params;
    params.q = static_cast<DTypeQ*>(q);
    params.paged_kv = paged_kv;
    params.o = static_cast<DTypeO*>(o);
    params.lse = lse;
    params.padded_batch_size = 0;
    params.num_qo_heads = h->num_qo_heads;
    params.q_stride_n = static_cast<IdType>(q_stride_n);
    params.q_stride_h = static_cast<IdType>(q_stride_h);
    params.window_left = -1;
    params.partition_kv = false;
    params.block_valid_mask = nullptr;
    // additional params (defaults of BatchDecodeWithPagedKVCacheWrapper.run)
    params.maybe_alibi_slopes = nullptr;
    params.logits_soft_cap = 0.0;
    params.sm_scale = sm_scale;
    params.rope_rcp_scale = 1.0;
    params.rope_rcp_theta = 1.0 / 1e4;

    DTypeO* tmp_v = nullptr;
    float* tmp_s = nullptr;
    params.request_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.request_indices_offset);
    params.kv_tile_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.kv_tile_indices_offset);
    params.o_indptr = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.o_indptr_offset);
    params.kv_chunk_size_ptr =
        GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.kv_chunk_size_ptr_offset);
    if (plan_info.split_kv) {
      tmp_v = GetPtrFromBaseOffset<DTypeO>(h->float_ws, plan_info.v_offset);
      tmp_s = GetPtrFromBaseOffset<float>(h->float_ws, plan_info.s_offset);
      if (plan_info.enable_cuda_graph) {
        params.block_valid_mask = GetPtrFromBaseOffset<bool>(h->int_ws, plan_info.block_valid_mask_offset);
      }
    }
    params.padded_batch_size = plan_info.padded_batch_size;
    fipeer::check(BatchDecodeWithPagedKVCacheDispatched<HEAD_DIM_QK, POS_ENCODING_MODE, Variant>(
                      params, tmp_v, tmp_s, enable_pdl != 0, static_cast<cudaStream_t>(stream)),
                  "BatchDecodeWithPagedKVCache");
  });
}
