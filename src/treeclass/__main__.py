"""Command line: ``python -m treeclass`` (and the ``treeclass`` script); see :mod:`._cli`."""

from __future__ import annotations

import sys

from ._io.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
