"""Benchmark sweeps of SPEC §4 (prefill) and the FLOP model used to turn times into TFLOPS.

Pure Python (no torch): the CLI tests and the CPU-side ``plot`` command use it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

MODES = ("fwd", "bwd", "fwd_bwd")
# FLOPs of a mode as a multiple of the forward FLOPs (SPEC §4).
MODE_FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}

SWEEPS = ("fa3", "small")
# Sweeps that "all" leaves out (asked for by name).
EXTRA_SWEEPS = ("dims",)

# fa3: FlashAttention-3 methodology: 16k tokens in total, hidden size 2048.
FA3_TOTAL_TOKENS = 16384
FA3_HIDDEN = 2048
FA3_HEAD_DIMS = (64, 128, 256)
FA3_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
FA3_SEQLENS_QUICK = (1024, 4096, 16384)

# small: the small-batch sweep of the Triton tuning chapter: B=4, H=8.
SMALL_BATCH = 4
SMALL_HEADS = 8
SMALL_HEAD_DIMS = (64, 128)
SMALL_SEQLENS = (256, 512, 1024, 2048, 4096, 8192, 16384)
SMALL_SEQLENS_QUICK = (512, 2048, 8192)

# dims: the head dims that have Hopper kernels but no place in fa3's hidden 2048 (issue 8's
# D 96 / 192 bar): 16k tokens and 16 heads, fa3's lengths.
DIMS_HEADS = 16
DIMS_HEAD_DIMS = (96, 192)


@dataclass(frozen=True)
class Config:
    """One attention problem (self-attention: S_q == S_k, D == Dv)."""

    sweep: str
    B: int
    H_q: int
    H_kv: int
    S: int
    D: int
    causal: bool

    @property
    def S_q(self) -> int:
        return self.S

    @property
    def S_k(self) -> int:
        return self.S

    @property
    def Dv(self) -> int:
        return self.D

    def label(self) -> str:
        heads = f"{self.H_q}" if self.H_q == self.H_kv else f"{self.H_q}/{self.H_kv}"
        return (f"{self.sweep:<5} D={self.D:<3} causal={int(self.causal)} "
                f"S={self.S:<5} B={self.B:<2} H={heads:<2}")


def fwd_flops(B: int, H_q: int, S_q: int, S_k: int, D: int, causal: bool) -> float:
    """Forward FLOPs = 4·B·H_q·S_q·S_k·D, halved for causal (SPEC §4)."""
    f = 4.0 * B * H_q * S_q * S_k * D
    return f / 2.0 if causal else f


def flops(cfg: Config, mode: str) -> float:
    return fwd_flops(cfg.B, cfg.H_q, cfg.S_q, cfg.S_k, cfg.D, cfg.causal) * MODE_FLOP_FACTOR[mode]


# --- sliding window ---------------------------------------------------------------------
# flashkit.attention's mask, with d = S_k - S_q: query row i sees key j iff 0 <= j < S_k,
# (right < 0 or j <= i + d + right) and (left < 0 or j >= i + d - left); causal is
# right = 0. A windowed run's FLOPs count only the visible (query, key) pairs:
#   window FLOPs = 4·B·H_q·D·visible_pairs(S_q, S_k, left, right)   (x 2.5 bwd, x 3.5 fwd_bwd)
# For S_q = S_k = S and a causal window of left W < S (row i sees min(i, W) + 1 keys):
#   visible_pairs = S + W(W+1)/2 + (S - 1 - W)·W
# e.g. S = 16384, W = 4096: 58,734,592 pairs, 0.4376 of a full causal S²/2 = 134,217,728.


def _clamped_prefix(y: int, m: int) -> int:
    """sum over integers x <= y of clamp(x, 0, m) (x <= 0 add nothing)."""
    if y <= 0:
        return 0
    if y <= m:
        return y * (y + 1) // 2
    return m * (m + 1) // 2 + (y - m) * m


def _pairs_up_to(S_q: int, S_k: int, c: int) -> int:
    """Number of (i, j), 0 <= i < S_q, 0 <= j < S_k, with j <= i + c: row i has
    clamp(i + c + 1, 0, S_k) such keys; summed over i in closed form."""
    a = c + 1
    return _clamped_prefix(a + S_q - 1, S_k) - _clamped_prefix(a - 1, S_k)


def visible_pairs(S_q: int, S_k: int, causal: bool = False, window_left: int = -1,
                  window_right: int = -1) -> int:
    """Exact number of visible (query, key) pairs under flashkit.attention's causal mask
    and sliding window (bottom-right aligned; -1: no bound on that side; causal sets the
    right bound to 0), in O(1): pairs(j - i <= d + right) - pairs(j - i <= d - left - 1)."""
    if S_q <= 0 or S_k <= 0:
        return 0
    d = S_k - S_q
    right = 0 if causal else window_right
    hi = S_q * S_k if right < 0 else _pairs_up_to(S_q, S_k, d + right)
    lo = 0 if window_left < 0 else _pairs_up_to(S_q, S_k, d - window_left - 1)
    return max(0, hi - lo)


def window_fwd_flops(B: int, H_q: int, S_q: int, S_k: int, D: int, window_left: int,
                     causal: bool = True, window_right: int = -1) -> float:
    """Forward FLOPs of a windowed run: 4·B·H_q·D per visible (query, key) pair (Q K^T and
    P V, 2 FLOPs per multiply-add each). Key tiles outside the window are skipped by the
    kernels, so only visible pairs count."""
    return 4.0 * B * H_q * D * visible_pairs(S_q, S_k, causal, window_left, window_right)


def window_flops(cfg: Config, window_left: int, mode: str) -> float:
    """FLOPs of the --window rows: a causal sliding window (window_left, 0) on cfg."""
    return (window_fwd_flops(cfg.B, cfg.H_q, cfg.S_q, cfg.S_k, cfg.D, window_left)
            * MODE_FLOP_FACTOR[mode])


def parse_window(text: str) -> int:
    """'4096', '4k' -> 4096 (a window's left bound, >= 0). Raises ValueError."""
    t = str(text).strip().lower()
    mult = 1
    if t.endswith("k"):
        mult, t = 1024, t[:-1]
    try:
        value = int(t) * mult
    except ValueError:
        raise ValueError(f"expected a number of keys >= 0 (e.g. 4096 or 4k), got {text!r}")
    if value < 0:
        raise ValueError(f"expected a number of keys >= 0, got {text!r}")
    return value


def tflops(total_flops: float, ms: float) -> float:
    return total_flops / (ms * 1e-3) / 1e12


def fa3_configs(seqlens: Sequence[int] = FA3_SEQLENS) -> list[Config]:
    out = []
    for D in FA3_HEAD_DIMS:
        H = FA3_HIDDEN // D
        for causal in (False, True):
            for S in seqlens:
                out.append(Config("fa3", FA3_TOTAL_TOKENS // S, H, H, S, D, causal))
    return out


def dims_configs(seqlens: Sequence[int] = FA3_SEQLENS) -> list[Config]:
    out = []
    for D in DIMS_HEAD_DIMS:
        for causal in (False, True):
            for S in seqlens:
                out.append(Config("dims", FA3_TOTAL_TOKENS // S, DIMS_HEADS, DIMS_HEADS, S, D, causal))
    return out


def small_configs(seqlens: Sequence[int] = SMALL_SEQLENS) -> list[Config]:
    out = []
    for D in SMALL_HEAD_DIMS:
        for causal in (False, True):
            for S in seqlens:
                out.append(Config("small", SMALL_BATCH, SMALL_HEADS, SMALL_HEADS, S, D, causal))
    return out


def parse_seqlen(text: str) -> int:
    """'2048', '2k', '2K', '16k' -> int. Raises ValueError."""
    t = text.strip().lower()
    if not t:
        raise ValueError("empty sequence length")
    mult = 1
    if t.endswith("k"):
        mult, t = 1024, t[:-1]
    value = int(t) * mult
    if value <= 0:
        raise ValueError(f"sequence length must be positive: {text!r}")
    return value


def format_seqlen(S: int) -> str:
    return f"{S // 1024}k" if S >= 1024 and S % 1024 == 0 else str(S)


def parse_heads_dim(text: str) -> tuple[Optional[int], int]:
    """'128' -> (None, 128) (any head count); '16x128' or '16:128' -> (16, 128)."""
    t = text.strip().lower()
    for sep in ("x", ":"):
        if sep in t:
            h, d = t.split(sep, 1)
            H, D = int(h), int(d)
            if H <= 0 or D <= 0:
                raise ValueError(f"bad heads/dim filter {text!r}")
            return H, D
    D = int(t)
    if D <= 0:
        raise ValueError(f"bad head-dim filter {text!r}")
    return None, D


def build_configs(sweeps: Iterable[str],
                  seqlens: Optional[Sequence[int]] = None,
                  heads_dims: Optional[Sequence[tuple[Optional[int], int]]] = None,
                  causal: Optional[bool] = None,
                  quick: bool = False) -> list[Config]:
    """All configurations of the chosen sweeps, filtered.

    seqlens: the lengths to run, replacing each sweep's own list (fa3 drops lengths that
    do not divide its 16k tokens).
    heads_dims: keep configs whose (H_q, D) matches one entry (H None = any).
    causal: None = both.  quick: a shorter list of lengths (ignored when seqlens is given).
    """
    configs: list[Config] = []
    for sweep in sweeps:
        if sweep == "fa3":
            lens = tuple(seqlens) if seqlens else (FA3_SEQLENS_QUICK if quick else FA3_SEQLENS)
            # fa3 keeps B·S = 16k tokens, so S must divide 16k.
            lens = tuple(s for s in lens if FA3_TOTAL_TOKENS % s == 0)
            configs += fa3_configs(lens)
        elif sweep == "small":
            lens = tuple(seqlens) if seqlens else (SMALL_SEQLENS_QUICK if quick else SMALL_SEQLENS)
            configs += small_configs(lens)
        elif sweep == "dims":
            lens = tuple(seqlens) if seqlens else (FA3_SEQLENS_QUICK if quick else FA3_SEQLENS)
            lens = tuple(s for s in lens if FA3_TOTAL_TOKENS % s == 0)
            configs += dims_configs(lens)
        else:
            raise ValueError(f"unknown sweep {sweep!r} (known: {', '.join(SWEEPS + EXTRA_SWEEPS)})")
    if heads_dims:
        configs = [c for c in configs
                   if any(c.D == d and (h is None or c.H_q == h) for h, d in heads_dims)]
    if causal is not None:
        configs = [c for c in configs if c.causal == causal]
    return configs


def classify_sweep(B: int, H_q: int, S_q: int, D: int) -> str:
    """Which sweep a results row belongs to (the CSV has no sweep column)."""
    if B * S_q == FA3_TOTAL_TOKENS and H_q * D == FA3_HIDDEN:
        return "fa3"
    if B * S_q == FA3_TOTAL_TOKENS and H_q == DIMS_HEADS and D in DIMS_HEAD_DIMS:
        return "dims"
    if B == SMALL_BATCH and H_q == SMALL_HEADS:
        return "small"
    return "other"


def geomean(values: Iterable[float]) -> float:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return float("nan")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))
