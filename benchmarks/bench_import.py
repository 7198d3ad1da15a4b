"""How long ``import treeclass`` takes, in fresh interpreters (median of several runs).

Budget (issue 2): well under 25 ms. ``typing`` alone is shown for scale; treeclass does not
import it. Run: ``python benchmarks/bench_import.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

RUNS = 15


def measure(stmt: str) -> float:
    code = f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    times = []
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        times.append(float(out.stdout) * 1000)
    return statistics.median(times)


def main() -> None:
    subprocess.run([sys.executable, "-c", "import treeclass, typing"], check=True)  # warm .pyc
    tc = measure("import treeclass")
    ty = measure("import typing")
    print(f"import treeclass: {tc:.1f} ms (median of {RUNS}); import typing alone: {ty:.1f} ms")
    print("budget: well under 25 ms" + ("  ok" if tc < 25 else "  OVER BUDGET"))


if __name__ == "__main__":
    main()
