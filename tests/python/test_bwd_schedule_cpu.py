"""CPU model check of the backward kernel's index math (src/kernels/bwd_sm80/kernel.cuh).

The kernel's row-block range per key block (m_begin / m_end under causal, sliding window
and sequence ends) and its deterministic-mode turn per (row block, key block) are written
here in Python with C++ integer semantics, then checked exhaustively on random shapes:

- coverage: every visible (row, key) pair (attn::Mask's rule) lies in a row block that the
  key's block visits, so no gradient contribution is skipped;
- order: the key blocks visiting a row block get turns exactly 0..k-1 (the counter would
  otherwise wait forever or let two blocks add at once);
- progress: in the descending order a key block only waits for a higher one, which the
  reversed grid launches earlier.

Keep the formulas in sync with the kernel (they are quoted from it).
"""
import random

import pytest


def cdiv(a, b):  # C++ integer division (truncates toward zero)
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def normalize(sq, sk, causal, left, right, total=None):
    """make_fwd_params: windows wider than the tensors are none; causal is right = 0.
    Varlen normalizes against the packed totals (``total``), so a sequence can keep a
    window wider than itself."""
    big = max(sq, sk) if total is None else total
    r = -1 if right < 0 or right >= big else right
    if causal or r == 0:
        r = 0
    causal = r == 0
    return causal, (0 if causal else r), (-1 if left < 0 or left >= big else left)


def schedule(sq, sk, causal, left, right, block_m, block_n, total=None):
    causal, wr, wl = normalize(sq, sk, causal, left, right, total)
    d = sk - sq
    has_right = causal or wr >= 0

    def right_of(row):
        return row + d + (0 if causal else wr)

    def visible(i, j):
        return j < sk and (not has_right or j <= right_of(i)) and (wl < 0 or j >= i + d - wl)

    visits = {}
    for n in range(cdiv(sk + block_n - 1, block_n)):
        n0 = n * block_n
        m_begin = cdiv(max(0, n0 - right_of(0)), block_m) if has_right else 0
        m_end = cdiv(sq + block_m - 1, block_m)
        if wl >= 0:
            last_row = n0 + block_n - 1 - d + wl
            m_end = 0 if last_row < 0 else min(m_end, cdiv(last_row, block_m) + 1)
        for j in range(n0, min(n0 + block_n, sk)):
            for i in range(sq):
                if visible(i, j):
                    assert m_begin <= i // block_m < m_end, (n, i, j)
        for m in range(m_begin, m_end):
            visits.setdefault(m, []).append(n)
    for m, ns in visits.items():
        m0 = m * block_m
        if has_right:
            n_last = max(0, min(cdiv(sk - 1, block_n), cdiv(right_of(min(m0 + block_m, sq) - 1), block_n)))
            turns = {n: n_last - n for n in ns}
        else:
            first = cdiv(max(0, m0 + d - wl), block_n) if wl >= 0 else 0
            turns = {n: n - first for n in ns}
        assert sorted(turns.values()) == list(range(len(ns))), (m, ns, turns)
        for n, t in turns.items():  # the block with turn t waits for turn t-1's block
            prev = [x for x, u in turns.items() if u == t - 1]
            if prev:
                assert (prev[0] > n) == has_right  # launched earlier in the grid order
    return visits


@pytest.mark.parametrize("seed", range(6))
def test_backward_schedule_model(seed):
    rng = random.Random(seed)
    for _ in range(150):
        sq = rng.choice([1, 3, 17, 64, 100, 333, 500])
        sk = rng.choice([1, 3, 17, 64, 100, 333, 500])
        schedule(sq, sk, rng.random() < 0.5, rng.choice([-1, -1, 0, 1, 5, 31, 64, 200]),
                 rng.choice([-1, -1, 0, 1, 7, 64, 150]), rng.choice([32, 64]), rng.choice([32, 64, 128]))


@pytest.mark.parametrize("seed", range(3))
def test_backward_schedule_model_varlen_windows(seed):
    # Windows wider than this sequence but narrower than the packed totals stay windows.
    rng = random.Random(100 + seed)
    for _ in range(100):
        sq = rng.choice([1, 3, 17, 100, 333])
        sk = rng.choice([1, 3, 17, 100, 333])
        total = max(sq, sk) + rng.choice([1, 50, 1000])
        schedule(sq, sk, rng.random() < 0.5, rng.choice([-1, 0, 5, 400, 900]), rng.choice([-1, 0, 7, 400, 900]),
                 rng.choice([32, 64]), rng.choice([32, 64, 128]), total)


def test_causal_square_visits():
    # S_q = S_k = 256, 64-row / 64-key blocks, causal: key block n visits row blocks n..3.
    v = schedule(256, 256, True, -1, -1, 64, 64)
    assert v == {0: [0], 1: [0, 1], 2: [0, 1, 2], 3: [0, 1, 2, 3]}


def test_window_skips_far_blocks():
    # window_left = 64 with causal at S = 512, 64 x 64 blocks: each key block visits only
    # its own row block and the next one (tiles outside the window are not computed).
    v = schedule(512, 512, True, 64, -1, 64, 64)
    assert all(ns == ([m - 1, m] if m else [0]) for m, ns in v.items())
