"""``python -m flashkit.bench --op mla``: the MLA decode sweep (see docs/benchmarking.md).

No torch / flashkit import at module level: ``--help`` and ``--dry-run`` work anywhere.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import mla_impls, mla_sweeps
from .cli import add_output_args, check_timing_args, no_gpu_exit, resolve_impls
from .cli import split_list as _split
from .sweeps import format_seqlen, parse_seqlen

_EPILOG = f"""\
default: FlashMLA's own test matrix (SPEC §4): B=128, s_q 1/2, mean S_k 4k/8k/16k,
h_q 16/32/64/128, h_kv=1, d=576, d_v=512, causal, fixed and varlen lengths: 48 configs;
flashmla at page 64 (its only block size), flashkit at pages 16/32/64/128, on the same cache.
--quick: S_k 8k, h_q 16 and 128 (s_q 1/2, fixed/varlen: 8 configs), flashkit pages 16 and 64,
shorter timing. Timing: >= 2 input sets called in turn between CUDA events (the decode bench's
timer; a call never re-reads the previous call's cache from L2), metadata made untimed.
Any of --batch/--sq/--seqlens/--heads/--modes/--page-sizes replaces that list.

flashkit rows need `import flashkit.mla`; without it the run measures FlashMLA alone (and exits
1, as the other sweeps do when flashkit is missing). FlashMLA: --flashmla-path DIR (a folder
with flash_mla/ and flash_mla_cuda*.so, see bench/peers/flashmla), else
${mla_impls.ENV_VAR}, else ./.carry/{mla_impls.CARRY_NAME}.

exit status: 0 ok; 1 measured but something is wrong (a correctness warning, an implementation
unavailable, CUDA context broken, nothing measured); 2 no GPU / torch, bad arguments.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flashkit.bench --op mla",
        description="MLA decode (DeepSeek latent attention, FlashMLA's API) of flashkit.mla side "
                    "by side with FlashMLA on this GPU: TFLOPS, GB/s and us per configuration; "
                    "SPEC §4 MLA sweep. Writes <out-dir>/mla-<gpu>-<date>[-tag].csv "
                    "(+ .png, .notes.txt).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=("mla",), default="mla", help=argparse.SUPPRESS)
    p.add_argument("--impls", nargs="+", action="extend", metavar="IMPL",
                   help=f"any of {', '.join(mla_impls.ALL_IMPLS)} (default: "
                        f"{' '.join(mla_impls.DEFAULT_IMPLS)})")
    p.add_argument("--batch", nargs="+", action="extend", metavar="B", help="batch sizes (128)")
    p.add_argument("--sq", nargs="+", action="extend", metavar="S_Q",
                   help="query tokens per sequence (1 2)")
    p.add_argument("--seqlens", nargs="+", action="extend", metavar="S_K",
                   help="mean cache lengths (4k 8k 16k)")
    p.add_argument("--heads", nargs="+", action="extend", metavar="H_Q",
                   help="query heads (16 32 64 128); h_kv is 1")
    p.add_argument("--modes", nargs="+", action="extend", metavar="MODE",
                   help="fixed, varlen (both)")
    p.add_argument("--page-sizes", nargs="+", action="extend", metavar="P",
                   help="flashkit's page sizes (16 32 64 128); flashmla always runs page 64")
    p.add_argument("--quick", action="store_true",
                   help="8 configs (S_k 8k, h_q 16/128), flashkit pages 16/64, short timing")
    p.add_argument("--flashmla-path", metavar="DIR",
                   help=f"folder with flash_mla/ + flash_mla_cuda*.so (default: "
                        f"${mla_impls.ENV_VAR}, ./.carry/{mla_impls.CARRY_NAME})")
    p.add_argument("--timer", choices=("events", "do_bench"), default="events",
                   help="events: CUDA events around each call, launch overhead hidden (the "
                        "decode bench's timer, default); do_bench: triton.testing.do_bench "
                        "median with an L2 flush before each call (FlashMLA's test times with "
                        "do_bench, mean)")
    p.add_argument("--sets", type=int, default=2,
                   help="events timer: at least this many input sets called in turn, so a call "
                        "never re-reads the previous call's cache from L2 (default 2; 1 = the "
                        "same cache back to back; on an H200 the two differed by 0.5%% median)")
    p.add_argument("--cos-tol", type=float, default=1e-5,
                   help="max cos_diff (FlashMLA's measure) vs the fp32 reference and flashkit vs "
                        "flashmla (default 1e-5, FlashMLA's test)")
    p.add_argument("--seed", type=int, default=0, help="base seed of lengths and data")
    p.add_argument("--block-table", choices=("sequential", "shuffled"), default="sequential",
                   help="sequential: sequence b owns pages b*n .. b*n+n-1 (FlashMLA's test, "
                        "default); shuffled: the pages moved to random ids (a fragmented pool)")
    p.add_argument("--warmup-ms", type=float, help="GPU warm-up per measurement")
    p.add_argument("--rep-ms", type=float, help="GPU time of the timed samples per measurement")
    add_output_args(p)
    p.add_argument("--dry-run", action="store_true",
                   help="list the configurations and exit (no GPU needed)")
    return p


def resolve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    names = resolve_impls(args.impls, mla_impls.ALL_IMPLS, mla_impls.DEFAULT_IMPLS, parser)
    try:
        batches = mla_sweeps.parse_positive_ints(_split(args.batch), "--batch") or None
        sqs = mla_sweeps.parse_positive_ints(_split(args.sq), "--sq") or None
        seqlens = [parse_seqlen(s) for s in _split(args.seqlens)] or None
        heads = mla_sweeps.parse_positive_ints(_split(args.heads), "--heads") or None
        pages = mla_sweeps.parse_positive_ints(_split(args.page_sizes), "--page-sizes") or None
    except ValueError as e:
        parser.error(str(e))
    modes = _split(args.modes) or None
    for m in modes or ():
        if m not in mla_sweeps.MODES:
            parser.error(f"--modes: unknown mode {m!r} (choose from "
                         f"{', '.join(mla_sweeps.MODES)})")
    if sqs and any(s > 16 for s in sqs):
        parser.error("--sq: at most 16")
    if pages and any(p > 256 for p in pages):
        parser.error("--page-sizes: at most 256")
    if heads and any(h % mla_sweeps.H_KV for h in heads):
        parser.error("--heads: must be a multiple of h_kv")
    if args.cos_tol <= 0:
        parser.error("--cos-tol must be positive")
    if not 1 <= args.sets <= 8:
        parser.error("--sets: 1..8")
    check_timing_args(args, parser)
    sel = mla_sweeps.build_selection(batches=batches, sqs=sqs, seqlens_=seqlens, heads=heads,
                                     modes=modes, flashkit_pages=pages, quick=args.quick)
    if not sel.configs:
        parser.error("no configuration is left")
    return {"impls": names, "selection": sel}


def dry_run(sel, names: Sequence[str], seed: int = 0, out=None) -> None:
    out = out or sys.stdout
    n = mla_sweeps.measurements(sel, names)
    secs = mla_sweeps.rough_seconds(sel, names)
    pages = ", ".join(f"{i} @ {','.join(map(str, sel.flashkit_pages if i in mla_sweeps.FLASHKIT_PAGED_IMPLS else (mla_sweeps.FLASHMLA_PAGE,)))}"
                      for i in names)
    print(f"mla sweep: {len(sel.configs)} configs, {pages}: {n} measurements (x3 rows: "
          f"TFLOPS, GB/s, us); roughly {secs / 60:.1f} min of GPU time", file=out)
    for c in sel.configs:
        lens = mla_sweeps.seqlens(c, seed)
        total = sum(lens)
        pad = mla_sweeps.padded_max(lens)
        print(f"  {c.label()}  Σlen {total:>8} (mean {total / c.B:7.0f}, max {max(lens):>6})  "
              f"cache {mla_sweeps.cache_bytes(c, pad) / 1e9:5.2f} GB  "
              f"GFLOP {mla_sweeps.flops(c, total) / 1e9:8.1f}  MB {mla_sweeps.nbytes(c, total) / 1e6:8.1f}",
              file=out)


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    sel = resolve(args, parser)
    if args.dry_run:
        dry_run(sel["selection"], sel["impls"], args.seed)
        return 0
    no_gpu = no_gpu_exit()
    if no_gpu is not None:
        return no_gpu
    from . import mla_runner  # imports torch

    s = sel["selection"]
    opts = mla_runner.MlaOptions(
        configs=s.configs, impls=sel["impls"], flashkit_pages=s.flashkit_pages,
        out_dir=args.out_dir, tag=args.tag, plot=not args.no_plot, quick=args.quick,
        cos_tol=args.cos_tol, flashmla_path=args.flashmla_path, timer=args.timer,
        seed=args.seed, block_table=args.block_table, min_sets=args.sets, warmup_ms=args.warmup_ms,
        rep_ms=args.rep_ms,
        argv=list(argv))
    return mla_runner.run(opts)


__all__ = ["build_parser", "resolve", "dry_run", "main", "format_seqlen"]
