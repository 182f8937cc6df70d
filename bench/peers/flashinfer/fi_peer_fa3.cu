// FlashInfer FA3 (Hopper, sm90) batch prefill with a paged KV cache: the kernel
// flashinfer.BatchPrefillWithPagedKVCacheWrapper(backend="auto") picks on sm90 for bf16
// head_dim 128. Plan and run follow FlashInfer 0.7.2.post1's csrc/batch_prefill_sm90.cu
// (BatchPrefillWithKVCacheSM90Plan / BatchPrefillWithPagedKVCacheSM90Run). Kernels: the
// rendered batch_prefill_paged_sm90_kernel_mask_{0,1}.cu (FlashInfer's
// batch_prefill_paged_sm90_kernel_inst template). No split-KV in this path.
#include <flashinfer/attention/mask.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/layout.cuh>
#include <flashinfer/math.cuh>

#include "batch_prefill_sm90_config.inc"
#include "fi_peer_common.h"

namespace flashinfer {
template <uint32_t HEAD_DIM_QK, uint32_t HEAD_DIM_VO, MaskMode MASK_MODE, bool LEFT_SLIDING_WINDOW,
          bool SAME_SCHEDULE_FOR_ALL_HEADS, typename AttentionVariant, typename Params>
cudaError_t BatchPrefillWithPagedKVCacheDispatched(Params& params, bool enable_pdl,
                                                   cudaStream_t stream);
}  // namespace flashinfer

using Variant = DefaultAttention<false>;  // = the config's variant_name
using fipeer::Handle;

FI_EXPORT const char* fi_last_error() { return fipeer::last_error().c_str(); }

FI_EXPORT const char* fi_describe() {
  return "flashinfer 0.7.2.post1 BatchPrefillWithPagedKVCache fa3 (sm90; prefill wrapper "
         "backend=auto on Hopper), bf16, head_dim 128, NHD";
}

FI_EXPORT int fi_create(int hq, int hkv, int d, int page, size_t fws, size_t iws, void** out) {
  return fipeer::guarded([&] { *out = fipeer::create_handle(hq, hkv, d, page, fws, iws); });
}

FI_EXPORT int fi_destroy(void* h) {
  return fipeer::guarded([&] { fipeer::destroy_handle(static_cast<Handle*>(h)); });
}

FI_EXPORT int fi_plan(void* handle, const int32_t* kv_indptr_host, const int32_t* kv_len_host,
                      int batch_size, int q_len, int causal, void* stream) {
  return fipeer::guarded([&] {
    auto* h = static_cast<Handle*>(handle);
    fipeer::require(q_len >= 1, "q_len must be >= 1");
    std::vector<int32_t> qo_indptr(batch_size + 1);
    for (int i = 0; i <= batch_size; ++i) qo_indptr[i] = i * q_len;
    PrefillPlanSM90Info plan_info;
    fipeer::check(PrefillSM90Plan<IdType>(
                      h->float_ws, h->float_ws_bytes, h->int_ws, h->pinned_ws, h->int_ws_bytes,
                      plan_info, qo_indptr.data(), const_cast<int32_t*>(kv_indptr_host),
                      const_cast<int32_t*>(kv_len_host), /*total_num_rows=*/batch_size * q_len,
                      batch_size, h->num_qo_heads, h->num_kv_heads, HEAD_DIM_QK, HEAD_DIM_VO,
                      h->page_size, causal != 0, /*enable_cuda_graph=*/false,
                      /*sizeof_dtype_o=*/2, static_cast<cudaStream_t>(stream)),
                  "PrefillSM90Plan");
    h->plan_info = plan_info.ToVector();
    h->batch_size = batch_size;
    h->q_len = q_len;
    h->causal = causal;
    h->planned = true;
  });
}

template <MaskMode MASK_MODE>
static cudaError_t dispatch_sched(bool same, PagedParams& params, bool pdl, cudaStream_t s) {
  return same ? BatchPrefillWithPagedKVCacheDispatched<HEAD_DIM_QK, HEAD_DIM_VO, MASK_MODE, false,
                                                       true, Variant>(params, pdl, s)
              : BatchPrefillWithPagedKVCacheDispatched<HEAD_DIM_QK, HEAD_DIM_VO, MASK_MODE, false,
                                                       false, Variant>(params, pdl, s);
}

FI_EXPORT int fi_run(void* handle, void* q, int64_t q_stride_n, int64_t q_stride_h,
                     void* k_cache, void* v_cache, const int64_t* kv_strides, void* kv_indices,
                     void* kv_indptr, void* last_page_len, void* qo_indptr, void* o, float* lse,
                     double sm_scale, int enable_pdl, void* stream) {
  (void)kv_indptr;      // the sm90 kernel reads the planned copies in the int workspace
  (void)last_page_len;
  (void)qo_indptr;
  return fipeer::guarded([&] {
    auto* h = static_cast<Handle*>(handle);
    fipeer::require(h->planned, "fi_run before fi_plan");
    PrefillPlanSM90Info plan_info;
    plan_info.FromVector(h->plan_info);
    PagedParams params;
    params.q_ptr = static_cast<DTypeQ*>(q);
    params.k_ptr = static_cast<DTypeKV*>(k_cache);
    params.v_ptr = static_cast<DTypeKV*>(v_cache);
    params.o_ptr = static_cast<DTypeO*>(o);
    params.lse_ptr = lse;
    params.q_stride_n = q_stride_n;
    params.q_stride_h = q_stride_h;
    params.o_stride_n = static_cast<int64_t>(h->num_qo_heads) * HEAD_DIM_VO;  // o contiguous
    params.o_stride_h = HEAD_DIM_VO;
    // NHD: (num_pages, page_size, num_heads, head_dim)
    params.k_stride_n = kv_strides[1];
    params.k_stride_h = kv_strides[2];
    params.v_stride_n = kv_strides[1];
    params.v_stride_h = kv_strides[2];
    params.k_page_stride = kv_strides[0];
    params.v_page_stride = kv_strides[0];
    params.nnz_qo = static_cast<int64_t>(h->batch_size) * h->q_len;
    params.num_qo_heads = h->num_qo_heads;
    params.num_kv_heads = h->num_kv_heads;
    params.group_size = h->num_qo_heads / h->num_kv_heads;
    params.page_size = h->page_size;
    params.head_dim = HEAD_DIM_QK;
    params.window_left = -1;
    params.causal = h->causal != 0;
    params.qo_tile_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.qo_tile_indices_offset);
    params.qo_indptr = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.qo_indptr_offset);
    params.kv_indptr = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.kv_indptr_offset);
    params.qo_lens = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.qo_len_offset);
    params.kv_lens = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.kv_len_offset);
    params.head_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.head_indices_offset);
    params.work_indptr = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.work_indptr_offset);
    params.batch_indices = GetPtrFromBaseOffset<IdType>(h->int_ws, plan_info.batch_indices_offset);
    params.kv_indices = static_cast<IdType*>(kv_indices);
    // additional params (defaults of BatchPrefillWithPagedKVCacheWrapper.run, bf16)
    params.additional_params.maybe_prefix_len_ptr = nullptr;
    params.additional_params.maybe_token_pos_in_items_ptr = nullptr;
    params.additional_params.maybe_max_item_len_ptr = nullptr;
    params.additional_params.maybe_scale_v = nullptr;
    params.additional_params.logits_soft_cap = 0.0;
    params.additional_params.sm_scale = sm_scale;
    params.additional_params.scale_v_scalar = 1.0;
    params.additional_params.token_pos_in_items_len = 0;

    bool same = plan_info.same_schedule_for_all_heads;
    auto s = static_cast<cudaStream_t>(stream);
    bool pdl = enable_pdl != 0;
    cudaError_t st = h->causal ? dispatch_sched<MaskMode::kCausal>(same, params, pdl, s)
                               : dispatch_sched<MaskMode::kNone>(same, params, pdl, s);
    fipeer::check(st, "BatchPrefillWithPagedKVCacheSM90");
  });
}
