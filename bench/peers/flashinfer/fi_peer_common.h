// C ABI shared by the three FlashInfer peer libraries of the FlashKit decode bench
// (libfi_decode.so, libfi_fa2.so, libfi_fa3.so). Each library wraps one FlashInfer kernel
// family compiled from FlashInfer's own templates (see render_templates.py, build.sh); the
// plan/run logic mirrors what FlashInfer's csrc/*.cu bindings do for its Python wrappers,
// with raw pointers instead of tvm-ffi tensors. Every entry point returns 0 on success and
// 1 on failure (message from fi_last_error()); no C++ exception crosses the boundary.
//
// Handles own their workspaces (device float/int buffers and a pinned host buffer), like a
// FlashInfer wrapper object does. Tensors (all device pointers, bf16 unless noted):
//   q        [B * q_len, H_q, D]   (token stride q_stride_n, head stride q_stride_h)
//   k/v      [num_pages, page_size, H_kv, D]  (NHD layout; strides in elements)
//   kv_indices [nnz_pages] int32, kv_indptr [B+1] int32, last_page_len [B] int32
//   qo_indptr [B+1] int32 (prefill kernels only: i * q_len)
//   o        [B * q_len, H_q, D] contiguous;  lse [B * q_len, H_q] fp32 or null
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#define FI_EXPORT extern "C" __attribute__((visibility("default")))

namespace fipeer {

inline std::string& last_error() {
  static thread_local std::string msg;
  return msg;
}

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error() = e.what();
  } catch (...) {
    last_error() = "unknown C++ exception";
  }
  return 1;
}

inline void check(cudaError_t st, const char* what) {
  if (st != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(st));
  }
}

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

struct Handle {
  int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 0;
  void* float_ws = nullptr;
  void* int_ws = nullptr;
  void* pinned_ws = nullptr;
  size_t float_ws_bytes = 0, int_ws_bytes = 0;
  // set by plan
  bool planned = false;
  int batch_size = 0, q_len = 1, causal = 0;
  std::vector<int64_t> plan_info;
};

inline Handle* create_handle(int hq, int hkv, int d, int page, size_t float_ws, size_t int_ws) {
  require(hq > 0 && hkv > 0 && hq % hkv == 0, "num_qo_heads must be a multiple of num_kv_heads");
  require(d == 128, "this build instantiates head_dim 128 only");
  require(page >= 1, "page_size must be >= 1");
  auto* h = new Handle();
  h->num_qo_heads = hq;
  h->num_kv_heads = hkv;
  h->head_dim = d;
  h->page_size = page;
  h->float_ws_bytes = float_ws;
  h->int_ws_bytes = int_ws;
  try {
    check(cudaMalloc(&h->float_ws, float_ws), "cudaMalloc(float workspace)");
    check(cudaMalloc(&h->int_ws, int_ws), "cudaMalloc(int workspace)");
    check(cudaMallocHost(&h->pinned_ws, int_ws), "cudaMallocHost(pinned workspace)");
  } catch (...) {
    if (h->float_ws) cudaFree(h->float_ws);
    if (h->int_ws) cudaFree(h->int_ws);
    delete h;
    throw;
  }
  return h;
}

inline void destroy_handle(Handle* h) {
  if (!h) return;
  cudaFree(h->float_ws);
  cudaFree(h->int_ws);
  cudaFreeHost(h->pinned_ws);
  delete h;
}

}  // namespace fipeer

// The ABI every library exports (implemented per kernel family).
FI_EXPORT const char* fi_last_error();
FI_EXPORT const char* fi_describe();  // which FlashInfer kernel family / template values
FI_EXPORT int fi_create(int num_qo_heads, int num_kv_heads, int head_dim, int page_size,
                        size_t float_ws_bytes, size_t int_ws_bytes, void** out);
FI_EXPORT int fi_destroy(void* handle);
// kv_indptr_host: [B+1] page offsets; kv_len_host: [B] tokens (including the new ones).
FI_EXPORT int fi_plan(void* handle, const int32_t* kv_indptr_host, const int32_t* kv_len_host,
                      int batch_size, int q_len, int causal, void* stream);
// kv_strides: 4 int64 (page, token, head, dim) in elements, identical for K and V.
FI_EXPORT int fi_run(void* handle, void* q, int64_t q_stride_n, int64_t q_stride_h,
                     void* k_cache, void* v_cache, const int64_t* kv_strides, void* kv_indices,
                     void* kv_indptr, void* last_page_len, void* qo_indptr, void* o, float* lse,
                     double sm_scale, int enable_pdl, void* stream);
