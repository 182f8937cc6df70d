"""flashkit.bench: prefill attention benchmarks, FlashKit side by side with its peers.

Run ``python -m flashkit.bench --help``. Modules:

- ``sweeps``  the SPEC §4 sweeps (fa3, small) and the FLOP model
- ``timing``  median of CUDA-event-timed repeats (triton's do_bench when available)
- ``impls``   flashkit, SDPA backends (flash, cudnn, efficient), FlexAttention
- ``runner``  the measuring loop with the correctness check (needs torch + a GPU); its
  ``BaseRunner`` (CSV loop, CUDA context check, closing summary) is shared by the op runners
- ``report``  results CSV (SPEC schema), tables with ratios, plots, and the table / plot
  helpers the op reports share
- ``cli``     the command line, and the argument helpers the op command lines share
- ``decode_*``  ``--op decode``: the paged-decode sweep against FlashInfer / SDPA
- ``mla_*``     ``--op mla``: the MLA decode sweep against FlashMLA (``mla_sweeps``,
  ``mla_impls``, ``mla_runner``, ``mla_report``, ``mla_cli``)

Only ``runner`` and ``impls`` (lazily) import torch; ``import flashkit`` happens only when
the flashkit implementation is set up, so ``--help`` works without the extension.
"""


def main(argv=None) -> int:
    from .cli import main as _main
    return _main(argv)


__all__ = ["main"]
