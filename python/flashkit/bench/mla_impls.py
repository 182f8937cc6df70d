"""The implementations the MLA decode bench measures side by side (SPEC §4-5).

Both have FlashMLA's Python API, so one class drives them:
``get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv) -> (tile_scheduler_metadata,
num_splits)`` once per configuration, outside the timed region (as FlashMLA's test does), then
``flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, d_v, tile_scheduler_metadata,
num_splits, causal=True) -> (out, lse)`` timed.

- ``flashkit``   ``flashkit.mla`` (FlashKit's drop-in for FlashMLA's API), at every page size
- ``flashmla``   ``flash_mla`` (deepseek-ai/FlashMLA, the 2025-04 version 9edee0c), built for
                 sm_90a (bench/peers/flashmla); page 64 only (its only block size)
- ``flashkit_fp8`` ``flashkit.mla`` over the same cache in FlashMLA's FP8 layout
                 (``quantize_kv_cache_fp8``, untimed), ``is_fp8_kvcache=True``; dtype column
                 ``fp8_e4m3``, GB/s from its 656 bytes per token; checked against the bf16
                 reference with a looser cosine tolerance (quantization error), not against
                 FlashMLA's output. Only when asked for (``--impls``); its rows go to the CSV
                 and the log (the summary table shows flashkit and flashmla).

Where ``flash_mla`` is looked for, first match wins: ``--flashmla-path``, the
``FLASHKIT_FLASHMLA_PATH`` environment variable, ``<cwd>/.carry/flashmla_built``,
``<repo>/.carry/flashmla_built``; the folder must hold the ``flash_mla/`` package and the
``flash_mla_cuda*.so`` extension, and is put first on ``sys.path``. Without any of them a
``flash_mla`` already importable is used. No torch import at module level.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from . import mla_sweeps

FLASHKIT = "flashkit"
FLASHMLA = "flashmla"
FLASHKIT_FP8 = "flashkit_fp8"
ALL_IMPLS = (FLASHKIT, FLASHMLA, FLASHKIT_FP8)
DEFAULT_IMPLS = (FLASHKIT, FLASHMLA)
ENV_VAR = "FLASHKIT_FLASHMLA_PATH"
CARRY_NAME = "flashmla_built"
REPO_CARRY = Path(__file__).resolve().parents[3] / ".carry" / CARRY_NAME


def candidate_dirs(explicit: Optional[str] = None, env: Optional[dict] = None,
                   cwd: Optional[Path] = None) -> list[Path]:
    env = os.environ if env is None else env
    out = []
    if explicit:
        out.append(Path(explicit))
    if env.get(ENV_VAR):
        out.append(Path(env[ENV_VAR]))
    out.append(Path(cwd or Path.cwd()) / ".carry" / CARRY_NAME)
    out.append(REPO_CARRY)
    return list(dict.fromkeys(out))


def is_flashmla_dir(path: Path) -> bool:
    path = Path(path)
    return (path / "flash_mla" / "__init__.py").is_file() and \
        any(path.glob("flash_mla_cuda*.so"))


def find_flashmla(explicit: Optional[str] = None, env: Optional[dict] = None,
                  cwd: Optional[Path] = None) -> tuple[Optional[Path], list[Path]]:
    """(the first folder holding flash_mla/ + flash_mla_cuda*.so, the folders looked at).
    An explicit path that does not qualify is not skipped silently: it is returned as the
    only candidate with None."""
    dirs = candidate_dirs(explicit, env, cwd)
    if explicit:
        p = Path(explicit)
        return (p if is_flashmla_dir(p) else None), [p]
    for d in dirs:
        if is_flashmla_dir(d):
            return d, dirs
    return None, dirs


class Env:
    def __init__(self, flashmla_path: Optional[str] = None) -> None:
        self.flashmla_path = flashmla_path


class MlaImpl:
    """One implementation of FlashMLA's API. ``setup()`` returns None when usable, else why
    not; ``prepare(cfg, data, page)`` plans (untimed) and returns the timed callable."""

    name = "?"
    pages: Sequence[int] = ()

    def __init__(self) -> None:
        self.mod = None
        self.how = ""

    def setup(self, env: Env) -> Optional[str]:
        raise NotImplementedError

    def supports(self, cfg, page: int) -> Optional[str]:
        return None

    def prepare(self, cfg, data, page: int):
        """metadata once (untimed); the callable returns (out, lse)."""
        k_cache, block_table = data.paged(page)
        meta, splits = self.mod.get_mla_metadata(data.seqlens, cfg.s_q * cfg.H_q // cfg.H_kv,
                                                 cfg.H_kv)
        q, seq, dv, fn = data.q, data.seqlens, cfg.Dv, self.mod.flash_mla_with_kvcache
        return lambda: fn(q, k_cache, block_table, seq, dv, meta, splits, causal=True)


class FlashKitImpl(MlaImpl):
    name = FLASHKIT

    def __init__(self, pages: Sequence[int] = mla_sweeps.FLASHKIT_PAGES) -> None:
        super().__init__()
        self.pages = tuple(pages)

    def setup(self, env: Env) -> Optional[str]:
        try:
            import flashkit.mla as mod
        except Exception as e:  # ImportError until flashkit.mla exists, OSError, ...
            return f"import flashkit.mla failed: {type(e).__name__}: {e}"
        missing = [f for f in ("get_mla_metadata", "flash_mla_with_kvcache")
                   if not hasattr(mod, f)]
        if missing:
            return f"flashkit.mla has no {', '.join(missing)}"
        self.mod = mod
        self.how = f"flashkit.mla from {Path(getattr(mod, '__file__', '?')).parent}"
        return None


class FlashKitFp8Impl(FlashKitImpl):
    name = FLASHKIT_FP8
    dtype = "fp8_e4m3"
    cos_tol = 5e-3       # the quantization error, not the kernel's
    compare_peer = False

    def prepare(self, cfg, data, page: int):
        _, block_table = data.paged(page)
        # Quantized once per data set (untimed; the layout is per token, so every page
        # size is a view of the same bytes).
        q8 = getattr(data, "_fp8_cache", None)
        if q8 is None:
            q8 = data._fp8_cache = self.mod.quantize_kv_cache_fp8(data.cache)
        k8 = q8.view(-1, page, cfg.H_kv, mla_sweeps.FP8_TOKEN_BYTES)
        perm = data.page_perm(page)
        if perm is not None:  # shuffled tables: the pages move as data.paged moved them
            moved = data.torch.empty_like(k8)
            moved[perm] = k8
            k8 = moved
        meta, splits = self.mod.get_mla_metadata(data.seqlens, cfg.s_q * cfg.H_q // cfg.H_kv,
                                                 cfg.H_kv)
        q, seq, dv, fn = data.q, data.seqlens, cfg.Dv, self.mod.flash_mla_with_kvcache
        return lambda: fn(q, k8, block_table, seq, dv, meta, splits, causal=True,
                          is_fp8_kvcache=True)

    @staticmethod
    def nbytes(cfg, total_seqlens: int) -> int:
        return mla_sweeps.nbytes_fp8(cfg, total_seqlens)


class FlashMlaImpl(MlaImpl):
    name = FLASHMLA
    pages = (mla_sweeps.FLASHMLA_PAGE,)

    def setup(self, env: Env) -> Optional[str]:
        path, searched = find_flashmla(env.flashmla_path)
        if path is None and env.flashmla_path:
            return (f"{env.flashmla_path} holds no flash_mla/ package with a flash_mla_cuda*.so "
                    "(see bench/peers/flashmla/README.md)")
        if path is not None:
            p = str(path.resolve())
            if p in sys.path:
                sys.path.remove(p)
            sys.path.insert(0, p)
        try:
            import flash_mla as mod
        except Exception as e:
            where = (f"from {path}" if path is not None else
                     f"(no prebuilt folder in {', '.join(str(d) for d in searched)})")
            return (f"import flash_mla failed {where}: {type(e).__name__}: {e}; build it with "
                    "bench/peers/flashmla/build.sh, pass --flashmla-path or set "
                    f"{ENV_VAR}")
        self.mod = mod
        self.how = f"flash_mla {getattr(mod, '__version__', '?')} from " \
                   f"{Path(getattr(mod, '__file__', '?')).parent.parent}"
        return None

    def supports(self, cfg, page: int) -> Optional[str]:
        if page != mla_sweeps.FLASHMLA_PAGE:
            return f"FlashMLA takes page (block) size {mla_sweeps.FLASHMLA_PAGE} only"
        return None


def make_impl(name: str, flashkit_pages: Sequence[int] = mla_sweeps.FLASHKIT_PAGES) -> MlaImpl:
    if name == FLASHKIT:
        return FlashKitImpl(flashkit_pages)
    if name == FLASHMLA:
        return FlashMlaImpl()
    if name == FLASHKIT_FP8:
        return FlashKitFp8Impl(flashkit_pages)
    raise ValueError(f"unknown impl {name!r} (known: {', '.join(ALL_IMPLS)})")
