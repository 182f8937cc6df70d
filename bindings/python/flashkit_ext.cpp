// flashkit._C: the thin Python binding of the public C++ API.
//
// Every array argument is imported as an unconstrained nanobind ndarray (never converted),
// so anything that speaks DLPack (torch, cupy, jax, numpy, ...) or the buffer protocol
// arrives unchanged and without a copy; it becomes a flashkit::TensorRef (dtype from the
// DLPack code/bits, strides in elements) and the C++ validation decides whether it is
// acceptable. That keeps a single source of truth for the error messages. The one check
// made here: a dtype with no flashkit::DType (complex, fp4, vector lanes, ...) raises
// ValueError "<arg>: unsupported dtype complex64" (every other dtype reaches validation,
// whose messages name it: "expected dtype int32, got int64").
//
// torch tensors take a fast path that reads data_ptr/shape/stride/dtype/device directly
// (a few attribute reads instead of building a DLPack capsule per tensor: the host
// overhead of a call drops from ~20 us to a few us); torch itself is never imported
// here, only found in sys.modules once the caller has imported it.
//
// Status codes map to Python exceptions, the message verbatim:
//   InvalidArgument -> ValueError, NotCompiled -> NotImplementedError,
//   UnsupportedDevice / CudaError -> RuntimeError.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "api/index_checks.h"  // internal (testing hook _check_block_table)
#include "flashkit/flashkit.h"
#include "flashkit/decode.h"
#include "flashkit/mla.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using flashkit::Device;
using flashkit::DType;
using flashkit::Status;
using flashkit::TensorRef;

// DLPack dtype -> DType; kInvalid when FlashKit has no code for it (see dlpack_dtype_str).
DType dtype_from_dlpack(nb::dlpack::dtype dt) {
  if (dt.lanes != 1) return DType::kInvalid;
  using C = nb::dlpack::dtype_code;
  switch (static_cast<C>(dt.code)) {
    case C::Float:
      return dt.bits == 16 ? DType::kFloat16 : dt.bits == 32 ? DType::kFloat32
           : dt.bits == 64 ? DType::kFloat64 : DType::kInvalid;
    case C::Bfloat: return dt.bits == 16 ? DType::kBFloat16 : DType::kInvalid;
    case C::Int:
      return dt.bits == 8 ? DType::kInt8 : dt.bits == 16 ? DType::kInt16
           : dt.bits == 32 ? DType::kInt32 : dt.bits == 64 ? DType::kInt64 : DType::kInvalid;
    case C::UInt:
      return dt.bits == 8 ? DType::kUInt8 : dt.bits == 16 ? DType::kUInt16
           : dt.bits == 32 ? DType::kUInt32 : dt.bits == 64 ? DType::kUInt64 : DType::kInvalid;
    case C::Bool: return dt.bits == 8 ? DType::kBool : DType::kInvalid;
    case C::Float8_E4M3FN: return dt.bits == 8 ? DType::kFloat8E4M3FN : DType::kInvalid;
    case C::Float8_E5M2: return dt.bits == 8 ? DType::kFloat8E5M2 : DType::kInvalid;
    default: return DType::kInvalid;
  }
}

// A DLPack dtype FlashKit has no DType for, as users spell it where we can: "complex64",
// "float8_e4m3fnuz", else "DLPack dtype code 3, 64 bits"; " x 4 lanes" for vector types.
std::string dlpack_dtype_str(nb::dlpack::dtype dt) {
  using C = nb::dlpack::dtype_code;
  const std::string bits = std::to_string(dt.bits);
  std::string s;
  switch (static_cast<C>(dt.code)) {
    case C::Int: s = "int" + bits; break;
    case C::UInt: s = "uint" + bits; break;
    case C::Float: s = "float" + bits; break;
    case C::Bfloat: s = "bfloat" + bits; break;
    case C::Complex: s = "complex" + bits; break;
    case C::Bool: s = "bool (" + bits + " bits)"; break;
    case C::Float8_E3M4: s = "float8_e3m4"; break;
    case C::Float8_E4M3: s = "float8_e4m3"; break;
    case C::Float8_E4M3B11FNUZ: s = "float8_e4m3b11fnuz"; break;
    case C::Float8_E4M3FN: s = "float8_e4m3fn (" + bits + " bits)"; break;
    case C::Float8_E4M3FNUZ: s = "float8_e4m3fnuz"; break;
    case C::Float8_E5M2: s = "float8_e5m2 (" + bits + " bits)"; break;
    case C::Float8_E5M2FNUZ: s = "float8_e5m2fnuz"; break;
    case C::Float8_E8M0FNU: s = "float8_e8m0fnu"; break;
    case C::Float6_E2M3FN: s = "float6_e2m3fn"; break;
    case C::Float6_E3M2FN: s = "float6_e3m2fn"; break;
    case C::Float4_E2M1FN: s = "float4_e2m1fn"; break;
    case C::Bcomplex: s = "bcomplex" + bits; break;
    default: s = "DLPack dtype code " + std::to_string(int(dt.code)) + ", " + bits + " bits"; break;
  }
  if (dt.lanes != 1) s += " x " + std::to_string(dt.lanes) + " lanes";
  return s;
}

[[noreturn]] void raise_unsupported_dtype(const char* name, const std::string& what) {
  throw nb::value_error((std::string(name) + ": unsupported dtype " + what).c_str());
}

Device device_from_dlpack(int device_type) {
  if (device_type == nb::device::cuda::value) return Device::kCUDA;
  if (device_type == nb::device::cpu::value) return Device::kCPU;
  return Device::kOther;
}

[[noreturn]] void raise_too_many_dims(const char* name, size_t ndim, const int64_t* shape) {
  std::string s = "[";
  for (size_t i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  s += "]";
  throw nb::value_error((std::string(name) + ": expected at most " +
                         std::to_string(flashkit::kMaxDims) + " dimensions, got " +
                         std::to_string(ndim) + " (shape " + s + ")")
                            .c_str());
}

template <typename... Ts>
TensorRef ref_from_ndarray(const nb::ndarray<Ts...>& a, const char* name) {
  TensorRef t;
  const size_t ndim = a.ndim();
  if (ndim > static_cast<size_t>(flashkit::kMaxDims)) {
    raise_too_many_dims(name, ndim, a.shape_ptr());
  }
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.dtype = dtype_from_dlpack(a.dtype());
  if (t.dtype == DType::kInvalid) raise_unsupported_dtype(name, dlpack_dtype_str(a.dtype()));
  t.device = device_from_dlpack(a.device_type());
  t.device_id = a.device_id();
  t.ndim = static_cast<int32_t>(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    t.shape[i] = static_cast<int64_t>(a.shape(i));
    t.stride[i] = a.stride(i);  // DLPack strides are in elements already
  }
  return t;
}

// --- torch fast path --------------------------------------------------------------------
// Objects looked up once torch is in sys.modules (never imported from here).
struct TorchRefs {
  nb::object tensor_type;
  // torch dtype objects and their DType (dtypes this torch version lacks are left out).
  std::vector<std::pair<nb::object, DType>> dtypes;
  nb::object s_data_ptr, s_shape, s_stride, s_dtype, s_device, s_type, s_index;
  nb::object s_is_cuda, s_get_device;  // the device without a torch.device object
};

const TorchRefs* torch_refs() {
  static TorchRefs* refs = nullptr;  // leaked on purpose: lives as long as the interpreter
  if (refs) return refs;
  PyObject* mod = PyImport_GetModule(nb::str("torch").ptr());  // new ref, or NULL
  if (!mod) {
    PyErr_Clear();
    return nullptr;  // torch not imported: no object can be a torch.Tensor
  }
  nb::object torch = nb::steal(mod);
  auto* r = new TorchRefs;
  r->tensor_type = torch.attr("Tensor");
  // Most common first: the lookup is a linear scan by identity.
  const std::pair<const char*, DType> names[] = {
      {"bfloat16", DType::kBFloat16},   {"float16", DType::kFloat16},
      {"int32", DType::kInt32},         {"float32", DType::kFloat32},
      {"int64", DType::kInt64},         {"float64", DType::kFloat64},
      {"uint8", DType::kUInt8},         {"int8", DType::kInt8},
      {"int16", DType::kInt16},         {"bool", DType::kBool},
      {"float8_e4m3fn", DType::kFloat8E4M3FN}, {"float8_e5m2", DType::kFloat8E5M2},
      {"uint16", DType::kUInt16},       {"uint32", DType::kUInt32},
      {"uint64", DType::kUInt64}};
  for (const auto& [attr, dt] : names) {
    if (nb::hasattr(torch, attr)) r->dtypes.emplace_back(torch.attr(attr), dt);
  }
  r->s_data_ptr = nb::steal(PyUnicode_InternFromString("data_ptr"));
  r->s_shape = nb::steal(PyUnicode_InternFromString("shape"));
  r->s_stride = nb::steal(PyUnicode_InternFromString("stride"));
  r->s_dtype = nb::steal(PyUnicode_InternFromString("dtype"));
  r->s_device = nb::steal(PyUnicode_InternFromString("device"));
  r->s_type = nb::steal(PyUnicode_InternFromString("type"));
  r->s_index = nb::steal(PyUnicode_InternFromString("index"));
  r->s_is_cuda = nb::steal(PyUnicode_InternFromString("is_cuda"));
  r->s_get_device = nb::steal(PyUnicode_InternFromString("get_device"));
  refs = r;
  return refs;
}

nb::object get_attr(nb::handle o, const nb::object& name) {
  PyObject* r = PyObject_GetAttr(o.ptr(), name.ptr());
  if (!r) throw nb::python_error();
  return nb::steal(r);
}

nb::object call_method0(nb::handle o, const nb::object& name) {
  PyObject* r = PyObject_CallMethodNoArgs(o.ptr(), name.ptr());
  if (!r) throw nb::python_error();
  return nb::steal(r);
}

int64_t to_i64(nb::handle h) {
  const long long v = PyLong_AsLongLong(h.ptr());
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return static_cast<int64_t>(v);
}

TensorRef ref_from_torch(const TorchRefs& r, nb::handle o, const char* name) {
  TensorRef t;
  nb::object shape = get_attr(o, r.s_shape);
  nb::object stride = call_method0(o, r.s_stride);
  const Py_ssize_t ndim = PyTuple_Size(shape.ptr());
  if (ndim < 0 || PyTuple_Size(stride.ptr()) != ndim) throw nb::python_error();
  int64_t shape_buf[16];
  if (ndim > flashkit::kMaxDims) {
    const size_t n = static_cast<size_t>(ndim < 16 ? ndim : 16);
    for (size_t i = 0; i < n; ++i) shape_buf[i] = to_i64(PyTuple_GET_ITEM(shape.ptr(), i));
    raise_too_many_dims(name, static_cast<size_t>(ndim), shape_buf);
  }
  t.ndim = static_cast<int32_t>(ndim);
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    t.shape[i] = to_i64(PyTuple_GET_ITEM(shape.ptr(), i));
    t.stride[i] = to_i64(PyTuple_GET_ITEM(stride.ptr(), i));
  }
  nb::object dtype = get_attr(o, r.s_dtype);
  t.dtype = DType::kInvalid;
  for (const auto& [obj, dt] : r.dtypes) {
    if (dtype.is(obj)) {
      t.dtype = dt;
      break;
    }
  }
  if (t.dtype == DType::kInvalid) {  // e.g. torch.complex64 -> "complex64"
    std::string what = nb::cast<std::string>(nb::str(dtype));
    if (what.rfind("torch.", 0) == 0) what = what.substr(6);
    raise_unsupported_dtype(name, what);
  }
  // CUDA tensors (every call that launches): is_cuda + get_device(), two cheap calls; reading
  // `device` builds a torch.device and two more attribute reads (about twice the host time of
  // the whole conversion on the device machine's host). Anything else takes the general path.
  nb::object is_cuda = get_attr(o, r.s_is_cuda);
  if (is_cuda.ptr() == Py_True) {
    t.device = Device::kCUDA;
    t.device_id = static_cast<int32_t>(to_i64(call_method0(o, r.s_get_device)));
  } else {
    nb::object device = get_attr(o, r.s_device);
    nb::object dev_type = get_attr(device, r.s_type);
    const char* type_str = PyUnicode_AsUTF8(dev_type.ptr());
    if (!type_str) throw nb::python_error();
    const std::string type_name(type_str);
    t.device = type_name == "cuda"  ? Device::kCUDA
               : type_name == "cpu" ? Device::kCPU
                                    : Device::kOther;
    nb::object index = get_attr(device, r.s_index);
    t.device_id = index.is_none() ? 0 : static_cast<int32_t>(to_i64(index));
  }
  // data_ptr() already includes the storage offset.
  t.data = PyLong_AsVoidPtr(call_method0(o, r.s_data_ptr).ptr());
  if (!t.data && PyErr_Occurred()) throw nb::python_error();
  return t;
}

// "numpy.ndarray", "list": the type of `obj` as Python users spell it.
std::string qualified_type_name(nb::handle obj) {
  nb::handle tp = obj.type();
  std::string name = nb::cast<std::string>(nb::str(tp.attr("__qualname__")));
  if (nb::hasattr(tp, "__module__")) {
    std::string mod = nb::cast<std::string>(nb::str(tp.attr("__module__")));
    if (mod != "builtins") name = mod + "." + name;
  }
  return name;
}

// Keeps the DLPack imports alive until the call returns.
struct Holder {
  nb::ndarray<nb::ro> in[8];
  nb::ndarray<> out[8];
  int n_in = 0, n_out = 0;
};

// Converts one array argument: None -> absent (ndim == 0); torch.Tensor -> fast path;
// anything speaking DLPack or the buffer protocol -> nanobind ndarray (no copy, never
// converted). `writable`: the array is written (out, lse), read-only views are refused.
TensorRef to_ref(nb::handle obj, const char* name, bool writable, Holder& holder) {
  if (obj.is_none()) return TensorRef();
  if (const TorchRefs* r = torch_refs()) {
    if (PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(r->tensor_type.ptr()))) {
      return ref_from_torch(*r, obj, name);
    }
  }
  if (writable) {
    nb::ndarray<>& a = holder.out[holder.n_out++];
    if (nb::try_cast(obj, a, /*convert=*/false)) return ref_from_ndarray(a, name);
  } else {
    nb::ndarray<nb::ro>& a = holder.in[holder.n_in++];
    if (nb::try_cast(obj, a, /*convert=*/false)) return ref_from_ndarray(a, name);
  }
  PyErr_Clear();
  throw nb::type_error((std::string(name) + ": expected " +
                        (writable ? "a writable array" : "an array") +
                        " supporting DLPack (torch, cupy, jax, numpy, ...), got " +
                        qualified_type_name(obj).c_str())
                           .c_str());
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

// Runs `call` (a library call returning a Status) with the GIL released, so other Python
// threads run meanwhile, and raises a failure as raise_status maps it.
template <class Call>
void call_released(Call&& call) {
  Status status;
  {
    nb::gil_scoped_release release;
    status = call();
  }
  if (!status.ok()) raise_status(status);
}

// The arrays an op cannot do without: None is a TypeError naming the argument (the optional
// ones become absent TensorRefs, and the C++ validation names what is missing).
void require_arrays(std::initializer_list<std::pair<const char*, nb::handle>> arrays) {
  for (const auto& [name, obj] : arrays) {
    if (obj.is_none()) throw nb::type_error((std::string(name) + ": expected an array, got None").c_str());
  }
}

// A softcap as the float32 the kernels use: a positive value that rounds to 0 (or
// overflows) would silently turn the cap off (or into inf), so it is refused here.
float to_softcap(double softcap) {
  const float f = static_cast<float>(softcap);
  if (softcap > 0.0 && (f == 0.f || std::isinf(f))) {
    char msg[128];
    std::snprintf(msg, sizeof(msg), "softcap: %g is not representable as a finite float32 > 0", softcap);
    PyErr_SetString(PyExc_ValueError, msg);
    throw nb::python_error();
  }
  return f;
}

flashkit::AttentionFwdArgs make_args(Holder& h, nb::handle q, nb::handle k, nb::handle v,
                                     nb::handle out, nb::handle lse, nb::handle cu_seqlens_q,
                                     nb::handle cu_seqlens_k, int64_t max_seqlen_q,
                                     int64_t max_seqlen_k, double softmax_scale, bool causal,
                                     int64_t window_left, int64_t window_right,
                                     double softcap) {
  require_arrays({{"q", q}, {"k", k}, {"v", v}, {"out", out}});
  flashkit::AttentionFwdArgs args;
  args.q = to_ref(q, "q", false, h);
  args.k = to_ref(k, "k", false, h);
  args.v = to_ref(v, "v", false, h);
  args.out = to_ref(out, "out", true, h);
  args.lse = to_ref(lse, "lse", true, h);
  args.cu_seqlens_q = to_ref(cu_seqlens_q, "cu_seqlens_q", false, h);
  args.cu_seqlens_k = to_ref(cu_seqlens_k, "cu_seqlens_k", false, h);
  args.max_seqlen_q = max_seqlen_q;
  args.max_seqlen_k = max_seqlen_k;
  args.softmax_scale = static_cast<float>(softmax_scale);
  args.causal = causal;
  args.window_left = window_left;
  args.window_right = window_right;
  args.softcap = to_softcap(softcap);
  return args;
}

void attention_fwd(nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                   nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, int64_t max_seqlen_q,
                   int64_t max_seqlen_k, double softmax_scale, bool causal, uintptr_t stream,
                   bool check_inputs, int64_t window_left, int64_t window_right,
                   double softcap) {
  Holder h;
  flashkit::AttentionFwdArgs args =
      make_args(h, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal, window_left, window_right, softcap);
  args.check_inputs = check_inputs;
  call_released([&] { return flashkit::attention_fwd(args, reinterpret_cast<cudaStream_t>(stream)); });
}

void validate_attention_fwd(nb::handle q, nb::handle k, nb::handle v, nb::handle out,
                            nb::handle lse, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k,
                            int64_t max_seqlen_q, int64_t max_seqlen_k, double softmax_scale,
                            bool causal, int64_t window_left, int64_t window_right,
                            double softcap) {
  Holder h;
  const Status status = flashkit::validate_attention_fwd(
      make_args(h, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal, window_left, window_right, softcap));
  if (!status.ok()) raise_status(status);
}


// --- attention backward --------------------------------------------------------------------
// Like make_args: dout, q, k, v, out, dq, dk, dv must be arrays (None is a TypeError); lse,
// workspace and cu_seqlens may be None (absent), and the C++ validation names what is missing.
flashkit::AttentionBwdArgs make_bwd_args(Holder& h, nb::handle dout, nb::handle q, nb::handle k,
                                         nb::handle v, nb::handle out, nb::handle lse,
                                         nb::handle dq, nb::handle dk, nb::handle dv,
                                         nb::handle cu_seqlens_q, nb::handle cu_seqlens_k,
                                         int64_t max_seqlen_q, int64_t max_seqlen_k,
                                         double softmax_scale, bool causal, bool deterministic,
                                         nb::handle workspace, int64_t window_left,
                                         int64_t window_right, double softcap) {
  require_arrays(
      {{"dout", dout}, {"q", q}, {"k", k}, {"v", v}, {"out", out}, {"dq", dq}, {"dk", dk}, {"dv", dv}});
  flashkit::AttentionBwdArgs args;
  args.dout = to_ref(dout, "dout", false, h);
  args.q = to_ref(q, "q", false, h);
  args.k = to_ref(k, "k", false, h);
  args.v = to_ref(v, "v", false, h);
  args.out = to_ref(out, "out", false, h);
  args.lse = to_ref(lse, "lse", false, h);
  args.cu_seqlens_q = to_ref(cu_seqlens_q, "cu_seqlens_q", false, h);
  args.cu_seqlens_k = to_ref(cu_seqlens_k, "cu_seqlens_k", false, h);
  args.dq = to_ref(dq, "dq", true, h);
  args.dk = to_ref(dk, "dk", true, h);
  args.dv = to_ref(dv, "dv", true, h);
  args.workspace = to_ref(workspace, "workspace", true, h);
  args.max_seqlen_q = max_seqlen_q;
  args.max_seqlen_k = max_seqlen_k;
  args.softmax_scale = static_cast<float>(softmax_scale);
  args.causal = causal;
  args.window_left = window_left;
  args.window_right = window_right;
  args.softcap = to_softcap(softcap);
  args.deterministic = deterministic;
  return args;
}

void attention_bwd(nb::handle dout, nb::handle q, nb::handle k, nb::handle v, nb::handle out,
                   nb::handle lse, nb::handle dq, nb::handle dk, nb::handle dv,
                   nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, int64_t max_seqlen_q,
                   int64_t max_seqlen_k, double softmax_scale, bool causal, bool deterministic,
                   nb::handle workspace, uintptr_t stream, bool check_inputs,
                   int64_t window_left, int64_t window_right, double softcap) {
  Holder h;
  flashkit::AttentionBwdArgs args =
      make_bwd_args(h, dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic, workspace,
                    window_left, window_right, softcap);
  args.check_inputs = check_inputs;
  call_released([&] { return flashkit::attention_bwd(args, reinterpret_cast<cudaStream_t>(stream)); });
}

void validate_attention_bwd(nb::handle dout, nb::handle q, nb::handle k, nb::handle v,
                            nb::handle out, nb::handle lse, nb::handle dq, nb::handle dk,
                            nb::handle dv, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k,
                            int64_t max_seqlen_q, int64_t max_seqlen_k, double softmax_scale,
                            bool causal, bool deterministic, nb::handle workspace,
                            int64_t window_left, int64_t window_right, double softcap) {
  Holder h;
  const Status status = flashkit::validate_attention_bwd(
      make_bwd_args(h, dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q, max_seqlen_k, softmax_scale, causal, deterministic,
                    workspace, window_left, window_right, softcap));
  if (!status.ok()) raise_status(status);
}

DType attention_dtype_from(const std::string& dtype) {
  if (dtype == "float16") return DType::kFloat16;
  if (dtype == "bfloat16") return DType::kBFloat16;
  throw nb::value_error("dtype must be 'float16' or 'bfloat16'");
}

// --- paged decode ------------------------------------------------------------------------
DType kv_dtype_from(const std::string& name) {
  if (name.empty() || name == "none") return DType::kInvalid;
  if (name == "int8") return DType::kInt8;
  if (name == "float8_e4m3fn") return DType::kFloat8E4M3FN;
  throw nb::value_error(("kv_dtype: expected '', 'int8' or 'float8_e4m3fn', got '" + name + "'").c_str());
}

flashkit::DecodePlanArgs plan_args(int64_t batch, int64_t s_q, int64_t h_q, int64_t h_kv,
                                   int64_t head_dim, int64_t head_dim_v, int64_t split_size,
                                   int64_t max_seqlen_k, const std::string& kv_dtype) {
  flashkit::DecodePlanArgs a;
  a.kv_dtype = kv_dtype_from(kv_dtype);
  a.batch = batch, a.s_q = s_q, a.num_heads_q = h_q, a.num_heads_kv = h_kv;
  a.head_dim = head_dim, a.head_dim_v = head_dim_v, a.split_size = split_size;
  a.max_seqlen_k = max_seqlen_k;
  return a;
}

int64_t decode_workspace_size(int64_t batch, int64_t s_q, int64_t h_q, int64_t h_kv,
                              int64_t head_dim, int64_t head_dim_v, int64_t split_size,
                              int64_t max_seqlen_k, int device, const std::string& kv_dtype) {
  int64_t bytes = 0;
  const flashkit::DecodePlanArgs a =
      plan_args(batch, s_q, h_q, h_kv, head_dim, head_dim_v, split_size, max_seqlen_k, kv_dtype);
  call_released([&] { return flashkit::decode_workspace_size(a, device, &bytes); });
  return bytes;
}

void decode_plan(nb::handle seqlens_k, nb::handle workspace, int64_t batch, int64_t s_q,
                 int64_t h_q, int64_t h_kv, int64_t head_dim, int64_t head_dim_v,
                 int64_t split_size, int64_t max_seqlen_k, uintptr_t stream,
                 const std::string& kv_dtype) {
  Holder h;
  flashkit::DecodePlanArgs a =
      plan_args(batch, s_q, h_q, h_kv, head_dim, head_dim_v, split_size, max_seqlen_k, kv_dtype);
  a.seqlens_k = to_ref(seqlens_k, "seqlens_k", false, h);
  a.workspace = to_ref(workspace, "workspace", true, h);
  call_released([&] { return flashkit::decode_plan(a, reinterpret_cast<cudaStream_t>(stream)); });
}

void decode_run(nb::handle q, nb::handle k_cache, nb::handle v_cache, nb::handle block_table,
                nb::handle seqlens_k, nb::handle out, nb::handle lse, nb::handle workspace,
                double softmax_scale, bool causal, int64_t split_size, int64_t max_seqlen_k,
                bool plan_first, bool validate_only, uintptr_t stream, bool check_inputs,
                nb::handle k_scale, nb::handle v_scale) {
  Holder h;
  flashkit::DecodeArgs a;
  a.q = to_ref(q, "q", false, h);
  a.k_cache = to_ref(k_cache, "k_cache", false, h);
  a.v_cache = to_ref(v_cache, "v_cache", false, h);
  a.block_table = to_ref(block_table, "block_table", false, h);
  a.seqlens_k = to_ref(seqlens_k, "seqlens_k", false, h);
  a.out = to_ref(out, "out", true, h);
  a.lse = to_ref(lse, "lse", true, h);
  a.workspace = to_ref(workspace, "workspace", true, h);
  a.k_scale = to_ref(k_scale, "k_scale", false, h);
  a.v_scale = to_ref(v_scale, "v_scale", false, h);
  a.softmax_scale = static_cast<float>(softmax_scale);
  a.causal = causal;
  a.split_size = split_size;
  a.max_seqlen_k = max_seqlen_k;
  a.check_inputs = check_inputs;
  call_released([&] {
    const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    return validate_only ? flashkit::validate_decode(a)
                         : (plan_first ? flashkit::decode(a, s) : flashkit::decode_run(a, s));
  });
}

void append_kv(nb::handle k_new, nb::handle v_new, nb::handle k_cache, nb::handle v_cache,
               nb::handle block_table, nb::handle seqlens_k, uintptr_t stream, nb::handle k_scale,
               nb::handle v_scale) {
  Holder h;
  flashkit::AppendKVArgs a;
  a.k_new = to_ref(k_new, "k_new", false, h);
  a.v_new = to_ref(v_new, "v_new", false, h);
  a.k_cache = to_ref(k_cache, "k_cache", true, h);
  a.v_cache = to_ref(v_cache, "v_cache", true, h);
  a.block_table = to_ref(block_table, "block_table", false, h);
  a.seqlens_k = to_ref(seqlens_k, "seqlens_k", false, h);
  a.k_scale = to_ref(k_scale, "k_scale", true, h);
  a.v_scale = to_ref(v_scale, "v_scale", true, h);
  call_released([&] { return flashkit::append_kv(a, reinterpret_cast<cudaStream_t>(stream)); });
}

// --- MLA decode ---------------------------------------------------------------------------
void mla_metadata(nb::handle seqlens_k, nb::handle tile_scheduler_metadata, nb::handle num_splits,
                  uintptr_t stream) {
  Holder h;
  flashkit::MlaMetadataArgs a;
  a.seqlens_k = to_ref(seqlens_k, "seqlens_k", false, h);
  a.tile_scheduler_metadata = to_ref(tile_scheduler_metadata, "tile_scheduler_metadata", true, h);
  a.num_splits = to_ref(num_splits, "num_splits", true, h);
  call_released([&] { return flashkit::mla_metadata(a, reinterpret_cast<cudaStream_t>(stream)); });
}

void mla_decode(nb::handle q, nb::handle kv_cache, nb::handle block_table, nb::handle seqlens_k,
                nb::handle tile_scheduler_metadata, nb::handle num_splits, nb::handle out,
                nb::handle lse, nb::handle workspace, int64_t head_dim_v, double softmax_scale,
                bool causal, bool validate_only, uintptr_t stream, bool check_inputs) {
  Holder h;
  flashkit::MlaDecodeArgs a;
  a.q = to_ref(q, "q", false, h);
  a.kv_cache = to_ref(kv_cache, "kv_cache", false, h);
  a.block_table = to_ref(block_table, "block_table", false, h);
  a.seqlens_k = to_ref(seqlens_k, "seqlens_k", false, h);
  a.tile_scheduler_metadata = to_ref(tile_scheduler_metadata, "tile_scheduler_metadata", false, h);
  a.num_splits = to_ref(num_splits, "num_splits", false, h);
  a.out = to_ref(out, "out", true, h);
  a.lse = to_ref(lse, "lse", true, h);
  a.workspace = to_ref(workspace, "workspace", true, h);
  a.head_dim_v = head_dim_v;
  a.softmax_scale = static_cast<float>(softmax_scale);
  a.causal = causal;
  a.check_inputs = check_inputs;
  call_released([&] {
    return validate_only ? flashkit::validate_mla_decode(a)
                         : flashkit::mla_decode(a, reinterpret_cast<cudaStream_t>(stream));
  });
}

}  // namespace

void bind_kvcache(nb::module_& m);  // kvcache_bind.cpp

NB_MODULE(_C, m) {
  m.doc() =
      "FlashKit native extension: DLPack arrays in, flashkit C++ API underneath. "
      "Use the functions of the `flashkit` package instead of calling this directly.";

  m.def("attention_fwd", &attention_fwd, "q"_a.none(), "k"_a.none(), "v"_a.none(),
        "out"_a.none(), "lse"_a.none() = nb::none(), "cu_seqlens_q"_a.none() = nb::none(),
        "cu_seqlens_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0,
        "softmax_scale"_a = 0.0, "causal"_a = false, "stream"_a = 0, "check_inputs"_a = false,
        "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0,
        nb::sig("def attention_fwd(q: object, k: object, v: object, out: object, "
                "lse: object | None = None, cu_seqlens_q: object | None = None, "
                "cu_seqlens_k: object | None = None, max_seqlen_q: int = 0, "
                "max_seqlen_k: int = 0, softmax_scale: float = 0.0, causal: bool = False, "
                "stream: int = 0, check_inputs: bool = False, window_left: int = -1, "
                "window_right: int = -1, softcap: float = 0.0) -> None"),
        "Attention forward into preallocated `out` (and `lse` if given) on the CUDA stream "
        "`stream` (a cudaStream_t as int; 0 = legacy default stream). Dense layout: "
        "q [B, S_q, H_q, D], k [B, S_k, H_kv, D], v [B, S_k, H_kv, D_v], out [B, S_q, H_q, "
        "D_v], lse float32 [B, H_q, S_q]. Varlen (cu_seqlens_q/k int32 [B+1]): q [total_q, "
        "H_q, D], lse [H_q, total_q]. softmax_scale <= 0 means 1/sqrt(D). window_left, "
        "window_right: sliding window, bottom-right aligned like causal (row i sees keys j "
        "with i + S_k - S_q - window_left <= j <= i + S_k - S_q + window_right; -1: no bound "
        "on that side; causal is window_right = 0). softcap > 0: scores s * softmax_scale "
        "become softcap * tanh(s * softmax_scale / softcap) before the softmax (lse of the "
        "capped scores); 0: off. check_inputs "
        "(varlen): validate cu_seqlens_q/k on the GPU first (syncs `stream`; refused during "
        "CUDA-graph capture). Raises ValueError (bad argument, nothing written), "
        "NotImplementedError (variant not compiled), RuntimeError (device or CUDA error). The "
        "GIL is released during the launch.");
  m.def("validate_attention_fwd", &validate_attention_fwd, "q"_a.none(), "k"_a.none(),
        "v"_a.none(), "out"_a.none(), "lse"_a.none() = nb::none(),
        "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(),
        "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0, "softmax_scale"_a = 0.0, "causal"_a = false,
        "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0,
        nb::sig("def validate_attention_fwd(q: object, k: object, v: object, out: object, "
                "lse: object | None = None, cu_seqlens_q: object | None = None, "
                "cu_seqlens_k: object | None = None, max_seqlen_q: int = 0, "
                "max_seqlen_k: int = 0, softmax_scale: float = 0.0, causal: bool = False, "
                "window_left: int = -1, window_right: int = -1, softcap: float = 0.0) "
                "-> None"),
        "Checks the arguments of attention_fwd without touching the GPU; returns None or "
        "raises the same exception attention_fwd would.");
  m.def("attention_bwd", &attention_bwd, "dout"_a.none(), "q"_a.none(), "k"_a.none(),
        "v"_a.none(), "out"_a.none(), "lse"_a.none(), "dq"_a.none(), "dk"_a.none(),
        "dv"_a.none(), "cu_seqlens_q"_a.none() = nb::none(),
        "cu_seqlens_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0,
        "softmax_scale"_a = 0.0, "causal"_a = false, "deterministic"_a = false,
        "workspace"_a.none() = nb::none(), "stream"_a = 0, "check_inputs"_a = false,
        "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0,
        nb::sig("def attention_bwd(dout: object, q: object, k: object, v: object, "
                "out: object, lse: object | None, dq: object, dk: object, dv: object, "
                "cu_seqlens_q: object | None = None, cu_seqlens_k: object | None = None, "
                "max_seqlen_q: int = 0, max_seqlen_k: int = 0, softmax_scale: float = 0.0, "
                "causal: bool = False, deterministic: bool = False, "
                "workspace: object | None = None, stream: int = 0, "
                "check_inputs: bool = False, window_left: int = -1, window_right: int = -1, "
                "softcap: float = 0.0) -> None"),
        "Attention backward into preallocated dq, dk, dv (written completely) on the CUDA "
        "stream `stream` (a cudaStream_t as int; 0 = legacy default stream). dout/out/dq like "
        "q, dk like k, dv like v; lse float32 [B, H_q, S_q] (varlen [H_q, total_q]) as the "
        "forward wrote it (required). workspace: a uint8 (or int32) 1-D contiguous array on "
        "q's device of at least attention_bwd_workspace_size(...) bytes (contents on entry do "
        "not matter). deterministic: dq, dk, dv bitwise reproducible (otherwise dq is "
        "accumulated with atomics). softmax_scale <= 0 means 1/sqrt(D); it, causal, "
        "window_left/right and softcap must be the forward's. Raises ValueError (bad "
        "argument, nothing written), NotImplementedError (variant not compiled), "
        "RuntimeError (device or CUDA error). The GIL is released during the launch.");
  m.def("validate_attention_bwd", &validate_attention_bwd, "dout"_a.none(), "q"_a.none(),
        "k"_a.none(), "v"_a.none(), "out"_a.none(), "lse"_a.none(), "dq"_a.none(),
        "dk"_a.none(), "dv"_a.none(), "cu_seqlens_q"_a.none() = nb::none(),
        "cu_seqlens_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0,
        "softmax_scale"_a = 0.0, "causal"_a = false, "deterministic"_a = false,
        "workspace"_a.none() = nb::none(), "window_left"_a = -1, "window_right"_a = -1,
        "softcap"_a = 0.0,
        nb::sig("def validate_attention_bwd(dout: object, q: object, k: object, v: object, "
                "out: object, lse: object | None, dq: object, dk: object, dv: object, "
                "cu_seqlens_q: object | None = None, cu_seqlens_k: object | None = None, "
                "max_seqlen_q: int = 0, max_seqlen_k: int = 0, softmax_scale: float = 0.0, "
                "causal: bool = False, deterministic: bool = False, "
                "workspace: object | None = None, window_left: int = -1, "
                "window_right: int = -1, softcap: float = 0.0) -> None"),
        "Checks the arguments of attention_bwd without touching the GPU; returns None or "
        "raises the same exception attention_bwd would.");
  m.def("attention_bwd_workspace_size", &flashkit::attention_bwd_workspace_size, "batch"_a,
        "rows_q"_a, "max_seqlen_q"_a, "num_heads_q"_a, "head_dim"_a, "deterministic"_a = false,
        "Bytes of workspace attention_bwd needs. rows_q: B * S_q (dense) or total_q (varlen); "
        "batch: B; max_seqlen_q: S_q (dense) or the varlen bound.");
  m.def(
      "bwd_kernel_family",
      [](const std::string& dtype, int head_dim) {
        return flashkit::bwd_kernel_family(attention_dtype_from(dtype), head_dim);
      },
      "dtype"_a, "head_dim"_a,
      "Kernel family attention_bwd runs for (dtype, head_dim) on the current device: 'sm80' "
      "(portable), or '' (not compiled / no usable device).");
  m.def(
      "_dtype_of",
      [](nb::handle x) {
        Holder h;
        return std::string(flashkit::dtype_name(to_ref(x, "x", false, h).dtype));
      },
      "x"_a,
      "Testing hook: the dtype name the binding reads from array `x` (as validation messages "
      "print it); raises ValueError 'x: unsupported dtype ...' for types FlashKit has no name "
      "for.");
  m.def(
      "_check_block_table",
      [](nb::handle block_table, nb::handle seqlens_k, int64_t num_pages, int64_t page_size,
         uintptr_t stream) {
        Holder h;
        const TensorRef t = to_ref(block_table, "block_table", false, h);
        const TensorRef l = to_ref(seqlens_k, "seqlens_k", false, h);
        call_released([&] {
          return flashkit::checks::check_block_table(t, l, num_pages, page_size,
                                                     reinterpret_cast<cudaStream_t>(stream));
        });
      },
      "block_table"_a, "seqlens_k"_a, "num_pages"_a, "page_size"_a, "stream"_a = 0,
      "Testing hook of the internal block-table check (for the paged-decode ops to come): "
      "block_table int32 [B, max_pages], seqlens_k int32 [B] on one GPU; raises ValueError "
      "naming the first bad entry. Synchronizes `stream`.");
  m.def("compiled_fwd_variants", &flashkit::compiled_fwd_variants,
        "The forward variants compiled into this build, e.g. ['bfloat16/128', ...].");
  m.def("compiled_fwd_kernels", &flashkit::compiled_fwd_kernels,
        "Every compiled kernel as '<family>/<dtype>/<head_dim>', e.g. 'sm90/bfloat16/128'.");
  m.def(
      "fwd_kernel_family",
      [](const std::string& dtype, int head_dim) {
        return flashkit::fwd_kernel_family(attention_dtype_from(dtype), head_dim);
      },
      "dtype"_a, "head_dim"_a,
      "Kernel family attention runs for (dtype, head_dim) on the current device: 'sm90' "
      "(Hopper wgmma), 'sm80' (portable), or '' (not compiled / no usable device). "
      "FLASHKIT_FWD_PORTABLE=1 forces 'sm80'.");

  m.def("decode_workspace_size", &decode_workspace_size, "batch"_a, "s_q"_a, "num_heads_q"_a,
        "num_heads_kv"_a, "head_dim"_a, "head_dim_v"_a = 0, "split_size"_a = 0,
        "max_seqlen_k"_a = 0, "device"_a = -1, "kv_dtype"_a = "",
        "Bytes of workspace a decode plan with these sizes needs on `device` (-1: current); "
        "kv_dtype: '' (cache in q's dtype), 'int8' or 'float8_e4m3fn'.");
  m.def("decode_plan", &decode_plan, "seqlens_k"_a.none(), "workspace"_a.none(), "batch"_a,
        "s_q"_a, "num_heads_q"_a, "num_heads_kv"_a, "head_dim"_a, "head_dim_v"_a = 0,
        "split_size"_a = 0, "max_seqlen_k"_a = 0, "stream"_a = 0, "kv_dtype"_a = "",
        "GPU-side decode plan from seqlens_k into `workspace` (no host sync).");
  m.def("decode_run", &decode_run, "q"_a.none(), "k_cache"_a.none(), "v_cache"_a.none(),
        "block_table"_a.none(), "seqlens_k"_a.none(), "out"_a.none(), "lse"_a.none() = nb::none(),
        "workspace"_a.none() = nb::none(), "softmax_scale"_a = 0.0, "causal"_a = true,
        "split_size"_a = 0, "max_seqlen_k"_a = 0, "plan_first"_a = false,
        "validate_only"_a = false, "stream"_a = 0, "check_inputs"_a = false,
        "k_scale"_a.none() = nb::none(), "v_scale"_a.none() = nb::none(),
        "Paged decode into preallocated `out` (and `lse`): split + combine with a planned "
        "workspace (plan_first=True plans first). validate_only: check arguments only. "
        "check_inputs: validate block_table/seqlens_k on the GPU first (synchronizes).");
  m.def("append_kv", &append_kv, "k_new"_a.none(), "v_new"_a.none(), "k_cache"_a.none(),
        "v_cache"_a.none(), "block_table"_a.none(), "seqlens_k"_a.none(), "stream"_a = 0,
        "k_scale"_a.none() = nb::none(), "v_scale"_a.none() = nb::none(),
        "Writes k_new/v_new [B, s_new, H_kv, D] into the page slots of positions "
        "seqlens_k[b] - s_new + t (int8 / fp8 caches: quantized, scales into k_scale/v_scale).");
  m.def("mla_num_parts", &flashkit::mla_num_parts, "num_sms"_a, "rows_per_kv"_a, "num_heads_kv"_a,
        "Scheduler parts for a GPU with num_sms SMs: num_sms / h_kv / ceil(rows_per_kv / 64), "
        "at least 1 (rows_per_kv = s_q * h_q / h_kv).");
  m.def("mla_workspace_size", &flashkit::mla_workspace_size, "batch"_a, "s_q"_a, "num_heads_q"_a,
        "num_parts"_a, "Bytes of MLA workspace (fp32 partial outputs and LSEs) for these sizes.");
  m.def("mla_metadata", &mla_metadata, "seqlens_k"_a.none(), "tile_scheduler_metadata"_a.none(),
        "num_splits"_a.none(), "stream"_a = 0,
        "MLA tile scheduler on the GPU (no host sync): writes tile_scheduler_metadata "
        "[num_parts, 8] and num_splits [B + 1] (int32) from seqlens_k.");
  m.def("mla_decode", &mla_decode, "q"_a.none(), "kv_cache"_a.none(), "block_table"_a.none(),
        "seqlens_k"_a.none(), "tile_scheduler_metadata"_a.none(), "num_splits"_a.none(),
        "out"_a.none(), "lse"_a.none(), "workspace"_a.none(), "head_dim_v"_a = 512,
        "softmax_scale"_a = 0.0, "causal"_a = false, "validate_only"_a = false, "stream"_a = 0,
        "check_inputs"_a = false,
        "MLA decode (split + combine) into preallocated out [B, s_q, h_q, 512] and lse "
        "[B, h_q, s_q] with a workspace of mla_workspace_size bytes. validate_only: check "
        "arguments only. check_inputs: validate block_table/seqlens_k on the GPU first.");
  m.def(
      "mla_split_kernel_family",
      [](const std::string& dtype, bool fp8_kv_cache) {
        const DType dt = dtype == "float16" ? DType::kFloat16
                         : dtype == "bfloat16" ? DType::kBFloat16 : DType::kInvalid;
        return std::string(flashkit::mla_split_kernel_family(dt, fp8_kv_cache));
      },
      "dtype"_a, "fp8_kv_cache"_a = false,
      "The MLA split kernel for dtype ('float16' / 'bfloat16', q's) on the current device: "
      "'sm90', 'sm80' (portable; forced by FLASHKIT_MLA_PORTABLE=1, read per call, and always "
      "for the FP8 cache) or ''.");
  m.def(
      "read_device_errors",
      [](int device, bool clear) {
        uint32_t bits = 0;
        call_released([&] { return flashkit::read_device_errors(device, clear, &bits); });
        return bits;
      },
      "device"_a = -1, "clear"_a = true,
      "Bits of the device error word of CUDA device `device` (-1: the current device); clears "
      "the bits read when `clear`. Synchronizes the device (releases the GIL meanwhile).");
  m.def("describe_device_errors", &flashkit::describe_device_errors, "bits"_a,
        "A readable description of device error bits.");
  m.def(
      "device_error_bits",
      []() {
        nb::dict d;
        d["CU_SEQLENS"] = uint32_t(flashkit::kDeviceErrorCuSeqlens);
        d["SEQLEN_ABOVE_MAX"] = uint32_t(flashkit::kDeviceErrorSeqlenAboveMax);
        d["BLOCK_ID"] = uint32_t(flashkit::kDeviceErrorBlockId);
        d["SEQLENS_K"] = uint32_t(flashkit::kDeviceErrorSeqlensK);
        d["APPEND_SLOT"] = uint32_t(flashkit::kDeviceErrorAppendSlot);
        d["DECODE_PLAN"] = uint32_t(flashkit::kDeviceErrorDecodePlan);
        d["DET_ORDER"] = uint32_t(flashkit::kDeviceErrorDetOrder);
        return d;
      },
      "The bits of the device error word by name (as in flashkit::DeviceError).");
  m.def("version", []() { return std::string(flashkit::version()); },
        "Version of the native library.");
  bind_kvcache(m);
}
