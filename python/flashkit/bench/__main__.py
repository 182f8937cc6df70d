"""``python -m flashkit.bench``: see ``python -m flashkit.bench --help`` and docs/benchmarking.md."""

import sys

from flashkit.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
