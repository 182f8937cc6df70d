import random
from bwd90 import Mask, cdiv
def check(sq, sk, causal, left, right, BM, BN):
    mask = Mask(sq, sk, causal, left, right)
    descending = causal or right >= 0
    nb = cdiv(sk, BN); diag = sk - sq
    visits = {}
    for n in range(nb):
        n0 = n * BN
        if n0 >= sk: continue
        m_begin = max(0, n0 - mask.right_of(0)) // BM if mask.has_right() else 0
        m_end = cdiv(sq, BM)
        if left >= 0:
            last_row = n0 + BN - 1 - diag + left
            m_end = 0 if last_row < 0 else min(m_end, last_row // BM + 1)
        for m in range(m_begin, m_end):
            m0 = m * BM
            if descending:
                n_last = max(0, min((sk - 1) // BN, mask.right_of(min(m0 + BM, sq) - 1) // BN))
                turn = n_last - n
            else:
                turn = n - mask.first_key_tile(m0, BN)
            visits.setdefault(m, []).append((turn, n))
        # coverage: every visible (row, key) pair of this key block is in a visited row block
        for i in range(sq):
            for j in range(n0, min(n0 + BN, sk)):
                if mask.visible(i, j):
                    assert m_begin <= i // BM < m_end, ("coverage", sq, sk, causal, left, right, i, j)
    for m, lst in visits.items():
        turns = sorted(t for t, _ in lst)
        assert turns == list(range(len(lst))), ("turns", sq, sk, causal, left, right, BM, BN, m, lst)
        # launch order: blockIdx.x = nb-1-n when deterministic & descending; turn t's CTA must launch after t-1's
        bx = {n: (nb - 1 - n if descending else n) for _, n in lst}
        order = sorted(lst)
        for (t0, n0_), (t1, n1_) in zip(order, order[1:]):
            assert bx[n0_] < bx[n1_], ("launch", sq, sk, causal, left, right, m, lst)
random.seed(1)
for BM, BN in [(64, 128), (64, 64)]:
    for _ in range(1500):
        sq = random.randint(1, 700); sk = random.randint(1, 700)
        mode = random.choice(["none", "causal", "window", "left", "right"])
        causal = mode == "causal"
        left = random.randint(0, 300) if mode in ("window", "left") else -1
        right = random.randint(0, 300) if mode in ("window", "right") else -1
        check(sq, sk, causal, left, right, BM, BN)
print("ok")
