// Dense attention forward entry point: validate, convert to FwdParams, dispatch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "api/attention_internal.h"
#include "api/validate_util.h"
#include "api/index_checks.h"
#include "api/launch_device.h"
#include "flashkit/attention.h"
#include "launch/device_errors.h"
#include "launch/fwd_dispatch.h"

namespace flashkit {
namespace detail {
namespace {

constexpr double kLog2e = 1.4426950408889634074;

struct RowHeadStrides {
  int64_t batch, row, head;
};

RowHeadStrides bshd_strides(const TensorRef& t, bool varlen) {
  int64_t s[kMaxDims] = {0, 0, 0, 0};
  vutil::effective_strides(t, s);
  if (varlen) return {0, s[0], s[1]};  // [total, H, D]
  return {s[0], s[1], s[2]};           // [B, S, H, D]
}

}  // namespace

FLASHKIT_EXPORT bool fwd_is_empty(const AttentionFwdArgs& args) {
  if (args.cu_seqlens_q.defined()) {
    return args.cu_seqlens_q.shape[0] <= 1 || args.q.shape[0] == 0;  // B == 0 or total_q == 0
  }
  return args.q.shape[0] == 0 || args.q.shape[1] == 0;  // B == 0 or S_q == 0
}

FLASHKIT_EXPORT FwdParams make_fwd_params(const AttentionFwdArgs& args) {
  const bool varlen = args.cu_seqlens_q.defined();
  const int o = varlen ? 0 : 1;  // dim offset: varlen tensors have no batch dim
  FwdParams p{};

  p.q = args.q.data;
  p.k = args.k.data;
  p.v = args.v.data;
  p.o = args.out.data;

  const RowHeadStrides q = bshd_strides(args.q, varlen);
  const RowHeadStrides k = bshd_strides(args.k, varlen);
  const RowHeadStrides v = bshd_strides(args.v, varlen);
  const RowHeadStrides out = bshd_strides(args.out, varlen);
  p.q_batch_stride = q.batch, p.q_row_stride = q.row, p.q_head_stride = q.head;
  p.k_batch_stride = k.batch, p.k_row_stride = k.row, p.k_head_stride = k.head;
  p.v_batch_stride = v.batch, p.v_row_stride = v.row, p.v_head_stride = v.head;
  p.o_batch_stride = out.batch, p.o_row_stride = out.row, p.o_head_stride = out.head;

  const int64_t s_q = args.q.shape[o];  // total_q in varlen mode
  const int64_t s_k = args.k.shape[o];  // total_k in varlen mode
  const int64_t h_q = args.q.shape[o + 1];
  const int64_t h_kv = args.k.shape[o + 1];
  const int64_t d = args.q.shape[o + 2];

  if (args.lse.defined()) {
    p.lse = static_cast<float*>(args.lse.data);
    p.lse_batch_stride = varlen ? 0 : h_q * s_q;
    p.lse_head_stride = s_q;
  } else {
    p.lse = nullptr;
    p.lse_batch_stride = 0;
    p.lse_head_stride = 0;
  }

  p.error_flag = nullptr;  // set by attention_fwd (needs the device)
  p.total_q = static_cast<int>(s_q);
  p.total_k = static_cast<int>(s_k);
  if (varlen) {
    p.cu_seqlens_q = static_cast<const int32_t*>(args.cu_seqlens_q.data);
    p.cu_seqlens_k = static_cast<const int32_t*>(args.cu_seqlens_k.data);
    p.batch = static_cast<int>(args.cu_seqlens_q.shape[0] - 1);
    // Every sequence fits in the packed tensor, so total is an upper bound as well.
    p.seqlen_q = static_cast<int>(std::min(args.max_seqlen_q, s_q));
    p.seqlen_k = static_cast<int>(std::min(args.max_seqlen_k, s_k));
  } else {
    p.cu_seqlens_q = nullptr;
    p.cu_seqlens_k = nullptr;
    p.batch = static_cast<int>(args.q.shape[0]);
    p.seqlen_q = static_cast<int>(s_q);
    p.seqlen_k = static_cast<int>(s_k);
  }

  p.h_q = static_cast<int>(h_q);
  p.h_kv = static_cast<int>(h_kv);
  p.h_ratio = h_kv > 0 ? static_cast<int>(h_q / h_kv) : 0;
  p.div_h_q = prims::FastDiv::make(p.h_q);
  p.div_h_ratio = prims::FastDiv::make(p.h_ratio);
  p.head_dim = static_cast<int>(d);

  const float scale = args.softmax_scale > 0.f  // false for NaN
                          ? args.softmax_scale
                          : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  p.softmax_scale = scale;
  p.softmax_scale_log2 = static_cast<float>(static_cast<double>(scale) * kLog2e);
  // window_right = 0 is the causal mask; a causal call clips a larger window_right to 0.
  // Windows wider than any sequence are the same as none (and keep int ranges small).
  const int64_t big = std::max<int64_t>(s_q, s_k);
  int64_t right = args.window_right < 0 || args.window_right >= big ? -1 : args.window_right;
  if (args.causal || right == 0) right = 0;
  p.causal = right == 0;
  p.window_right = p.causal ? 0 : static_cast<int>(right);
  p.window_left = args.window_left < 0 || args.window_left >= big ? -1 : static_cast<int>(args.window_left);
  p.softcap = args.softcap > 0.f ? args.softcap : 0.f;
  p.softcap_scale = p.softcap > 0.f ? scale / p.softcap : 0.f;
  if (p.softcap > 0.f) p.softmax_scale_log2 = static_cast<float>(kLog2e);
  return p;
}

}  // namespace detail

namespace detail {

// Check mode: cu_seqlens_q/k validated on the GPU (the current device is q's). Only the
// explicit request is refused under graph capture; the environment switch skips the
// calls being captured.
Status check_varlen_indices(const AttentionFwdArgs& args, cudaStream_t stream) {
  if (!args.check_inputs) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
        capture != cudaStreamCaptureStatusNone) {
      return Status::Ok();
    }
  }
  const checks::CuSeqlensCheck q{"cu_seqlens_q", "q", "total_q", "max_seqlen_q",
                                 {static_cast<const int32_t*>(args.cu_seqlens_q.data),
                                  args.cu_seqlens_q.shape[0], args.q.shape[0], args.max_seqlen_q}};
  const checks::CuSeqlensCheck k{"cu_seqlens_k", "k", "total_k", "max_seqlen_k",
                                 {static_cast<const int32_t*>(args.cu_seqlens_k.data),
                                  args.cu_seqlens_k.shape[0], args.k.shape[0], args.max_seqlen_k}};
  Status s = checks::check_index(q, stream);
  if (s.ok()) s = checks::check_index(k, stream);
  return s;
}

}  // namespace detail

FLASHKIT_EXPORT Status attention_fwd(const AttentionFwdArgs& args, cudaStream_t stream) {
  Status status = validate_attention_fwd(args);
  if (!status.ok()) return status;
  const bool check = args.cu_seqlens_q.defined() && (args.check_inputs || checks::check_inputs_from_env());
  const bool empty = detail::fwd_is_empty(args);
  if (empty && !check) return Status::Ok();  // nothing to compute or write

  const detail::LaunchDevice launch(args.q.device_id);  // q's device, for this scope
  if (!launch.status().ok()) return launch.status();
  if (check) status = detail::check_varlen_indices(args, stream);
  if (status.ok() && !empty) {
    FwdParams params = detail::make_fwd_params(args);
    params.error_flag = launch.error_word();
    status = run_attention_fwd(params, args.q.dtype, stream);
  }
  return status;
}

}  // namespace flashkit
