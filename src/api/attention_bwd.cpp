// Dense attention backward: validation, workspace size, BwdParams, dispatch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "api/attention_internal.h"
#include "api/index_checks.h"
#include "api/launch_device.h"
#include "api/validate_util.h"
#include "flashkit/attention.h"
#include "kernels/bwd_params.h"
#include "launch/bwd_dispatch.h"
#include "launch/bwd_launch.h"
#include "launch/device_errors.h"
#include "launch/fwd_dispatch.h"

namespace flashkit {
namespace {
using namespace vutil;

constexpr int64_t kWsAlign = 256;

int64_t align_up(int64_t x) { return (x + kWsAlign - 1) / kWsAlign * kWsAlign; }

// Byte offsets of the workspace regions (see BwdParams).
struct WorkspaceLayout {
  int64_t dq_accum, delta, semaphore, dq_exp, kvbound, total;
};

WorkspaceLayout workspace_layout(int64_t batch, int64_t rows_q, int64_t max_seqlen_q, int64_t h_q,
                                 int64_t d, bool deterministic) {
  WorkspaceLayout l{};
  l.dq_accum = 0;
  l.delta = align_up(rows_q * h_q * d * 4);
  l.semaphore = l.delta + align_up(rows_q * h_q * 4);
  const int64_t sem_blocks = (max_seqlen_q + kBwdSemBlockM - 1) / kBwdSemBlockM;
  // deterministic mode: the turn counters, and the fixed-point dQ's row exponents and KV bounds
  // (sized by h_q >= h_kv: the size function has no h_kv)
  l.dq_exp = l.semaphore + (deterministic ? align_up(batch * h_q * sem_blocks * 4) : 0);
  l.kvbound = l.dq_exp + (deterministic ? align_up(rows_q * h_q * 4) : 0);
  // (no rows, no workspace: a call without rows has no dq to add, and takes no fixed-point path)
  l.total = l.kvbound + (deterministic && rows_q > 0 ? align_up(h_q * 2 * 4) : 0);
  return l;
}

AttentionFwdArgs forward_view(const AttentionBwdArgs& a) {
  AttentionFwdArgs f;
  f.q = a.q;
  f.k = a.k;
  f.v = a.v;
  f.out = a.out;
  f.lse = a.lse;
  f.cu_seqlens_q = a.cu_seqlens_q;
  f.cu_seqlens_k = a.cu_seqlens_k;
  f.max_seqlen_q = a.max_seqlen_q;
  f.max_seqlen_k = a.max_seqlen_k;
  f.softmax_scale = a.softmax_scale;
  f.causal = a.causal;
  f.window_left = a.window_left;
  f.window_right = a.window_right;
  f.softcap = a.softcap;
  return f;
}

// `t` (named `name`) must look like `like` (named `like_name`): same dtype, same shape,
// and the q/k/v/out layout rules (last dim contiguous, aligned strides and pointer).
Status check_like(const char* name, const TensorRef& t, const char* like_name, const TensorRef& like,
                  bool is_output) {
  if (t.dtype != like.dtype) {
    return invalid(name, std::string("expected dtype ") + dtype_name(like.dtype) + " (same as " +
                             like_name + "), got " + dtype_name(t.dtype));
  }
  bool same = t.ndim == like.ndim;
  for (int i = 0; same && i < t.ndim; ++i) same = t.shape[i] == like.shape[i];
  if (!same) {
    return invalid(name, "expected shape " + like.shape_str() + " (same as " + like_name + "), got " +
                             t.shape_str());
  }
  FK_RETURN_IF_ERROR(check_sizes(name, t));
  return check_qkvo_layout(name, t, is_output);
}

struct RowHeadStrides {
  int64_t batch, row, head;
};

RowHeadStrides bshd_strides(const TensorRef& t, bool varlen) {
  int64_t s[kMaxDims] = {0, 0, 0, 0};
  effective_strides(t, s);
  if (varlen) return {0, s[0], s[1]};
  return {s[0], s[1], s[2]};
}

int64_t rows_of(const AttentionBwdArgs& a) {
  const bool varlen = a.cu_seqlens_q.defined();
  return varlen ? a.q.shape[0] : a.q.shape[0] * a.q.shape[1];
}

int64_t batch_of(const AttentionBwdArgs& a) {
  return a.cu_seqlens_q.defined() ? a.cu_seqlens_q.shape[0] - 1 : a.q.shape[0];
}

int64_t max_seqlen_q_of(const AttentionBwdArgs& a) {
  return a.cu_seqlens_q.defined() ? std::min(a.max_seqlen_q, a.q.shape[0]) : a.q.shape[1];
}

}  // namespace

FLASHKIT_EXPORT int64_t attention_bwd_workspace_size(int64_t batch, int64_t rows_q, int64_t max_seqlen_q,
                                                     int64_t num_heads_q, int64_t head_dim,
                                                     bool deterministic) {
  if (batch < 0 || rows_q < 0 || max_seqlen_q < 0 || num_heads_q < 0 || head_dim < 0) return 0;
  return workspace_layout(batch, rows_q, max_seqlen_q, num_heads_q, head_dim, deterministic).total;
}

FLASHKIT_EXPORT Status validate_attention_bwd(const AttentionBwdArgs& a) {
  const NamedTensor all[] = {{"q", a.q},
                             {"k", a.k},
                             {"v", a.v},
                             {"out", a.out},
                             {"lse", a.lse},
                             {"dout", a.dout},
                             {"dq", a.dq},
                             {"dk", a.dk},
                             {"dv", a.dv},
                             {"workspace", a.workspace},
                             {"cu_seqlens_q", a.cu_seqlens_q, false},
                             {"cu_seqlens_k", a.cu_seqlens_k, false}};
  FK_RETURN_IF_ERROR(check_present_on_device(all));
  // q, k, v, out, lse and the varlen arrays: exactly the forward's rules and messages.
  Status fwd = validate_attention_fwd(forward_view(a));
  if (fwd.code() == Status::Code::kNotCompiled) {
    // Same (dtype, head dim) lists as the forward, so the backward is missing too.
    std::string compiled;
    for (const std::string& v : bwd_variants()) compiled += (compiled.empty() ? "" : ", ") + v;
    return Status::NotCompiled(std::string("attention backward for dtype ") + dtype_name(a.q.dtype) +
                               " and head_dim " + str(a.q.shape[a.q.ndim - 1]) +
                               " is not compiled into this build of FlashKit (compiled: " +
                               (compiled.empty() ? std::string("none") : compiled) +
                               "; see FLASHKIT_DTYPES / FLASHKIT_HEAD_DIMS)");
  }
  FK_RETURN_IF_ERROR(fwd);
  FK_RETURN_IF_ERROR(check_like("dout", a.dout, "out", a.out, false));
  FK_RETURN_IF_ERROR(check_like("dq", a.dq, "q", a.q, true));
  FK_RETURN_IF_ERROR(check_like("dk", a.dk, "k", a.k, true));
  FK_RETURN_IF_ERROR(check_like("dv", a.dv, "v", a.v, true));

  const int64_t rows_q = rows_of(a);
  const int64_t h_q = a.q.shape[a.q.ndim - 2];
  const int64_t d = a.q.shape[a.q.ndim - 1];
  if (rows_q * h_q > kMaxSize) {
    return invalid("q", "rows x heads = " + str(rows_q * h_q) + " exceeds 2^31 - 1");
  }
  if (a.workspace.dtype != DType::kUInt8 && a.workspace.dtype != DType::kInt32) {
    return invalid("workspace", std::string("expected dtype uint8 or int32, got ") + dtype_name(a.workspace.dtype));
  }
  FK_RETURN_IF_ERROR(check_ndim("workspace", a.workspace, 1, "[bytes] (1-D)"));
  FK_RETURN_IF_ERROR(check_sizes("workspace", a.workspace));
  FK_RETURN_IF_ERROR(check_contiguous("workspace", a.workspace));
  FK_RETURN_IF_ERROR(check_data_ptr("workspace", a.workspace, 16));
  const int64_t need =
      attention_bwd_workspace_size(batch_of(a), rows_q, max_seqlen_q_of(a), h_q, d, a.deterministic);
  const int64_t have = a.workspace.numel() * dtype_size(a.workspace.dtype);
  if (have < need) {
    return invalid("workspace", "has " + str(have) + " bytes, expected at least " + str(need) +
                                    " (attention_bwd_workspace_size)");
  }
  return Status::Ok();
}

namespace {

BwdParams make_bwd_params(const AttentionBwdArgs& a) {
  BwdParams p{};
  static_cast<FwdParams&>(p) = detail::make_fwd_params(forward_view(a));
  const bool varlen = a.cu_seqlens_q.defined();
  const RowHeadStrides dout = bshd_strides(a.dout, varlen);
  const RowHeadStrides dq = bshd_strides(a.dq, varlen);
  const RowHeadStrides dk = bshd_strides(a.dk, varlen);
  const RowHeadStrides dv = bshd_strides(a.dv, varlen);
  p.dout = a.dout.data;
  p.dq = a.dq.data;
  p.dk = a.dk.data;
  p.dv = a.dv.data;
  p.do_batch_stride = dout.batch, p.do_row_stride = dout.row, p.do_head_stride = dout.head;
  p.dq_batch_stride = dq.batch, p.dq_row_stride = dq.row, p.dq_head_stride = dq.head;
  p.dk_batch_stride = dk.batch, p.dk_row_stride = dk.row, p.dk_head_stride = dk.head;
  p.dv_batch_stride = dv.batch, p.dv_row_stride = dv.row, p.dv_head_stride = dv.head;

  const int64_t rows_q = rows_of(a);
  const int64_t max_sq = max_seqlen_q_of(a);
  const WorkspaceLayout l =
      workspace_layout(batch_of(a), rows_q, max_sq, p.h_q, p.head_dim, a.deterministic);
  char* ws = static_cast<char*>(a.workspace.data);
  p.dq_accum = reinterpret_cast<float*>(ws + l.dq_accum);
  p.delta = reinterpret_cast<float*>(ws + l.delta);
  p.dq_semaphore = a.deterministic ? reinterpret_cast<int32_t*>(ws + l.semaphore) : nullptr;
  p.dq_exp = a.deterministic ? reinterpret_cast<int32_t*>(ws + l.dq_exp) : nullptr;
  p.dq_kvbound = a.deterministic && rows_q > 0 ? reinterpret_cast<float*>(ws + l.kvbound) : nullptr;
  p.rows_q = static_cast<int>(rows_q);
  p.sem_m_blocks = static_cast<int>((max_sq + kBwdSemBlockM - 1) / kBwdSemBlockM);
  p.deterministic = a.deterministic;
  return p;
}

}  // namespace

FLASHKIT_EXPORT Status attention_bwd(const AttentionBwdArgs& args, cudaStream_t stream) {
  Status status = validate_attention_bwd(args);
  if (!status.ok()) return status;
  const bool varlen = args.cu_seqlens_q.defined();
  const bool check = varlen && (args.check_inputs || checks::check_inputs_from_env());
  if (batch_of(args) == 0 && !check) return Status::Ok();

  const detail::LaunchDevice launch(args.q.device_id);  // q's device, for this scope
  if (!launch.status().ok()) return launch.status();
  if (check) {
    AttentionFwdArgs f = forward_view(args);
    f.check_inputs = args.check_inputs;
    status = detail::check_varlen_indices(f, stream);
  }
  if (status.ok() && batch_of(args) > 0) {
    BwdParams params = make_bwd_params(args);
    params.error_flag = launch.error_word();
    status = run_attention_bwd(params, args.q.dtype, stream);
  }
  return status;
}

FLASHKIT_EXPORT std::string bwd_kernel_family(DType dtype, int head_dim) {
  return bwd_family(dtype, head_dim);
}

}  // namespace flashkit
