"""Test utilities of FlashKit: the reference attention and the accuracy rule (SPEC §3).

    from flashkit.testing import attention_reference, attention_pytorch, check_close

    out_ref, lse_ref = attention_reference(q, k, v, causal=True)   # float32/float64
    out_pt = attention_pytorch(q, k, v, causal=True)                # PyTorch, same dtype
    res = check_close(out, out_ref, out_pt)
    assert res.ok, res.message

``fake_dlpack.FakeCudaArray`` describes a CUDA array (pointer, dtype, shape, strides)
without any memory, so argument validation can be tested on a machine without a GPU.
``bad_index`` (imported on demand; needs torch and a GPU) holds varlen calls with wrong
cu_seqlens and checks that FlashKit handles them as documented.
"""

from . import cuda_inputs as _cuda_inputs
from . import decode_reference as _decode_reference
from . import mla_reference as _mla_reference
from . import reference
from .cuda_inputs import *  # noqa: F401,F403
from .decode_reference import *  # noqa: F401,F403
from .mla_reference import *  # noqa: F401,F403
from .reference import *  # noqa: F401,F403 - the public testing API

__all__ = (list(reference.__all__) + list(_decode_reference.__all__) +
           list(_mla_reference.__all__) + list(_cuda_inputs.__all__))
