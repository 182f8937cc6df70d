"""Run a few configurations of FlashMLA's own tests/test_flash_mla.py (its correctness
assertion cos_diff < 1e-5 against its fp32 reference, and its do_bench timing) against a
prebuilt flash_mla. Usage, on the GPU machine:

    PYTHONPATH=<prebuilt dir>:<FlashMLA source>/tests python3 test_subset.py [--all]

--all runs FlashMLA's whole matrix (its main()), the default a subset of 6 configurations.
"""

import random
import sys

import torch

import test_flash_mla as t  # FlashMLA's tests/test_flash_mla.py

SUBSET = [  # (s_q, mean_sk, h_q, varlen)
    (1, 4096, 16, False), (2, 4096, 128, True), (1, 8192, 64, True),
    (2, 8192, 32, False), (1, 16384, 128, False), (2, 16384, 16, True),
]

if __name__ == "__main__":
    if "--all" in sys.argv:
        t.main(torch.bfloat16)
        sys.exit(0)
    device = torch.device("cuda:0")
    torch.set_default_dtype(torch.bfloat16)
    torch.set_default_device(device)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    random.seed(0)
    for s_q, mean_sk, h_q, varlen in SUBSET:
        t.test_flash_mla(128, s_q, mean_sk, h_q, 1, 576, 512, True, varlen)
    print(f"FlashMLA test subset: {len(SUBSET)} passed, 0 failed")
