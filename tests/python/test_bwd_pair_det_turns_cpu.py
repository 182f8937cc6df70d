"""CPU model check of the deterministic dq order of the D 256 pair kernel
(src/kernels/bwd_sm90/kernel_ks_pair.cuh with kDet; BwdCta::dq_turn_pair in
src/kernels/attention_common/bwd_cta.cuh).

The formulas are quoted from the C++ (integer semantics): make_bwd_cta's key block of a CTA (the
grid numbered from its end in deterministic mode under a right bound), the partner block
(n_block ^ 1), the row range of a key block (m_begin, per_head), the pair's union walk, and the
turn. Checked over causal / non-causal, left / right windows, S_q != S_k and odd key-block counts:
- every pair that walks a row block has its own turn 2 * (its place among them in the dq order),
  and both CTAs of the pair (the one without keys of an odd last pair included) the same;
- the turns of a row block are exactly 0, 2, .., 2 (P - 1) for the P pairs that walk it, so the
  counter (one release per CTA) reaches every threshold;
- a pair only ever waits for pairs with a lower launch index (cluster index = grid x // 2): no
  CTA waits for one launched after it, whatever the number of resident CTAs.
"""
import itertools

import pytest

BM = BN = 64  # BwdKsPairTraits: kBlockM, kBlockN


class Mask:
    def __init__(self, sq, sk, causal, left, right):
        self.sq, self.sk, self.causal, self.left, self.right = sq, sk, causal, left, right

    def has_right(self):
        return self.causal or self.right >= 0

    def right_of(self, row):
        return row + self.sk - self.sq + (0 if self.causal else self.right)

    def first_key_tile(self, m0, bn):
        if self.left < 0:
            return 0
        return max(0, m0 + self.sk - self.sq - self.left) // bn


def cta_at(mask, n_block):
    """make_bwd_cta_at: (m_begin, per_head) of key block n_block, None without keys."""
    n0 = n_block * BN
    if n0 >= mask.sk:
        return None
    m_begin = max(0, n0 - mask.right_of(0)) // BM if mask.has_right() else 0
    m_end = (mask.sq + BM - 1) // BM
    if mask.left >= 0:
        last_row = n0 + BN - 1 - (mask.sk - mask.sq) + mask.left
        m_end = 0 if last_row < 0 else min(m_end, last_row // BM + 1)
    return m_begin, max(0, m_end - m_begin)


def union_walk(mask, n_block):
    """The pair kernel's row blocks for CTA n_block (its partner is n_block ^ 1)."""
    own, par = cta_at(mask, n_block), cta_at(mask, n_block ^ 1)
    if own is None and par is None:
        return None  # both CTAs return before any cluster operation
    lo = own[0] if own else par[0]
    hi = own[0] + own[1] if own else par[0] + par[1]
    if own and par:
        lo, hi = min(lo, par[0]), max(hi, par[0] + par[1])
    return list(range(lo, max(lo, hi)))


def dq_turn_pair(mask, n_block, m0, descending):
    pair = n_block >> 1
    if descending:
        n_last = max(0, min((mask.sk - 1) // BN, mask.right_of(min(m0 + BM, mask.sq) - 1) // BN))
        before = (n_last >> 1) - pair
    else:
        before = pair - (mask.first_key_tile(m0, BN) >> 1)
    return 2 * max(0, before)


CASES = [
    (sq, sk, causal, left, right)
    for sq, sk in [(64, 64), (100, 100), (333, 333), (640, 640), (700, 300), (300, 700), (1000, 1000), (1, 130)]
    for causal, left, right in [(False, -1, -1), (True, -1, -1), (True, 100, -1), (True, 300, -1), (False, 200, 50),
                                (False, -1, 0), (False, 150, -1)]
]


@pytest.mark.parametrize("sq,sk,causal,left,right", CASES)
def test_pair_turns_are_a_fixed_order_of_earlier_launched_pairs(sq, sk, causal, left, right):
    mask = Mask(sq, sk, causal, left, right)
    deterministic = True
    descending = causal or right >= 0
    n_blocks = (sk + BN - 1) // BN
    grid = 2 * ((n_blocks + 1) // 2)  # the launcher's grid x
    walkers = {}  # row block -> [(pair, launch cluster, turn)]
    for x in range(grid):
        n_block = grid - 1 - x if deterministic and descending else x  # make_bwd_cta
        assert (n_block ^ 1) == (grid - 1 - (x ^ 1) if descending else x ^ 1)  # the partner's CTA
        walk = union_walk(mask, n_block)
        if walk is None:
            continue
        for m in walk:
            walkers.setdefault(m, []).append((n_block >> 1, x // 2, dq_turn_pair(mask, n_block, m * BM, descending)))
    for m, ws in walkers.items():
        pairs = sorted({p for p, _, _ in ws}, reverse=descending)
        order = {p: i for i, p in enumerate(pairs)}
        for p, cluster, turn in ws:
            assert turn == 2 * order[p], (m, p, turn, pairs)
        turns = sorted({t for _, _, t in ws})
        assert turns == [2 * i for i in range(len(pairs))], (m, turns)
        assert sum(1 for _ in ws) == 2 * len(pairs), (m, ws)  # both CTAs of every pair
        # a pair waits only for pairs launched before it
        launch = {p: c for p, c, _ in ws}
        for p in pairs:
            for q in pairs[:order[p]]:
                assert launch[q] < launch[p], (m, p, q)


def test_cases_cover_odd_pairs_and_unwalked_rows():
    odd = [c for c in CASES if ((c[1] + BN - 1) // BN) % 2 == 1]
    assert odd, "an odd key-block count (a pair whose second CTA has no keys)"
    assert any(c[2] for c in odd) and any(not c[2] for c in odd)
    assert any(c[3] >= 0 for c in CASES) and any(c[4] >= 0 for c in CASES)
    assert list(itertools.islice(CASES, 1))
