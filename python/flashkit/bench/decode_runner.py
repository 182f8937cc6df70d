"""The decode measuring loop: paged-decode bandwidth of FlashKit and its peers on one GPU.

Per shape (B, H_q, H_kv, S_k, s_q): R input sets of random data (R so that the sets together
are several times the L2 cache; 1 for large shapes), each with q, and K/V stored contiguously
(BHSD, what the SDPA peers read). For each page size, the same K/V scattered into a paged
cache through a random block table (a random permutation of the pool's pages; unused pages
and the slots past each length hold NaN). A reference in fp32 (SDPA math on a gathered
contiguous copy of a few sequences) checks every implementation's output before it is timed.
Rows go to the CSV as soon as they are measured, twice: GB/s and us.
"""

from __future__ import annotations

import math
import platform
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from . import decode_impls as di
from . import decode_report, decode_sweeps, report, timing
from .runner import BaseRunner, _Fatal, _short


@dataclass
class DecodeOptions:
    shapes: Sequence[decode_sweeps.DecodeShape]
    impls: Sequence[str]
    out_dir: str
    tag: Optional[str] = None
    plot: bool = True
    quick: bool = False
    rtol: float = 2e-2           # relative L2 error allowed against the fp32 reference
    atol: float = 1e-2           # max abs error allowed
    l2_rotate: float = 4.0       # input sets cover at least this many times the L2 size
    max_sets: int = 64
    flashinfer_path: Optional[str] = None
    skipped: Sequence = ()       # (shape, reason) left out by the selection
    argv: Sequence[str] = field(default_factory=list)
    seed: int = 0
    warmup_ms: Optional[float] = None   # override the timing defaults
    rep_ms: Optional[float] = None


class PagedCache:
    """One paged copy of a set's K/V, in FlashKit's layout and FlashInfer's CSR view."""

    def __init__(self, torch, d, shape, page_size: int, gen) -> None:
        B, S, Hkv, D = shape.B, shape.S_k, shape.H_kv, shape.D
        P = page_size
        dev = d.q.device
        n = -(-S // P)                      # pages per sequence
        needed = B * n
        pool = needed + max(1, needed // 64)  # some pages no sequence uses (NaN)
        perm = torch.randperm(pool, generator=gen, device="cpu")[:needed].to(torch.int32)
        self.block_table = perm.view(B, n).to(dev)
        nan = float("nan")
        self.k = torch.full((pool, P, Hkv, D), nan, dtype=d.q.dtype, device=dev)
        self.v = torch.full((pool, P, Hkv, D), nan, dtype=d.q.dtype, device=dev)
        for b in range(B):  # per sequence: bounded temporary memory
            idx = self.block_table[b].long()
            for src, dst in ((d.k_src, self.k), (d.v_src, self.v)):
                tok = src[b].transpose(0, 1)  # [S_k, H_kv, D] view of BHSD
                if n * P != S:
                    tmp = torch.full((n * P, Hkv, D), nan, dtype=src.dtype, device=dev)
                    tmp[:S] = tok
                else:
                    tmp = tok.reshape(n * P, Hkv, D)
                dst[idx] = tmp.view(n, P, Hkv, D)
        self.seqlens = torch.full((B,), S, dtype=torch.int32, device=dev)
        # FlashInfer's CSR form of the same block table (pages actually used per sequence)
        self.kv_len_host = [S] * B
        self.kv_indptr_host = [b * n for b in range(B + 1)]
        self.kv_indptr = torch.tensor(self.kv_indptr_host, dtype=torch.int32, device=dev)
        self.kv_indices = self.block_table.reshape(-1).contiguous()
        self.last_page_len = torch.full((B,), S - (n - 1) * P, dtype=torch.int32, device=dev)


class DataSet:
    def __init__(self, torch, shape, seed: int, device) -> None:
        gen = torch.Generator(device=device).manual_seed(seed)
        dt = torch.bfloat16
        self.q = torch.randn(shape.B, shape.s_q, shape.H_q, shape.D, generator=gen, dtype=dt,
                             device=device)
        kv_shape = (shape.B, shape.H_kv, shape.S_k, shape.D)
        self.k_src = torch.randn(kv_shape, generator=gen, dtype=dt, device=device)
        self.v_src = torch.randn(kv_shape, generator=gen, dtype=dt, device=device)
        self.paged: dict = {}
        self.cpu_gen = torch.Generator().manual_seed(seed)


def reference(torch, d: DataSet, shape, batch_ids) -> dict:
    """{b: o[s_q, H_q, D] fp32}: softmax(q k^T / sqrt(D)) v in fp32, bottom-right causal."""
    G, sq, S, D = shape.H_q // shape.H_kv, shape.s_q, shape.S_k, shape.D
    scale = 1.0 / math.sqrt(D)
    out = {}
    for b in batch_ids:
        q = d.q[b].float().permute(1, 0, 2)                 # [H_q, s_q, D]
        q = q.reshape(shape.H_kv, G * sq, D)                 # rows g * s_q + t of KV head h
        k = d.k_src[b].float()                               # [H_kv, S_k, D]
        v = d.v_src[b].float()
        s = torch.matmul(q, k.transpose(1, 2)) * scale       # [H_kv, G*s_q, S_k]
        if sq > 1:
            pos = torch.arange(S, device=s.device)
            lim = S - sq + torch.arange(sq, device=s.device)
            mask = (pos[None, :] > lim[:, None]).repeat(G, 1)  # [G*s_q, S_k]
            s.masked_fill_(mask, float("-inf"))
        o = torch.matmul(torch.softmax(s, dim=-1), v)        # [H_kv, G*s_q, D]
        out[b] = o.reshape(shape.H_q, sq, D).permute(1, 0, 2).contiguous()
    return out


class DecodeRunner(BaseRunner):
    def __init__(self, opts: DecodeOptions, out=None) -> None:
        super().__init__(opts, out)
        base = timing.DECODE_QUICK if opts.quick else timing.DECODE_DEFAULT
        self.timing = timing.with_overrides(base, opts.warmup_ms, opts.rep_ms)
        # marks: (impl, B, H_q, H_kv, S_k, s_q, page) that mismatched;
        # not_measured: (impl, reason) -> [labels]
        self.mismatches: list[str] = []
        self.notes: list[str] = []
        self.l2_bytes = self._l2_bytes()
        self.device = self.torch.device("cuda")
        self._noted: set = set()

    # -- output -------------------------------------------------------------------------

    def skip(self, impl: str, reason: str, label: str) -> None:
        self._not_measured((impl, reason), impl, reason, label)

    def note_once(self, key, msg: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(msg)
            self.say(f"  note: {msg}")

    # -- main loop ----------------------------------------------------------------------

    def run(self) -> int:
        opts = self.opts
        env = di.Env(flashinfer_path=opts.flashinfer_path)
        impls = []
        for name in opts.impls:
            impl = di.make_impl(name)
            try:
                reason = impl.setup(env)
            except Exception as e:
                reason = f"setup failed: {_short(e)}"
            if reason is None:
                impls.append(impl)
            elif name == di.FLASHKIT:
                self.problems.append(f"flashkit not measured: {reason}")
                self.say(f"!!! FLASHKIT NOT MEASURED: {reason}\n!!! Measuring the peers only.")
            else:
                self.say(f"note: {name} unavailable: {reason}")
                self.not_measured.setdefault((name, f"unavailable: {reason}"), []).append("all")
        csv_path = report.results_path(opts.out_dir, self.gpu, self.date, opts.tag, op="decode")
        self._header(csv_path, impls)
        if not impls:
            self.say("!!! nothing to measure: no implementation available")
            return 1
        paged = [i for i in impls if i.paged]
        contiguous = [i for i in impls if not i.paged]
        total = decode_sweeps.count_measurements(opts.shapes, len(paged), len(contiguous))
        self.counter = [0, total]

        def measure(writer) -> None:
            for shape in opts.shapes:
                self._run_shape(shape, paged, contiguous, writer)
        return self._finish(csv_path, self._measure_into(csv_path, measure))

    def _header(self, csv_path: Path, impls) -> None:
        torch = self.torch
        triton_v = self._triton_version()
        t = self.timing
        self.say(f"flashkit.bench decode | GPU {self.gpu} | bf16 cache | commit {self.commit} | "
                 f"{self.date}")
        self.say(f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
                 f"{torch.backends.cudnn.version()}) | triton {triton_v} | python "
                 f"{platform.python_version()} | L2 {self.l2_bytes / 2**20:.0f} MiB")
        self.say(f"timing: rotating input sets (>= {self.opts.l2_rotate:g}x L2), back-to-back "
                 f"calls between CUDA events, warm-up {t.warmup_ms:g} ms, samples for "
                 f"{t.rep_ms:g} ms, median | check: rel-L2 <= {self.opts.rtol:g}, "
                 f"max-abs <= {self.opts.atol:g} vs fp32 reference")
        for i in impls:
            extra = ""
            if isinstance(i, di.FlashInferImpl) and i.lib is not None:
                extra = f": {i.lib.describe} [{i.lib.path}]"
            elif isinstance(i, di.FlashKitImpl):
                extra = f": {i.how}"
            self.say(f"  impl {i.name}{extra}")
        self.say(f"{len(self.opts.shapes)} shapes; bytes = K+V of valid tokens + Q + O")
        for shape, reason in self.opts.skipped:
            self.say(f"  skipped {shape.label()} page {','.join(map(str, shape.page_sizes))}: "
                     f"{reason}")
        self.say(f"writing {csv_path}")

    def _sets_for(self, shape) -> int:
        target = self.opts.l2_rotate * self.l2_bytes
        return int(min(self.opts.max_sets, max(1, math.ceil(target / shape.bytes))))

    def _run_shape(self, shape, paged, contiguous, writer) -> None:
        torch = self.torch
        need = shape.kv_bytes * 2 + shape.kv_bytes * 2 // 64 + (1 << 30)
        free, _ = torch.cuda.mem_get_info()
        if need > free:
            reason = f"needs ~{need / 1e9:.1f} GB, {free / 1e9:.1f} GB free"
            for i in paged:
                for p in shape.page_sizes:
                    self.counter[0] += 1
                    self.skip(i.name, reason, f"{shape.label()} page={p}")
            for i in contiguous:
                self.counter[0] += 1
                self.skip(i.name, reason, shape.label())
            return
        R = self._sets_for(shape)
        sets = [DataSet(torch, shape, self.opts.seed + 1000 * r, self.device) for r in range(R)]
        check_ids = sorted({0, shape.B // 2, shape.B - 1})
        refs = reference(torch, sets[0], shape, check_ids)
        try:
            for impl in contiguous:
                self._measure(impl, shape, 0, sets, refs, writer)
            for p in shape.page_sizes:
                for d in sets:
                    d.paged.clear()
                torch.cuda.empty_cache()
                for d in sets:
                    d.paged[p] = PagedCache(torch, d, shape, p, d.cpu_gen)
                for impl in paged:
                    self._measure(impl, shape, p, sets, refs, writer)
        finally:
            del sets, refs
            torch.cuda.empty_cache()

    def _measure(self, impl, shape, page: int, sets, refs, writer) -> None:
        torch = self.torch
        self.counter[0] += 1
        label = f"{shape.label()} page={page:<3}"
        reason = impl.supports(shape)
        if reason:
            self.skip(impl.name, reason, label)
            return
        try:
            if isinstance(impl, di.ReadLimitImpl):
                ms, how = self._time_read_limit(impl, shape, sets)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fns = impl.prepare(shape, page, sets)
                    with impl.context():
                        out = fns[0]()
                    torch.cuda.synchronize()
                note = impl.note(shape)
                if note:
                    self.note_once((impl.name, note), f"{impl.name} ({shape.ratio}, s_q "
                                                       f"{shape.s_q}): {note}")
                bad = self._compare(impl, shape, page, out, refs) if impl.checks_output else None
                del out
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with impl.context():
                        ms, _ = timing.rotating_median_ms(fns, self.timing)
                del fns
                how = bad
        except _Fatal:
            raise
        except Exception as e:
            self._check_context()
            impl.release()
            self.skip(impl.name, _short(e), label)
            return
        impl.release()
        nbytes = shape.bytes
        value = decode_sweeps.gbps(nbytes, ms)
        for unit, v in (("GB/s", value), ("us", ms * 1e3)):
            row = report.make_row(
                op="decode", impl=impl.name, dtype="bf16", D=shape.D, B=shape.B, H_q=shape.H_q,
                H_kv=shape.H_kv, S_q=shape.s_q, S_k=shape.S_k, causal=True, mode="fwd",
                page_size=page, value=v, unit=unit, gpu=self.gpu, date=self.date,
                commit=self.commit)
            writer.write(row)
            self.rows.append(row)
        key = (impl.name, shape.B, shape.H_q, shape.H_kv, shape.S_k, shape.s_q, page)
        flag = "  !MISMATCH" if key in self.marks else ""
        extra = f"  ({how})" if how and isinstance(impl, di.ReadLimitImpl) else ""
        n, total = self.counter
        self.say(f"[{n:>4}/{total}] {label} {impl.name:<15} {value:8.1f} GB/s {ms * 1e3:10.2f} us"
                 f"  R={len(sets)}{flag}{extra}")

    def _time_read_limit(self, impl, shape, sets) -> tuple[float, str]:
        best = None
        try:
            for label, fns in impl.variants(shape, sets):
                fns[0]()
                self.torch.cuda.synchronize()
                ms, _ = timing.rotating_median_ms(fns, self.timing)
                if best is None or ms < best[0]:
                    best = (ms, label)
        finally:
            impl.release()
        return best

    def _compare(self, impl, shape, page, out, refs) -> Optional[str]:
        torch = self.torch
        expect = (shape.B, shape.s_q, shape.H_q, shape.D)
        what = None
        if tuple(out.shape) != expect:
            what = f"output shape {tuple(out.shape)}, expected {expect}"
        elif not bool(torch.isfinite(out).all().item()):
            what = "non-finite output"
        else:
            worst_l2, worst_abs, mag = 0.0, 0.0, 0.0
            for b, r in refs.items():
                o = out[b].float()
                diff = (o - r)
                worst_abs = max(worst_abs, diff.abs().max().item())
                worst_l2 = max(worst_l2, (diff.norm() / r.norm().clamp_min(1e-30)).item())
                mag = max(mag, r.abs().max().item())
            if worst_l2 > self.opts.rtol or worst_abs > self.opts.atol:
                what = (f"rel-L2 {worst_l2:.3g} (<= {self.opts.rtol:g}), max-abs {worst_abs:.3g} "
                        f"(<= {self.opts.atol:g}), max|ref| {mag:.3g}")
        if what is None:
            return None
        msg = f"!!! MISMATCH {impl.name} {shape.label()} page={page}: {what} vs fp32 reference"
        self.say(msg)
        self.mismatches.append(msg)
        self.marks.add((impl.name, shape.B, shape.H_q, shape.H_kv, shape.S_k, shape.s_q, page))
        return what

    # -- the end ------------------------------------------------------------------------

    def _finish(self, csv_path: Path, interrupted: bool) -> int:
        # the ratio table and the bar checks come last
        return self._finish_sweep(
            csv_path, interrupted, plot_rows=decode_report.plot_rows, flagged=self.mismatches,
            heading=f"\n!!! {len(self.mismatches)} OUTPUT MISMATCH(ES) against the fp32 "
                    "reference; those numbers are marked '!' and are suspect:",
            digest_item=f"{len(self.mismatches)} output mismatch(es)",
            report_text=lambda: decode_report.format_report(self.rows, self.marks),
            prog="flashkit.bench decode")

    def _notes_text(self) -> str:
        lines = self._notes_head() + [
            f"timing: rotating sets >= {self.opts.l2_rotate:g}x L2 ({self.l2_bytes} B), "
            f"warmup_ms={self.timing.warmup_ms} rep_ms={self.timing.rep_ms}",
            f"rows: {len(self.rows)}"]
        lines += [f"note: {n}" for n in self.notes]
        for shape, reason in self.opts.skipped:
            lines.append(f"skipped: {shape.label()} pages {shape.page_sizes}: {reason}")
        for (impl, reason), labels in self.not_measured.items():
            lines.append(f"not measured: {impl} ({len(labels)} configs): {reason}")
        lines += [f"mismatch: {m}" for m in self.mismatches]
        lines += [f"problem: {p}" for p in self.problems]
        return "\n".join(lines) + "\n"


def run(opts: DecodeOptions, out=None) -> int:
    return DecodeRunner(opts, out).run()
