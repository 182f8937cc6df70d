"""MLA decode sweep of SPEC §4 (FlashMLA's own test matrix) and its FLOP / byte model.

Pure Python (no torch): the CLI, ``--dry-run`` and the CPU tests use it.

SPEC §4 (= FlashMLA's tests/test_flash_mla.py): b = 128, s_q ∈ {1, 2}, mean S_k ∈ {4k, 8k,
16k}, h_q ∈ {16, 32, 64, 128}, h_kv = 1, d = 576 (512 latent + 64 rope), d_v = 512, causal,
bf16, fixed and variable lengths. 48 configurations. FlashMLA runs page 64 only; flashkit
is measured at page 16, 32, 64 and 128 on the same cache (a sequential block table, so one
cache serves every page size; see mla_runner).

Lengths (FlashMLA's test): ``fixed``: every sequence has S_k tokens; ``varlen``: each length
is ``max(normalvariate(S_k, S_k / 2), s_q)``, truncated to an int (what assigning the float
to FlashMLA's int32 tensor does). FlashMLA draws them from one ``random.seed(0)`` stream
shared by all its configurations in its loop order; here each configuration draws from its
own ``random.Random(seed)`` stream (seed from the base seed and the configuration), so a
configuration's lengths do not depend on which others were selected. Same distribution.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Optional, Sequence

from .sweeps import format_seqlen

D_QK = 576
D_V = 512
H_KV = 1
DTYPE_BYTES = 2  # bf16

BATCHES = (128,)
SQ_VALUES = (1, 2)
SEQLENS = (4096, 8192, 16384)
HEADS = (16, 32, 64, 128)
MODES = ("fixed", "varlen")
FLASHMLA_PAGE = 64                      # the only block size FlashMLA 2025-04 takes
FLASHKIT_PAGES = (16, 32, 64, 128)      # flashkit is measured at each
PAD_TO = 256                            # FlashMLA's test pads max_seqlen to a multiple of 256

QUICK_SEQLENS = (8192,)
QUICK_HEADS = (16, 128)
QUICK_FLASHKIT_PAGES = (16, 64)

BAR_VS_FLASHMLA = 1.05                  # SPEC §6: >= 1.05x FlashMLA on MLA decode


@dataclass(frozen=True)
class MlaConfig:
    """One MLA decode problem (h_kv = 1, d = 576, d_v = 512, causal)."""

    B: int
    s_q: int
    S_k: int          # the nominal mean length (the CSV's S_k)
    H_q: int
    mode: str         # fixed | varlen
    H_kv: int = H_KV
    D: int = D_QK
    Dv: int = D_V

    def label(self) -> str:
        return (f"B={self.B:<3} s_q={self.s_q} S_k={format_seqlen(self.S_k):<4} "
                f"H_q={self.H_q:<3} {self.mode:<6}")

    @property
    def key(self) -> tuple:
        return (self.B, self.s_q, self.S_k, self.H_q, self.mode)

    def seed(self, base: int = 0) -> int:
        """The configuration's own length / data seed (stable across selections)."""
        return (base * 1_000_003 + self.B * 7919 + self.s_q * 104_729 + self.S_k * 31
                + self.H_q * 613 + (1 if self.mode == "varlen" else 0)) % (2**31 - 1)


def seqlens(cfg: MlaConfig, seed: int = 0) -> list[int]:
    """The cache lengths of one configuration (FlashMLA's test distribution)."""
    if cfg.mode == "fixed":
        return [cfg.S_k] * cfg.B
    if cfg.mode != "varlen":
        raise ValueError(f"unknown mode {cfg.mode!r}")
    rng = random.Random(cfg.seed(seed))
    return [int(max(rng.normalvariate(cfg.S_k, cfg.S_k / 2), cfg.s_q)) for _ in range(cfg.B)]


def padded_max(lengths: Sequence[int], pad: int = PAD_TO) -> int:
    """max(lengths) rounded up to a multiple of ``pad`` (FlashMLA's max_seqlen_pad)."""
    return -(-max(lengths) // pad) * pad


def flops(cfg: MlaConfig, total_seqlens: int) -> int:
    """SPEC §4: 2·s_q·Σseqlens·h_q·(d + d_v) (FlashMLA's count; causal masking not subtracted)."""
    return 2 * cfg.s_q * total_seqlens * cfg.H_q * (cfg.D + cfg.Dv)


FP8_TOKEN_BYTES = 656  # 512 e4m3 + 4 fp32 scales + 64 bf16 RoPE values
FLASHKIT_PAGED_IMPLS = ("flashkit", "flashkit_fp8")  # measured at every page size


def nbytes(cfg: MlaConfig, total_seqlens: int) -> int:
    """SPEC §4: (Σseqlens·h_kv·d + b·s_q·h_q·(d + d_v))·2 (the latent cache once, q, out)."""
    return (total_seqlens * cfg.H_kv * cfg.D + cfg.B * cfg.s_q * cfg.H_q * (cfg.D + cfg.Dv)) \
        * DTYPE_BYTES


def nbytes_fp8(cfg: MlaConfig, total_seqlens: int) -> int:
    """nbytes with the cache in FlashMLA's FP8 layout (656 bytes per token and KV head)."""
    return total_seqlens * cfg.H_kv * FP8_TOKEN_BYTES + \
        cfg.B * cfg.s_q * cfg.H_q * (cfg.D + cfg.Dv) * DTYPE_BYTES


def tflops(cfg: MlaConfig, total_seqlens: int, ms: float) -> float:
    return flops(cfg, total_seqlens) / (ms * 1e-3) / 1e12


def gbps(cfg: MlaConfig, total_seqlens: int, ms: float) -> float:
    return nbytes(cfg, total_seqlens) / (ms * 1e-3) / 1e9


def cache_bytes(cfg: MlaConfig, max_pad: int) -> int:
    """Bytes of the padded cache [B * max_pad, h_kv, d] (what the GPU must hold)."""
    return cfg.B * max_pad * cfg.H_kv * cfg.D * DTYPE_BYTES


def parse_positive_ints(values: Sequence[str], what: str) -> list[int]:
    out = []
    for v in values:
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"{what}: not an integer: {v!r}") from None
        if n <= 0:
            raise ValueError(f"{what}: must be positive: {v!r}")
        out.append(n)
    return out


@dataclass
class Selection:
    configs: list
    flashkit_pages: tuple
    quick: bool = False


def build_selection(*, batches: Optional[Sequence[int]] = None,
                    sqs: Optional[Sequence[int]] = None,
                    seqlens_: Optional[Sequence[int]] = None,
                    heads: Optional[Sequence[int]] = None,
                    modes: Optional[Sequence[str]] = None,
                    flashkit_pages: Optional[Sequence[int]] = None,
                    quick: bool = False) -> Selection:
    """The product of the given lists; a list not given takes the SPEC value (with --quick:
    S_k 8k, h_q 16 and 128, flashkit pages 16 and 64; s_q and modes stay both)."""
    batches = list(batches or BATCHES)
    sqs = list(sqs or SQ_VALUES)
    seqlens_ = list(seqlens_ or (QUICK_SEQLENS if quick else SEQLENS))
    heads = list(heads or (QUICK_HEADS if quick else HEADS))
    modes = list(modes or MODES)
    pages = tuple(dict.fromkeys(flashkit_pages or
                                (QUICK_FLASHKIT_PAGES if quick else FLASHKIT_PAGES)))
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r} (choose from {', '.join(MODES)})")
    configs = []
    # FlashMLA's loop order: b, S_k, h_q, s_q, varlen
    for B, S, hq, sq, mode in itertools.product(
            dict.fromkeys(batches), dict.fromkeys(seqlens_), dict.fromkeys(heads),
            dict.fromkeys(sqs), [m for m in MODES if m in modes]):
        configs.append(MlaConfig(B=B, s_q=sq, S_k=S, H_q=hq, mode=mode))
    return Selection(configs=configs, flashkit_pages=pages, quick=quick)


def measurements(sel: Selection, impls: Sequence[str]) -> int:
    """How many timings a run makes (flashkit and flashkit_fp8 once per page size, flashmla
    once)."""
    per = sum(len(sel.flashkit_pages) if i in FLASHKIT_PAGED_IMPLS else 1 for i in impls)
    return per * len(sel.configs)


def rough_seconds(sel: Selection, impls: Sequence[str], per_measurement_s: float = 0.6) -> float:
    """A rough wall time: data (~0.3 s/GB made + the reference) and the measurements."""
    gb = 0.0
    for c in sel.configs:
        mean_pad = c.S_k * (2.5 if c.mode == "varlen" else 1.0)
        gb += cache_bytes(c, int(math.ceil(mean_pad / PAD_TO) * PAD_TO)) / 1e9
    return measurements(sel, impls) * per_measurement_s + 0.3 * gb + 1.0 * len(sel.configs)
