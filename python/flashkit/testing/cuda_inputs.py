"""Small helpers shared by the GPU test files: per-case seeded CUDA generators, random
CUDA tensors, the current stream as an int. torch is imported when they are called, so
``flashkit.testing`` still imports without torch."""

import zlib

__all__ = ["case_generator", "cuda_randn", "current_stream_handle"]


def case_generator(*case):
    """A CUDA generator seeded by the case, so every case has its own fresh inputs."""
    import torch

    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr(case).encode()))
    return g


def cuda_randn(shape, dtype, gen):
    import torch

    return torch.randn(shape, dtype=dtype, device="cuda", generator=gen)


def current_stream_handle():
    import torch

    return torch.cuda.current_stream().cuda_stream
