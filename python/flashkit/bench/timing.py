"""GPU timing: median of many CUDA-event-timed repeats after warm-up.

Uses ``triton.testing.do_bench(..., return_mode="median")`` when triton is importable
(it flushes L2 between repeats and times each repeat with its own pair of CUDA events);
otherwise an equivalent loop of our own.  torch is imported lazily.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class TimingOptions:
    warmup_ms: float = 25.0   # time spent warming up before measuring
    rep_ms: float = 200.0     # time budget for the measured repeats
    min_reps: int = 10        # ... but at least this many
    max_reps: int = 1000      # ... and at most this many (own loop only)


DEFAULT = TimingOptions()
QUICK = TimingOptions(warmup_ms=10.0, rep_ms=50.0, min_reps=5)

_L2_FLUSH_BYTES = 256 * 1024 * 1024


def timer_name() -> str:
    try:
        import triton.testing  # noqa: F401
        return "triton.testing.do_bench(median)"
    except Exception:
        return "cuda-events(median)"


def bench_median_ms(fn: Callable[[], object], opts: TimingOptions = DEFAULT) -> float:
    """Median time of one call of ``fn`` in milliseconds.

    ``fn`` must already have been called once (compiled / autotuned / checked).
    """
    try:
        from triton.testing import do_bench
    except Exception:
        do_bench = None
    if do_bench is not None:
        try:
            ms = do_bench(fn, warmup=opts.warmup_ms, rep=opts.rep_ms, return_mode="median")
            return float(ms)
        except TypeError:
            pass  # an old triton without return_mode: use our own loop
    return _event_loop_median_ms(fn, opts)


def _event_loop_median_ms(fn: Callable[[], object], opts: TimingOptions) -> float:
    import torch

    cache = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    # Estimate one call's time.
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    est_ms = max(start.elapsed_time(end) / 5, 1e-3)

    n_warmup = max(1, int(opts.warmup_ms / est_ms))
    n_rep = min(opts.max_reps, max(opts.min_reps, int(opts.rep_ms / est_ms)))

    for _ in range(n_warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        # Flush L2 so every repeat starts cold, as do_bench does; the flush is
        # enqueued before the start event, so it is not timed, and it keeps the GPU
        # busy while the host launches fn (launch overhead is hidden, not timed).
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return float(statistics.median(times))


# ---------------------------------------------------------------------------------------
# decode: rotating input sets, back-to-back calls


@dataclass(frozen=True)
class RotatingOptions:
    warmup_ms: float = 10.0   # GPU time spent warming up
    rep_ms: float = 100.0     # GPU time budget for the timed samples
    min_samples: int = 10
    max_samples: int = 400


DECODE_DEFAULT = RotatingOptions()
DECODE_QUICK = RotatingOptions(warmup_ms=5.0, rep_ms=40.0, min_samples=8)


def with_overrides(opts, warmup_ms: Optional[float] = None, rep_ms: Optional[float] = None):
    """opts (TimingOptions or RotatingOptions) with warmup_ms / rep_ms replaced where given."""
    return dataclasses.replace(
        opts, warmup_ms=opts.warmup_ms if warmup_ms is None else warmup_ms,
        rep_ms=opts.rep_ms if rep_ms is None else rep_ms)

_GPU_HZ_FOR_SLEEP = 2.0e9   # cycles per second assumed by torch.cuda._sleep (a lower clock
                            # only makes the sleep longer, which is harmless)


def rotating_median_ms(fns, opts: RotatingOptions = DECODE_DEFAULT) -> tuple[float, int]:
    """(median ms per call, number of samples) of calling ``fns`` (one callable per input
    set) back to back.

    One sample = one pass over all input sets, fn_0() ... fn_{R-1}(), between two CUDA events.
    The sets rotate so that, when one set's data could sit in L2, the others evict it (the
    caller sizes R so the R sets together are several times L2). Before each sample's start
    event the stream gets a sleep kernel longer than the host needs to enqueue the pass, so
    the pass runs back to back on the GPU: host launch overhead is not timed, the kernels'
    own gaps (and any merge kernels) are. ms per call = sample time / R; median of samples.
    Every fn must already have been called once (compiled, planned, checked).
    """
    import time

    import torch

    fns = list(fns)
    torch.cuda.synchronize()
    # host time to enqueue one pass, and a first GPU estimate
    t0 = time.perf_counter()
    for f in fns:
        f()
    host_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sleep_cycles = int(max(2.0 * host_s, 50e-6) * _GPU_HZ_FOR_SLEEP)
    torch.cuda._sleep(sleep_cycles)
    start.record()
    for f in fns:
        f()
    end.record()
    torch.cuda.synchronize()
    pass_ms = max(start.elapsed_time(end), 1e-3)

    n_warm = max(1, int(opts.warmup_ms / pass_ms))
    n = min(opts.max_samples, max(opts.min_samples, int(opts.rep_ms / pass_ms)))
    # each sample also waits for its sleep: bound the wall time of short, host-heavy passes
    sleep_ms = sleep_cycles / _GPU_HZ_FOR_SLEEP * 1e3
    n = min(n, max(opts.min_samples, int(4 * opts.rep_ms / (sleep_ms + pass_ms))))
    for _ in range(n_warm):
        for f in fns:
            f()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(n)]
    t0 = time.perf_counter()
    for s, e in events:
        torch.cuda._sleep(sleep_cycles)
        s.record()
        for f in fns:
            f()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) / len(fns) for s, e in events)
    return float(statistics.median(times)), n
