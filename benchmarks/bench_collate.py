"""``torch.utils.data.default_collate`` of 256 treeclass instances vs the same data as dicts.

Each sample: an image tensor (3x32x32), a label (Python int), a dict of two floats and a
static ``split``. The dict sample holds the same data fields. Rounds alternate the two sides;
each round times ``number`` collates of each in CPU time (``time.process_time``), and the
ratio is taken round by round (a load change hits both sides alike). Reported: the median
per-round ratio with its 10th-90th percentiles.
Run: ``python benchmarks/bench_collate.py``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from _workload import paired_times, ratio_spread

import treeclass as tc

N = 256


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
    ours, theirs = paired_times(
        lambda: default_collate(instances),
        lambda: default_collate(dicts),
        number=20,
        repeat=41,
        clock=time.process_time,
    )
    ratio, p10, p90 = ratio_spread(ours, theirs)
    print(
        f"default_collate of {N} samples: instances {statistics.median(ours):.1f} us, "
        f"dicts {statistics.median(theirs):.1f} us (CPU time, median); ratio "
        f"{ratio:.3f}x (p10 {p10:.3f}x, p90 {p90:.3f}x)"
    )


if __name__ == "__main__":
    main()
