"""The implementations measured side by side: FlashKit and its peers (SPEC §5).

Every implementation takes BSHD tensors ``q [B,S,H_q,D]``, ``k/v [B,S,H_kv,D]`` and
returns a BSHD output.  Peers that want BHSD get ``transpose(1, 2)`` views of the same
data (no copy) and their output is transposed back (a view, no copy either).

``--window LEFT`` adds ``flashkit_window<LEFT>``: FlashKit with a causal sliding window
(``causal=True, window=(LEFT, -1)``), run on the causal configurations only, in every mode
(forward, and the backward through ``flashkit.attention_backward`` with the same window; no
peer has a sliding window: SDPA takes no window, and a dense boolean mask would time a
different, unskipped computation).

Backward: through torch autograd by default (the runner builds the graph once and times
``torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)``); an implementation with
a backward entry point of its own says so in ``backward_fn`` (FlashKit:
``flashkit.attention_backward`` from the saved out and lse).

torch, torch.nn.attention and flashkit are imported lazily (``setup()``), so this module
can be imported on a machine without them.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Optional

FLASHKIT = "flashkit"
# FlashKit's backward in deterministic mode, beside the fast one in the same run (bwd and
# fwd_bwd rows; its forward is flashkit's, so it has no fwd rows).
FLASHKIT_DET = "flashkit_deterministic"
SDPA_BACKENDS = {
    # impl name -> torch.nn.attention.SDPBackend member
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
}
FLEX = "flex"
WINDOW_PREFIX = "flashkit_window"  # + the left bound: FlashKit with a causal sliding window
ALL_IMPLS = (FLASHKIT, FLASHKIT_DET, *SDPA_BACKENDS, FLEX)
DEFAULT_IMPLS = (FLASHKIT, *SDPA_BACKENDS)
# Order in which SDPA backends are tried as the reference for the correctness check.
REFERENCE_ORDER = tuple(SDPA_BACKENDS)


class Impl:
    """One implementation. ``setup()`` returns None when usable, else the reason why not."""

    name: str = "?"
    # The modes this impl has rows for (None: every mode).
    modes: Optional[tuple] = None

    def setup(self) -> Optional[str]:
        return None

    def configure(self, deterministic: bool = False) -> None:
        """Run options (--deterministic: FlashKit's deterministic backward); ignored by
        implementations without such a choice."""

    def context(self):
        """Context manager every call (probe and timed) runs in."""
        return contextlib.nullcontext()

    def forward(self, q, k, v, causal: bool):
        raise NotImplementedError

    def backward_fn(self, q, k, v, dout, causal: bool) -> Optional[Callable]:
        """A closure computing (dq, dk, dv) for ``dout`` with the forward's results saved
        (runs the forward once, outside the timing), or None: time autograd instead."""
        return None


class FlashKitImpl(Impl):
    name = FLASHKIT

    def __init__(self) -> None:
        self._attention: Optional[Callable] = None
        self._backward: Optional[Callable] = None
        self.deterministic = False

    def setup(self) -> Optional[str]:
        try:
            import flashkit  # lazily: the bench must start without the extension
        except Exception as e:  # ImportError, OSError from a missing .so, ...
            return f"import flashkit failed: {type(e).__name__}: {e}"
        fn = getattr(flashkit, "attention", None)
        if fn is None:
            try:
                from flashkit.ops import attention as fn  # type: ignore
            except Exception as e:
                return f"flashkit.attention not found ({type(e).__name__}: {e})"
        self._attention = fn
        self._backward = getattr(flashkit, "attention_backward", None)
        return None

    def configure(self, deterministic: bool = False) -> None:
        self.deterministic = bool(deterministic)

    def forward(self, q, k, v, causal: bool):
        if self._backward is not None:
            out = self._attention(q, k, v, causal=causal, deterministic=self.deterministic)
        else:  # a build without the backward
            out = self._attention(q, k, v, causal=causal)
        if isinstance(out, (tuple, list)):  # (out, lse) if a build returns both
            out = out[0]
        return out

    def backward_fn(self, q, k, v, dout, causal: bool) -> Optional[Callable]:
        if self._backward is None:
            return None
        q, k, v = (t.detach() for t in (q, k, v))
        out, lse = self._attention(q, k, v, causal=causal, return_lse=True)
        backward, det = self._backward, self.deterministic

        def fn():
            return backward(dout, q, k, v, out, lse, causal=causal, deterministic=det)
        return fn


class FlashKitDeterministicImpl(FlashKitImpl):
    """FlashKit with its deterministic backward whatever --deterministic says."""

    name = FLASHKIT_DET
    modes = ("bwd", "fwd_bwd")

    def __init__(self) -> None:
        super().__init__()
        self.deterministic = True

    def setup(self) -> Optional[str]:
        reason = super().setup()
        if reason is None and self._backward is None:
            return "this flashkit build has no backward"
        return reason

    def configure(self, deterministic: bool = False) -> None:
        self.deterministic = True


def window_impl_name(left: int) -> str:
    """'flashkit_window4096': the impl name of --window rows (the CSV's impl column)."""
    return f"{WINDOW_PREFIX}{int(left)}"


def window_of(name: str) -> Optional[int]:
    """The left bound of a window impl name, or None for other names."""
    rest = name[len(WINDOW_PREFIX):] if name.startswith(WINDOW_PREFIX) else ""
    return int(rest) if rest.isdigit() else None


class FlashKitWindowImpl(FlashKitImpl):
    """FlashKit with a causal sliding window: row i sees keys i + S_k - S_q - left .. the
    diagonal (``flashkit.attention(..., causal=True, window=(left, -1))``). Its forward and
    backward are flashkit's with that window, the deterministic choice handled as
    FlashKitImpl handles it; the ``causal`` argument is ignored (the --window rows are
    causal by definition and run on the causal configs only)."""

    def __init__(self, left: int) -> None:
        super().__init__()
        self.left = int(left)
        self.name = window_impl_name(self.left)

    @property
    def window(self) -> tuple:
        return (self.left, -1)

    def forward(self, q, k, v, causal: bool):
        if self._backward is not None:
            out = self._attention(q, k, v, causal=True, window=self.window,
                                  deterministic=self.deterministic)
        else:  # a build without the backward
            out = self._attention(q, k, v, causal=True, window=self.window)
        return out[0] if isinstance(out, (tuple, list)) else out

    def backward_fn(self, q, k, v, dout, causal: bool) -> Optional[Callable]:
        if self._backward is None:
            return None
        q, k, v = (t.detach() for t in (q, k, v))
        window = self.window
        out, lse = self._attention(q, k, v, causal=True, return_lse=True, window=window)
        backward, det = self._backward, self.deterministic

        def fn():
            return backward(dout, q, k, v, out, lse, causal=True, deterministic=det,
                            window=window)
        return fn


class SdpaImpl(Impl):
    def __init__(self, name: str) -> None:
        self.name = name
        self._backend = None
        self._sdpa = None
        self._sdpa_kernel = None

    def setup(self) -> Optional[str]:
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

    def forward(self, q, k, v, causal: bool):
        gqa = q.shape[2] != k.shape[2]
        kwargs = {"enable_gqa": True} if gqa else {}
        out = self._sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                         is_causal=causal, **kwargs)
        return out.transpose(1, 2)


class FlexImpl(Impl):
    """torch FlexAttention, compiled (one compile per shape; slow to start)."""

    name = FLEX

    def __init__(self) -> None:
        self._flex = None
        self._create_block_mask = None
        self._masks: dict = {}

    def setup(self) -> Optional[str]:
        try:
            import torch
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        except Exception as e:
            return f"FlexAttention unavailable: {e}"
        # Every shape of the sweeps is a new compile; the default recompile limit (8)
        # would silently fall back to eager flex, which materialises S×S scores.
        cfg = torch._dynamo.config
        for attr in ("recompile_limit", "cache_size_limit",
                     "accumulated_recompile_limit", "accumulated_cache_size_limit"):
            if hasattr(cfg, attr):
                setattr(cfg, attr, max(getattr(cfg, attr), 4096))
        self._flex = torch.compile(flex_attention, dynamic=False)
        self._create_block_mask = create_block_mask
        return None

    def _causal_mask(self, S_q: int, S_k: int, device):
        key = (S_q, S_k, str(device))
        if key not in self._masks:
            offset = S_k - S_q  # bottom-right aligned (SPEC §2)

            def causal(b, h, q_idx, kv_idx):
                return q_idx + offset >= kv_idx

            self._masks[key] = self._create_block_mask(
                causal, B=None, H=None, Q_LEN=S_q, KV_LEN=S_k, device=device)
        return self._masks[key]

    def forward(self, q, k, v, causal: bool):
        bm = self._causal_mask(q.shape[1], k.shape[1], q.device) if causal else None
        gqa = q.shape[2] != k.shape[2]
        kwargs = {"enable_gqa": True} if gqa else {}
        out = self._flex(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                         block_mask=bm, **kwargs)
        return out.transpose(1, 2)


def make_impl(name: str) -> Impl:
    if name == FLASHKIT:
        return FlashKitImpl()
    if name == FLASHKIT_DET:
        return FlashKitDeterministicImpl()
    if window_of(name) is not None:
        return FlashKitWindowImpl(window_of(name))
    if name in SDPA_BACKENDS:
        return SdpaImpl(name)
    if name == FLEX:
        return FlexImpl()
    raise ValueError(f"unknown impl {name!r} (known: {', '.join(ALL_IMPLS)})")
