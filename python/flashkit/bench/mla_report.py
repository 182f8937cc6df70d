"""MLA decode results: the flashkit / FlashMLA table with the SPEC bar, and the plot.

Works on rows of the SPEC CSV schema (op == "mla_decode"), so the same report comes out of a
run and of ``python -m flashkit.bench plot mla-*.csv`` on a machine without a GPU. No torch.
Also reads the output of FlashMLA's own tests/test_flash_mla.py (``read_flashmla_log``), as
impl ``flashmla_anchor``, to set a run beside an earlier one.

The bar (SPEC §6): flashkit >= 1.05x FlashMLA on every configuration of the sweep, compared
as time (FlashMLA's us / flashkit's us) at FlashMLA's page size, 64, on the same inputs.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path
from typing import Optional, Sequence

from . import report
from .mla_sweeps import BAR_VS_FLASHMLA, D_QK, D_V, FLASHMLA_PAGE, H_KV
from .report import fmt_value as _fmt
from .report import page_of as _page
from .report import safe_ratio as _speedup  # (peer time, our time): our speed-up
from .report import table_lines as _table
from .sweeps import format_seqlen

OURS = "flashkit"
PEER = "flashmla"
ANCHOR = "flashmla_anchor"
IMPL_ORDER = (OURS, PEER, ANCHOR)
MODES = ("fixed", "varlen")


def mla_rows(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("op") == "mla_decode"]


class Index:
    """(gpu, mode, S_k, H_q, s_q, impl, page) -> {unit: value}; the last row wins."""

    def __init__(self, rows: Sequence[dict]) -> None:
        self.v: dict = {}
        for r in mla_rows(rows):
            key = (r["gpu"], r["mode"], r["S_k"], r["H_q"], r["S_q"], r["impl"], _page(r))
            self.v.setdefault(key, {})[r["unit"]] = r["value"]
        self.gpus = list(OrderedDict.fromkeys(k[0] for k in self.v))

    def get(self, gpu, cfg, impl, page, unit="us") -> Optional[float]:
        return self.v.get((gpu, *cfg, impl, page), {}).get(unit)

    def configs(self, gpu):
        """(mode, S_k, H_q, s_q), in FlashMLA's order (S_k, h_q, s_q, mode)."""
        return sorted({k[1:5] for k in self.v if k[0] == gpu},
                      key=lambda c: (c[1], c[2], c[3], MODES.index(c[0]) if c[0] in MODES else 9))

    def pages(self, gpu, impl=OURS):
        return sorted({k[6] for k in self.v if k[0] == gpu and k[5] == impl})


def format_report(rows: Sequence[dict], marks: Optional[set] = None,
                  checks: Optional[dict] = None) -> str:
    """The table of every GPU in rows: FlashMLA's TFLOPS / GB/s / us at page 64, flashkit's us
    at each page size, flashkit's speed-up over FlashMLA (time ratio) at page 64 and at its
    best page, the bar, and the correctness check (from a run; '-' when re-read from CSV)."""
    idx = Index(rows)
    if not idx.gpus:
        return "(no mla_decode rows)"
    marks = marks or set()
    checks = checks or {}
    out = []
    for gpu in idx.gpus:
        out += _report_gpu(idx, gpu, marks, checks)
    return "\n".join(out)


def _check_cell(marks, checks, cfg, have) -> str:
    if not have:
        return "-"
    bad = [k for k in marks if k[1:5] == cfg]
    if bad:
        return "WARN " + ",".join(f"{k[0]}@{k[5]}" for k in sorted(bad))
    return "ok" if any(k[1:5] == cfg for k in checks) else "-"


def _report_gpu(idx: Index, gpu: str, marks: set, checks: dict) -> list[str]:
    fk_pages = idx.pages(gpu, OURS)
    has_anchor = any(k[0] == gpu and k[5] == ANCHOR for k in idx.v)
    out = [f"== mla_decode | bf16, d={D_QK}, d_v={D_V}, h_kv={H_KV}, causal | {gpu} ==",
           f"flashmla and fk@{FLASHMLA_PAGE} read the same cache; speed-up = flashmla us / "
           f"flashkit us (bar >= {BAR_VS_FLASHMLA:g} at page {FLASHMLA_PAGE}); best = "
           "flashkit's fastest page"]
    header = ["mode", "S_k", "H_q", "s_q", "fm TFLOPS", "fm GB/s", "fm us"]
    if has_anchor:
        header.append("anchor us")
    header += [f"fk@{p} us" for p in fk_pages] + ["fk TFLOPS", f"x@{FLASHMLA_PAGE}", "x best",
                                                   "bar", "check"]
    body = []
    passed, failed, unevaluated = 0, [], 0
    speedups = []
    for cfg in idx.configs(gpu):
        mode, S, hq, sq = cfg
        fm_us = idx.get(gpu, cfg, PEER, FLASHMLA_PAGE)
        fk = {p: idx.get(gpu, cfg, OURS, p) for p in fk_pages}
        fk64 = fk.get(FLASHMLA_PAGE)
        best = min((v for v in fk.values() if v is not None), default=None)
        x64, xbest = _speedup(fm_us, fk64), _speedup(fm_us, best)
        if fk64 is None and fm_us is None:
            bar = "-"
        elif x64 is None:
            bar = "n/a"
            unevaluated += 1
        else:
            speedups.append(x64)
            bad = any(k[1:5] == cfg and k[0] == OURS for k in marks)
            if x64 >= BAR_VS_FLASHMLA and not bad:
                bar = "ok"
                passed += 1
            else:
                bar = "FAIL"
                failed.append(f"{mode} S_k={format_seqlen(S)} H_q={hq} s_q={sq}: "
                              f"{x64:.2f}x{' [check warning]' if bad else ''}")
        line = [mode, format_seqlen(S), str(hq), str(sq),
                _fmt(idx.get(gpu, cfg, PEER, FLASHMLA_PAGE, "TFLOPS")),
                _fmt(idx.get(gpu, cfg, PEER, FLASHMLA_PAGE, "GB/s")), _fmt(fm_us, 1)]
        if has_anchor:
            line.append(_fmt(idx.get(gpu, cfg, ANCHOR, FLASHMLA_PAGE), 1))
        line += [_fmt(fk[p], 1) + ("!" if (OURS, *cfg, p) in marks else "") for p in fk_pages]
        line += [_fmt(idx.get(gpu, cfg, OURS, FLASHMLA_PAGE, "TFLOPS")), _fmt(x64, 2),
                 _fmt(xbest, 2), bar,
                 _check_cell(marks, checks, cfg, fm_us is not None or any(fk.values()))]
        body.append(line)
    out += _table(header, body)
    if speedups:
        from .sweeps import geomean
        out.append(f"geomean speed-up flashkit@{FLASHMLA_PAGE} / flashmla: "
                   f"{geomean(speedups):.3f}x over {len(speedups)} configs")
    out.append(f"bar checks on {gpu}: {passed} passed, {len(failed)} failed, "
               f"{unevaluated} not evaluable")
    if not fk_pages:
        out.append("  (no flashkit rows: nothing to hold to the bar)")
    for f in failed[:20]:
        out.append(f"  FAIL {f}")
    if len(failed) > 20:
        out.append(f"  ... {len(failed) - 20} more")
    if marks:
        out.append("  ! / WARN = output failed the correctness check (see the warnings)")
    out.append("")
    return out


def bar_summary(rows: Sequence[dict]) -> dict:
    """{gpu: (passed, failed, unevaluated)} (for tests and scripts)."""
    idx = Index(rows)
    res = {}
    for gpu in idx.gpus:
        res[gpu] = report.bar_counts(_report_gpu(idx, gpu, set(), {}), gpu)
    return res


# ---------------------------------------------------------------------------------------
# FlashMLA's own test output (tests/test_flash_mla.py), e.g. shared/anchors/h200-flashmla-*.log

_CFG_RE = re.compile(r"b=(\d+), s_q=(\d+), mean_sk=(\d+), h_q=(\d+), h_kv=(\d+), d=(\d+), "
                     r"dv=(\d+), causal=(\w+), varlen=(\w+)")
_RES_RE = re.compile(r"([\d.]+) ms, (\d+) TFLOPS, (\d+) GB/s")


def read_flashmla_log(path, gpu: Optional[str] = None, impl: str = ANCHOR) -> list[dict]:
    """Rows (unit us, TFLOPS, GB/s; page 64) from the text FlashMLA's test prints. The GPU
    label defaults to the file name's first part ('h200-flashmla-...log' -> 'H200 (anchor
    <date>)'); the date is the one in the name."""
    path = Path(path)
    m = re.search(r"(\d{4}-\d{2}-\d{2})", path.name)
    date = m.group(1) if m else ""
    if gpu is None:
        gpu = f"{path.name.split('-', 1)[0].upper()} (anchor {date})".replace(" )", ")")
    rows, cfg = [], None
    for line in path.read_text().splitlines():
        c = _CFG_RE.search(line)
        if c:
            cfg = c
            continue
        r = _RES_RE.search(line)
        if r and cfg is not None:
            b, sq, sk, hq, hkv, d, dv = (int(cfg.group(i)) for i in range(1, 8))
            causal = cfg.group(8) == "True"
            mode = "varlen" if cfg.group(9) == "True" else "fixed"
            ms, tf, gb = float(r.group(1)), float(r.group(2)), float(r.group(3))
            for unit, v in (("TFLOPS", tf), ("GB/s", gb), ("us", ms * 1e3)):
                rows.append(report.make_row(
                    op="mla_decode", impl=impl, dtype="bf16", D=d, Dv=dv, B=b, H_q=hq,
                    H_kv=hkv, S_q=sq, S_k=sk, causal=causal, mode=mode, value=v, unit=unit,
                    gpu=gpu, date=date, commit="anchor", page_size=FLASHMLA_PAGE))
            cfg = None
    return rows


def relabel_gpu(rows: Sequence[dict], gpu: str) -> list[dict]:
    return [dict(r, gpu=gpu) for r in rows]


# ---------------------------------------------------------------------------------------
# plot

_COLORS = {OURS: "tab:red", PEER: "tab:blue", ANCHOR: "tab:gray"}


def plot_rows(rows: Sequence[dict], path, title: Optional[str] = None) -> Optional[Path]:
    """TFLOPS per configuration: one panel per (mode, S_k); along x the (h_q, s_q) pairs;
    bars for flashmla (page 64), flashkit at page 64 (labelled with its speed-up) and, if
    present, the anchor; flashkit's other page sizes as markers. Returns the path, or None
    without matplotlib or rows."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return None
    sel = [r for r in mla_rows(rows) if r["unit"] == "TFLOPS"]
    if not sel:
        return None
    gpus = list(OrderedDict.fromkeys(r["gpu"] for r in sel))
    gpu = gpus[0]
    idx = Index(sel)
    if len(gpus) > 1:  # anchors come with their own gpu label: fold them into the first GPU
        idx = Index([dict(r, gpu=gpu) for r in sel if r["gpu"] == gpu or r["impl"] == ANCHOR])
    panels = sorted({(c[0], c[1]) for c in idx.configs(gpu)},
                    key=lambda p: (MODES.index(p[0]) if p[0] in MODES else 9, p[1]))
    modes = [m for m in MODES if any(p[0] == m for p in panels)] or \
        sorted({p[0] for p in panels})
    seqs = sorted({p[1] for p in panels})
    bar_impls = [(i, FLASHMLA_PAGE) for i in (PEER, OURS, ANCHOR)
                 if any(k[5] == i and k[6] == FLASHMLA_PAGE for k in idx.v)]
    other_pages = [p for p in idx.pages(gpu, OURS) if p != FLASHMLA_PAGE]
    markers = ["v", "^", "D", "s", "P"]
    nr, nc = len(modes), len(seqs)
    fig, axes = plt.subplots(nr, nc, figsize=(4.6 * nc, 3.2 * nr + 0.9), squeeze=False)
    width = 0.8 / max(1, len(bar_impls))
    for i, mode in enumerate(modes):
        for j, S in enumerate(seqs):
            ax = axes[i][j]
            cfgs = [c for c in idx.configs(gpu) if c[0] == mode and c[1] == S]
            cfgs.sort(key=lambda c: (c[2], c[3]))
            xs = list(range(len(cfgs)))
            for n, (impl, page) in enumerate(bar_impls):
                vals = [idx.get(gpu, c, impl, page, "TFLOPS") for c in cfgs]
                pos = [x - 0.4 + width * (n + 0.5) for x in xs]
                ax.bar(pos, [v or 0 for v in vals], width=width, color=_COLORS.get(impl),
                       label=f"{impl} (page {page})")
                if impl == OURS:
                    for x, c, v in zip(pos, cfgs, vals):
                        sp = _speedup(idx.get(gpu, c, PEER, FLASHMLA_PAGE),
                                      idx.get(gpu, c, OURS, FLASHMLA_PAGE))
                        if v and sp:
                            ax.annotate(f"{sp:.2f}x", (x, v), ha="center", va="bottom",
                                        fontsize=6, rotation=90)
            for n, p in enumerate(other_pages):
                vals = [idx.get(gpu, c, OURS, p, "TFLOPS") for c in cfgs]
                pts = [(x, v) for x, v in zip(xs, vals) if v is not None]
                if pts:
                    ax.scatter([x for x, _ in pts], [v for _, v in pts], s=14, zorder=3,
                               marker=markers[n % len(markers)], color="black",
                               label=f"flashkit page {p}")
            ax.set_xticks(xs, [f"{c[2]}/{c[3]}" for c in cfgs], fontsize=7)
            ax.set_ylim(bottom=0)
            ax.grid(True, axis="y", alpha=0.3)
            ax.set_title(f"{mode}, mean S_k={format_seqlen(S)}", fontsize=9)
            if j == 0:
                ax.set_ylabel("TFLOPS")
            if i == nr - 1:
                ax.set_xlabel("h_q / s_q")
    handles, labels = report.legend_entries(axes)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    if title is None:
        dates = sorted({r["date"] for r in sel if r.get("date") and r["impl"] != ANCHOR})
        commits = sorted({r["commit"] for r in sel if r.get("commit") and r["impl"] != ANCHOR})
        title = (f"MLA decode (B=128, d=576, d_v=512, h_kv=1, causal, bf16) — {gpu} — "
                 f"{', '.join(dates)} — commit {', '.join(commits)}; label: speed-up over "
                 f"flashmla")
    fig.suptitle(title, x=0.01, ha="left", fontsize=9)
    height = 3.2 * nr + 0.9
    fig.tight_layout(rect=(0, 0.45 / height, 1, 1 - 0.4 / height))
    return report.save_figure(fig, path)
