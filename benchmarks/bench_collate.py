"""``torch.utils.data.default_collate`` of 256 treeclass instances vs the same data as dicts.

Each sample: an image tensor (3x32x32), a label (Python int), a dict of two floats and a
static ``split``. The dict sample holds the same data fields. Rounds alternate the two sides;
each round times ``number`` collates of each in CPU time (``time.process_time``), and the
ratio is taken round by round (a load change hits both sides alike). Reported: the median
per-round ratio with its 10th-90th percentiles.
Run: ``python benchmarks/bench_collate.py``.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import treeclass as tc

N = 256


def cpu_rounds(
    ours: Callable[[], Any], theirs: Callable[[], Any], *, number: int, rounds: int
) -> tuple[list[float], list[float]]:
    """Per-round CPU time (ms per call) of both sides, interleaved."""
    ours()
    theirs()
    t_ours: list[float] = []
    t_theirs: list[float] = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for fn, out in ((ours, t_ours), (theirs, t_theirs)):
                t0 = time.process_time()
                for _ in range(number):
                    fn()
                out.append((time.process_time() - t0) / number * 1e3)
    finally:
        if gc_was:
            gc.enable()
    return t_ours, t_theirs


def main() -> None:
    import torch
    from torch.utils.data import default_collate

    @tc.pytree_dataclass(name="bench.collate.Sample")
    class Sample:
        image: Any
        label: Any
        meta: Any
        split: str = tc.field(static=True, default="train")

    images = [torch.randn(3, 32, 32) for _ in range(N)]
    instances = [Sample(images[i], i, {"a": float(i), "b": 0.5}) for i in range(N)]
    dicts = [{"image": images[i], "label": i, "meta": {"a": float(i), "b": 0.5}} for i in range(N)]

    torch.set_num_threads(1)
    ours, theirs = cpu_rounds(
        lambda: default_collate(instances), lambda: default_collate(dicts), number=20, rounds=41
    )
    ratios = sorted(a / b for a, b in zip(ours, theirs))
    p10, p90 = statistics.quantiles(ratios, n=10)[0], statistics.quantiles(ratios, n=10)[-1]
    print(
        f"default_collate of {N} samples: instances {statistics.median(ours):.3f} ms, "
        f"dicts {statistics.median(theirs):.3f} ms (CPU time, median); ratio "
        f"{statistics.median(ratios):.3f}x (p10 {p10:.3f}x, p90 {p90:.3f}x)"
    )


if __name__ == "__main__":
    main()
