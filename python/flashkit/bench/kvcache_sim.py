"""``python -m flashkit.bench.kvcache_sim``: a simulated serving run of the KV-cache manager.

CPU only (no torch, no GPU): it drives ``flashkit.KVCacheManager``'s bookkeeping with a
synthetic workload and measures what the manager decides, not kernel speed. Two parts:

- **serving**: continuous batching of requests that all start with one shared system
  prompt, followed by a random user prompt and a random number of decoded tokens.
  Requests are admitted while a block-table row and enough blocks are free; when an
  append finds the pool exhausted, the youngest running request is preempted (freed and
  queued again, recomputed later). Reports the **internal waste** (allocated but unused
  token slots over allocated slots, summed over every step) and the **prefix hit rate**
  (prompt tokens reused from the prefix cache over all prompt tokens).
- **parallel sampling** (n = 4): each prompt is prefilled once, then forked into 4
  samples that decode their own random lengths (prefix caching off, so only fork
  sharing counts). Reports the **memory ratio**: physical blocks in use with sharing
  over the blocks the same sequences would hold without it (summed over every step).

Bars (issue 10): internal waste < 4%; memory ratio <= 50%.

Writes ``<out-dir>/kvcache-sim-<date>.csv`` (SPEC §4 schema: ``op=kvcache_sim``, ``mode``
the metric, ``value`` a fraction, ``unit=ratio``, ``gpu=cpu``; ``B`` = max_batch,
``S_q``/``S_k`` = mean prompt/output tokens of that part, ``page_size`` = block size).
Exit status 0 when both bars hold, 1 otherwise, 2 without the native extension.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import deque
from dataclasses import dataclass
from typing import Optional, Sequence

from . import report

WASTE_BAR = 0.04
MEMORY_RATIO_BAR = 0.50
VOCAB = 32000


@dataclass
class Request:
    prompt: list
    output_len: int
    seq: Optional[int] = None
    generated: int = 0
    admitted_at: int = 0


@dataclass
class Totals:
    """Sums over every step of one part."""
    allocated_slots: int = 0
    filled_slots: int = 0
    used_blocks: int = 0
    logical_blocks: int = 0
    steps: int = 0
    preemptions: int = 0

    def sample(self, stats: dict, block_size: int) -> None:
        self.allocated_slots += stats["used_blocks"] * block_size
        self.filled_slots += stats["filled_slots"]
        self.used_blocks += stats["used_blocks"]
        self.logical_blocks += stats["logical_blocks"]
        self.steps += 1

    @property
    def waste(self) -> float:
        return 1.0 - self.filled_slots / self.allocated_slots if self.allocated_slots else 0.0

    @property
    def memory_ratio(self) -> float:
        return self.used_blocks / self.logical_blocks if self.logical_blocks else 1.0


def _tokens(rng: random.Random, n: int) -> list:
    return [rng.randrange(VOCAB) for _ in range(n)]


def run_serving(args, rng: random.Random):
    """Continuous batching with a shared system prompt. Returns (Totals, stats, requests)."""
    from flashkit.kvcache import KVCacheExhaustedError, KVCacheManager

    B = args.block_size
    m = KVCacheManager(args.num_blocks, B, args.max_batch, args.max_blocks_per_seq)
    system = _tokens(rng, args.system_prompt)
    requests = [Request(system + _tokens(rng, rng.randint(*args.user_prompt)),
                        rng.randint(*args.output)) for _ in range(args.requests)]
    queue = deque(requests)
    running: list = []
    t = Totals()
    step = 0
    while queue or running:
        step += 1
        # Admission: prompts enter while a row and their blocks are there.
        while queue and m.num_free_rows() > 0:
            r = queue[0]
            if m.blocks_needed_for_create(r.prompt) > m.num_available_blocks():
                break
            r.seq, _ = m.create(r.prompt)
            r.generated, r.admitted_at = 0, step
            running.append(queue.popleft())
        # Decode: one token for every request admitted before this step.
        for r in list(running):
            if r.admitted_at == step or r.seq is None:
                continue
            while True:
                try:
                    m.append(r.seq, [rng.randrange(VOCAB)])
                    break
                except KVCacheExhaustedError:
                    victim = max((x for x in running if x.seq is not None),
                                 key=lambda x: x.admitted_at)
                    m.free(victim.seq)
                    victim.seq = None
                    running.remove(victim)
                    queue.appendleft(victim)
                    t.preemptions += 1
                    if victim is r:
                        break
            if r.seq is not None:
                r.generated += 1
        m.take_updates()  # the step boundary: the forward would run here
        t.sample(m.stats(), B)
        for r in list(running):
            if r.generated >= r.output_len:
                m.free(r.seq)
                r.seq = None
                running.remove(r)
    m.check_invariants()
    return t, m.stats(), requests


def run_parallel_sampling(args, rng: random.Random):
    """n samples forked from each prefilled prompt. Returns (Totals, stats, prompts, outputs)."""
    from flashkit.kvcache import KVCacheManager

    B = args.block_size
    n = args.samples
    m = KVCacheManager(args.num_blocks, B, args.max_batch, args.max_blocks_per_seq,
                       prefix_caching=False)
    prompts = [_tokens(rng, rng.randint(*args.sampling_prompt)) for _ in range(args.sampling_requests)]
    outputs = [[rng.randint(*args.output) for _ in range(n)] for _ in prompts]
    queue = deque(range(len(prompts)))
    running: dict = {}  # seq -> (request, tokens left)
    left_in_request: dict = {}  # request -> samples still running
    pending_fork: list = []  # prompts prefilled this step: fork next step

    def worst_case(i):  # blocks request i can ever hold: prompt + per sample a copy + growth
        return -(-len(prompts[i]) // B) + n * (-(-max(outputs[i]) // B) + 1)

    committed = 0  # worst cases of the admitted requests: the pool can never run out
    rows = 0  # block-table rows of the admitted requests (n each)
    t = Totals()
    while queue or running or pending_fork:
        # Fork the prompts prefilled in the previous step into n samples each.
        for seq, i in pending_fork:
            running[seq] = (i, outputs[i][0])
            for s in range(1, n):
                running[m.fork(seq)] = (i, outputs[i][s])
            left_in_request[i] = n
        pending_fork = []
        while (queue and rows + n <= args.max_batch
               and committed + worst_case(queue[0]) <= args.num_blocks):
            i = queue.popleft()
            committed += worst_case(i)
            rows += n
            seq, _ = m.create(prompts[i])
            pending_fork.append((seq, i))
        for seq, (i, left) in list(running.items()):
            m.append(seq, [rng.randrange(VOCAB)])
            running[seq] = (i, left - 1)
        m.take_updates()
        t.sample(m.stats(), B)
        for seq, (i, left) in list(running.items()):
            if left <= 0:
                m.free(seq)
                del running[seq]
                left_in_request[i] -= 1
                if left_in_request[i] == 0:
                    committed -= worst_case(i)
                    rows -= n
    m.check_invariants()
    return t, m.stats(), prompts, outputs


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def _range(s: str):
    lo, _, hi = s.partition(":")
    lo, hi = int(lo), int(hi or lo)
    if lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected LO:HI with 0 <= LO <= HI, got {s}")
    return lo, hi


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flashkit.bench.kvcache_sim",
        description="Simulated serving run of flashkit.KVCacheManager (CPU only): internal "
                    "waste, prefix hit rate, parallel-sampling memory ratio.")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-blocks", type=int, default=8192, help="pool size (default 8192)")
    p.add_argument("--max-batch", type=int, default=128)
    p.add_argument("--max-blocks-per-seq", type=int, default=None,
                   help="block-table columns (default: enough for the longest sequence)")
    p.add_argument("--requests", type=int, default=600, help="serving part: requests")
    p.add_argument("--system-prompt", type=int, default=300, help="shared system prompt tokens")
    p.add_argument("--user-prompt", type=_range, default=(16, 1024), metavar="LO:HI",
                   help="user prompt tokens, uniform (default 16:1024)")
    p.add_argument("--output", type=_range, default=(16, 512), metavar="LO:HI",
                   help="decoded tokens per sequence, uniform (default 16:512)")
    p.add_argument("--samples", type=int, default=4, help="parallel sampling: n (default 4)")
    p.add_argument("--sampling-requests", type=int, default=150)
    p.add_argument("--sampling-prompt", type=_range, default=(256, 2048), metavar="LO:HI",
                   help="parallel-sampling prompt tokens, uniform (default 256:2048)")
    p.add_argument("--out-dir", default="bench/results")
    p.add_argument("--no-csv", action="store_true", help="print only")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.max_blocks_per_seq is None:
        longest = max(args.system_prompt + args.user_prompt[1], args.sampling_prompt[1]) + args.output[1]
        args.max_blocks_per_seq = -(-longest // args.block_size)
    try:
        import flashkit
        if flashkit._C is None:
            raise ImportError(flashkit._C_IMPORT_ERROR)
    except ImportError as e:
        print(f"kvcache_sim needs flashkit's native extension: {e}", file=sys.stderr)
        return 2
    date, commit = report.today(), report.git_commit()
    serve, serve_stats, reqs = run_serving(args, random.Random(args.seed))
    par, par_stats, prompts, outputs = run_parallel_sampling(args, random.Random(args.seed + 1))

    mean_prompt = _mean(len(r.prompt) for r in reqs)
    mean_out = _mean(r.output_len for r in reqs)
    par_prompt = _mean(len(p) for p in prompts)
    par_out = _mean(o for outs in outputs for o in outs)
    metrics = [
        ("waste", serve.waste, round(mean_prompt), round(mean_out)),
        ("prefix_hit_rate", serve_stats["prefix_hit_rate"], round(mean_prompt), round(mean_out)),
        ("memory_ratio", par.memory_ratio, round(par_prompt), round(par_out)),
    ]
    print(f"kvcache_sim | block size {args.block_size} | pool {args.num_blocks} blocks | "
          f"max batch {args.max_batch} | seed {args.seed} | commit {commit} | {date}")
    print(f"serving: {args.requests} requests, system prompt {args.system_prompt} + user "
          f"{args.user_prompt[0]}..{args.user_prompt[1]} tokens (mean prompt {mean_prompt:.0f}), "
          f"output {args.output[0]}..{args.output[1]} (mean {mean_out:.0f}); {serve.steps} steps, "
          f"{serve.preemptions} preemptions, {serve_stats['evictions']} cache evictions")
    print(f"  internal waste   {serve.waste:.4%}  (bar < {WASTE_BAR:.0%})")
    print(f"  prefix hit rate  {serve_stats['prefix_hit_rate']:.4%}  "
          f"({serve_stats['prefix_hit_tokens']} of {serve_stats['prompt_tokens']} prompt tokens)")
    print(f"parallel sampling: {args.sampling_requests} prompts of {args.sampling_prompt[0]}.."
          f"{args.sampling_prompt[1]} tokens (mean {par_prompt:.0f}) x n={args.samples} samples "
          f"of {args.output[0]}..{args.output[1]} tokens (mean {par_out:.0f}); {par.steps} steps, "
          f"{par_stats['cow_copies']} copy-on-write blocks")
    print(f"  memory with / without sharing  {par.memory_ratio:.4%}  (bar <= {MEMORY_RATIO_BAR:.0%});"
          f" internal waste {par.waste:.4%}")
    ok = serve.waste < WASTE_BAR and par.memory_ratio <= MEMORY_RATIO_BAR
    print("bars: " + ("met" if ok else "NOT met"))

    if not args.no_csv:
        rows = [{"op": "kvcache_sim", "impl": "flashkit", "B": args.max_batch, "S_q": sq,
                 "S_k": sk, "causal": False, "mode": mode, "page_size": args.block_size,
                 "value": value, "unit": "ratio", "gpu": "cpu", "date": date, "commit": commit}
                for mode, value, sq, sk in metrics]
        path = report.unique_path(args.out_dir, f"kvcache-sim-{date}")
        report.write_csv(path, rows)
        print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
