"""Results files (SPEC §4 CSV schema), tables with ratios, and plots.

No torch here: the ``plot`` command runs on a CPU-only machine. matplotlib is optional.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import math
import os
import re
import subprocess
from collections import OrderedDict
from pathlib import Path
from typing import IO, Iterable, Optional, Sequence

from .sweeps import MODES, classify_sweep, format_seqlen, geomean

CSV_COLUMNS = ("op", "impl", "dtype", "D", "Dv", "B", "H_q", "H_kv", "S_q", "S_k",
               "causal", "mode", "page_size", "value", "unit", "gpu", "date", "commit")
_INT_COLUMNS = ("D", "Dv", "B", "H_q", "H_kv", "S_q", "S_k")

# Column order in tables and legend order in plots; others follow alphabetically.
IMPL_ORDER = ("flashkit", "flashkit_deterministic", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex")
# Ratio columns: flashkit / peer.
RATIO_PEERS = ("sdpa_flash", "sdpa_cudnn")
OURS = "flashkit"
# --window rows (impl flashkit_window<LEFT>): a column of their own, and the ratio
# flashkit_window<LEFT> / flashkit (a causal window against full causal, both FlashKit).
WINDOW_PREFIX = "flashkit_window"


def is_window_impl(name: str) -> bool:
    return name.startswith(WINDOW_PREFIX) and name[len(WINDOW_PREFIX):].isdigit()

# ---------------------------------------------------------------------------------------
# metadata


def gpu_slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'; 'NVIDIA H200' -> 'h200'."""
    s = gpu_name.lower()
    s = re.sub(r"\bnvidia\b", "", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s or "gpu"


def today() -> str:
    return _dt.date.today().isoformat()


def git_commit(env: Optional[dict] = None) -> str:
    """$FLASHKIT_COMMIT when set (a copy of the bench run from inside another checkout, e.g. a
    carry folder on the GPU machine, would otherwise report that checkout's HEAD), else
    `git rev-parse --short HEAD` of this checkout, else 'unknown'."""
    env = os.environ if env is None else env
    if env.get("FLASHKIT_COMMIT"):
        return env["FLASHKIT_COMMIT"]
    here = Path(__file__).resolve().parent
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def _safe_tag(tag: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", tag).strip("-")


def unique_path(out_dir, stem: str) -> Path:
    """<out_dir>/<stem>.csv, or <stem>-2.csv, -3, ... : never an existing file."""
    out_dir = Path(out_dir)
    path = out_dir / f"{stem}.csv"
    n = 2
    while path.exists():
        path = out_dir / f"{stem}-{n}.csv"
        n += 1
    return path


def results_path(out_dir, gpu_name: str, date: str, tag: Optional[str] = None,
                 op: str = "prefill") -> Path:
    """<out_dir>/<op>-<gpu-slug>-<date>[-tag].csv; never an existing file (adds -2, -3, ...)."""
    stem = f"{op}-{gpu_slug(gpu_name)}-{date}"
    if tag and _safe_tag(tag):
        stem += f"-{_safe_tag(tag)}"
    return unique_path(out_dir, stem)


# ---------------------------------------------------------------------------------------
# rows


def make_row(*, impl: str, dtype: str, D: int, B: int, H_q: int, H_kv: int, S_q: int,
             S_k: int, causal: bool, mode: str, value: float, gpu: str, date: str,
             commit: str, Dv: Optional[int] = None, op: str = "prefill",
             unit: str = "TFLOPS", page_size: Optional[int] = None) -> dict:
    return {"op": op, "impl": impl, "dtype": dtype, "D": int(D),
            "Dv": int(D if Dv is None else Dv), "B": int(B), "H_q": int(H_q),
            "H_kv": int(H_kv), "S_q": int(S_q), "S_k": int(S_k), "causal": bool(causal),
            "mode": mode, "page_size": page_size, "value": float(value), "unit": unit,
            "gpu": gpu, "date": date, "commit": commit}


def _fmt_cell(col: str, v, unit: Optional[str] = None) -> str:
    if v is None:
        return ""
    if col == "causal":
        return "True" if v else "False"
    if col == "value":
        return f"{v:.6f}" if unit == "ratio" else f"{v:.2f}"  # ratios are fractions
    return str(v)


def _parse_bool(s: str) -> bool:
    t = str(s).strip().lower()
    if t in ("true", "1", "yes", "y", "t"):
        return True
    if t in ("false", "0", "no", "n", "f", ""):
        return False
    raise ValueError(f"not a boolean: {s!r}")


class CsvWriter:
    """Writes rows as they are measured (flushed), so a killed run keeps what it had."""

    def __init__(self, path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] = open(self.path, "w", newline="")
        self._w = csv.writer(self._f)
        self._w.writerow(CSV_COLUMNS)
        self._f.flush()

    def write(self, row: dict) -> None:
        self._w.writerow([_fmt_cell(c, row.get(c), row.get("unit")) for c in CSV_COLUMNS])
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_csv(path, rows: Iterable[dict]) -> Path:
    with CsvWriter(path) as w:
        for r in rows:
            w.write(r)
    return Path(path)


def _normalize(raw: dict) -> dict:
    row = dict(raw)
    for c in _INT_COLUMNS:
        row[c] = int(row[c]) if str(row.get(c, "")).strip() != "" else None
    row["causal"] = _parse_bool(row.get("causal", ""))
    row["value"] = float(row["value"])
    ps = str(row.get("page_size", "") or "").strip()
    row["page_size"] = int(ps) if ps else None
    return row


ANCHOR_COLUMNS = ("impl", "D", "S", "B", "H", "causal", "value", "unit")
_ANCHOR_IMPLS = {"fa2": "sdpa_flash", "cudnn": "sdpa_cudnn", "efficient": "sdpa_efficient"}


def _from_anchor(raw: dict, label: str, date: str) -> Optional[dict]:
    """A row of shared/anchors/*-sdpa-*.csv (impl,D,S,B,H,causal,value,unit with unit =
    mode) in our schema; None for rows that are not prefill (copy, gemm, decode-*)."""
    impl = _ANCHOR_IMPLS.get(raw.get("impl", ""))
    mode = raw.get("unit", "")
    if impl is None or mode not in MODES:
        return None
    D, S, B, H = (int(raw[c]) for c in ("D", "S", "B", "H"))
    return make_row(impl=impl, dtype="bf16", D=D, B=B, H_q=H, H_kv=H, S_q=S, S_k=S,
                    causal=_parse_bool(raw["causal"]), mode=mode, value=float(raw["value"]),
                    gpu=label, date=date, commit="anchor")


def read_csv(path) -> list[dict]:
    """Rows of a results CSV (SPEC schema), typed. Also reads the peer-anchor format
    (shared/anchors/*-sdpa-*.csv), labelled '<GPU> (anchor)'. Non-prefill rows are kept
    in the result but tables and plots only use op == prefill."""
    path = Path(path)
    text = path.read_text()
    reader = csv.DictReader(io.StringIO(text))
    fields = tuple(reader.fieldnames or ())
    if fields == CSV_COLUMNS or set(CSV_COLUMNS) <= set(fields):
        return [_normalize(r) for r in reader]
    if fields == ANCHOR_COLUMNS:
        m = re.search(r"(\d{4}-\d{2}-\d{2})", path.name)
        date = m.group(1) if m else ""
        gpu = path.name.split("-", 1)[0].upper()
        label = f"{gpu} (anchor {date})".replace(" )", ")")
        rows = [_from_anchor(r, label, date) for r in reader]
        return [r for r in rows if r is not None]
    raise ValueError(f"{path}: not a FlashKit results CSV; header {','.join(fields)!r}, "
                     f"expected {','.join(CSV_COLUMNS)!r}")


# ---------------------------------------------------------------------------------------
# tables


def page_of(row: dict) -> int:
    """A row's page size; 0 when it has none (a contiguous cache)."""
    p = row.get("page_size")
    return 0 if p in (None, "") else int(p)


def fmt_value(v: Optional[float], nd: int = 0) -> str:
    """A table cell: '-' for a missing value, else v with nd decimals."""
    return "-" if v is None else f"{v:.{nd}f}"


def safe_ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """a / b; None when either is missing or b <= 0."""
    return None if a is None or b is None or b <= 0 else a / b


def table_lines(header: list, body: list) -> list[str]:
    """A text table: the header, a rule and the body rows, every column right-aligned."""
    widths = [max(len(h), *(len(b[j]) for b in body)) if body else len(h)
              for j, h in enumerate(header)]
    out = ["  ".join(h.rjust(w) for h, w in zip(header, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(b, widths)) for b in body]
    return out


def bar_counts(lines: Sequence[str], gpu: str) -> tuple:
    """(passed, failed, not evaluable) from a report's 'bar checks on <gpu>: ...' line."""
    line = [ln for ln in lines if ln.startswith(f"bar checks on {gpu}:")][0]
    nums = [int(tok) for tok in line.replace(",", " ").split() if tok.isdigit()]
    return tuple(nums[-3:])


def impl_sort_key(name: str):
    if name in IMPL_ORDER:
        return (IMPL_ORDER.index(name), 0, "")
    if is_window_impl(name):  # right after flashkit, by window size
        return (0, int(name[len(WINDOW_PREFIX):]) + 1, "")
    return (len(IMPL_ORDER), 0, name)


def _sweep_of(row: dict) -> str:
    return classify_sweep(row["B"], row["H_q"], row["S_q"], row["D"])


def group_rows(rows: Sequence[dict]):
    """{(gpu, dtype, mode, sweep): {(D, causal, S, B, H_q): {impl: value}}} for prefill
    TFLOPS rows, in a stable order. A later row for the same cell replaces an earlier one."""
    groups: "OrderedDict[tuple, dict]" = OrderedDict()
    for r in rows:
        if r.get("op") != "prefill" or r.get("unit") != "TFLOPS":
            continue
        g = (r["gpu"], r["dtype"], r["mode"], _sweep_of(r))
        key = (r["D"], r["causal"], r["S_q"], r["B"], r["H_q"])
        groups.setdefault(g, {}).setdefault(key, {})[r["impl"]] = r["value"]
    sweep_order = {"fa3": 0, "small": 1, "other": 2}
    ordered = sorted(groups.items(), key=lambda kv: (
        kv[0][0], kv[0][1], MODES.index(kv[0][2]) if kv[0][2] in MODES else 9,
        sweep_order.get(kv[0][3], 9)))
    return OrderedDict((g, dict(sorted(cells.items()))) for g, cells in ordered)


def ratio(cells: dict, peer: str, ours: str = OURS) -> Optional[float]:
    return safe_ratio(cells.get(ours), cells.get(peer))


def format_table(group: tuple, cells: dict, marks: Optional[set] = None) -> str:
    """One sweep's table: rows (D, causal, S), TFLOPS per impl, flashkit/peer ratios and
    their geometric means. marks: {(mode, impl, D, causal, S, B, H_q)} cells to flag with
    '!' (their output did not match the reference)."""
    gpu, dtype, mode, sweep = group
    impls = sorted({i for c in cells.values() for i in c}, key=impl_sort_key)
    ratio_cols = [p for p in RATIO_PEERS if OURS in impls and p in impls]
    window_cols = [i for i in impls if is_window_impl(i) and OURS in impls]
    header = (["D", "causal", "S", "B", "H"] + impls + [f"{OURS}/{p}" for p in ratio_cols]
              + [f"{w}/{OURS}" for w in window_cols])
    body = []
    ratios: dict = {p: [] for p in ratio_cols}
    wratios: dict = {w: [] for w in window_cols}
    for (D, causal, S, B, H), c in cells.items():
        line = [str(D), "yes" if causal else "no", format_seqlen(S), str(B), str(H)]
        for i in impls:
            v = c.get(i)
            cell = "-" if v is None else f"{v:.1f}"
            if marks and (mode, i, D, causal, S, B, H) in marks:
                cell += "!"
            line.append(cell)
        for p in ratio_cols:
            x = ratio(c, p)
            if x is not None:
                ratios[p].append(x)
            line.append("-" if x is None else f"{x:.2f}x")
        for w in window_cols:
            x = safe_ratio(c.get(w), c.get(OURS))
            if x is not None:
                wratios[w].append(x)
            line.append("-" if x is None else f"{x:.2f}x")
        body.append(line)
    if ratio_cols or window_cols:
        gm = ["geomean", "", "", "", ""] + [""] * len(impls)
        for col, vals in [(p, ratios[p]) for p in ratio_cols] + \
                [(w, wratios[w]) for w in window_cols]:
            g = geomean(vals)
            gm.append("-" if math.isnan(g) else f"{g:.2f}x")
        body.append(gm)
    out = [f"== prefill {sweep} | {mode} | {dtype} | TFLOPS | {gpu} =="]
    out += table_lines(header, body)
    if marks and any(m[0] == mode and m[2:] in cells for m in marks):
        out.append("  ! = output did not match the SDPA reference (see warnings)")
    if window_cols:
        out.append(f"  {', '.join(window_cols)}: flashkit with a causal sliding window (left "
                   "bound in the name), TFLOPS of the visible (query, key) pairs only; "
                   f"<window>/{OURS} compares it with full causal")
    return "\n".join(out)


def format_tables(rows: Sequence[dict], marks: Optional[set] = None) -> str:
    groups = group_rows(rows)
    if not groups:
        return "(no prefill TFLOPS rows)"
    return "\n\n".join(format_table(g, c, marks) for g, c in groups.items())


# ---------------------------------------------------------------------------------------
# plots

MATPLOTLIB_MISSING = ("matplotlib is not installed: no plot written (pip install matplotlib, "
                      "or re-plot later with `python -m flashkit.bench plot <csv>`)")

_STYLE = {  # impl -> (color, linewidth, marker)
    "flashkit": ("tab:red", 2.4, "o"),
    "flashkit_deterministic": ("tab:orange", 1.8, "o"),
    "sdpa_flash": ("tab:blue", 1.4, "s"),
    "sdpa_cudnn": ("tab:green", 1.4, "^"),
    "sdpa_efficient": ("tab:gray", 1.2, "v"),
    "flex": ("tab:purple", 1.2, "D"),
}


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
        return True
    except Exception:
        return False


def legend_entries(axes) -> tuple[list, list]:
    """(handles, labels) of every panel, each label once, in the order they first appear."""
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def save_figure(fig, path) -> Path:
    """Writes fig to path as a PNG (110 dpi, parent folders made), closes it; returns path."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_groups(rows: Sequence[dict]):
    """{(gpu, dtype): rows} — one figure per GPU (and dtype)."""
    out: "OrderedDict[tuple, list]" = OrderedDict()
    for r in rows:
        if r.get("op") == "prefill" and r.get("unit") == "TFLOPS":
            out.setdefault((r["gpu"], r["dtype"]), []).append(r)
    return out


def _group_of(r) -> int:
    """H_q / H_kv of a row (1 where H_kv is missing)."""
    try:
        return max(1, int(r["H_q"]) // int(r["H_kv"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return 1


def plot_rows(rows: Sequence[dict], path, title: Optional[str] = None) -> Optional[Path]:
    """A grid of TFLOPS-vs-S panels: one row of panels per (sweep, D), one column per
    (mode, causal); one line per impl. Returns the path, or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullLocator
    except Exception:
        return None
    rows = [r for r in rows if r.get("op") == "prefill" and r.get("unit") == "TFLOPS"]
    if not rows:
        return None
    sweep_order = {"fa3": 0, "small": 1, "other": 2}
    # one panel row per (sweep, D, GQA group size): GQA rows do not share MHA's lines
    panel_rows = sorted({(_sweep_of(r), r["D"], _group_of(r)) for r in rows},
                        key=lambda x: (sweep_order.get(x[0], 9), x[1], x[2]))
    panel_cols = sorted({(r["mode"], r["causal"]) for r in rows},
                        key=lambda x: (MODES.index(x[0]) if x[0] in MODES else 9, x[1]))
    impls = sorted({r["impl"] for r in rows}, key=impl_sort_key)
    nr, nc = len(panel_rows), len(panel_cols)
    fig, axes = plt.subplots(nr, nc, figsize=(4.2 * nc, 3.0 * nr + 0.8), squeeze=False)
    for i, (sweep, D, group) in enumerate(panel_rows):
        for j, (mode, causal) in enumerate(panel_cols):
            ax = axes[i][j]
            sel = [r for r in rows if _sweep_of(r) == sweep and r["D"] == D and _group_of(r) == group
                   and r["mode"] == mode and r["causal"] == causal]
            if not sel:  # e.g. GQA rows measured in one mode only
                ax.axis("off")
                continue
            xs_all = sorted({r["S_q"] for r in sel})
            for impl in impls:
                pts = {}
                for r in sel:
                    if r["impl"] == impl:
                        pts[r["S_q"]] = r["value"]  # last one wins
                if not pts:
                    continue
                xs = sorted(pts)
                color, lw, marker = _STYLE.get(impl) or (
                    ("tab:orange", 1.8, "o") if is_window_impl(impl) else (None, 1.2, "x"))
                ax.plot(xs, [pts[x] for x in xs], label=impl, color=color, linewidth=lw,
                        marker=marker, markersize=4)
            ax.set_xscale("log", base=2)
            if xs_all:
                ax.xaxis.set_major_locator(FixedLocator(xs_all))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.set_xticks(xs_all, [format_seqlen(x) for x in xs_all])
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            hd = sel[0] if sel else None
            bh = f"B={hd['B']} H={hd['H_q']}" if hd and sweep != "fa3" else \
                (f"16k tok, H={hd['H_q']}" if hd else "")
            gqa = f" GQA {group}" if group > 1 else ""
            ax.set_title(f"{sweep} D={D}{gqa} {'causal' if causal else 'non-causal'} {mode}\n{bh}",
                         fontsize=9)
            if j == 0:
                ax.set_ylabel("TFLOPS")
            if i == nr - 1:
                ax.set_xlabel("S (seqlen)")
    handles, labels = legend_entries(axes)
    order = sorted(range(len(labels)), key=lambda k: impl_sort_key(labels[k]))
    fig.legend([handles[k] for k in order], [labels[k] for k in order],
               loc="upper right", ncol=len(labels), fontsize=9)
    if title is None:
        gpus = sorted({r["gpu"] for r in rows})
        dates = sorted({r["date"] for r in rows if r.get("date")})
        dtypes = sorted({r["dtype"] for r in rows})
        commits = sorted({r["commit"] for r in rows if r.get("commit")})
        title = (f"FlashKit prefill — {', '.join(gpus)} — {', '.join(dtypes)} — "
                 f"{', '.join(dates)} — commit {', '.join(commits)}")
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / (3.0 * nr + 0.8)))
    return save_figure(fig, path)
