# Coverage model of wip-fwd90: copy plan (ColumnPrefix + kTrimmed), zero_padding, store/zero_tile columns.
def tile_offset(kRows, row, col):
    return (col // 64) * (kRows * 64) + row * 64 + ((((col % 64) // 8) ^ (row % 8)) * 8) + (col % 8)

def plan(kCols, kRows, threads=256, period=8):
    cpr = kCols // 8; raw = threads // cpr; rpp = raw // period * period
    trimmed = rpp != raw; passes = -(-kRows // rpp)
    even = threads % cpr == 0 and not trimmed and kRows % rpp == 0
    writes = []
    for tid in range(threads):
        prow, pcol = tid // cpr, (tid % cpr) * 8
        for i in range(passes):
            row = prow + i * rpp
            active = even or ((not trimmed or prow < rpp) and row < kRows)
            if active:
                dst = tile_offset(kRows, prow, pcol) + i * rpp * 64
                assert dst == tile_offset(kRows, row, pcol), (tid, i)
                writes.append((row, pcol))
    return writes

for D, Dp, BM, BN, KS, VS in [(96, 128, 128, 128, 3, 2), (192, 192, 128, 64, 3, 2)]:
    for rows in (BM, BN):
        w = plan(D, rows)
        assert len(w) == len(set(w)) == rows * D // 8, (D, rows, len(w), len(set(w)))
        assert all(c < D for _, c in w)
    if Dp != D:
        # zero_padding: rows of Q, K stages, V stages
        pc = (Dp - D) // 8
        nrows = BM + KS * BN + VS * BN
        tiles = {}
        for i in range(nrows * pc):
            r = i // pc; col = D + (i % pc) * 8
            if r < BM: key, row, kr = ('Q', 0), r, BM
            elif r < BM + KS * BN: k = r - BM; key, row, kr = ('K', k // BN), k % BN, BN
            else: v = r - BM - KS * BN; key, row, kr = ('V', v // BN), v % BN, BN
            tiles.setdefault(key, set()).add(tile_offset(kr, row, col) // 8)
        data = {}
        for key, kr in [(('Q', 0), BM)] + [(('K', s), BN) for s in range(KS)] + [(('V', s), BN) for s in range(VS)]:
            pad = set(tile_offset(kr, r, c) // 8 for r in range(kr) for c in range(D, Dp, 8))
            dat = set(tile_offset(kr, r, c) // 8 for r, c in plan(D, kr))
            assert tiles[key] == pad and not (pad & dat) and len(pad | dat) == kr * Dp // 8, key
    # store_tile / zero_tile over ColumnPrefix: columns
    cpr = D * 2 // 16; chunks = BM * cpr
    assert chunks % 256 == 0
    cols = set((c % cpr) * 8 for c in range(chunks))
    assert max(cols) + 8 <= D
    print(D, "ok")
