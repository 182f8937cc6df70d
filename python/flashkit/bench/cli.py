"""Command line of ``python -m flashkit.bench`` (see docs/benchmarking.md).

Nothing here imports torch or flashkit at module level, so ``--help``, ``--dry-run`` and
``plot`` work on a machine without them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Optional, Sequence

from . import impls, report, sweeps

NO_GPU_MESSAGE = "flashkit.bench needs a CUDA GPU and PyTorch; none found"
OPS = ("prefill", "decode", "mla", "kvcache")
KVCACHE_MODULE = "flashkit.bench.kvcache_sim"
EXIT_NO_GPU = 2

_EPILOG = """\
other commands:
  python -m flashkit.bench plot CSV [CSV ...] [--out PNG] [--no-plot]
      print the tables of existing results files (and the peer anchors in
      shared/anchors/*-sdpa-*.csv) and plot them; needs no GPU and no torch.

exit status: 0 ok; 1 measured, but something is wrong (an output did not match the
SDPA reference, flashkit could not be loaded, the CUDA context broke, nothing
measured); 2 no CUDA GPU / no PyTorch, or bad arguments; 130 interrupted.
"""


# ---------------------------------------------------------------------------------------
# shared by the command lines of every op (prefill here, decode_cli, mla_cli)


def split_list(values: Optional[Sequence[str]]) -> list[str]:
    """['a,b', 'c'] -> ['a', 'b', 'c'] (lists may be given with spaces or commas)."""
    out: list[str] = []
    for v in values or ():
        out += [x.strip() for x in str(v).split(",") if x.strip()]
    return out


def add_output_args(p: argparse.ArgumentParser,
                    out_dir_help: str = "default: bench/results") -> None:
    """--out-dir, --tag and --no-plot."""
    p.add_argument("--out-dir", default="bench/results", help=out_dir_help)
    p.add_argument("--tag", help="suffix of the results file name")
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG plot")


def resolve_impls(values, all_impls: Sequence[str], default_impls: Sequence[str],
                  parser: argparse.ArgumentParser) -> list[str]:
    """The --impls list: validated against all_impls, in the given order, no duplicates."""
    names = split_list(values) or list(default_impls)
    for n in names:
        if n not in all_impls:
            parser.error(f"--impls: unknown impl {n!r} (choose from {', '.join(all_impls)})")
    return list(dict.fromkeys(names))


def check_timing_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--warmup-ms >= 0 and --rep-ms > 0 where given."""
    if (args.warmup_ms is not None and args.warmup_ms < 0) or \
            (args.rep_ms is not None and args.rep_ms <= 0):
        parser.error("--warmup-ms must be >= 0 and --rep-ms > 0")


def cuda_problem() -> Optional[str]:
    """None when torch imports and sees a CUDA GPU, else why not."""
    try:
        import torch
    except Exception as e:
        return f"PyTorch is not importable ({type(e).__name__}: {e})"
    try:
        ok = torch.cuda.is_available() and torch.cuda.device_count() > 0
    except Exception as e:
        return f"torch {torch.__version__}: CUDA query failed ({e})"
    if not ok:
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA GPU"
    return None


def no_gpu_exit() -> Optional[int]:
    """None when torch sees a CUDA GPU; else says why on stderr and returns EXIT_NO_GPU."""
    problem = cuda_problem()
    if problem:
        print(f"{NO_GPU_MESSAGE} ({problem})", file=sys.stderr)
        return EXIT_NO_GPU
    return None


# ---------------------------------------------------------------------------------------
# prefill


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flashkit.bench",
        description="Prefill attention TFLOPS of FlashKit side by side with PyTorch SDPA "
                    "backends (and FlexAttention) on this GPU; SPEC §4 sweeps. Writes "
                    "<out-dir>/prefill-<gpu>-<date>[-tag].csv (+ .png, .notes.txt).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=OPS, default="prefill",
                   help="prefill (this sweep, the default); decode: the paged-decode sweep "
                        "(see `--op decode --help`); mla: the MLA decode sweep against FlashMLA "
                        "(see `--op mla --help`); kvcache: the KV-cache manager simulation "
                        "(python -m flashkit.bench.kvcache_sim)")
    p.add_argument("--sweep", choices=(*sweeps.SWEEPS, *sweeps.EXTRA_SWEEPS, "all"), default="all",
                   help="fa3: 16k tokens, hidden 2048, D 64/128/256, S 512..16k; "
                        "small: B=4 H=8 D 64/128, S 256..16k; dims: 16k tokens, H=16, D 96/192, "
                        "S 512..16k (only by name); all = fa3 + small (default)")
    p.add_argument("--mode", nargs="+", action="extend", metavar="MODE",
                   help="fwd, bwd, fwd_bwd (several allowed; default fwd). bwd times the "
                        "backward alone (flashkit: attention_backward from the saved out/lse; "
                        "peers: autograd on a graph built once), fwd_bwd both")
    p.add_argument("--deterministic", action="store_true",
                   help="flashkit's backward in deterministic mode (bitwise reproducible dq; "
                        "default: the fast mode, dq accumulated with atomics)")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--impls", nargs="+", action="extend", metavar="IMPL",
                   help=f"any of {', '.join(impls.ALL_IMPLS)} (default: "
                        f"{', '.join(impls.DEFAULT_IMPLS)}; flex only with --flex)")
    p.add_argument("--flex", action="store_true",
                   help="also measure torch FlexAttention (torch.compile per shape: slow)")
    p.add_argument("--heads-dims", nargs="+", action="extend", metavar="[HxD|D]",
                   help="keep only these head dims, or heads x dim pairs (e.g. 128 16x128)")
    p.add_argument("--seqlens", nargs="+", action="extend", metavar="S",
                   help="run only these lengths (e.g. 1k 4096 16k)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    p.add_argument("--gqa", type=int, default=1, metavar="G",
                   help="grouped-query attention: H_kv = H_q / G on every configuration (the "
                        "SPEC sweeps are MHA, G = 1; e.g. 4 or 8 as in Llama-style models); "
                        "SDPA peers get enable_gqa=True")
    p.add_argument("--window", metavar="LEFT",
                   help="also time flashkit with a causal sliding window of LEFT keys before "
                        "the diagonal (causal=True, window=(LEFT, -1); e.g. 4096 or 4k) on the "
                        "causal configs, as impl flashkit_window<LEFT>, in every --mode "
                        "(bwd: attention_backward with the window): flashkit only (SDPA has "
                        "no window), TFLOPS of the visible (query, key) pairs only; each "
                        "mode's table adds flashkit_window<LEFT>/flashkit")
    p.add_argument("--quick", action="store_true",
                   help="fewer lengths (fa3 1k/4k/16k, small 512/2k/8k) and shorter timing")
    add_output_args(p, "where results go (default: bench/results)")
    p.add_argument("--atol", type=float, default=2e-2,
                   help="max |out - SDPA reference| before a result is flagged (default 2e-2)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the configurations and exit (no GPU needed)")
    return p


def resolve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    """Validated, expanded choices from parsed arguments (no torch)."""
    modes = split_list(args.mode) or ["fwd"]
    for m in modes:
        if m not in sweeps.MODES:
            parser.error(f"--mode: unknown mode {m!r} (choose from {', '.join(sweeps.MODES)})")
    modes = [m for m in sweeps.MODES if m in modes]  # canonical order, no duplicates

    names = resolve_impls(args.impls, impls.ALL_IMPLS, impls.DEFAULT_IMPLS, parser)
    if args.flex and impls.FLEX not in names:
        names.append(impls.FLEX)

    try:
        seqlens = [sweeps.parse_seqlen(s) for s in split_list(args.seqlens)] or None
    except ValueError as e:
        parser.error(f"--seqlens: {e}")
    try:
        heads_dims = [sweeps.parse_heads_dim(s) for s in split_list(args.heads_dims)] or None
    except ValueError as e:
        parser.error(f"--heads-dims: {e}")
    causal = {"both": None, "yes": True, "no": False}[args.causal]
    chosen = sweeps.SWEEPS if args.sweep == "all" else (args.sweep,)
    configs = sweeps.build_configs(chosen, seqlens=seqlens, heads_dims=heads_dims,
                                   causal=causal, quick=args.quick)
    if not configs:
        parser.error("no configuration is left after the filters")
    if args.gqa < 1:
        parser.error("--gqa must be >= 1")
    if args.gqa > 1:
        bad = sorted({c.H_q for c in configs if c.H_q % args.gqa})
        if bad:
            parser.error(f"--gqa {args.gqa}: H_q {', '.join(map(str, bad))} is not a multiple of it")
        configs = [dataclasses.replace(c, H_kv=c.H_q // args.gqa) for c in configs]
    if args.atol <= 0:
        parser.error("--atol must be positive")
    window = None
    if args.window is not None:
        try:
            window = sweeps.parse_window(args.window)
        except ValueError as e:
            parser.error(f"--window: {e}")
        if not any(c.causal for c in configs):
            parser.error("--window: a causal sliding window runs on the causal configs; "
                         "none is selected (--causal no)")
        if impls.FLASHKIT not in names:
            parser.error("--window: the window rows are compared with full causal flashkit; "
                         "keep flashkit in --impls")
    return {"modes": modes, "impls": names, "configs": configs,
            "deterministic": bool(args.deterministic), "window": window}


def run_main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    sel = resolve(args, parser)
    if args.dry_run:
        n = len(sel["configs"]) * len(sel["modes"]) * len(sel["impls"])
        det = ", deterministic backward" if sel["deterministic"] else ""
        window = sel["window"]
        wname = impls.window_impl_name(window) if window is not None else None
        n_win = (sum(1 for c in sel["configs"] if c.causal) * len(sel["modes"])
                 if window is not None else 0)
        extra = f" + {n_win} {wname} {','.join(sel['modes'])}" if n_win else ""
        print(f"{len(sel['configs'])} configs x modes {','.join(sel['modes'])} x impls "
              f"{','.join(sel['impls'])} = {n} measurements{extra} ({args.dtype}{det})")
        for c in sel["configs"]:
            gflop = "  ".join(f"{m} GFLOP {sweeps.flops(c, m) / 1e9:10.1f}" for m in sel["modes"])
            if window is not None and c.causal:
                gflop += "".join(f"  {wname} {m} GFLOP "
                                 f"{sweeps.window_flops(c, window, m) / 1e9:10.1f}"
                                 for m in sel["modes"])
            print(f"  {c.label()}  {gflop}")
        return 0
    no_gpu = no_gpu_exit()
    if no_gpu is not None:
        return no_gpu
    from . import runner  # imports torch
    opts = runner.RunOptions(configs=sel["configs"], modes=sel["modes"], dtype=args.dtype,
                             impls=sel["impls"], out_dir=args.out_dir, tag=args.tag,
                             plot=not args.no_plot, quick=args.quick, atol=args.atol,
                             argv=list(argv), deterministic=sel["deterministic"],
                             window=sel["window"])
    return runner.run(opts)


def build_plot_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flashkit.bench plot",
        description="Print tables of results CSVs (SPEC §4 schema, or the peer anchors "
                    "format) and plot them. No GPU, no torch needed.")
    p.add_argument("csv", nargs="+", help="results files")
    p.add_argument("--out", help="PNG path (default: next to the first CSV, or in the "
                                 "current directory if that is not writable); one file "
                                 "per GPU/dtype, suffixed when there are several")
    p.add_argument("--no-plot", action="store_true", help="tables only")
    p.add_argument("--title", help="figure title")
    return p


def plot_main(argv: Sequence[str]) -> int:
    parser = build_plot_parser()
    args = parser.parse_args(argv)
    rows: list[dict] = []
    from . import mla_report

    logs = [p for p in args.csv if p.endswith(".log")]
    for path in args.csv:
        if path in logs:
            continue
        try:
            rows += report.read_csv(path)
        except (OSError, ValueError, KeyError) as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            return 2
    for path in logs:  # FlashMLA's own test output (e.g. shared/anchors/h200-flashmla-*.log)
        try:
            anchor = mla_report.read_flashmla_log(path)
        except OSError as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            return 2
        if not anchor:
            print(f"error: {path}: no FlashMLA test results in it", file=sys.stderr)
            return 2
        # beside a run on the same kind of GPU (h200-... next to an H200 run): one table
        gpu_prefix = Path(path).name.split("-", 1)[0]
        runs = {r["gpu"] for r in mla_report.mla_rows(rows)}
        same = [g for g in runs if report.gpu_slug(g).startswith(gpu_prefix)]
        if len(same) == 1:
            anchor = mla_report.relabel_gpu(anchor, same[0])
        rows += anchor
    from . import decode_report

    mla_rows = mla_report.mla_rows(rows)
    if mla_rows:
        print(mla_report.format_report(mla_rows))
        if not args.no_plot and report.have_matplotlib():
            base = Path(args.out) if args.out else Path(args.csv[0]).with_suffix(".png")
            mpath = base.with_name(f"{base.stem}-mla{base.suffix}") if \
                len(mla_rows) != len(rows) else base
            try:
                written = mla_report.plot_rows(mla_rows, mpath, title=args.title)
            except OSError:
                if args.out:
                    raise
                written = mla_report.plot_rows(mla_rows, Path.cwd() / mpath.name,
                                               title=args.title)
            if written:
                print(f"plot: {written}")
        rows = [r for r in rows if r.get("op") != "mla_decode"]
        if not rows:
            if args.no_plot or report.have_matplotlib():
                return 0
            print(f"note: {report.MATPLOTLIB_MISSING}")
            return 0

    has_decode = bool(decode_rows := decode_report.decode_rows(rows))
    has_prefill = any(r.get("op") == "prefill" for r in rows)
    if has_prefill or not has_decode:
        print(report.format_tables(rows))
    if has_decode:
        print(decode_report.format_report(decode_rows))
    if args.no_plot:
        return 0
    if not report.have_matplotlib():
        print(f"note: {report.MATPLOTLIB_MISSING}")
        return 0
    base = Path(args.out) if args.out else Path(args.csv[0]).with_suffix(".png")
    if has_decode:
        dpath = base.with_name(f"{base.stem}-decode{base.suffix}") if has_prefill else base
        try:
            written = decode_report.plot_rows(decode_rows, dpath, title=args.title)
        except OSError:
            if args.out:
                raise
            written = decode_report.plot_rows(decode_rows, Path.cwd() / dpath.name,
                                              title=args.title)
        if written:
            print(f"plot: {written}")
    groups = report.plot_groups(rows)
    if not groups:
        if not has_decode:
            print("note: no prefill TFLOPS rows to plot")
        return 0
    for (gpu, dtype), grows in groups.items():
        path = base
        if len(groups) > 1:
            path = base.with_name(f"{base.stem}-{report.gpu_slug(gpu)}-{dtype}{base.suffix}")
        try:
            written = report.plot_rows(grows, path, title=args.title)
        except OSError:
            if args.out:
                raise
            written = report.plot_rows(grows, Path.cwd() / path.name, title=args.title)
        print(f"plot: {written}")
    return 0


def op_of(argv: Sequence[str]) -> str:
    """The --op value in argv ('prefill' when absent); an unknown one is left to the prefill
    parser, which rejects it."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--op", default="prefill")
    ns, _ = pre.parse_known_args(list(argv))
    return ns.op


def strip_op(argv: Sequence[str]) -> list[str]:
    """argv without its --op option ('--op X' or '--op=X')."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--op":
            skip = True
        elif not a.startswith("--op="):
            out.append(a)
    return out


def kvcache_main(argv: Sequence[str]) -> int:
    """--op kvcache: run python -m flashkit.bench.kvcache_sim with the other arguments."""
    import importlib.util
    import runpy

    rest = strip_op(argv)
    try:
        found = importlib.util.find_spec(KVCACHE_MODULE) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        print(f"--op kvcache: {KVCACHE_MODULE} is not in this checkout (the KV-cache manager "
              "simulation is not built yet); nothing to run", file=sys.stderr)
        return 2
    saved = sys.argv
    sys.argv = [KVCACHE_MODULE, *rest]
    try:
        runpy.run_module(KVCACHE_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "plot":
        return plot_main(argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    op = op_of(argv)
    if op == "decode":
        from .decode_cli import main as decode_main
        return decode_main(argv)
    if op == "mla":
        from .mla_cli import main as mla_main
        return mla_main(argv)
    if op == "kvcache":
        return kvcache_main(argv)
    return run_main(argv)
