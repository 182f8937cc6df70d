"""Check that the FlashInfer peer libraries load, run and match an fp32 reference on this GPU,
and time one configuration. Independent of the bench's runner (its own paged-cache builder).

    python bench/peers/flashinfer/validate_fi.py [LIB_DIR]     (default: ./.carry/flashinfer)

Needs torch and a CUDA GPU (sm_90a: the libraries are built for Hopper only). Exit status 0
when every check passed.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def _load_fi_peer():
    for cand in (HERE / "fi_peer.py", HERE.parents[2] / "python" / "flashkit" / "bench" / "fi_peer.py"):
        if cand.is_file():
            spec = importlib.util.spec_from_file_location("fi_peer", cand)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    raise SystemExit("fi_peer.py not found")


fi_peer = _load_fi_peer()


def build(B, Hq, Hkv, D, lens, P, sq, seed=0):
    """q [B*sq, Hq, D]; K/V per sequence (fp32 copies for the reference); paged cache with a
    random page permutation, NaN in unused pages and in the slots past each length."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    q = torch.randn(B * sq, Hq, D, generator=g, device=dev, dtype=torch.bfloat16)
    ks = [torch.randn(L, Hkv, D, generator=g, device=dev, dtype=torch.bfloat16) for L in lens]
    vs = [torch.randn(L, Hkv, D, generator=g, device=dev, dtype=torch.bfloat16) for L in lens]
    npages = [-(-L // P) for L in lens]
    pool = sum(npages) + 3
    perm = torch.randperm(pool, generator=torch.Generator().manual_seed(seed))[: sum(npages)]
    kc = torch.full((pool, P, Hkv, D), float("nan"), device=dev, dtype=torch.bfloat16)
    vc = torch.full_like(kc, float("nan"))
    indptr = [0]
    for b, L in enumerate(lens):
        pages = perm[indptr[-1]: indptr[-1] + npages[b]].to(dev)
        for src, dst in ((ks[b], kc), (vs[b], vc)):
            tmp = torch.full((npages[b] * P, Hkv, D), float("nan"), device=dev, dtype=torch.bfloat16)
            tmp[:L] = src
            dst[pages] = tmp.view(npages[b], P, Hkv, D)
        indptr.append(indptr[-1] + npages[b])
    indices = perm.to(torch.int32).to(dev)
    last = torch.tensor([L - (n - 1) * P if n else 0 for L, n in zip(lens, npages)],
                        dtype=torch.int32, device=dev)
    return dict(q=q, ks=ks, vs=vs, kc=kc, vc=vc, indptr_host=indptr,
                indptr=torch.tensor(indptr, dtype=torch.int32, device=dev), indices=indices,
                last=last, qo_indptr=torch.arange(0, (B + 1) * sq, sq, dtype=torch.int32, device=dev))


def reference(d, B, Hq, Hkv, D, lens, sq):
    G = Hq // Hkv
    out = torch.empty(B * sq, Hq, D, device="cuda")
    q = d["q"].float().view(B, sq, Hq, D)
    for b, L in enumerate(lens):
        k = d["ks"][b].float().repeat_interleave(G, dim=1)   # [L, Hq, D]
        v = d["vs"][b].float().repeat_interleave(G, dim=1)
        s = torch.einsum("thd,lhd->htl", q[b], k) / math.sqrt(D)
        lim = L - sq + torch.arange(sq, device="cuda")
        s = s.masked_fill(torch.arange(L, device="cuda")[None, None, :] > lim[None, :, None],
                          float("-inf"))
        out[b * sq:(b + 1) * sq] = torch.einsum("htl,lhd->thd", torch.softmax(s, -1), v)
    return out


def run_kind(lib, d, B, Hq, Hkv, D, lens, P, sq, time_it=False):
    h = lib.create(Hq, Hkv, D, P)
    stream = torch.cuda.current_stream().cuda_stream
    try:
        lib.plan(h, d["indptr_host"], list(lens), sq, True, stream)
        o = torch.full((B * sq, Hq, D), float("nan"), device="cuda", dtype=torch.bfloat16)
        args = lib.run_args(h, d["q"].data_ptr(), d["q"].stride(0), d["q"].stride(1),
                            d["kc"].data_ptr(), d["vc"].data_ptr(), tuple(d["kc"].stride()),
                            d["indices"].data_ptr(), d["indptr"].data_ptr(), d["last"].data_ptr(),
                            d["qo_indptr"].data_ptr(), o.data_ptr(), 1 / math.sqrt(D), True, stream)
        lib.run(args)
        torch.cuda.synchronize()
        us = None
        if time_it:
            for _ in range(5):
                lib.run(args)
            n = 50
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(int(2e9 * 2e-3))  # let the host queue the calls
            s.record()
            for _ in range(n):
                lib.run(args)
            e.record()
            torch.cuda.synchronize()
            us = s.elapsed_time(e) / n * 1e3
        return o, us
    finally:
        torch.cuda.synchronize()
        lib.destroy(h)


def main() -> int:
    lib_dir = sys.argv[1] if len(sys.argv) > 1 else None
    print(f"torch {torch.__version__} CUDA {torch.version.cuda} | {torch.cuda.get_device_name()} "
          f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    libs = {}
    for kind in fi_peer.KINDS:
        path, searched = fi_peer.find_library(kind, lib_dir)
        if path is None:
            print(f"MISSING libfi_{kind}.so (searched {searched})")
            continue
        libs[kind] = fi_peer.FlashInferLib(path)
        print(f"loaded {path}: {libs[kind].describe}")
    cases = [  # (name, B, Hq, Hkv, lens, P, sq, kinds, time)
        ("B=64 32/8 S_k=8k page16 s_q=1", 64, 32, 8, [8192] * 64, 16, 1, ("decode", "fa2", "fa3"), True),
        ("B=4 32/8 S_k=1000 page16 s_q=4 causal (NaN tails)", 4, 32, 8, [1000] * 4, 16, 4, ("fa2", "fa3"), False),
        ("B=4 32/8 S_k=1000 page16 s_q=1 (NaN tails)", 4, 32, 8, [1000] * 4, 16, 1, ("decode", "fa2", "fa3"), False),
        ("B=3 64/8 ragged 1/17/3000 page1 s_q=1", 3, 64, 8, [1, 17, 3000], 1, 1, ("decode", "fa2", "fa3"), False),
        ("B=3 32/32 ragged 5/300/4097 page256 s_q=2", 3, 32, 32, [5, 300, 4097], 256, 2, ("fa2", "fa3"), False),
    ]
    ok = True
    D = 128
    for name, B, Hq, Hkv, lens, P, sq, kinds, time_it in cases:
        d = build(B, Hq, Hkv, D, lens, P, sq)
        ref = reference(d, B, Hq, Hkv, D, lens, sq)
        nbytes = sum(lens) * Hkv * D * 2 * 2 + 2 * B * sq * Hq * D * 2
        for kind in kinds:
            if kind not in libs:
                ok = False
                continue
            try:
                o, us = run_kind(libs[kind], d, B, Hq, Hkv, D, lens, P, sq, time_it)
            except Exception as e:
                print(f"FAIL {kind:<6} {name}: {type(e).__name__}: {e}")
                ok = False
                continue
            of = o.float()
            finite = bool(torch.isfinite(of).all())
            err = (of - ref).abs().max().item() if finite else float("nan")
            rel = ((of - ref).norm() / ref.norm()).item() if finite else float("nan")
            good = finite and rel < 2e-2 and err < 1e-2
            ok &= good
            t = f"  {us:8.1f} us  {nbytes / (us * 1e-6) / 1e9:7.0f} GB/s" if us else ""
            print(f"{'ok  ' if good else 'FAIL'} {kind:<6} {name}: max-abs {err:.2e} rel-L2 {rel:.2e}{t}")
    print("ALL OK" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
