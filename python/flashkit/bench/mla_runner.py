"""The MLA decode measuring loop: flashkit.mla and FlashMLA side by side on one GPU.

Per configuration, one data set made as FlashMLA's tests/test_flash_mla.py makes it:
lengths (fixed, or FlashMLA's varlen distribution, see mla_sweeps), max_seqlen_pad = the
longest length rounded up to 256 (to a multiple of every page size measured), q
``randn [B, s_q, H_q, 576]``, the latent cache ``randn [B * max_seqlen_pad, 1, 576]`` with NaN
in every slot past a sequence's length, V = the first 512 channels of K (the same memory:
FlashMLA's API takes only k_cache), and a sequential block table (sequence b owns blocks
b*n .. b*n+n-1). The cache is contiguous, so the same bytes viewed as
``[num_blocks, P, 1, 576]`` with ``block_table = arange(B * max_seqlen_pad / P)`` serve every
page size P: flashkit (P = 16, 32, 64, 128) and FlashMLA (P = 64) read identical inputs.
``--block-table shuffled`` (MlaOptions.block_table) measures a fragmented pool instead: per page
size, the pages are moved to a random permutation of the ids (a copy of the cache, made when that
page size is measured, only one page size's copy kept at a time) and the block table follows them,
so every sequence reads the same tokens and the outputs stay comparable; consecutive ids within a
64-token block (what lets flashkit fetch four 16-token pages with one TMA box) become rare.

Timing (the decode bench's ``timing.rotating_median_ms``): R >= 2 such data sets with the same
lengths (R so that together they are at least 4x the L2 size), called in turn, back to back,
between CUDA events, after a sleep kernel that hides host launch time; time per call = sample
/ R, median. The second set means a call never re-reads what the previous call left in L2
(another layer's cache, as in a model); every set here is >= 600 MB, so with one set the
effect is small: on an H200, FlashMLA's times with one set and with two differed by 0.5%
(median; every row within 5%, run-to-run noise; bench/results/history/
mla-h200-2026-11-23-peers-r1.*). ``--timer do_bench`` times set 0
alone with triton's do_bench (256 MB L2 flush before each call, each call between its own
events, median), FlashMLA's own method (its test prints the mean): that gave 8-13% longer
times on FlashMLA's memory-bound rows (h_q*s_q <= 64) and about the same on compute-bound
ones (see docs/benchmarking.md, MLA).

Before timing, every output is checked: finite everywhere (the NaN past the lengths must not
leak), and against an fp32 reference on a few sequences with FlashMLA's own measure
(``cos_diff = 1 - 2·Σxy / Σ(x² + y²)`` < 1e-5, for out and lse); flashkit's whole output is
also compared with FlashMLA's (same measure). A miss prints a warning, marks the row and
makes the exit status 1. Rows go to the CSV as soon as they are measured, three per timing:
TFLOPS, GB/s and us.
"""

from __future__ import annotations

import math
import platform
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from . import mla_impls as mi
from . import mla_report, mla_sweeps, report, timing
from .runner import BaseRunner, _Fatal, _short


@dataclass
class MlaOptions:
    configs: Sequence[mla_sweeps.MlaConfig]
    impls: Sequence[str]
    flashkit_pages: Sequence[int]
    out_dir: str
    tag: Optional[str] = None
    plot: bool = True
    quick: bool = False
    cos_tol: float = 1e-5          # FlashMLA's test: cos_diff < 1e-5
    flashmla_path: Optional[str] = None
    timer: str = "events"          # events (rotating_median_ms) | do_bench
    l2_rotate: float = 4.0         # the rotating sets cover at least this many times the L2
    min_sets: int = 2              # ... and are at least this many (see the module doc)
    max_sets: int = 8
    seed: int = 0
    block_table: str = "sequential"  # sequential | shuffled (see the module doc)
    warmup_ms: Optional[float] = None
    rep_ms: Optional[float] = None
    argv: Sequence[str] = field(default_factory=list)


def cos_diff(torch, x, y) -> float:
    """FlashMLA's measure: 1 - 2·Σxy / Σ(x² + y²), in float64 (0 = identical)."""
    x, y = x.double(), y.double()
    den = max((x * x + y * y).sum().item(), 1e-12)
    return 1.0 - 2.0 * (x * y).sum().item() / den


class MlaData:
    """One configuration's inputs, as FlashMLA's test makes them (see the module doc)."""

    def __init__(self, torch, cfg, lengths: Sequence[int], pad_multiple: int, seed: int,
                 device, shuffled: bool = False) -> None:
        self.torch = torch
        self.shuffled = shuffled
        self.seed = seed
        self.cfg = cfg
        self.lengths = list(lengths)
        self.total = sum(self.lengths)
        self.max_pad = -(-max(self.lengths) // pad_multiple) * pad_multiple
        B, sq, hq, hkv, d = cfg.B, cfg.s_q, cfg.H_q, cfg.H_kv, cfg.D
        gen = torch.Generator(device=device).manual_seed(seed)
        dt = torch.bfloat16
        self.seqlens = torch.tensor(self.lengths, dtype=torch.int32, device=device)
        self.q = torch.randn(B, sq, hq, d, generator=gen, dtype=dt, device=device)
        self.cache = torch.randn(B * self.max_pad, hkv, d, generator=gen, dtype=dt,
                                 device=device)
        pos = torch.arange(self.max_pad, device=device)
        past = pos[None, :] >= self.seqlens[:, None].long()          # [B, max_pad]
        self.cache.view(B, self.max_pad, hkv, d)[past] = float("nan")
        self._tables: dict = {}

    def page_perm(self, page: int):
        """Shuffled tables: the new id of each page of `page` tokens (a permutation seeded by the
        data set's seed and the page size); None for sequential tables."""
        if not self.shuffled:
            return None
        n = self.cfg.B * (self.max_pad // page)
        gen = self.torch.Generator(device=self.q.device).manual_seed(self.seed * 1009 + page)
        return self.torch.randperm(n, generator=gen, device=self.q.device)

    def paged(self, page: int):
        """(k_cache [num_blocks, page, h_kv, d], block_table [B, max_pad / page] int32)."""
        if page not in self._tables:
            if self.max_pad % page:
                raise ValueError(f"max_seqlen_pad {self.max_pad} is not a multiple of {page}")
            n = self.max_pad // page
            bt = self.torch.arange(self.cfg.B * n, dtype=self.torch.int32,
                                   device=self.q.device).view(self.cfg.B, n)
            k = self.cache.view(-1, page, self.cfg.H_kv, self.cfg.D)
            perm = self.page_perm(page)
            if perm is not None:
                self._tables.clear()  # one page size's shuffled copy at a time (memory)
                moved = self.torch.empty_like(k)
                moved[perm] = k
                k, bt = moved, perm.int()[bt.long()]
            self._tables[page] = (k, bt)
        return self._tables[page]


def reference(torch, data: MlaData, batch_ids) -> dict:
    """{b: (out [s_q, H_q, d_v] fp32, lse [H_q, s_q] fp32)}: softmax(q kᵀ/√576) v with
    bottom-right causal masking, v = k[..., :512], on sequence b's valid tokens."""
    cfg = data.cfg
    scale = 1.0 / math.sqrt(cfg.D)
    out = {}
    view = data.cache.view(cfg.B, data.max_pad, cfg.H_kv, cfg.D)
    for b in batch_ids:
        L = data.lengths[b]
        k = view[b, :L, 0].float()                          # [L, d]   (h_kv = 1)
        v = k[:, :cfg.Dv]
        q = data.q[b].float().permute(1, 0, 2)               # [h_q, s_q, d]
        s = torch.matmul(q, k.t()) * scale                   # [h_q, s_q, L]
        if cfg.s_q > 1:
            pos = torch.arange(L, device=s.device)
            lim = L - cfg.s_q + torch.arange(cfg.s_q, device=s.device)
            s.masked_fill_(pos[None, :] > lim[:, None], float("-inf"))
        lse = torch.logsumexp(s, dim=-1)                     # [h_q, s_q]
        o = torch.matmul(torch.softmax(s, dim=-1), v)        # [h_q, s_q, d_v]
        out[b] = (o.permute(1, 0, 2).contiguous(), lse)
    return out


class MlaRunner(BaseRunner):
    def __init__(self, opts: MlaOptions, out=None) -> None:
        super().__init__(opts, out)
        if opts.timer == "do_bench":
            base = timing.QUICK if opts.quick else timing.DEFAULT
        else:
            base = timing.DECODE_QUICK if opts.quick else timing.DECODE_DEFAULT
        self.timing = timing.with_overrides(base, opts.warmup_ms, opts.rep_ms)
        # marks: (impl, mode, S_k, H_q, s_q, page) whose check failed;
        # not_measured: (impl, reason) -> [labels]
        self.warnings: list[str] = []
        self.checks: dict = {}        # (impl, mode, S_k, H_q, s_q, page) -> text
        self.device = self.torch.device("cuda")
        self.l2_bytes = self._l2_bytes()
        pages = set(opts.flashkit_pages) | {mla_sweeps.FLASHMLA_PAGE}
        self.pad_multiple = mla_sweeps.PAD_TO
        for p in pages:
            self.pad_multiple = self.pad_multiple * p // math.gcd(self.pad_multiple, p)

    def skip(self, impl: str, reason: str, label: str) -> None:
        self._not_measured((impl, reason), impl, reason, label)

    # -- main loop ------------------------------------------------------------------------

    def run(self) -> int:
        opts = self.opts
        env = mi.Env(flashmla_path=opts.flashmla_path)
        impls = []
        for name in opts.impls:
            impl = mi.make_impl(name, opts.flashkit_pages)
            try:
                reason = impl.setup(env)
            except Exception as e:
                reason = f"setup failed: {_short(e)}"
            if reason is None:
                impls.append(impl)
            elif name == mi.FLASHKIT:
                self.problems.append(f"flashkit not measured: {reason}")
                self.say(f"!!! FLASHKIT NOT MEASURED: {reason}\n!!! Measuring FlashMLA only.")
            else:
                self.problems.append(f"{name} not measured: {reason}")
                self.say(f"!!! {name} unavailable: {reason}")
        # FlashMLA first: its output is what flashkit's is compared with
        impls.sort(key=lambda i: 0 if i.name == mi.FLASHMLA else 1)
        csv_path = report.results_path(opts.out_dir, self.gpu, self.date, opts.tag, op="mla")
        self._header(csv_path, impls)
        if not impls:
            self.say("!!! nothing to measure: no implementation available")
            return 1
        total = sum(len(i.pages) for i in impls) * len(opts.configs)
        self.counter = [0, total]

        def measure(writer) -> None:
            for cfg in opts.configs:
                self._run_config(cfg, impls, writer)
        return self._finish(csv_path, self._measure_into(csv_path, measure))

    def _header(self, csv_path: Path, impls) -> None:
        torch = self.torch
        t = self.timing
        self.say(f"flashkit.bench mla | GPU {self.gpu} | bf16 | commit {self.commit} | "
                 f"{self.date}")
        self.say(f"torch {torch.__version__} (CUDA {torch.version.cuda}) | python "
                 f"{platform.python_version()}")
        if self.opts.timer == "do_bench":
            self.say(f"timing: {timing.timer_name()} (L2 flushed before each call), warm-up "
                     f"{t.warmup_ms:g} ms, repeats for {t.rep_ms:g} ms, median")
        else:
            self.say(f"timing: R >= {self.opts.min_sets} input sets (>= {self.opts.l2_rotate:g}x "
                     f"L2 {self.l2_bytes / 2**20:.0f} MiB) called in turn between CUDA events "
                     f"(a sleep kernel queued first so host launch time is not timed), warm-up "
                     f"{t.warmup_ms:g} ms, samples for {t.rep_ms:g} ms, median per call; "
                     "metadata made once per set, untimed")
        self.say(f"check: cos_diff < {self.opts.cos_tol:g} (FlashMLA's measure) vs an fp32 "
                 "reference on 3-4 sequences, and flashkit vs flashmla on the whole output")
        for i in impls:
            self.say(f"  impl {i.name}: {i.how}; pages {','.join(map(str, i.pages))}")
        self.say(f"{len(self.opts.configs)} configs; TFLOPS = 2 s_q Σlen h_q (576+512) / t; "
                 "GB/s = (Σlen·576 + B s_q h_q (576+512))·2 / t")
        self.say(f"writing {csv_path}")

    def _run_config(self, cfg, impls, writer) -> None:
        torch = self.torch
        lengths = mla_sweeps.seqlens(cfg, self.opts.seed)
        max_pad = -(-max(lengths) // self.pad_multiple) * self.pad_multiple
        one = mla_sweeps.cache_bytes(cfg, max_pad)
        if self.opts.block_table == "shuffled":
            one *= 2  # each set also holds one page size's moved copy
        free, _ = torch.cuda.mem_get_info()
        label = cfg.label()
        R = 1
        if self.opts.timer != "do_bench":
            per_call = mla_sweeps.nbytes(cfg, sum(lengths))
            R = min(self.opts.max_sets, max(self.opts.min_sets,
                                            math.ceil(self.opts.l2_rotate * self.l2_bytes
                                                      / per_call)))
            while R > 1 and R * one + (1 << 30) > free:
                R -= 1
        need = R * one + (1 << 30)
        if need > free:
            reason = f"needs ~{need / 1e9:.1f} GB, {free / 1e9:.1f} GB free"
            for i in impls:
                for p in i.pages:
                    self.counter[0] += 1
                    self.skip(i.name, reason, f"{label} page={p}")
            return
        sets = [MlaData(torch, cfg, lengths, self.pad_multiple,
                        cfg.seed(self.opts.seed) + 1 + 7919 * r, self.device,
                        shuffled=self.opts.block_table == "shuffled") for r in range(R)]
        data = sets[0]
        longest = max(range(cfg.B), key=lambda b: lengths[b])
        check_ids = sorted({0, cfg.B // 2, cfg.B - 1, longest})
        refs = reference(torch, data, check_ids)
        peer_out = None
        self.say(f"-- {label}: Σlen {data.total} (mean {data.total / cfg.B:.0f}, "
                 f"min {min(lengths)}, max {max(lengths)}), cache {data.cache.numel() * 2 / 1e9:.2f}"
                 f" GB x {R} set(s)")
        try:
            for impl in impls:
                for page in impl.pages:
                    out = self._measure(impl, cfg, page, sets, refs, peer_out, writer)
                    if impl.name == mi.FLASHMLA and out is not None:
                        peer_out = out
                    del out
        finally:
            del sets, data, refs, peer_out
            torch.cuda.empty_cache()

    def _measure(self, impl, cfg, page: int, sets, refs, peer_out, writer):
        """Check (set 0), time (all sets in turn), write the rows; returns set 0's output (kept
        for flashmla) or None."""
        torch = self.torch
        self.counter[0] += 1
        label = f"{cfg.label()} page={page:<3}"
        reason = impl.supports(cfg, page)
        if reason:
            self.skip(impl.name, reason, label)
            return None
        key = (impl.name, cfg.mode, cfg.S_k, cfg.H_q, cfg.s_q, page)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fns = [impl.prepare(cfg, d, page) for d in sets]
                out, lse = fns[0]()
                torch.cuda.synchronize()
            check = self._check(impl, cfg, page, out, lse, refs, peer_out)
            self.checks[key] = check
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if self.opts.timer == "do_bench":
                    ms = timing.bench_median_ms(fns[0], self.timing)
                else:
                    ms, _ = timing.rotating_median_ms(fns, self.timing)
            del fns
        except _Fatal:
            raise
        except Exception as e:
            self._check_context()
            self.skip(impl.name, _short(e), label)
            return None
        total_len = sets[0].total
        values = (("TFLOPS", mla_sweeps.tflops(cfg, total_len, ms)),
                  ("GB/s", getattr(impl, "nbytes", mla_sweeps.nbytes)(cfg, total_len) / (ms * 1e-3) / 1e9),
                  ("us", ms * 1e3))
        for unit, v in values:
            row = report.make_row(
                op="mla_decode", impl=impl.name, dtype=getattr(impl, "dtype", "bf16"), D=cfg.D, Dv=cfg.Dv, B=cfg.B,
                H_q=cfg.H_q, H_kv=cfg.H_kv, S_q=cfg.s_q, S_k=cfg.S_k, causal=True,
                mode=cfg.mode, page_size=page, value=v, unit=unit, gpu=self.gpu,
                date=self.date, commit=self.commit)
            writer.write(row)
            self.rows.append(row)
        n, total = self.counter
        flag = "  !WARN" if key in self.marks else ""
        self.say(f"[{n:>3}/{total}] {label} {impl.name:<9} {values[0][1]:7.1f} TFLOPS "
                 f"{values[1][1]:7.0f} GB/s {ms * 1e3:9.2f} us  R={len(sets)}  [{check}]{flag}")
        return out

    def _check(self, impl, cfg, page, out, lse, refs, peer_out) -> str:
        torch = self.torch
        key = (impl.name, cfg.mode, cfg.S_k, cfg.H_q, cfg.s_q, page)
        expect_o = (cfg.B, cfg.s_q, cfg.H_q, cfg.Dv)
        expect_l = (cfg.B, cfg.H_q, cfg.s_q)
        problems, parts = [], []
        if tuple(out.shape) != expect_o or tuple(lse.shape) != expect_l:
            problems.append(f"shapes out {tuple(out.shape)} lse {tuple(lse.shape)}, expected "
                            f"{expect_o} and {expect_l}")
        elif not bool(torch.isfinite(out).all().item()):
            problems.append("non-finite output")
        else:
            worst_o = max(cos_diff(torch, out[b], r[0]) for b, r in refs.items())
            worst_l = max(cos_diff(torch, lse[b], r[1]) for b, r in refs.items())
            parts.append(f"ref cos {worst_o:.1e}/{worst_l:.1e}")
            tol = max(self.opts.cos_tol, getattr(impl, "cos_tol", 0.0))
            if not worst_o < tol or not worst_l < tol:
                problems.append(f"vs fp32 reference: cos_diff out {worst_o:.3g}, lse "
                                f"{worst_l:.3g} (< {tol:g})")
            if impl.name != mi.FLASHMLA and peer_out is not None and getattr(impl, "compare_peer", True):
                c = cos_diff(torch, out, peer_out)
                parts.append(f"vs flashmla {c:.1e}")
                if not c < self.opts.cos_tol:
                    problems.append(f"vs flashmla output: cos_diff {c:.3g} "
                                    f"(< {self.opts.cos_tol:g})")
        if problems:
            msg = f"!!! WARNING {impl.name} {cfg.label()} page={page}: {'; '.join(problems)}"
            self.say(msg)
            self.warnings.append(msg)
            self.marks.add(key)
            return "WARN " + "; ".join(problems)
        return "ok " + ", ".join(parts)

    # -- the end --------------------------------------------------------------------------

    def _finish(self, csv_path: Path, interrupted: bool) -> int:
        return self._finish_sweep(
            csv_path, interrupted, plot_rows=mla_report.plot_rows, flagged=self.warnings,
            heading=f"\n!!! {len(self.warnings)} CORRECTNESS WARNING(S); those rows are marked "
                    "'!' and are suspect:",
            digest_item=f"{len(self.warnings)} correctness warning(s)",
            report_text=lambda: mla_report.format_report(self.rows, self.marks, self.checks),
            prog="flashkit.bench mla")

    def _notes_text(self) -> str:
        t = self.timing
        lines = self._notes_head(cudnn=False) + [
            f"timer: {self.opts.timer} warmup_ms={t.warmup_ms} rep_ms={t.rep_ms}"
            + ("" if self.opts.timer == "do_bench" else
               f" sets>={self.opts.min_sets} covering >={self.opts.l2_rotate:g}x L2 "
               f"({self.l2_bytes} B)"),
            f"seed: {self.opts.seed}; max_seqlen_pad multiple: {self.pad_multiple}; "
            f"block tables: {self.opts.block_table}",
            f"rows: {len(self.rows)}"]
        for key, text in self.checks.items():
            impl, mode, S, hq, sq, page = key
            lines.append(f"check: {impl} {mode} S_k={S} H_q={hq} s_q={sq} page={page}: {text}")
        for (impl, reason), labels in self.not_measured.items():
            lines.append(f"not measured: {impl} ({len(labels)} configs): {reason}")
        lines += [f"warning: {m}" for m in self.warnings]
        lines += [f"problem: {p}" for p in self.problems]
        return "\n".join(lines) + "\n"


def run(opts: MlaOptions, out=None) -> int:
    return MlaRunner(opts, out).run()
