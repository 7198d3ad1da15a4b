"""Command line: ``python -m treeclass demo`` (and ``python -m treeclass version``)."""

from __future__ import annotations

import sys

_USAGE = """usage: python -m treeclass COMMAND

commands:
  demo      flatten a model output, write its treespec as JSON, load it in a fresh interpreter
  version   print treeclass's version and the frameworks it found
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m treeclass`` and the ``treeclass`` script."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["demo"]:
        from ._demo import run

        return run()
    if args == ["version"]:
        import importlib.util

        import treeclass
        from treeclass._hooks import FRAMEWORKS

        found = [f.name for f in FRAMEWORKS if importlib.util.find_spec(f.module) is not None]
        names = ", ".join(found) or "none"
        print(f"treeclass {treeclass.__version__}; frameworks installed: {names}")
        return 0
    print(_USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
