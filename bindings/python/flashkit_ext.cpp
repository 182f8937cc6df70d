// flashkit._C: the thin Python binding of the public C++ API.
//
// Every array argument is taken as an unconstrained nanobind ndarray, so anything that
// speaks DLPack (torch, cupy, jax, numpy, ...) or the buffer protocol arrives here
// unchanged and without a copy; it becomes a flashkit::TensorRef (dtype from the DLPack
// code/bits, strides in elements) and the C++ validation decides whether it is
// acceptable. That keeps a single source of truth for the error messages.
//
// Status codes map to Python exceptions, the message verbatim:
//   InvalidArgument -> ValueError, NotCompiled -> NotImplementedError,
//   UnsupportedDevice / CudaError -> RuntimeError.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>

#include "flashkit/flashkit.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using flashkit::Device;
using flashkit::DType;
using flashkit::Status;
using flashkit::TensorRef;

using InArray = nb::ndarray<nb::ro>;  // inputs: read-only views are fine
using OutArray = nb::ndarray<>;       // outputs: must be writable

DType dtype_from_dlpack(nb::dlpack::dtype dt) {
  if (dt.lanes != 1) return DType::kInvalid;
  const auto code = static_cast<nb::dlpack::dtype_code>(dt.code);
  if (code == nb::dlpack::dtype_code::Float && dt.bits == 16) return DType::kFloat16;
  if (code == nb::dlpack::dtype_code::Bfloat && dt.bits == 16) return DType::kBFloat16;
  if (code == nb::dlpack::dtype_code::Float && dt.bits == 32) return DType::kFloat32;
  if (code == nb::dlpack::dtype_code::Int && dt.bits == 32) return DType::kInt32;
  return DType::kInvalid;
}

Device device_from_dlpack(int device_type) {
  if (device_type == nb::device::cuda::value) return Device::kCUDA;
  if (device_type == nb::device::cpu::value) return Device::kCPU;
  return Device::kOther;
}

// An absent (None) array gives an undefined TensorRef (ndim == 0).
template <typename... Ts>
TensorRef to_ref(const nb::ndarray<Ts...>& a, const char* name) {
  TensorRef t;
  if (!a.is_valid()) return t;
  const size_t ndim = a.ndim();
  if (ndim > static_cast<size_t>(flashkit::kMaxDims)) {
    std::string shape = "[";
    for (size_t i = 0; i < ndim; ++i) {
      if (i) shape += ", ";
      shape += std::to_string(a.shape(i));
    }
    shape += "]";
    throw nb::value_error((std::string(name) + ": expected at most " +
                           std::to_string(flashkit::kMaxDims) + " dimensions, got " +
                           std::to_string(ndim) + " (shape " + shape + ")")
                              .c_str());
  }
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.dtype = dtype_from_dlpack(a.dtype());
  t.device = device_from_dlpack(a.device_type());
  t.device_id = a.device_id();
  t.ndim = static_cast<int32_t>(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    t.shape[i] = static_cast<int64_t>(a.shape(i));
    t.stride[i] = a.stride(i);  // DLPack strides are in elements already
  }
  return t;
}

[[noreturn]] void raise_status(const Status& s) {
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case Status::Code::kInvalidArgument: type = PyExc_ValueError; break;
    case Status::Code::kNotCompiled: type = PyExc_NotImplementedError; break;
    default: type = PyExc_RuntimeError; break;
  }
  PyErr_SetString(type, s.message().c_str());
  throw nb::python_error();
}

flashkit::AttentionFwdArgs make_args(const InArray& q, const InArray& k, const InArray& v,
                                     const OutArray& out, const OutArray& lse,
                                     const InArray& cu_seqlens_q, const InArray& cu_seqlens_k,
                                     int64_t max_seqlen_q, int64_t max_seqlen_k,
                                     double softmax_scale, bool causal) {
  flashkit::AttentionFwdArgs args;
  args.q = to_ref(q, "q");
  args.k = to_ref(k, "k");
  args.v = to_ref(v, "v");
  args.out = to_ref(out, "out");
  args.lse = to_ref(lse, "lse");
  args.cu_seqlens_q = to_ref(cu_seqlens_q, "cu_seqlens_q");
  args.cu_seqlens_k = to_ref(cu_seqlens_k, "cu_seqlens_k");
  args.max_seqlen_q = max_seqlen_q;
  args.max_seqlen_k = max_seqlen_k;
  args.softmax_scale = static_cast<float>(softmax_scale);
  args.causal = causal;
  return args;
}

void attention_fwd(const InArray& q, const InArray& k, const InArray& v, const OutArray& out,
                   const OutArray& lse, const InArray& cu_seqlens_q,
                   const InArray& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                   double softmax_scale, bool causal, uintptr_t stream) {
  const flashkit::AttentionFwdArgs args =
      make_args(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal);
  Status status;
  {
    nb::gil_scoped_release release;
    status = flashkit::attention_fwd(args, reinterpret_cast<cudaStream_t>(stream));
  }
  if (!status.ok()) raise_status(status);
}

void validate_attention_fwd(const InArray& q, const InArray& k, const InArray& v,
                            const OutArray& out, const OutArray& lse,
                            const InArray& cu_seqlens_q, const InArray& cu_seqlens_k,
                            int64_t max_seqlen_q, int64_t max_seqlen_k, double softmax_scale,
                            bool causal) {
  const Status status = flashkit::validate_attention_fwd(
      make_args(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal));
  if (!status.ok()) raise_status(status);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() =
      "FlashKit native extension: DLPack arrays in, flashkit C++ API underneath. "
      "Use the functions of the `flashkit` package instead of calling this directly.";

  m.def("attention_fwd", &attention_fwd, "q"_a, "k"_a, "v"_a, "out"_a,
        "lse"_a.none() = nb::none(), "cu_seqlens_q"_a.none() = nb::none(),
        "cu_seqlens_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0,
        "softmax_scale"_a = 0.0, "causal"_a = false, "stream"_a = 0,
        "Attention forward into preallocated `out` (and `lse` if given) on the CUDA stream "
        "`stream` (a cudaStream_t as int; 0 = legacy default stream). Dense layout: "
        "q [B, S_q, H_q, D], k [B, S_k, H_kv, D], v [B, S_k, H_kv, D_v], out [B, S_q, H_q, "
        "D_v], lse float32 [B, H_q, S_q]. Varlen (cu_seqlens_q/k int32 [B+1]): q [total_q, "
        "H_q, D], lse [H_q, total_q]. softmax_scale <= 0 means 1/sqrt(D). Raises ValueError "
        "(bad argument, nothing written), NotImplementedError (variant not compiled), "
        "RuntimeError (device or CUDA error). The GIL is released during the launch.");
  m.def("validate_attention_fwd", &validate_attention_fwd, "q"_a, "k"_a, "v"_a, "out"_a,
        "lse"_a.none() = nb::none(), "cu_seqlens_q"_a.none() = nb::none(),
        "cu_seqlens_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0,
        "softmax_scale"_a = 0.0, "causal"_a = false,
        "Checks the arguments of attention_fwd without touching the GPU; returns None or "
        "raises the same exception attention_fwd would.");
  m.def("compiled_fwd_variants", &flashkit::compiled_fwd_variants,
        "The forward variants compiled into this build, e.g. ['bfloat16/128', ...].");
  m.def("version", []() { return std::string(flashkit::version()); },
        "Version of the native library.");
}
