"""Decode sweep of SPEC §4 (paged KV cache) and the byte model used for bandwidth.

Pure Python (no torch): the CLI, ``--dry-run`` and the CPU tests use it.

SPEC §4: B ∈ {1, 16, 64, 128}, H_q/H_kv ∈ {32/8, 64/8, 32/32}, D = 128, S_k 1k..64k,
page size ∈ {1, 16, 64, 256}, s_q ∈ {1, 2, 4}. The full product (4·3·7·4·3 = 1008 points,
many of them over 100 GB of KV) does not fit a run of minutes, so the default is a subset
that still covers every bar of the decode issue (see docs/benchmarking.md):

(a) main grid: page 16, s_q 1, every B × ratio × S_k ∈ {1k, 4k, 8k, 16k, 32k, 64k} whose
    KV cache fits the memory budget (default 20 GB of K+V; the others are listed as skipped);
(b) page sizes 1/16/64/256 at a few large configurations (PAGE_POINTS);
(c) s_q 1/2/4 at a few configurations (SQ_POINTS);
(d) B=1 at 64k and B=64 at 8k (page 16, s_q 1; part of the main grid, kept if filtered).

A *shape* is (B, H_q, H_kv, S_k, s_q) with the page sizes to measure it at: the contiguous
peers (SDPA) and the read-limit kernel run once per shape (page_size 0), the paged
implementations once per page size, all on the same data.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from .sweeps import format_seqlen

HEAD_DIM = 128
DTYPE_BYTES = 2  # bf16 cache, bf16 q/o

BATCHES = (1, 16, 64, 128)
RATIOS = ((32, 8), (64, 8), (32, 32))
SEQLENS = (1024, 4096, 8192, 16384, 32768, 65536)      # main grid (SPEC: 1k..64k)
FULL_SEQLENS = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
PAGE_SIZES = (1, 16, 64, 256)
SQ_VALUES = (1, 2, 4)
MAIN_PAGE = 16
DEFAULT_KV_BUDGET_GB = 20.0

# (b) page sizes at a few large configurations: (B, H_q, H_kv, S_k)
PAGE_POINTS = ((1, 32, 8, 65536), (16, 32, 8, 32768), (64, 32, 8, 8192), (128, 32, 32, 4096))
# (c) s_q 1/2/4 at a few configurations (page 16)
SQ_POINTS = ((1, 32, 8, 65536), (64, 32, 8, 8192), (16, 64, 8, 16384), (128, 32, 32, 4096))
# (d) the long-context check: B=1 at 64k against B=64 at 8k (each ratio), page 16, s_q 1
LONG_POINTS = ((1, 65536), (64, 8192))

# --quick: a handful of shapes that still exercise every bar once
QUICK_MAIN = ((1, 32, 8, 65536), (64, 32, 8, 8192), (16, 32, 8, 32768), (128, 32, 32, 4096),
              (64, 64, 8, 4096))
QUICK_PAGE_POINTS = ((64, 32, 8, 8192),)
QUICK_SQ_POINTS = ((64, 32, 8, 8192),)

BAR_MIN_KV_BYTES = 256 * 2**20  # rows with at least 256 MB of valid KV are held to the bar


@dataclass(frozen=True)
class DecodeShape:
    """One decode problem; ``page_sizes`` are the paged layouts it is measured at."""

    B: int
    H_q: int
    H_kv: int
    S_k: int
    s_q: int
    page_sizes: tuple = (MAIN_PAGE,)
    tags: tuple = field(default=(), compare=False)  # which parts of the sweep asked for it
    D: int = HEAD_DIM

    @property
    def ratio(self) -> str:
        return f"{self.H_q}/{self.H_kv}"

    def label(self) -> str:
        return (f"B={self.B:<3} H={self.ratio:<5} S_k={format_seqlen(self.S_k):<4} "
                f"s_q={self.s_q}")

    @property
    def kv_bytes(self) -> int:
        return kv_bytes(self.B, self.H_kv, self.S_k, self.D)

    @property
    def bytes(self) -> int:
        return decode_bytes(self.B, self.H_q, self.H_kv, self.S_k, self.s_q, self.D)


def kv_bytes(B: int, H_kv: int, S_k: int, D: int = HEAD_DIM, dtype_bytes: int = DTYPE_BYTES) -> int:
    """Bytes of K and V of the valid tokens: 2 · B · S_k · H_kv · D · sizeof(dtype)."""
    return 2 * B * S_k * H_kv * D * dtype_bytes


def decode_bytes(B: int, H_q: int, H_kv: int, S_k: int, s_q: int, D: int = HEAD_DIM,
                 dtype_bytes: int = DTYPE_BYTES) -> int:
    """SPEC §4 decode bytes: K and V actually read (valid tokens only) + Q + O.

    The block table and lengths (4 bytes per page and per sequence) are not counted; the
    same formula is used for every implementation, paged or contiguous, whatever it really
    reads (an SDPA backend that needs expanded GQA heads reads more and is not credited)."""
    q_bytes = B * s_q * H_q * D * dtype_bytes
    return kv_bytes(B, H_kv, S_k, D, dtype_bytes) + 2 * q_bytes


def gbps(nbytes: float, ms: float) -> float:
    """GB/s (10^9 bytes per second) for nbytes moved in ms milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


def parse_ratio(text: str) -> tuple[int, int]:
    """'32/8', '32:8' or '32x8' -> (32, 8)."""
    t = text.strip().lower()
    for sep in ("/", ":", "x"):
        if sep in t:
            a, b = t.split(sep, 1)
            hq, hkv = int(a), int(b)
            if hq <= 0 or hkv <= 0 or hq % hkv:
                raise ValueError(f"bad head ratio {text!r} (H_q must be a multiple of H_kv)")
            return hq, hkv
    raise ValueError(f"bad head ratio {text!r} (write H_q/H_kv, e.g. 32/8)")


def parse_positive_ints(values: Iterable[str], what: str) -> list[int]:
    out = []
    for v in values:
        n = int(v)
        if n <= 0:
            raise ValueError(f"{what} must be positive: {v!r}")
        out.append(n)
    return out


@dataclass
class DecodeSelection:
    shapes: list            # DecodeShape, in run order
    skipped: list           # (DecodeShape, reason) left out by the memory budget
    mode: str               # "default", "quick", "grid" or "full"


def _merge(points: Iterable[tuple]) -> list[DecodeShape]:
    """[(B, H_q, H_kv, S_k, s_q, page, tag)] -> shapes with their page sizes and tags merged."""
    merged: dict = {}
    for B, hq, hkv, S, sq, page, tag in points:
        key = (B, hq, hkv, S, sq)
        pages, tags = merged.setdefault(key, (set(), []))
        pages.add(page)
        if tag not in tags:
            tags.append(tag)
    out = [DecodeShape(*key, page_sizes=tuple(sorted(p)), tags=tuple(t))
           for key, (p, t) in merged.items()]
    ratio_order = {r: i for i, r in enumerate(RATIOS)}
    out.sort(key=lambda s: (s.s_q, ratio_order.get((s.H_q, s.H_kv), 99), s.H_q, s.H_kv, s.B, s.S_k))
    return out


def default_points(quick: bool = False) -> list[tuple]:
    pts = []
    if quick:
        for B, hq, hkv, S in QUICK_MAIN:
            pts.append((B, hq, hkv, S, 1, MAIN_PAGE, "main"))
        page_points, sq_points = QUICK_PAGE_POINTS, QUICK_SQ_POINTS
    else:
        for B, (hq, hkv), S in itertools.product(BATCHES, RATIOS, SEQLENS):
            pts.append((B, hq, hkv, S, 1, MAIN_PAGE, "main"))
        page_points, sq_points = PAGE_POINTS, SQ_POINTS
    for B, hq, hkv, S in page_points:
        for p in PAGE_SIZES:
            pts.append((B, hq, hkv, S, 1, p, "pages"))
    for B, hq, hkv, S in sq_points:
        for sq in SQ_VALUES:
            pts.append((B, hq, hkv, S, sq, MAIN_PAGE, "s_q"))
    for (hq, hkv) in (RATIOS[:1] if quick else RATIOS):
        for B, S in LONG_POINTS:
            pts.append((B, hq, hkv, S, 1, MAIN_PAGE, "long"))
    return pts


def build_selection(*, batches: Optional[Sequence[int]] = None,
                    ratios: Optional[Sequence[tuple[int, int]]] = None,
                    seqlens: Optional[Sequence[int]] = None,
                    page_sizes: Optional[Sequence[int]] = None,
                    sqs: Optional[Sequence[int]] = None,
                    quick: bool = False, full: bool = False,
                    kv_budget_gb: float = DEFAULT_KV_BUDGET_GB) -> DecodeSelection:
    """The shapes to run.

    No selection flag: the documented default subset ((a)-(d) above; --quick: a smaller one).
    Any of batches / ratios / seqlens / page_sizes / sqs given: the product of the given lists,
    each missing one taking its main-grid value (B and ratios: all, S_k: the main grid's,
    page: 16, s_q: 1). full: the whole SPEC product (each list still restrictable).
    Shapes whose K+V exceed kv_budget_gb (10^9 bytes) are skipped and reported."""
    grid = any(x for x in (batches, ratios, seqlens, page_sizes, sqs))
    if full or grid:
        mode = "full" if full else "grid"
        B_list = list(batches or BATCHES)
        r_list = list(ratios or RATIOS)
        S_list = list(seqlens or (FULL_SEQLENS if full else SEQLENS))
        P_list = list(page_sizes or (PAGE_SIZES if full else (MAIN_PAGE,)))
        Q_list = list(sqs or (SQ_VALUES if full else (1,)))
        pts = [(B, hq, hkv, S, sq, p, mode)
               for B, (hq, hkv), S, sq, p in itertools.product(B_list, r_list, S_list, Q_list,
                                                                P_list)]
    else:
        mode = "quick" if quick else "default"
        pts = default_points(quick)
    budget = kv_budget_gb * 1e9
    shapes, skipped = [], []
    for s in _merge(pts):
        if s.kv_bytes > budget:
            skipped.append((s, f"K+V {s.kv_bytes / 1e9:.1f} GB > budget {kv_budget_gb:g} GB"))
        else:
            shapes.append(s)
    return DecodeSelection(shapes=shapes, skipped=skipped, mode=mode)


def count_measurements(shapes: Sequence[DecodeShape], paged_impls: int, contiguous_impls: int) -> int:
    """Measurements a run makes: paged impls once per page size, the others once per shape."""
    return sum(len(s.page_sizes) * paged_impls + contiguous_impls for s in shapes)


def rough_seconds(shapes: Sequence[DecodeShape], paged_impls: int, contiguous_impls: int,
                  per_measurement_s: float = 0.35) -> float:
    """A rough run-time estimate for --dry-run: per measurement (probe + warm-up + repeats),
    plus making the data (~0.1 s per GB written, paged copies included)."""
    n = count_measurements(shapes, paged_impls, contiguous_impls)
    data_gb = sum(s.kv_bytes * (1 + len(s.page_sizes)) for s in shapes) / 1e9
    return n * per_measurement_s + 0.1 * data_gb
