// flashkit._C: the thin Python binding of the public C++ API.
//
// Every array argument is imported as an unconstrained nanobind ndarray (never converted),
// so anything that speaks DLPack (torch, cupy, jax, numpy, ...) or the buffer protocol
// arrives unchanged and without a copy; it becomes a flashkit::TensorRef (dtype from the
// DLPack code/bits, strides in elements) and the C++ validation decides whether it is
// acceptable. That keeps a single source of truth for the error messages.
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
  nb::object tensor_type, float16, bfloat16, float32, int32;
  nb::object s_data_ptr, s_shape, s_stride, s_dtype, s_device, s_type, s_index;
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
  r->float16 = torch.attr("float16");
  r->bfloat16 = torch.attr("bfloat16");
  r->float32 = torch.attr("float32");
  r->int32 = torch.attr("int32");
  r->s_data_ptr = nb::steal(PyUnicode_InternFromString("data_ptr"));
  r->s_shape = nb::steal(PyUnicode_InternFromString("shape"));
  r->s_stride = nb::steal(PyUnicode_InternFromString("stride"));
  r->s_dtype = nb::steal(PyUnicode_InternFromString("dtype"));
  r->s_device = nb::steal(PyUnicode_InternFromString("device"));
  r->s_type = nb::steal(PyUnicode_InternFromString("type"));
  r->s_index = nb::steal(PyUnicode_InternFromString("index"));
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
  if (dtype.is(r.float16)) t.dtype = DType::kFloat16;
  else if (dtype.is(r.bfloat16)) t.dtype = DType::kBFloat16;
  else if (dtype.is(r.float32)) t.dtype = DType::kFloat32;
  else if (dtype.is(r.int32)) t.dtype = DType::kInt32;
  else t.dtype = DType::kInvalid;
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

flashkit::AttentionFwdArgs make_args(Holder& h, nb::handle q, nb::handle k, nb::handle v,
                                     nb::handle out, nb::handle lse, nb::handle cu_seqlens_q,
                                     nb::handle cu_seqlens_k, int64_t max_seqlen_q,
                                     int64_t max_seqlen_k, double softmax_scale, bool causal) {
  if (q.is_none()) throw nb::type_error("q: expected an array, got None");
  if (k.is_none()) throw nb::type_error("k: expected an array, got None");
  if (v.is_none()) throw nb::type_error("v: expected an array, got None");
  if (out.is_none()) throw nb::type_error("out: expected an array, got None");
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
  return args;
}

void attention_fwd(nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                   nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, int64_t max_seqlen_q,
                   int64_t max_seqlen_k, double softmax_scale, bool causal, uintptr_t stream) {
  Holder h;
  const flashkit::AttentionFwdArgs args =
      make_args(h, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal);
  Status status;
  {
    nb::gil_scoped_release release;
    status = flashkit::attention_fwd(args, reinterpret_cast<cudaStream_t>(stream));
  }
  if (!status.ok()) raise_status(status);
}

void validate_attention_fwd(nb::handle q, nb::handle k, nb::handle v, nb::handle out,
                            nb::handle lse, nb::handle cu_seqlens_q, nb::handle cu_seqlens_k,
                            int64_t max_seqlen_q, int64_t max_seqlen_k, double softmax_scale,
                            bool causal) {
  Holder h;
  const Status status = flashkit::validate_attention_fwd(
      make_args(h, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal));
  if (!status.ok()) raise_status(status);
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
        "softmax_scale"_a = 0.0, "causal"_a = false, "stream"_a = 0,
        nb::sig("def attention_fwd(q: object, k: object, v: object, out: object, "
                "lse: object | None = None, cu_seqlens_q: object | None = None, "
                "cu_seqlens_k: object | None = None, max_seqlen_q: int = 0, "
                "max_seqlen_k: int = 0, softmax_scale: float = 0.0, causal: bool = False, "
                "stream: int = 0) -> None"),
        "Attention forward into preallocated `out` (and `lse` if given) on the CUDA stream "
        "`stream` (a cudaStream_t as int; 0 = legacy default stream). Dense layout: "
        "q [B, S_q, H_q, D], k [B, S_k, H_kv, D], v [B, S_k, H_kv, D_v], out [B, S_q, H_q, "
        "D_v], lse float32 [B, H_q, S_q]. Varlen (cu_seqlens_q/k int32 [B+1]): q [total_q, "
        "H_q, D], lse [H_q, total_q]. softmax_scale <= 0 means 1/sqrt(D). Raises ValueError "
        "(bad argument, nothing written), NotImplementedError (variant not compiled), "
        "RuntimeError (device or CUDA error). The GIL is released during the launch.");
  m.def("validate_attention_fwd", &validate_attention_fwd, "q"_a.none(), "k"_a.none(),
        "v"_a.none(), "out"_a.none(), "lse"_a.none() = nb::none(),
        "cu_seqlens_q"_a.none() = nb::none(), "cu_seqlens_k"_a.none() = nb::none(),
        "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0, "softmax_scale"_a = 0.0, "causal"_a = false,
        nb::sig("def validate_attention_fwd(q: object, k: object, v: object, out: object, "
                "lse: object | None = None, cu_seqlens_q: object | None = None, "
                "cu_seqlens_k: object | None = None, max_seqlen_q: int = 0, "
                "max_seqlen_k: int = 0, softmax_scale: float = 0.0, causal: bool = False) "
                "-> None"),
        "Checks the arguments of attention_fwd without touching the GPU; returns None or "
        "raises the same exception attention_fwd would.");
  m.def("compiled_fwd_variants", &flashkit::compiled_fwd_variants,
        "The forward variants compiled into this build, e.g. ['bfloat16/128', ...].");
  m.def("compiled_fwd_kernels", &flashkit::compiled_fwd_kernels,
        "Every compiled kernel as '<family>/<dtype>/<head_dim>', e.g. 'sm90/bfloat16/128'.");
  m.def(
      "fwd_kernel_family",
      [](const std::string& dtype, int head_dim) {
        DType dt = DType::kInvalid;
        if (dtype == "float16") dt = DType::kFloat16;
        else if (dtype == "bfloat16") dt = DType::kBFloat16;
        else throw nb::value_error("dtype must be 'float16' or 'bfloat16'");
        return flashkit::fwd_kernel_family(dt, head_dim);
      },
      "dtype"_a, "head_dim"_a,
      "Kernel family attention runs for (dtype, head_dim) on the current device: 'sm90' "
      "(Hopper wgmma), 'sm80' (portable), or '' (not compiled / no usable device). "
      "FLASHKIT_FWD_PORTABLE=1 forces 'sm80'.");
  m.def("version", []() { return std::string(flashkit::version()); },
        "Version of the native library.");
  bind_kvcache(m);
}
