"""Paged-KV decode attention (Flash-Decoding with a GPU-side plan) and the KV append.

::

    # one call (plans on the GPU, then runs; on Hopper with B <= 32 within ~1.5-3.5 us of a run):
    out = flashkit.decode(q, k_cache, v_cache, block_table, seqlens_k)

    # plan once per decode step, run for every layer; both CUDA-graph capturable:
    plan = flashkit.DecodePlan(batch_size=B, s_q=1, num_heads_q=32, num_heads_kv=8,
                               head_dim=128, device="cuda")
    flashkit.append_kv(k_cache, v_cache, k_new, v_new, block_table, seqlens_k)
    plan.plan(seqlens_k)
    out = plan.run(q, k_cache, v_cache, block_table, seqlens_k)

Layout: ``q [B, s_q, H_q, D]`` (s_q = 1..16 new tokens), ``k_cache [num_pages, page_size,
H_kv, D]`` and ``v_cache [num_pages, page_size, H_kv, D_v]`` (any strides with a contiguous
last dim: NHD, or HND as a permuted view), ``block_table [B, max_pages]`` int32,
``seqlens_k [B]`` int32 (cached tokens, the new ones included). Query token t of sequence b
sits at position ``seqlens_k[b] - s_q + t``; with ``causal`` (the default) it sees keys up
to that position. Returns ``out [B, s_q, H_q, D_v]`` (and ``lse [B, H_q, s_q]`` float32).

Device-side index data is never trusted: lengths outside ``[0, max_pages * page_size]``
are clamped and block ids outside ``[0, num_pages)`` are skipped; both set a bit of the
device error word (read it with :func:`flashkit.device_errors`).

torch tensors only (these are ``torch.library`` custom ops with fake implementations, so
``torch.compile(fullgraph=True)`` traces them); other DLPack arrays can call
``flashkit._C.decode_run`` / ``decode_plan`` / ``append_kv`` with preallocated outputs.
"""

from __future__ import annotations

from .ops import _scale_arg

__all__ = ["decode", "DecodePlan", "append_kv"]


def _tops():
    from . import _torch_decode_ops

    return _torch_decode_ops


def _scale(softmax_scale):
    return 0.0 if softmax_scale is None else _scale_arg(softmax_scale)


def _split_args(split_size, max_seqlen_k):
    for name, v in (("split_size", split_size), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    return int(split_size), int(max_seqlen_k)


def decode(q, k_cache, v_cache, block_table, seqlens_k, causal=True, softmax_scale=None,
           return_lse=False, split_size=0, max_seqlen_k=0, check_inputs=False, k_scale=None,
           v_scale=None):
    """Decode attention over a paged KV cache (plan + run in one call).

    Args:
        q: ``[B, s_q, H_q, D]`` float16/bfloat16 (D = 64, 128 or 256).
        k_cache, v_cache: ``[num_pages, page_size, H_kv, D]`` (any page size >= 1).
        block_table: int32 ``[B, max_pages]``;  seqlens_k: int32 ``[B]``.
        causal: the new tokens see the cache and each other, bottom-right aligned.
        softmax_scale: defaults to ``1/sqrt(D)``.
        return_lse: also return ``lse [B, H_q, s_q]`` (natural log, float32).
        split_size: 0 (splits balanced over the GPU) or a multiple of 64 tokens: every
            split then covers exactly that many tokens and a sequence's result bits do not
            depend on the rest of the batch (batch invariance).
        max_seqlen_k: with a fixed split_size, an upper bound of the lengths (default:
            ``max_pages * page_size``).
        k_scale, v_scale: with an int8 or float8_e4m3fn cache, its fp32 scales
            ``[num_pages, page_size, H_kv]`` (value = stored * scale; :func:`append_kv`
            writes them). The cache is dequantized in registers.
        check_inputs: validate ``block_table`` / ``seqlens_k`` on the GPU before the launch
            (synchronizes; not inside CUDA-graph capture) and raise ValueError naming the
            first bad entry. Also on for every call with ``FLASHKIT_CHECK_INPUTS=1``.
    """
    split_size, max_seqlen_k = _split_args(split_size, max_seqlen_k)
    out, lse = _tops().decode(q, k_cache, v_cache, block_table, seqlens_k, bool(causal),
                              _scale(softmax_scale), bool(return_lse), split_size, max_seqlen_k,
                              bool(check_inputs), k_scale, v_scale)
    return (out, lse) if return_lse else out


def append_kv(k_cache, v_cache, k_new, v_new, block_table, seqlens_k, k_scale=None, v_scale=None):
    """Writes ``k_new/v_new [B, s_new, H_kv, D]`` into the page slots of positions
    ``seqlens_k[b] - s_new + t`` (``seqlens_k`` already counts the new tokens), in place.
    With int8 / float8_e4m3fn caches the rows are quantized (symmetric, per token and head:
    scale = amax / 127 or amax / 448) and the scales written to ``k_scale`` / ``v_scale``.
    A token without a valid slot is skipped and sets the device error word."""
    _tops().append_kv(k_cache, v_cache, k_new, v_new, block_table, seqlens_k, k_scale, v_scale)


class DecodePlan:
    """A decode plan's workspace and sizes. ``plan(seqlens_k)`` computes the split schedule
    on the GPU (no host sync); ``run(...)`` runs the split and combine kernels with it.
    Re-plan whenever ``seqlens_k`` changes; capture ``plan`` + ``run`` in one CUDA graph to
    replay a decode step with new lengths and block tables.

    The workspace size depends only on the sizes below and the GPU's SM count (with a fixed
    ``split_size``, also on ``max_seqlen_k``).
    """

    def __init__(self, batch_size, s_q, num_heads_q, num_heads_kv, head_dim, *,
                 head_dim_v=None, device=None, split_size=0, max_seqlen_k=0, kv_dtype=None):
        import torch

        split_size, max_seqlen_k = _split_args(split_size, max_seqlen_k)
        self.device = torch.device(device if device is not None else "cuda")
        if self.device.type != "cuda":
            raise ValueError(f"device: expected a CUDA device, got {self.device}")
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        self.device = torch.device("cuda", index)
        self.batch_size = int(batch_size)
        self.s_q = int(s_q)
        self.num_heads_q = int(num_heads_q)
        self.num_heads_kv = int(num_heads_kv)
        self.head_dim = int(head_dim)
        self.head_dim_v = int(head_dim_v) if head_dim_v is not None else self.head_dim
        self.split_size = split_size
        self.max_seqlen_k = max_seqlen_k
        # the cache's dtype when quantized (torch.int8 / torch.float8_e4m3fn), else None
        self.kv_dtype = "" if kv_dtype is None else str(kv_dtype).replace("torch.", "")
        self._quant_dtypes = (torch.int8, torch.float8_e4m3fn)
        from .ops import _native

        nbytes = _native().decode_workspace_size(
            self.batch_size, self.s_q, self.num_heads_q, self.num_heads_kv, self.head_dim,
            self.head_dim_v, split_size, max_seqlen_k, index, self.kv_dtype)
        self.workspace = torch.empty(((nbytes + 3) // 4,), dtype=torch.int32, device=self.device)
        self._tops = _tops()

    def _sizes(self):
        return (self.batch_size, self.s_q, self.num_heads_q, self.num_heads_kv, self.head_dim,
                self.head_dim_v, self.split_size, self.max_seqlen_k)

    def plan(self, seqlens_k):
        """Computes the split schedule for these lengths on the GPU (current stream)."""
        _tops().decode_plan(seqlens_k, self.workspace, *self._sizes(), self.kv_dtype)

    def run(self, q, k_cache, v_cache, block_table, seqlens_k, causal=True, softmax_scale=None,
            return_lse=False, check_inputs=False, k_scale=None, v_scale=None, out=None, lse=None):
        """Split + combine with the planned workspace; returns ``out`` (or ``(out, lse)``).

        ``out`` (``[B, s_q, H_q, D_v]``, q's dtype) and ``lse`` (``[B, H_q, s_q]`` float32,
        only with ``return_lse``): tensors to write and return instead of new ones, so a
        step that reuses its buffers allocates nothing (``out``: any strides with a contiguous
        last dimension; ``lse`` contiguous; both checked like every other argument). Under
        torch.compile and in CUDA-graph capture they are written in place too."""
        qs, ks = getattr(q, "shape", ()), getattr(k_cache, "shape", ())
        if (len(qs) != 4 or len(ks) != 4 or qs[0] != self.batch_size or qs[1] != self.s_q
                or qs[2] != self.num_heads_q or ks[2] != self.num_heads_kv
                or qs[3] != self.head_dim):
            q4 = tuple(qs) if len(qs) == 4 else (None,) * 4
            got = (q4[0], q4[1], q4[2], ks[2] if len(ks) == 4 else None, q4[3])
            want = (self.batch_size, self.s_q, self.num_heads_q, self.num_heads_kv, self.head_dim)
            raise ValueError(
                "DecodePlan.run: q/k_cache sizes (B, s_q, H_q, H_kv, D) = "
                f"{got} differ from the plan's {want}")
        # The plan's shape (split CTAs per SM, rows per item) depends on the cache kind: a plan made
        # for another kind would only be refused on the GPU (a device error bit), so say it here.
        kd = getattr(k_cache, "dtype", None)
        if kd is not None and (str(kd).replace("torch.", "") if kd in self._quant_dtypes else "") != self.kv_dtype:
            raise ValueError(
                f"DecodePlan.run: k_cache is {kd}, but the plan was made with kv_dtype="
                f"{self.kv_dtype or None} (None: a 16-bit cache; torch.int8 / torch.float8_e4m3fn: "
                "a quantized one)")
        o, l = self._tops.decode_run(q, k_cache, v_cache, block_table, seqlens_k, self.workspace,
                                     bool(causal), _scale(softmax_scale), bool(return_lse),
                                     self.split_size, self.max_seqlen_k, bool(check_inputs),
                                     k_scale, v_scale, out, lse)
        return (o, l) if return_lse else o
