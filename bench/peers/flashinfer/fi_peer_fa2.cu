// FlashInfer FA2 (tensor-core) batch prefill with a paged KV cache: the kernel behind
// flashinfer.BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=True) (q_len_per_req >= 1)
// and BatchPrefillWithPagedKVCacheWrapper(backend="fa2"). Plan and run follow FlashInfer
// 0.7.2.post1's csrc/batch_prefill.cu (BatchPrefillWithKVCachePlan) and
// csrc/batch_prefill_paged.cuh (BatchPrefillWithPagedKVCacheRun, equal K/V strides) with the
// arguments the decode wrapper's tensor-core path passes (fixed_split_size -1, split-KV on,
// uniform_q_len = q_len when q_len > 1). Kernels: the rendered
// batch_prefill_paged_kernel_mask_{0,1}.cu (FlashInfer's batch_prefill_paged_kernel_inst).
#include <flashinfer/attention/mask.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/pos_enc.cuh>

#include "batch_prefill_config.inc"
#include "fi_peer_common.h"

namespace flashinfer {
template <bool SAME_KV_STRIDES, uint32_t CTA_TILE_Q, uint32_t HEAD_DIM_QK, uint32_t HEAD_DIM_VO,
          PosEncodingMode POS_ENCODING_MODE, bool USE_FP16_QK_REDUCTION, MaskMode MASK_MODE,
          typename AttentionVariant, typename Params>
cudaError_t BatchPrefillWithPagedKVCacheDispatched(Params params, typename Params::DTypeO* tmp_v,
                                                   float* tmp_s, bool enable_pdl,
                                                   cudaStream_t stream);
}  // namespace flashinfer

// = the config's variant_name with use_custom_mask = false (mask modes 0 and 1)
using Variant = DefaultAttention<false, false, false, false>;
using fipeer::Handle;

FI_EXPORT const char* fi_last_error() { return fipeer::last_error().c_str(); }

FI_EXPORT const char* fi_describe() {
  return "flashinfer 0.7.2.post1 BatchPrefillWithPagedKVCache fa2 (tensor cores; decode wrapper "
         "use_tensor_cores=True), bf16, head_dim 128, NHD, equal K/V strides";
}

FI_EXPORT int fi_create(int hq, int hkv, int d, int page, size_t fws, size_t iws, void** out) {
  return fipeer::guarded([&] { *out = fipeer::create_handle(hq, hkv, d, page, fws, iws); });
}

FI_EXPORT int fi_destroy(void* h) {
  return fipeer::guarded([&] { fipeer::destroy_handle(static_cast<Handle*>(h)); });
}

FI_EXPORT int fi_plan(void* handle, const int32_t* kv_indptr_host, const int32_t* kv_len_host,
                      int batch_size, int q_len, int causal, void* stream) {
  (void)kv_len_host;  // FlashInfer's fa2 plan takes kv_len_arr but does not use it
  return fipeer::guarded([&] {
    auto* h = static_cast<Handle*>(handle);
    fipeer::require(q_len >= 1, "q_len must be >= 1");
    std::vector<int32_t> qo_indptr(batch_size + 1);
    for (int i = 0; i <= batch_size; ++i) qo_indptr[i] = i * q_len;
    PrefillPlanInfo plan_info;
    fipeer::check(
        PrefillPlan<IdType>(h->float_ws, h->float_ws_bytes, h->int_ws, h->pinned_ws,
                            h->int_ws_bytes, plan_info, qo_indptr.data(),
                            const_cast<int32_t*>(kv_indptr_host),
                            /*total_num_rows=*/batch_size * q_len, batch_size, h->num_qo_heads,
                            h->num_kv_heads, HEAD_DIM_QK, HEAD_DIM_VO, h->page_size,
                            /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2,
                            /*window_left=*/-1, /*fixed_split_size=*/-1,
                            /*disable_split_kv=*/false, /*num_colocated_ctas=*/0,
                            /*uniform_q_len=*/q_len > 1 ? q_len : 0,
                            static_cast<cudaStream_t>(stream), /*kv_dtype_bytes=*/sizeof(DTypeKV)),
        "PrefillPlan");
    h->plan_info = plan_info.ToVector();
    h->batch_size = batch_size;
    h->q_len = q_len;
    h->causal = causal;
    h->planned = true;
  });
}

template <MaskMode MASK_MODE>
static cudaError_t dispatch_tile(int cta_tile_q, PagedParams& params, DTypeO* tmp_v, float* tmp_s,
                                 bool pdl, cudaStream_t stream) {
  // The rendered instantiation files hold CTA_TILE_Q 16, 64 and 128 (all the planner picks
  // for head_dim 128).
  switch (cta_tile_q) {
#define FI_TILE(T)                                                                           \
  case T:                                                                                    \
    return BatchPrefillWithPagedKVCacheDispatched<true, T, HEAD_DIM_QK, HEAD_DIM_VO,         \
                                                  POS_ENCODING_MODE, USE_FP16_QK_REDUCTION, \
                                                  MASK_MODE, Variant, PagedParams>(          \
        params, tmp_v, tmp_s, pdl, stream);
    FI_TILE(16)
    FI_TILE(64)
    FI_TILE(128)
#undef FI_TILE
    default:
      throw std::runtime_error("cta_tile_q " + std::to_string(cta_tile_q) + " not instantiated");
  }
}

FI_EXPORT int fi_run(void* handle, void* q, int64_t q_stride_n, int64_t q_stride_h,
                     void* k_cache, void* v_cache, const int64_t* kv_strides, void* kv_indices,
                     void* kv_indptr, void* last_page_len, void* qo_indptr, void* o, float* lse,
                     double sm_scale, int enable_pdl, void* stream) {
  return fipeer::guarded([&] {
    auto* h = static_cast<Handle*>(handle);
    fipeer::require(h->planned, "fi_run before fi_plan");
    fipeer::require(qo_indptr != nullptr, "qo_indptr is required");
    PrefillPlanInfo plan_info;
    plan_info.FromVector(h->plan_info);
    PagedParams params;
    params.q = static_cast<DTypeQ*>(q);
    params.paged_kv = paged_kv_t<DTypeKV, IdType>(
        h->num_kv_heads, h->page_size, HEAD_DIM_VO, h->batch_size, QKVLayout::kNHD,
        static_cast<DTypeKV*>(k_cache), static_cast<DTypeKV*>(v_cache), kv_strides, kv_strides,
        static_cast<IdType*>(kv_indices), static_cast<IdType*>(kv_indptr),
        static_cast<IdType*>(last_page_len));
    params.q_indptr = static_cast<IdType*>(qo_indptr);
    params.o = static_cast<DTypeO*>(o);
    params.lse = lse;
    params.num_qo_heads = h->num_qo_heads;
    params.group_size = uint_fastdiv(h->num_qo_heads / h->num_kv_heads);
    params.q_stride_n = static_cast<IdType>(q_stride_n);
    params.q_stride_h = static_cast<IdType>(q_stride_h);
    params.window_left = -1;
    params.request_indices = nullptr;
    params.qo_tile_indices = nullptr;
    params.kv_tile_indices = nullptr;
    params.merge_indptr = nullptr;
    params.o_indptr = nullptr;
    params.kv_chunk_size_ptr = nullptr;
    params.block_valid_mask = nullptr;
    params.total_num_rows = nullptr;
    params.max_total_num_rows = 0;
    params.padded_batch_size = 0;
    params.partition_kv = false;
    params.k_sf_stride_page = params.k_sf_stride_n = params.k_sf_stride_h = 0;
    params.v_sf_stride_page = params.v_sf_stride_n = params.v_sf_stride_h = 0;
    // additional params (defaults of the wrappers' run)
    params.maybe_custom_mask = nullptr;
    params.maybe_mask_indptr = nullptr;
    params.maybe_alibi_slopes = nullptr;
    params.maybe_prefix_len_ptr = nullptr;
    params.maybe_token_pos_in_items_ptr = nullptr;
    params.maybe_max_item_len_ptr = nullptr;
    params.maybe_k_cache_sf = nullptr;
    params.maybe_v_cache_sf = nullptr;
    params.logits_soft_cap = 0.0;
    params.sm_scale = sm_scale;
    params.rope_rcp_scale = 1.0;
    params.rope_rcp_theta = 1.0 / 1e4;
    params.token_pos_in_items_len = 0;

    DTypeO* tmp_v = nullptr;
    float* tmp_s = nullptr;
    params.request_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.request_indices_offset);
    params.qo_tile_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.qo_tile_indices_offset);
    params.kv_tile_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.kv_tile_indices_offset);
    params.o_indptr = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.o_indptr_offset);
    params.kv_chunk_size_ptr = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.kv_chunk_size_ptr_offset);
    if (plan_info.split_kv) {
      params.merge_indptr = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.merge_indptr_offset);
      tmp_v = GetPtrFromBaseOffset<DTypeO>(h->float_ws, plan_info.v_offset);
      tmp_s = GetPtrFromBaseOffset<float>(h->float_ws, plan_info.s_offset);
    }
    params.padded_batch_size = plan_info.padded_batch_size;
    params.max_total_num_rows = plan_info.total_num_rows;
    if (plan_info.enable_cuda_graph) {
      params.block_valid_mask = GetPtrFromBaseOffset<bool>(h->int_ws, plan_info.block_valid_mask_offset);
      params.total_num_rows = GetPtrFromBaseOffset<uint32_t>(h->int_ws, plan_info.total_num_rows_offset);
    }
    auto s = static_cast<cudaStream_t>(stream);
    bool pdl = enable_pdl != 0;
    cudaError_t st = h->causal
        ? dispatch_tile<MaskMode::kCausal>(plan_info.cta_tile_q, params, tmp_v, tmp_s, pdl, s)
        : dispatch_tile<MaskMode::kNone>(plan_info.cta_tile_q, params, tmp_v, tmp_s, pdl, s);
    fipeer::check(st, "BatchPrefillWithPagedKVCache");
  });
}
