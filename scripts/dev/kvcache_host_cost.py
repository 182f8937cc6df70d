"""Host time of a decode step's KV-cache bookkeeping: B sequences each get one token, by
KVCacheManager.append one sequence at a time, by append_batch with token ids, and by
append_batch without ids; then take_updates. CPU only (no torch, no GPU).

    python3 scripts/dev/kvcache_host_cost.py
"""
import time

import numpy as np

from flashkit import KVCacheManager


def run(B, prompt, mode, steps=200, block=16):
    width = prompt // block + 80
    m = KVCacheManager(num_blocks=B * width, block_size=block, max_batch=B, max_blocks_per_seq=width)
    rng = np.random.default_rng(0)
    ids = [m.create(rng.integers(0, 32000, prompt, dtype=np.int32))[0] for _ in range(B)]
    m.take_updates()
    ida = np.array(ids, dtype=np.int64)
    one = np.zeros(1, dtype=np.int32)
    toks = np.zeros((B, 1), dtype=np.int32)
    t_app = t_upd = 0.0
    for s in range(steps):
        t0 = time.perf_counter()
        if mode == "append":
            for sid in ids:
                one[0] = s
                m.append(sid, one)
        elif mode == "append_batch":
            toks[:, 0] = s
            m.append_batch(ida, toks)
        else:
            m.append_batch(ida, num_tokens=1)
        t1 = time.perf_counter()
        m.take_updates()
        t_upd += time.perf_counter() - t1
        t_app += t1 - t0
    m.check_invariants()
    return 1e6 * t_app / steps, 1e6 * t_upd / steps


def main():
    for B, prompt in ((256, 1000), (64, 4000)):
        cells = []
        for mode in ("append", "append_batch", "append_batch(num_tokens)"):
            a, u = run(B, prompt, mode)
            cells.append(f"{mode} {a:.0f} us + take_updates {u:.0f} us")
        print(f"B={B} prompt={prompt}, per step: " + "; ".join(cells))


if __name__ == "__main__":
    main()
