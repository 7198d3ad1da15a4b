"""How long ``import treeclass`` takes, in fresh interpreters (median of several runs).

Budget (issue 9): at most 15 ms. ``typing`` alone (which treeclass imports) is shown for
scale. Run: ``python benchmarks/bench_import.py``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

# Measure the import users get: from cached bytecode. With PYTHONDONTWRITEBYTECODE set (as on
# some machines) no .pyc would be written, and every run would compile the sources again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

RUNS = 15


def measure(stmt: str) -> float:
    code = f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    times = []
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=ENV
        )
        times.append(float(out.stdout) * 1000)
    return statistics.median(times)


def main() -> None:
    # warm the .pyc files
    subprocess.run([sys.executable, "-c", "import treeclass, typing"], check=True, env=ENV)
    tc = measure("import treeclass")
    ty = measure("import typing")
    print(f"import treeclass: {tc:.1f} ms (median of {RUNS}); import typing alone: {ty:.1f} ms")
    print("budget: at most 15 ms" + ("  ok" if tc <= 15 else "  OVER BUDGET"))


if __name__ == "__main__":
    main()
