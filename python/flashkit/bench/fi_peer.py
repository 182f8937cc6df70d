"""ctypes loader of the FlashInfer peer libraries (bench/peers/flashinfer, built ahead of time).

FlashInfer's Python package JIT-compiles its kernels and needs a stack of dependencies the
GPU machine does not have; the bench instead calls FlashInfer's own kernels, compiled from
the templates of the pinned flashinfer-python wheel by ``bench/peers/flashinfer/build.sh``,
through a small C ABI (``fi_peer_common.h``). Three libraries, one per kernel family:

- ``libfi_decode.so``  BatchDecodeWithPagedKVCacheWrapper's default CUDA-core kernel (s_q = 1)
- ``libfi_fa2.so``     the FA2 tensor-core paged kernel (decode wrapper use_tensor_cores=True,
                       prefill wrapper backend="fa2"); any s_q, causal
- ``libfi_fa3.so``     the sm90 FA3 paged kernel (prefill wrapper backend="auto" on Hopper)

Where they are looked for, first match wins: the ``--flashinfer-path`` option, the
``FLASHKIT_FLASHINFER_PATH`` environment variable, ``<cwd>/.carry/flashinfer``,
``<repo>/.carry/flashinfer``. No torch import here.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

ENV_VAR = "FLASHKIT_FLASHINFER_PATH"
KINDS = ("decode", "fa2", "fa3")
FLOAT_WORKSPACE_BYTES = 256 * 2**20  # FlashInfer's docs suggest 128 MB; split-KV never needs more here
INT_WORKSPACE_BYTES = 8 * 2**20      # FlashInfer's wrappers allocate 8 MB


# The source checkout's carry folder (searched last).
REPO_CARRY = Path(__file__).resolve().parents[3] / ".carry" / "flashinfer"


def candidate_dirs(explicit: Optional[str] = None) -> list[Path]:
    out = []
    if explicit:
        out.append(Path(explicit))
    if os.environ.get(ENV_VAR):
        out.append(Path(os.environ[ENV_VAR]))
    out.append(Path.cwd() / ".carry" / "flashinfer")
    out.append(REPO_CARRY)
    seen, uniq = set(), []
    for p in out:
        key = str(p)
        if key not in seen:
            seen.add(key)
            uniq.append(p)
    return uniq


def find_library(kind: str, explicit: Optional[str] = None) -> tuple[Optional[Path], list[Path]]:
    """(path of libfi_<kind>.so or None, the directories searched)."""
    dirs = candidate_dirs(explicit)
    for d in dirs:
        p = d / f"libfi_{kind}.so"
        if p.is_file():
            return p, dirs
    return None, dirs


class FlashInferLib:
    """One loaded peer library (its C ABI, typed)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        lib = ctypes.CDLL(str(self.path))  # RTLD_LOCAL: each library keeps its own symbols
        c_int, c_void_p, c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        i32p = ctypes.POINTER(ctypes.c_int32)
        lib.fi_last_error.restype = ctypes.c_char_p
        lib.fi_describe.restype = ctypes.c_char_p
        lib.fi_create.argtypes = [c_int, c_int, c_int, c_int, c_size_t, c_size_t,
                                  ctypes.POINTER(c_void_p)]
        lib.fi_destroy.argtypes = [c_void_p]
        lib.fi_plan.argtypes = [c_void_p, i32p, i32p, c_int, c_int, c_int, c_void_p]
        lib.fi_run.argtypes = [c_void_p, c_void_p, ctypes.c_int64, ctypes.c_int64, c_void_p,
                               c_void_p, ctypes.POINTER(ctypes.c_int64), c_void_p, c_void_p,
                               c_void_p, c_void_p, c_void_p, c_void_p, ctypes.c_double, c_int,
                               c_void_p]
        for f in ("fi_create", "fi_destroy", "fi_plan", "fi_run"):
            getattr(lib, f).restype = c_int
        self.lib = lib
        self.describe = lib.fi_describe().decode()

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"flashinfer peer {self.path.name} {what}: "
                               f"{self.lib.fi_last_error().decode()}")

    def create(self, num_qo_heads: int, num_kv_heads: int, head_dim: int, page_size: int,
               float_ws: int = FLOAT_WORKSPACE_BYTES, int_ws: int = INT_WORKSPACE_BYTES):
        h = ctypes.c_void_p()
        self._check(self.lib.fi_create(num_qo_heads, num_kv_heads, head_dim, page_size,
                                       float_ws, int_ws, ctypes.byref(h)), "create")
        return h

    def destroy(self, handle) -> None:
        self._check(self.lib.fi_destroy(handle), "destroy")

    def plan(self, handle, kv_indptr_host: list, kv_len_host: list, q_len: int, causal: bool,
             stream: int) -> None:
        B = len(kv_len_host)
        indptr = (ctypes.c_int32 * (B + 1))(*kv_indptr_host)
        lens = (ctypes.c_int32 * B)(*kv_len_host)
        self._check(self.lib.fi_plan(handle, indptr, lens, B, q_len, int(causal),
                                     ctypes.c_void_p(stream)), "plan")

    def run_args(self, handle, q_ptr: int, q_stride_n: int, q_stride_h: int, k_ptr: int,
                 v_ptr: int, kv_strides: tuple, kv_indices: int, kv_indptr: int,
                 last_page_len: int, qo_indptr: int, o_ptr: int, sm_scale: float,
                 enable_pdl: bool, stream: int) -> tuple:
        """The argument tuple of one fi_run call, converted once (the timed loop reuses it)."""
        strides = (ctypes.c_int64 * 4)(*kv_strides)
        vp = ctypes.c_void_p
        return (handle, vp(q_ptr), q_stride_n, q_stride_h, vp(k_ptr), vp(v_ptr), strides,
                vp(kv_indices), vp(kv_indptr), vp(last_page_len), vp(qo_indptr or None),
                vp(o_ptr), None, float(sm_scale), int(enable_pdl), vp(stream))

    def run(self, args: tuple) -> None:
        rc = self.lib.fi_run(*args)
        if rc != 0:
            self._check(rc, "run")
