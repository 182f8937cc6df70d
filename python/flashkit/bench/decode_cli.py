"""``python -m flashkit.bench --op decode``: the paged-decode sweep (see docs/benchmarking.md).

No torch / flashkit import at module level: ``--help`` and ``--dry-run`` work anywhere.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import decode_impls, decode_sweeps
from .cli import add_output_args, check_timing_args, no_gpu_exit, resolve_impls
from .cli import split_list as _split
from .sweeps import parse_seqlen

_EPILOG = """\
default subset (SPEC §4 decode sweep, see docs/benchmarking.md):
  (a) page 16, s_q 1: every B x H_q/H_kv x S_k in {1k,4k,8k,16k,32k,64k} whose K+V fits
      --kv-budget-gb (the others are listed as skipped)
  (b) page sizes 1/16/64/256 at B=1 32/8 64k, B=16 32/8 32k, B=64 32/8 8k, B=128 32/32 4k
  (c) s_q 1/2/4 at B=1 32/8 64k, B=64 32/8 8k, B=16 64/8 16k, B=128 32/32 4k
  (d) B=1 at 64k and B=64 at 8k for each ratio (the long-context check)
any of --batch/--ratios/--seqlens/--page-sizes/--sq: their product instead (missing ones:
all B, all ratios, the main grid's S_k, page 16, s_q 1); --full: the whole SPEC product.

exit status: 0 ok; 1 measured but something is wrong (an output mismatch, flashkit
unavailable, CUDA context broken, nothing measured); 2 no GPU / torch, bad arguments.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flashkit.bench --op decode",
        description="Paged-decode bandwidth (GB/s) of FlashKit side by side with FlashInfer, "
                    "PyTorch SDPA (cuDNN, flash) and a plain streaming read of the same bytes, "
                    "on this GPU; SPEC §4 decode sweep. Writes <out-dir>/decode-<gpu>-<date>"
                    "[-tag].csv (+ .png, .notes.txt).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=("decode",), default="decode", help=argparse.SUPPRESS)
    p.add_argument("--impls", nargs="+", action="extend", metavar="IMPL",
                   help=f"any of {', '.join(decode_impls.ALL_IMPLS)} (default: {', '.join(decode_impls.DEFAULT_IMPLS)})")
    p.add_argument("--batch", nargs="+", action="extend", metavar="B", help="batch sizes")
    p.add_argument("--ratios", nargs="+", action="extend", metavar="HQ/HKV",
                   help="head ratios, e.g. 32/8 64/8 32/32")
    p.add_argument("--seqlens", nargs="+", action="extend", metavar="S_K",
                   help="cached lengths, e.g. 1k 8k 65536")
    p.add_argument("--page-sizes", nargs="+", action="extend", metavar="P",
                   help="page sizes (1..256)")
    p.add_argument("--sq", nargs="+", action="extend", metavar="S_Q",
                   help="query tokens per sequence (1..16)")
    p.add_argument("--full", action="store_true",
                   help="the whole SPEC product (hours; filters still apply)")
    p.add_argument("--quick", action="store_true",
                   help="a few shapes covering every bar once, shorter timing (~1 min)")
    p.add_argument("--kv-budget-gb", type=float, default=decode_sweeps.DEFAULT_KV_BUDGET_GB,
                   help="skip shapes whose K+V exceed this many GB (default %(default)g)")
    p.add_argument("--flashinfer-path", metavar="DIR",
                   help="folder with libfi_{decode,fa2,fa3}.so (default: $FLASHKIT_FLASHINFER_PATH, "
                        "./.carry/flashinfer)")
    add_output_args(p)
    p.add_argument("--rtol", type=float, default=2e-2,
                   help="max relative L2 error vs the fp32 reference (default 2e-2)")
    p.add_argument("--atol", type=float, default=1e-2,
                   help="max absolute error vs the fp32 reference (default 1e-2)")
    p.add_argument("--l2-rotate", type=float, default=4.0,
                   help="input sets rotate over at least this many times the L2 size (default 4)")
    p.add_argument("--warmup-ms", type=float,
                   help="GPU warm-up per measurement (default 10, --quick 5)")
    p.add_argument("--rep-ms", type=float,
                   help="GPU time of the timed samples per measurement (default 100, --quick 40)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the shapes and exit (no GPU needed)")
    return p


def resolve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    names = resolve_impls(args.impls, decode_impls.ALL_IMPLS, decode_impls.DEFAULT_IMPLS, parser)
    try:
        batches = decode_sweeps.parse_positive_ints(_split(args.batch), "--batch") or None
        ratios = [decode_sweeps.parse_ratio(r) for r in _split(args.ratios)] or None
        seqlens = [parse_seqlen(s) for s in _split(args.seqlens)] or None
        pages = decode_sweeps.parse_positive_ints(_split(args.page_sizes), "--page-sizes") or None
        sqs = decode_sweeps.parse_positive_ints(_split(args.sq), "--sq") or None
    except ValueError as e:
        parser.error(str(e))
    if pages and any(p > 256 for p in pages):
        parser.error("--page-sizes: at most 256")
    if sqs and any(s > 16 for s in sqs):
        parser.error("--sq: at most 16")
    if args.kv_budget_gb <= 0 or args.rtol <= 0 or args.atol <= 0 or args.l2_rotate <= 0:
        parser.error("--kv-budget-gb, --rtol, --atol and --l2-rotate must be positive")
    check_timing_args(args, parser)
    sel = decode_sweeps.build_selection(batches=batches, ratios=ratios, seqlens=seqlens,
                                        page_sizes=pages, sqs=sqs, quick=args.quick,
                                        full=args.full, kv_budget_gb=args.kv_budget_gb)
    if not sel.shapes:
        parser.error("no shape is left (all filtered out or over --kv-budget-gb)")
    return {"impls": names, "selection": sel}


def dry_run(sel, names: Sequence[str], out=None) -> None:
    out = out or sys.stdout
    n_paged = sum(1 for n in names if n in decode_impls.PAGED_IMPLS)
    n_contig = len(names) - n_paged
    n = decode_sweeps.count_measurements(sel.shapes, n_paged, n_contig)
    secs = decode_sweeps.rough_seconds(sel.shapes, n_paged, n_contig)
    print(f"decode sweep ({sel.mode}): {len(sel.shapes)} shapes, impls {', '.join(names)}: "
          f"{n} measurements (x2 rows: GB/s and us); roughly {secs / 60:.1f} min of GPU time",
          file=out)
    for s in sel.shapes:
        print(f"  {s.label()}  pages {','.join(map(str, s.page_sizes)):<12} "
              f"KV {s.kv_bytes / 1e9:7.3f} GB  bytes/call {s.bytes / 1e6:10.1f} MB  "
              f"[{','.join(s.tags)}]", file=out)
    for s, reason in sel.skipped:
        print(f"  skipped {s.label()}  pages {','.join(map(str, s.page_sizes))}: {reason}",
              file=out)


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    sel = resolve(args, parser)
    if args.dry_run:
        dry_run(sel["selection"], sel["impls"])
        return 0
    no_gpu = no_gpu_exit()
    if no_gpu is not None:
        return no_gpu
    from . import decode_runner  # imports torch

    s = sel["selection"]
    opts = decode_runner.DecodeOptions(
        shapes=s.shapes, impls=sel["impls"], out_dir=args.out_dir, tag=args.tag,
        plot=not args.no_plot, quick=args.quick, rtol=args.rtol, atol=args.atol,
        l2_rotate=args.l2_rotate, flashinfer_path=args.flashinfer_path, skipped=s.skipped,
        warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
        argv=list(argv))
    return decode_runner.run(opts)
