// FlashKit public API: dense attention forward and backward.
//
//   out = softmax(q k^T * softmax_scale [+ causal mask]) v,   lse = logsumexp of each row
//
// Layout (SPEC §2): q [B, S_q, H_q, D], k [B, S_k, H_kv, D], v [B, S_k, H_kv, D_v],
// out [B, S_q, H_q, D_v]; or varlen (cu_seqlens_q/k set): q [total_q, H_q, D],
// k/v [total_k, H_kv, D], out [total_q, H_q, D_v]. Any strides in elements, last
// dimension contiguous. lse is fp32, natural log, [B, H_q, S_q] (varlen: [H_q, total_q]),
// contiguous. A row that sees no key gets out = 0 and lse = -inf.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashkit/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

struct AttentionFwdArgs {
  TensorRef q;
  TensorRef k;
  TensorRef v;
  TensorRef out;
  TensorRef lse;           // optional (ndim == 0: not written)
  TensorRef cu_seqlens_q;  // optional int32 [B+1]; set together with cu_seqlens_k for varlen
  TensorRef cu_seqlens_k;
  int64_t max_seqlen_q = 0;  // varlen only: an upper bound of the per-sequence lengths
  int64_t max_seqlen_k = 0;
  float softmax_scale = 0.f;  // <= 0 or NaN: 1/sqrt(D)
  bool causal = false;        // bottom-right aligned: row i sees keys j <= i + S_k - S_q
  // Sliding window (Mistral / Gemma style), bottom-right aligned like causal: row i sees
  // keys j with i + S_k - S_q - window_left <= j <= i + S_k - S_q + window_right; -1: no
  // bound on that side. causal = true is window_right = 0 (a larger window_right is
  // clipped to 0). Key tiles outside every row's window are skipped, not computed.
  int64_t window_left = -1;
  int64_t window_right = -1;
  // Logit soft-capping (Gemma-2): scores s = q k^T * softmax_scale become
  // softcap * tanh(s / softcap) before the softmax (and lse is of the capped scores).
  // 0: off; otherwise a finite value > 0.
  float softcap = 0.f;
  // Varlen only: validate cu_seqlens_q/k on the GPU before the launch (start at 0, never
  // decrease, end at total_q/total_k, every length <= max_seqlen_q/k) and return
  // Status::Invalid naming the argument and the first bad index instead of launching.
  // Costs a small kernel and a sync of `stream`, so it is off by default and refused
  // (Invalid) while `stream` is being captured into a CUDA graph. Without it, bad indices
  // never make the kernels read or write out of bounds: they are clamped and reported in
  // the device error word (flashkit/errors.h). FLASHKIT_CHECK_INPUTS=1 in the environment
  // (read once) turns it on for every call that is not being captured.
  bool check_inputs = false;
};

// Checks every argument (SPEC §2) without touching device memory or the GPU.
// Returns Status::Invalid with a message naming the argument on the first problem,
// or Status::NotCompiled when the (dtype, head_dim) variant is not in this build.
Status validate_attention_fwd(const AttentionFwdArgs& args);

// Validates (with check_inputs: also the index arrays, on the GPU), then launches on
// `stream`. Nothing is written unless validation passes.
// Errors from the CUDA runtime (no device, unsupported architecture, launch failure)
// come back as Status::Unsupported / Status::Cuda.
Status attention_fwd(const AttentionFwdArgs& args, cudaStream_t stream);

// The forward variants compiled into this build, e.g. {"float16/64", "bfloat16/128", ...}.
std::vector<std::string> compiled_fwd_variants();
bool is_fwd_variant_compiled(DType dtype, int head_dim);

// Which kernel family attention_fwd runs for (dtype, head_dim) on the current device:
// "sm90" (Hopper wgmma kernels, compute capability 9.0 with sm_90a code in the build),
// "sm80" (the portable kernels), or "" when the variant is not compiled or no device is
// usable. FLASHKIT_FWD_PORTABLE=1 in the environment (read once) forces "sm80".
std::string fwd_kernel_family(DType dtype, int head_dim);
// Every kernel compiled into this build as "<family>/<dtype>/<head_dim>", e.g.
// {"sm80/float16/64", ..., "sm90/bfloat16/256"}: the sm80 family covers every compiled
// variant, the sm90 family the head dims that have a Hopper kernel.
std::vector<std::string> compiled_fwd_kernels();

// ---------------------------------------------------------------------------------------
// Dense attention backward (training). From the forward's inputs, its output `out` and its
// `lse`, and the gradient of the output `dout`, computes
//   dq = dS k * softmax_scale,   dk = dS^T q * softmax_scale,   dv = P^T dout
// where P = exp(q k^T * softmax_scale - lse) (recomputed on chip, masked like the forward)
// and dS = P * (dout v^T - rowsum(dout * out)). GQA/MQA: dk, dv of a KV head are summed
// over the query heads that read it. Rows that see no key (lse = -inf) contribute nothing.
//
// Layouts as the forward: dout/out/dq like q (dense [B, S_q, H_q, D], varlen
// [total_q, H_q, D]), dk like k, dv like v, lse fp32 [B, H_q, S_q] (varlen [H_q, total_q])
// contiguous, exactly as attention_fwd wrote it. Any strides, last dimension contiguous.
// dq, dk, dv are written completely (zeros where nothing flows back), never accumulated
// into.
struct AttentionBwdArgs {
  TensorRef dout;
  TensorRef q;
  TensorRef k;
  TensorRef v;
  TensorRef out;
  TensorRef lse;  // required
  TensorRef dq;
  TensorRef dk;
  TensorRef dv;
  TensorRef cu_seqlens_q;  // optional int32 [B+1]; set together with cu_seqlens_k for varlen
  TensorRef cu_seqlens_k;
  int64_t max_seqlen_q = 0;  // varlen only: upper bounds of the per-sequence lengths
  int64_t max_seqlen_k = 0;
  float softmax_scale = 0.f;  // <= 0 or NaN: 1/sqrt(D); must be the forward's scale
  bool causal = false;
  int64_t window_left = -1;  // window and softcap: the forward's (AttentionFwdArgs)
  int64_t window_right = -1;
  float softcap = 0.f;
  // false: dq is accumulated across key tiles with fp32 atomics (fastest; the last bits of
  // dq may differ run to run). true: dq, dk and dv are bitwise identical run to run (dk and
  // dv are always deterministic). On Hopper (sm_90) the key tiles add dq in 32-bit fixed
  // point with a per-row scale derived from a bound on |dq| (integer sums do not depend on
  // their order; 0.85-0.97x the fast mode's speed, H200); the portable kernels (and Hopper
  // with a softcap at D 64 / 128) add in a fixed order instead. A row whose bound is not
  // finite gets NaN: inf or NaN in its dout or anywhere in k or v (as in the fast mode). The bound assumes the
  // forward's lse and softmax_scale (with others the int32 sums can wrap).
  bool deterministic = false;
  // uint8 (or int32), 1-D, contiguous, on q's device, at least attention_bwd_workspace_size
  // bytes: the fp32 dq accumulator, rowsum(dout * out) and the deterministic mode's counters,
  // row exponents and bounds. Its contents on entry do not matter; it is scratch after the call.
  TensorRef workspace;
  bool check_inputs = false;  // as AttentionFwdArgs::check_inputs (varlen cu_seqlens)
  // (Varlen with a sequence longer than max_seqlen_q/k, which sets
  // kDeviceErrorSeqlenAboveMax: the backward computes that sequence as if cut to the
  // maxima, the forward rounds up to its row block, so the gradients of such a call are
  // unspecified; nothing is read or written out of bounds.)
};

// Bytes of workspace attention_bwd needs for these sizes. rows_q: B * S_q (dense) or
// total_q (varlen); batch: B; max_seqlen_q: S_q (dense) or the varlen bound.
int64_t attention_bwd_workspace_size(int64_t batch, int64_t rows_q, int64_t max_seqlen_q,
                                     int64_t num_heads_q, int64_t head_dim, bool deterministic);

// Checks every argument without touching device memory or the GPU (Status::Invalid naming
// the argument, or Status::NotCompiled for a (dtype, head_dim) outside this build).
Status validate_attention_bwd(const AttentionBwdArgs& args);

// Validates, then launches on `stream` (three kernels: rowsum + dq-accumulator clear, the
// main kernel, the dq conversion). Nothing is written unless validation passes.
Status attention_bwd(const AttentionBwdArgs& args, cudaStream_t stream);

// The backward kernel family for (dtype, head_dim) on the current device: "sm90" (Hopper
// wgmma kernels, D = 64, 128 and 256, compute capability 9.0 with sm_90a code in the build),
// "sm80" (the portable kernels), or "" when not compiled or no usable device.
// FLASHKIT_BWD_PORTABLE=1 in the environment (read once) forces "sm80".
std::string bwd_kernel_family(DType dtype, int head_dim);

// Library version string, e.g. "0.1.0".
const char* version();

}  // namespace flashkit
