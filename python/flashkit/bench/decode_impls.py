"""The implementations the decode bench measures side by side (SPEC §4-5).

- ``flashkit``        flashkit.DecodePlan (planned outside the timed region) or flashkit.decode,
                      on the paged cache (page size as given)
- ``flashkit_onecall`` flashkit.decode (plan kernel, split, combine inside the timed call: the
                      one-call form; opt-in, not in the default set)
- ``flashinfer``      FlashInfer's BatchDecodeWithPagedKVCacheWrapper default kernel (CUDA
                      cores, s_q = 1 only), same paged cache
- ``flashinfer_tc``   FlashInfer's FA2 tensor-core paged kernel: the decode wrapper with
                      use_tensor_cores=True (q_len_per_req = s_q) = prefill wrapper backend="fa2",
                      causal
- ``flashinfer_fa3``  FlashInfer's sm90 FA3 paged prefill kernel: what
                      BatchPrefillWithPagedKVCacheWrapper(backend="auto", causal=True) runs on
                      Hopper
- ``sdpa_cudnn``, ``sdpa_flash``  PyTorch SDPA backends on the same data stored contiguously
                      (BHSD, page_size 0); GQA through enable_gqa=True, or, if a backend refuses
                      it, heads expanded by a copy made outside the timed region (then the
                      backend reads H_q/H_kv times more K/V bytes than counted); s_q > 1 is
                      bottom-right causal: flash through causal_lower_right (its kernel's own
                      bottom-right flag), cuDNN through the materialized boolean mask (torch's
                      cuDNN path has no bottom-right flag)
- ``read_limit``      a plain streaming read of the same number of bytes (Triton kernels loading
                      a buffer and reducing it into one int per program; best of a few tile
                      shapes), the bandwidth ceiling measured in the same run

The three FlashInfer kernels come from ahead-of-time builds of FlashInfer's own templates
(bench/peers/flashinfer, loaded by fi_peer.py). torch, triton and flashkit are imported lazily.
"""

from __future__ import annotations

import contextlib
import math
from typing import Optional

from . import fi_peer

FLASHKIT = "flashkit"
FLASHKIT_ONECALL = "flashkit_onecall"
FLASHINFER = "flashinfer"
FLASHINFER_TC = "flashinfer_tc"
FLASHINFER_FA3 = "flashinfer_fa3"
FLASHINFER_IMPLS = (FLASHINFER, FLASHINFER_TC, FLASHINFER_FA3)
SDPA_BACKENDS = {"sdpa_cudnn": "CUDNN_ATTENTION", "sdpa_flash": "FLASH_ATTENTION"}
READ_LIMIT = "read_limit"
ALL_IMPLS = (FLASHKIT, FLASHKIT_ONECALL, *FLASHINFER_IMPLS, *SDPA_BACKENDS, READ_LIMIT)
DEFAULT_IMPLS = (FLASHKIT, *FLASHINFER_IMPLS, *SDPA_BACKENDS, READ_LIMIT)
PAGED_IMPLS = (FLASHKIT, FLASHKIT_ONECALL, *FLASHINFER_IMPLS)


class Env:
    """What the implementations may need to know about the run."""

    def __init__(self, flashinfer_path: Optional[str] = None) -> None:
        self.flashinfer_path = flashinfer_path


class DecodeImpl:
    """One implementation. ``setup()`` returns None when usable, else why not.
    ``prepare(shape, page_size, sets)`` does everything untimed (plans, workspaces) and
    returns one callable per input set; each returns the output [B, s_q, H_q, D] (or, for
    read_limit, a small tensor)."""

    name = "?"
    paged = True          # measured once per page size (else once per shape, page_size 0)
    checks_output = True  # compared with the reference

    def setup(self, env: Env) -> Optional[str]:
        return None

    def supports(self, shape) -> Optional[str]:
        return None

    def context(self):
        return contextlib.nullcontext()

    def prepare(self, shape, page_size: int, sets) -> list:
        raise NotImplementedError

    def release(self) -> None:
        """Free what prepare() made (called after the measurement, GPU idle)."""

    def note(self, shape) -> Optional[str]:
        """Something to say about how this impl ran the shape (printed once)."""
        return None


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


class FlashKitImpl(DecodeImpl):
    name = FLASHKIT

    def __init__(self) -> None:
        self._decode = None
        self._plan_cls = None
        self.how = None

    def setup(self, env: Env) -> Optional[str]:
        try:
            import flashkit
        except Exception as e:  # ImportError, OSError from a missing .so, ...
            return f"import flashkit failed: {type(e).__name__}: {e}"
        self._decode = getattr(flashkit, "decode", None)
        self._plan_cls = getattr(flashkit, "DecodePlan", None)
        if self._decode is None and self._plan_cls is None:
            return ("flashkit.decode is not available in this build (no flashkit.decode / "
                    "flashkit.DecodePlan)")
        self.how = ("DecodePlan.plan() outside the timed region, DecodePlan.run() timed"
                    if self._plan_cls is not None else "flashkit.decode() (plan inside the timed call)")
        return None

    def prepare(self, shape, page_size: int, sets) -> list:
        fns = []
        plan = None
        if self._plan_cls is not None:
            d0 = sets[0]
            plan = self._plan_cls(shape.B, shape.s_q, shape.H_q, shape.H_kv, shape.D,
                                  device=d0.q.device, split_size=0, max_seqlen_k=shape.S_k)
            plan.plan(d0.paged[page_size].seqlens)  # same lengths in every set
        for d in sets:
            pc = d.paged[page_size]
            if plan is not None:
                fns.append(lambda plan=plan, d=d, pc=pc: _first(plan.run(
                    d.q, pc.k, pc.v, pc.block_table, pc.seqlens, causal=True)))
            else:
                fns.append(lambda d=d, pc=pc: _first(self._decode(
                    d.q, pc.k, pc.v, pc.block_table, pc.seqlens, causal=True)))
        self._plan = plan
        return fns

    def release(self) -> None:
        self._plan = None


class FlashKitOneCallImpl(FlashKitImpl):
    """flashkit.decode with its plan kernel inside the timed call (the form a caller without a
    DecodePlan uses; on Hopper with B <= 32 its split CTAs compute their own items)."""

    name = FLASHKIT_ONECALL

    def setup(self, env: Env) -> Optional[str]:
        why = super().setup(env)
        if why is None and self._decode is None:
            why = "flashkit.decode is not available in this build"
        self._plan_cls = None
        self.how = "flashkit.decode() (plan inside the timed call)"
        return why


class FlashInferImpl(DecodeImpl):
    KIND = {FLASHINFER: "decode", FLASHINFER_TC: "fa2", FLASHINFER_FA3: "fa3"}

    def __init__(self, name: str) -> None:
        self.name = name
        self.kind = self.KIND[name]
        self.lib: Optional[fi_peer.FlashInferLib] = None
        self._handle = None

    def setup(self, env: Env) -> Optional[str]:
        import torch

        path, searched = fi_peer.find_library(self.kind, env.flashinfer_path)
        if path is None:
            return (f"libfi_{self.kind}.so not found (looked in "
                    f"{', '.join(str(p) for p in searched)}; build it with "
                    f"bench/peers/flashinfer/build.sh, pass --flashinfer-path or set "
                    f"{fi_peer.ENV_VAR})")
        cc = torch.cuda.get_device_capability()
        if cc != (9, 0):
            return f"the FlashInfer peer is built for sm_90a only; this GPU is sm_{cc[0]}{cc[1]}"
        try:
            self.lib = fi_peer.FlashInferLib(path)
        except OSError as e:
            return f"loading {path} failed: {e}"
        return None

    def supports(self, shape) -> Optional[str]:
        if shape.D != 128:
            return "the FlashInfer peer build instantiates head_dim 128 only"
        if self.kind == "decode" and shape.s_q != 1:
            return ("the CUDA-core decode kernel takes one query token (FlashInfer runs s_q > 1 "
                    "with tensor cores: see flashinfer_tc)")
        return None

    def prepare(self, shape, page_size: int, sets) -> list:
        import torch

        B, sq, Hq, D = shape.B, shape.s_q, shape.H_q, shape.D
        stream = torch.cuda.current_stream().cuda_stream
        lib = self.lib
        # One wrapper-like handle (workspaces + plan) per shape and page size, reused by every
        # input set, as a serving engine reuses one plan for all layers of a step.
        self._handle = lib.create(Hq, shape.H_kv, D, page_size)
        pc0 = sets[0].paged[page_size]
        lib.plan(self._handle, pc0.kv_indptr_host, pc0.kv_len_host, sq, True, stream)
        qo_indptr = torch.arange(0, (B + 1) * sq, sq, dtype=torch.int32, device=sets[0].q.device)
        self._keep = [qo_indptr]
        scale = 1.0 / math.sqrt(D)
        fns = []
        for d in sets:
            pc = d.paged[page_size]
            q2 = d.q.view(B * sq, Hq, D)
            o = torch.empty(B * sq, Hq, D, dtype=d.q.dtype, device=d.q.device)
            self._keep.append(o)
            args = lib.run_args(self._handle, q2.data_ptr(), q2.stride(0), q2.stride(1),
                                pc.k.data_ptr(), pc.v.data_ptr(), tuple(pc.k.stride()),
                                pc.kv_indices.data_ptr(), pc.kv_indptr.data_ptr(),
                                pc.last_page_len.data_ptr(), qo_indptr.data_ptr(),
                                o.data_ptr(), scale, True, stream)
            out = o.view(B, sq, Hq, D)
            fns.append(lambda args=args, out=out: (lib.run(args), out)[1])
        torch.cuda.synchronize()
        return fns

    def release(self) -> None:
        if self._handle is not None:
            self.lib.destroy(self._handle)
            self._handle = None
        self._keep = []


class SdpaImpl(DecodeImpl):
    paged = False

    def __init__(self, name: str) -> None:
        self.name = name
        self._backend = None
        self._sdpa = None
        self._notes: dict = {}

    def setup(self, env: Env) -> Optional[str]:
        try:
            import torch.nn.functional as F
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except Exception as e:
            return f"torch.nn.attention unavailable: {e}"
        backend = getattr(SDPBackend, SDPA_BACKENDS[self.name], None)
        if backend is None:
            return f"SDPBackend.{SDPA_BACKENDS[self.name]} not in this torch"
        self._backend = backend
        self._sdpa = F.scaled_dot_product_attention
        self._sdpa_kernel = sdpa_kernel
        return None

    def context(self):
        return self._sdpa_kernel([self._backend])

    def _call(self, q, k, v, mask, gqa: bool):
        kwargs = {"enable_gqa": True} if gqa else {}
        return self._sdpa(q, k, v, attn_mask=mask, **kwargs).transpose(1, 2)

    def prepare(self, shape, page_size: int, sets) -> list:
        import torch
        from torch.nn.attention.bias import causal_lower_right

        G = shape.H_q // shape.H_kv
        mask, how_mask = None, ""
        if shape.s_q > 1:
            bias = causal_lower_right(shape.s_q, shape.S_k)
            if self.name == "sdpa_flash":
                # CausalBias calls the flash kernel with its bottom-right causal flag (and,
                # under a flash-only sdpa_kernel context, errors rather than fall back)
                mask, how_mask = bias, "bottom-right causal via causal_lower_right (flash kernel)"
            else:
                # torch's cuDNN path has no bottom-right causal flag: a boolean mask [s_q, S_k]
                # (what causal_lower_right materializes), made here, outside the timed region
                mask = bias._materialize(sets[0].q.device)
                how_mask = "bottom-right causal as a materialized boolean attn_mask"
        gqa = G > 1
        views = [(d.q.transpose(1, 2), d.k_src, d.v_src) for d in sets]
        how = "enable_gqa=True" if gqa else "MHA"
        if gqa:
            q0, k0, v0 = views[0]
            try:
                with self.context():
                    self._call(q0, k0, v0, mask, True)
                torch.cuda.synchronize()
            except RuntimeError as e:
                need = shape.kv_bytes * G * len(sets)
                free, _ = torch.cuda.mem_get_info()
                if need > 0.8 * free:
                    raise RuntimeError(
                        f"refuses enable_gqa ({str(e).strip().splitlines()[0][:120]}) and "
                        f"expanded heads would need {need / 1e9:.1f} GB") from e
                views = [(q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1))
                         for q, k, v in views]
                gqa = False
                how = (f"heads expanded x{G} by a copy outside the timed region (enable_gqa "
                       f"refused); reads {G}x the K/V bytes counted")
        if how_mask:
            how += ", " + how_mask
        self._notes[(shape.H_q, shape.H_kv, shape.s_q)] = how
        return [lambda q=q, k=k, v=v, g=gqa: self._call(q, k, v, mask, g) for q, k, v in views]

    def note(self, shape) -> Optional[str]:
        return self._notes.get((shape.H_q, shape.H_kv, shape.s_q))


# Triton streaming-read kernels for read_limit: (BLOCK int32 elements, ITERS, num_warps)
READ_VARIANTS = ((4096, 4, 8), (8192, 2, 8), (2048, 8, 4), (16384, 1, 16))


class ReadLimitImpl(DecodeImpl):
    name = READ_LIMIT
    paged = False
    checks_output = False

    def __init__(self) -> None:
        self._kernel = None
        self._bufs = []

    def setup(self, env: Env) -> Optional[str]:
        try:
            import triton
            import triton.language as tl
        except Exception as e:
            return f"triton unavailable: {e}"

        @triton.jit
        def _stream_read(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
            pid = tl.program_id(0).to(tl.int64)
            base = pid * (BLOCK * ITERS)
            acc = tl.zeros([BLOCK], dtype=tl.int32)
            for i in tl.static_range(ITERS):
                offs = base + i * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offs, mask=offs < n, other=0)
            tl.store(out_ptr + pid, tl.sum(acc, axis=0))

        self._kernel = _stream_read
        return None

    def variants(self, shape, sets) -> list:
        """[(label, fns)]: one streaming read of shape.bytes per set, per tile shape."""
        import torch

        n = (shape.bytes + 3) // 4
        self._bufs = []
        for d in sets:
            buf = torch.empty(n * 2, dtype=torch.bfloat16, device=d.q.device).normal_()
            self._bufs.append(buf.view(torch.int32))
        out = []
        for block, iters, warps in READ_VARIANTS:
            grid = (triton_cdiv(n, block * iters),)
            res = torch.empty(grid[0], dtype=torch.int32, device=sets[0].q.device)
            fns = [lambda b=b, res=res, grid=grid, block=block, iters=iters, warps=warps:
                   self._kernel[grid](b, res, n, BLOCK=block, ITERS=iters, num_warps=warps)
                   for b in self._bufs]
            out.append((f"BLOCK={block} ITERS={iters} warps={warps}", fns))
        return out

    def release(self) -> None:
        self._bufs = []


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def make_impl(name: str) -> DecodeImpl:
    if name == FLASHKIT:
        return FlashKitImpl()
    if name == FLASHKIT_ONECALL:
        return FlashKitOneCallImpl()
    if name in FLASHINFER_IMPLS:
        return FlashInferImpl(name)
    if name in SDPA_BACKENDS:
        return SdpaImpl(name)
    if name == READ_LIMIT:
        return ReadLimitImpl()
    raise ValueError(f"unknown impl {name!r} (known: {', '.join(ALL_IMPLS)})")
