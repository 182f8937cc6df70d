"""Array descriptors that claim to live on a CUDA device but own no memory.

``FakeCudaArray`` speaks DLPack (``__dlpack__`` / ``__dlpack_device__``) with any data
pointer, dtype, shape and strides, so ``flashkit._C.validate_attention_fwd`` (which reads
descriptors only, never memory) can be tested on a machine without a GPU, including sizes
too large to allocate. Never pass one to a function that launches a kernel.
"""

from __future__ import annotations

import ctypes

__all__ = ["DTYPES", "FakeCudaArray", "KDL_CPU", "KDL_CUDA"]

KDL_CPU = 1
KDL_CUDA = 2

# DLPack dtype codes: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5, kDLBool 6,
# kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12 (DLPack 1.1).
_DTYPES = {
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "float32": (2, 32),
    "float64": (2, 64),
    "int8": (0, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
    "uint16": (1, 16),
    "uint32": (1, 32),
    "uint64": (1, 64),
    "bool": (6, 8),
    "float8_e4m3fn": (10, 8),
    "float8_e5m2": (12, 8),
    "complex64": (5, 64),
}
DTYPES = tuple(_DTYPES)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # NULL: nothing to free, the Python object owns it
    ]


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAME = b"dltensor"  # module constant: the capsule keeps a pointer to it

# Fake device addresses: array n starts at 2^40 + (n mod 1024) * 2^36 (256-byte aligned),
# so arrays of up to 64 GiB do not overlap one another.
_count = 0


def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


class FakeCudaArray:
    """A DLPack view of nothing: ``FakeCudaArray((2, 128, 8, 64), "float16")``.

    Args:
        shape: sizes (may be huge: nothing is allocated).
        dtype: a name in ``DTYPES`` (float16, int64, bool, float8_e4m3fn, complex64, ...),
            or a raw DLPack ``(code, bits, lanes)`` tuple.
        strides: in elements; row-major contiguous by default.
        device: ``"cuda"`` or ``"cpu"`` (as reported through DLPack).
        device_id: the CUDA ordinal.
        offset_bytes: added to a 256-byte aligned fake address (to test alignment).
    """

    def __init__(self, shape, dtype="float16", strides=None, device="cuda", device_id=0,
                 offset_bytes=0):
        global _count
        if isinstance(dtype, tuple):
            if len(dtype) != 3:
                raise ValueError(
                    f"FakeCudaArray: raw dtype must be (code, bits, lanes), got {dtype}")
            self._dl_dtype = tuple(int(x) for x in dtype)
        elif dtype in _DTYPES:
            self._dl_dtype = _DTYPES[dtype] + (1,)
        else:
            raise ValueError(f"FakeCudaArray: unknown dtype {dtype!r}")
        self.shape = tuple(int(n) for n in shape)
        self.ndim = len(self.shape)
        self.dtype = dtype
        self.strides = tuple(int(s) for s in strides) if strides is not None else \
            _contiguous_strides(self.shape)
        if len(self.strides) != self.ndim:
            raise ValueError("FakeCudaArray: strides and shape differ in length")
        self.device_type = KDL_CUDA if device == "cuda" else KDL_CPU
        self.device_id = int(device_id)
        self.data = (1 << 40) + (_count % 1024) * (1 << 36) + int(offset_bytes)
        _count += 1
        self._keep = []  # ctypes buffers handed out through DLPack live as long as self

    def __repr__(self):
        return (f"FakeCudaArray(shape={self.shape}, dtype={self.dtype}, "
                f"strides={self.strides}, device_type={self.device_type}, "
                f"device_id={self.device_id}, data={self.data:#x})")

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # Always the unversioned capsule: consumers asking for max_version fall back to it.
        shape = (ctypes.c_int64 * max(self.ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(self.ndim, 1))(*self.strides)
        code, bits, lanes = self._dl_dtype
        mt = _DLManagedTensor()
        mt.dl_tensor.data = self.data
        mt.dl_tensor.device = _DLDevice(self.device_type, self.device_id)
        mt.dl_tensor.ndim = self.ndim
        mt.dl_tensor.dtype = _DLDataType(code, bits, lanes)
        mt.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        mt.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        mt.dl_tensor.byte_offset = 0
        mt.manager_ctx = None
        mt.deleter = None
        self._keep.append((mt, shape, strides))
        return _PyCapsule_New(ctypes.addressof(mt), _CAPSULE_NAME, None)
