"""Decode results: the ratio table with the issue's bar checks, and the bandwidth plot.

Works on rows of the SPEC CSV schema (op == "decode"), so the same report comes out of a run
and of ``python -m flashkit.bench plot decode-*.csv`` on a machine without a GPU. No torch.

Bar checks (the paged-decode issue), evaluated on flashkit's rows:
- every shape with >= 256 MB of valid KV, at page 16: flashkit >= 1.1x FlashInfer (``fi``:
  FlashInfer's wrappers with their defaults, as the issue names them: at s_q = 1 the paged
  decode wrapper's default kernel, ``flashinfer``; at s_q > 1 the paged prefill wrapper with
  causal=True and backend "auto", which is FA3 on Hopper, ``flashinfer_fa3``), >= 1.0x
  sdpa_cudnn, >= 0.85x read_limit (bandwidth);
  the table also shows ``fi*``, the fastest FlashInfer kernel of the row whatever the API
  (at s_q = 1 usually the tensor-core decode, ``flashinfer_tc``), and flashkit/fi*, for
  information;
- page 1 >= 0.85x page 16 (bandwidth, same shape);
- B=1 at 64k >= 0.8x the bandwidth of B=64 at 8k (same heads, page 16, s_q 1);
- s_q=4 time <= 1.3x s_q=1 time (same B, heads, S_k, page 16).
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Optional, Sequence

from . import report
from .decode_sweeps import BAR_MIN_KV_BYTES, MAIN_PAGE, kv_bytes
from .report import fmt_value as _fmt
from .report import page_of as _page
from .report import safe_ratio as _ratio
from .report import table_lines as _table
from .sweeps import format_seqlen

OURS = "flashkit"
FLASHINFER_IMPLS = ("flashinfer", "flashinfer_tc", "flashinfer_fa3")
CUDNN = "sdpa_cudnn"
FLASH = "sdpa_flash"
READ = "read_limit"
IMPL_ORDER = (OURS, *FLASHINFER_IMPLS, CUDNN, FLASH, READ)

BAR_VS_FLASHINFER = 1.1
BAR_VS_CUDNN = 1.0
BAR_VS_READ = 0.85
BAR_PAGE1 = 0.85
BAR_LONG = 0.8
BAR_SQ4_TIME = 1.3


def decode_rows(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("op") == "decode"]


class Index:
    """(gpu, B, H_q, H_kv, S_k, s_q, page, impl) -> {unit: value}; the last row wins."""

    def __init__(self, rows: Sequence[dict]) -> None:
        self.v: dict = {}
        for r in decode_rows(rows):
            key = (r["gpu"], r["B"], r["H_q"], r["H_kv"], r["S_k"], r["S_q"], _page(r), r["impl"])
            self.v.setdefault(key, {})[r["unit"]] = r["value"]
        self.gpus = list(OrderedDict.fromkeys(k[0] for k in self.v))

    def get(self, gpu, B, hq, hkv, S, sq, page, impl, unit="GB/s") -> Optional[float]:
        return self.v.get((gpu, B, hq, hkv, S, sq, page, impl), {}).get(unit)

    def shapes(self, gpu):
        return sorted({k[1:6] for k in self.v if k[0] == gpu},
                      key=lambda s: (s[4], s[1], s[2], s[0], s[3]))

    def pages(self, gpu, shape, impl=OURS):
        return sorted({k[6] for k in self.v if k[0] == gpu and k[1:6] == shape and k[7] == impl})

    def ref_flashinfer(self, gpu, shape, page) -> tuple[Optional[float], Optional[str]]:
        """The bar's FlashInfer, its wrappers' defaults: s_q = 1, the paged decode wrapper's
        default kernel (flashinfer); s_q > 1, the paged prefill wrapper's backend "auto",
        FA3 on Hopper (flashinfer_fa3)."""
        name = "flashinfer" if shape[4] == 1 else "flashinfer_fa3"
        v = self.get(gpu, *shape, page, name)
        return (v, name if v is not None else None)

    def best_flashinfer(self, gpu, shape, page, impls=FLASHINFER_IMPLS
                        ) -> tuple[Optional[float], Optional[str]]:
        best = (None, None)
        for impl in impls:
            v = self.get(gpu, *shape, page, impl)
            if v is not None and (best[0] is None or v > best[0]):
                best = (v, impl)
        return best


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []
        self.unevaluated: list[str] = []

    def add(self, ok: Optional[bool], what: str) -> str:
        if ok is None:
            self.unevaluated.append(what)
            return "n/a"
        if ok:
            self.passed += 1
            return "ok"
        self.failed.append(what)
        return "FAIL"


def format_report(rows: Sequence[dict], marks: Optional[set] = None) -> str:
    """The ratio tables and bar checks for every GPU in rows (decode rows only)."""
    idx = Index(rows)
    if not idx.gpus:
        return "(no decode rows)"
    marks = marks or set()
    out = []
    for gpu in idx.gpus:
        out += _report_gpu(idx, gpu, marks)
    return "\n".join(out)


def _mark(marks, impl, shape, page) -> str:
    return "!" if (impl, *shape, page) in marks else ""


def _report_gpu(idx: Index, gpu: str, marks: set) -> list[str]:
    checks = Checks()
    out = [f"== decode | bf16 cache, D=128 | GB/s | {gpu} ==",
           f"flashkit and FlashInfer at page {MAIN_PAGE}; SDPA and read_limit on a contiguous copy "
           "(page 0). fi = FlashInfer's wrapper defaults, the bar's reference (s_q=1: paged decode "
           "wrapper; s_q>1: paged prefill wrapper, backend auto = FA3 on Hopper); fi* = the "
           "fastest FlashInfer kernel of the row "
           "(d = flashinfer, tc = flashinfer_tc, f3 = flashinfer_fa3)"]
    short = {"flashinfer": "d", "flashinfer_tc": "tc", "flashinfer_fa3": "f3"}
    header = ["B", "H", "S_k", "s_q", "KV MB", "flashkit", "fi", "fi*", "cudnn", "flash", "read",
              "fk/fi", "fk/fi*", "fk/cudnn", "fk/read", "bar"]
    body = []
    have_ours = False
    behind_best = []
    for shape in idx.shapes(gpu):
        B, hq, hkv, S, sq = shape
        fk = idx.get(gpu, *shape, MAIN_PAGE, OURS)
        fi, fi_name = idx.ref_flashinfer(gpu, shape, MAIN_PAGE)
        fb, fb_name = idx.best_flashinfer(gpu, shape, MAIN_PAGE)
        cd = idx.get(gpu, *shape, 0, CUDNN)
        fl = idx.get(gpu, *shape, 0, FLASH)
        rd = idx.get(gpu, *shape, 0, READ)
        if fk is None and fb is None and cd is None and fl is None:
            continue  # e.g. a shape measured at other page sizes only
        have_ours |= fk is not None
        kvb = kv_bytes(B, hkv, S)
        r_fi, r_cd, r_rd = _ratio(fk, fi), _ratio(fk, cd), _ratio(fk, rd)
        r_fb = _ratio(fk, fb)
        if r_fb is not None and r_fb < 1.0:
            behind_best.append(f"B={B} H={hq}/{hkv} S_k={format_seqlen(S)} s_q={sq}: "
                               f"{fb_name} {fb:.0f} GB/s vs flashkit {fk:.0f} ({r_fb:.2f}x)")
        if kvb >= BAR_MIN_KV_BYTES and fk is not None:
            label = f"B={B} H={hq}/{hkv} S_k={format_seqlen(S)} s_q={sq}"
            bad = _mark(marks, OURS, shape, MAIN_PAGE)
            fails, states = [], []
            for r, bar, name in ((r_fi, BAR_VS_FLASHINFER, "fi"), (r_cd, BAR_VS_CUDNN, "cudnn"),
                                 (r_rd, BAR_VS_READ, "read")):
                ok = None if r is None else (r >= bar and not bad)
                st = checks.add(ok, f"{label}: flashkit/{name} "
                                    f"{'-' if r is None else f'{r:.2f}'} (bar {bar:g})"
                                    f"{' [output mismatch]' if bad else ''}")
                states.append(st)
                if st == "FAIL":
                    fails.append(name)
            bar_txt = ("FAIL " + ",".join(fails) if fails else
                       "ok" if "ok" in states else "n/a")
        else:
            bar_txt = "<256MB" if kvb < BAR_MIN_KV_BYTES else "-"
        def tagged(v, name):
            return (_fmt(v) + (f" {short[name]}" if name else "")
                    + (_mark(marks, name, shape, MAIN_PAGE) if name else ""))

        body.append([str(B), f"{hq}/{hkv}", format_seqlen(S), str(sq), f"{kvb / 2**20:.0f}",
                     _fmt(fk) + _mark(marks, OURS, shape, MAIN_PAGE),
                     tagged(fi, fi_name), tagged(fb, fb_name),
                     _fmt(cd) + _mark(marks, CUDNN, shape, 0), _fmt(fl) + _mark(marks, FLASH, shape, 0),
                     _fmt(rd),
                     _fmt(r_fi, 2), _fmt(r_fb, 2), _fmt(r_cd, 2), _fmt(r_rd, 2), bar_txt])
    out += _table(header, body)
    if behind_best:
        out.append(f"  note: a FlashInfer kernel is faster than flashkit on {len(behind_best)} "
                   "row(s) (fk/fi* < 1; not a bar check):")
        out += [f"    {x}" for x in behind_best[:10]]
        if len(behind_best) > 10:
            out.append(f"    ... {len(behind_best) - 10} more")

    # page sizes
    multi = [s for s in idx.shapes(gpu) if len(set(idx.pages(gpu, s)) | set(
        p for impl in FLASHINFER_IMPLS for p in idx.pages(gpu, s, impl))) > 1]
    if multi:
        out += ["", "-- page sizes (GB/s; flashkit, and the fastest FlashInfer kernel) --"]
        pages = sorted({p for s in multi for impl in (OURS, *FLASHINFER_IMPLS)
                        for p in idx.pages(gpu, s, impl)})
        header = ["B", "H", "S_k", "s_q"] + [f"fk@{p}" for p in pages] + \
                 [f"fi@{p}" for p in pages] + ["fk p1/p16", "bar"]
        body = []
        for s in multi:
            fk = {p: idx.get(gpu, *s, p, OURS) for p in pages}
            fi = {p: idx.best_flashinfer(gpu, s, p)[0] for p in pages}
            r = _ratio(fk.get(1), fk.get(MAIN_PAGE))
            st = "-"
            if 1 in pages and (fk.get(1) is not None or fk.get(MAIN_PAGE) is not None):
                st = checks.add(None if r is None else r >= BAR_PAGE1,
                                f"B={s[0]} H={s[1]}/{s[2]} S_k={format_seqlen(s[3])}: flashkit "
                                f"page1/page16 {_fmt(r, 2)} (bar {BAR_PAGE1:g})")
            body.append([str(s[0]), f"{s[1]}/{s[2]}", format_seqlen(s[3]), str(s[4])]
                        + [_fmt(fk[p]) for p in pages] + [_fmt(fi[p]) for p in pages]
                        + [_fmt(r, 2), st])
        out += _table(header, body)

    # long context: B=1 at 64k vs B=64 at 8k
    long_rows = []
    for hq, hkv in sorted({(s[1], s[2]) for s in idx.shapes(gpu)}):
        a = idx.get(gpu, 1, hq, hkv, 65536, 1, MAIN_PAGE, OURS)
        b = idx.get(gpu, 64, hq, hkv, 8192, 1, MAIN_PAGE, OURS)
        if a is None and b is None:
            continue
        r = _ratio(a, b)
        st = checks.add(None if r is None else r >= BAR_LONG,
                        f"H={hq}/{hkv}: flashkit B=1 64k / B=64 8k {_fmt(r, 2)} (bar {BAR_LONG:g})")
        long_rows.append([f"{hq}/{hkv}", _fmt(a), _fmt(b), _fmt(r, 2), st])
    if long_rows:
        out += ["", "-- long context: flashkit B=1 S_k=64k vs B=64 S_k=8k (GB/s, page 16) --"]
        out += _table(["H", "B=1 64k", "B=64 8k", "ratio", "bar"], long_rows)

    # s_q: time at s_q = 2, 4 over time at s_q = 1
    sq_rows = []
    bases = sorted({s[:4] for s in idx.shapes(gpu) if s[4] > 1})
    for B, hq, hkv, S in bases:
        t1 = idx.get(gpu, B, hq, hkv, S, 1, MAIN_PAGE, OURS, "us")
        t2 = idx.get(gpu, B, hq, hkv, S, 2, MAIN_PAGE, OURS, "us")
        t4 = idx.get(gpu, B, hq, hkv, S, 4, MAIN_PAGE, OURS, "us")
        r2, r4 = _ratio(t2, t1), _ratio(t4, t1)
        st = checks.add(None if r4 is None else r4 <= BAR_SQ4_TIME,
                        f"B={B} H={hq}/{hkv} S_k={format_seqlen(S)}: flashkit time s_q4/s_q1 "
                        f"{_fmt(r4, 2)} (bar <= {BAR_SQ4_TIME:g})")
        fi1 = idx.get(gpu, B, hq, hkv, S, 1, MAIN_PAGE, "flashinfer_tc", "us")
        fi4 = idx.get(gpu, B, hq, hkv, S, 4, MAIN_PAGE, "flashinfer_tc", "us")
        sq_rows.append([str(B), f"{hq}/{hkv}", format_seqlen(S), _fmt(t1, 1), _fmt(t2, 1),
                        _fmt(t4, 1), _fmt(r2, 2), _fmt(r4, 2), _fmt(_ratio(fi4, fi1), 2), st])
    if sq_rows:
        out += ["", "-- speculative decode: time (us) at s_q 1/2/4, flashkit, page 16 "
                    "(fi_tc = flashinfer_tc's own s_q4/s_q1) --"]
        out += _table(["B", "H", "S_k", "s_q1", "s_q2", "s_q4", "2/1", "4/1", "fi_tc 4/1", "bar"],
                      sq_rows)

    out += ["", f"bar checks on {gpu}: {checks.passed} passed, {len(checks.failed)} failed, "
                f"{len(checks.unevaluated)} not evaluable"]
    if not have_ours:
        out.append("  (no flashkit rows: nothing to hold to the bar)")
    for f in checks.failed:
        out.append(f"  FAIL {f}")
    for u in checks.unevaluated[:10]:
        out.append(f"  n/a  {u}")
    if len(checks.unevaluated) > 10:
        out.append(f"  ... {len(checks.unevaluated) - 10} more not evaluable")
    if any(True for _ in marks):
        out.append("  ! = output did not match the fp32 reference (see the mismatch list)")
    out.append("")
    return out


def bar_summary(rows: Sequence[dict]) -> dict:
    """{gpu: (passed, failed, unevaluated)} (for tests and scripts)."""
    idx = Index(rows)
    res = {}
    for gpu in idx.gpus:
        res[gpu] = report.bar_counts(_report_gpu(idx, gpu, set()), gpu)
    return res


# ---------------------------------------------------------------------------------------
# plot

_STYLE = {  # impl -> (color, linestyle, linewidth, marker)
    "flashkit": ("tab:red", "-", 2.4, "o"),
    "flashinfer": ("tab:orange", "-", 1.4, "s"),
    "flashinfer_tc": ("tab:olive", "-", 1.4, "P"),
    "flashinfer_fa3": ("tab:brown", "-", 1.2, "X"),
    "sdpa_cudnn": ("tab:green", "-", 1.4, "^"),
    "sdpa_flash": ("tab:blue", "-", 1.4, "v"),
    "read_limit": ("black", "--", 1.4, "_"),
}


def plot_rows(rows: Sequence[dict], path, title: Optional[str] = None) -> Optional[Path]:
    """Bandwidth vs S_k: one panel per (heads ratio, batch size), one line per impl (paged
    impls at page 16, contiguous ones at page 0), read_limit dashed; s_q = 1 rows only.
    Returns the path, or None without matplotlib or rows."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullLocator
    except Exception:
        return None
    sel = [r for r in decode_rows(rows) if r["unit"] == "GB/s" and r["S_q"] == 1
           and _page(r) in (0, MAIN_PAGE)]
    if not sel:
        return None
    ratios = sorted({(r["H_q"], r["H_kv"]) for r in sel}, key=lambda x: (x[1], x[0]))
    batches = sorted({r["B"] for r in sel})
    impls = sorted({r["impl"] for r in sel},
                   key=lambda n: (IMPL_ORDER.index(n) if n in IMPL_ORDER else 99, n))
    nr, nc = len(ratios), len(batches)
    fig, axes = plt.subplots(nr, nc, figsize=(3.8 * nc, 3.0 * nr + 0.9), squeeze=False)
    for i, (hq, hkv) in enumerate(ratios):
        for j, B in enumerate(batches):
            ax = axes[i][j]
            panel = [r for r in sel if r["H_q"] == hq and r["H_kv"] == hkv and r["B"] == B]
            xs_all = sorted({r["S_k"] for r in panel})
            for impl in impls:
                pts = {r["S_k"]: r["value"] for r in panel if r["impl"] == impl}
                if not pts:
                    continue
                xs = sorted(pts)
                color, ls, lw, marker = _STYLE.get(impl, (None, "-", 1.2, "x"))
                ax.plot(xs, [pts[x] for x in xs], label=impl, color=color, linestyle=ls,
                        linewidth=lw, marker=marker, markersize=4)
            ax.set_xscale("log", base=2)
            if xs_all:
                ax.xaxis.set_major_locator(FixedLocator(xs_all))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.set_xticks(xs_all, [format_seqlen(x) for x in xs_all])
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.set_title(f"B={B}  H_q/H_kv={hq}/{hkv}", fontsize=9)
            if j == 0:
                ax.set_ylabel("GB/s")
            if i == nr - 1:
                ax.set_xlabel("S_k")
    handles, labels = report.legend_entries(axes)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    if title is None:
        gpus = sorted({r["gpu"] for r in sel})
        dates = sorted({r["date"] for r in sel if r.get("date")})
        commits = sorted({r["commit"] for r in sel if r.get("commit")})
        title = (f"FlashKit paged decode (s_q=1, page {MAIN_PAGE}; SDPA contiguous) — "
                 f"{', '.join(gpus)} — {', '.join(dates)} — commit {', '.join(commits)}")
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    height = 3.0 * nr + 0.9
    fig.tight_layout(rect=(0, 0.45 / height, 1, 1 - 0.45 / height))
    return report.save_figure(fig, path)
