"""``ray.get`` of a 256 MiB tree of treeclass instances (pickled by name) against the same arrays
in a plain dict of dicts, on a local Ray (``ray.init(num_cpus=2)``). Target: ratio <= 1.1x.

The tree: 32 layers, each a frozen dataclass with two float32 arrays (6 MiB + 2 MiB) and a
static string; the plain side holds the very same arrays as ``{"layer_i": {"w", "b", "act"}}``.
The same 256 MiB in 8 and in 128 layers follow, without a target: the arrays are read without
a copy on both sides, so what differs is a fixed cost per instance (rebuilding it by name,
about 0.6 us), and the ratio grows with the number of instances, not with the bytes.
Both are ``ray.put`` once; each round then times ``ray.get`` of one side, then of the other
(``NUMBER`` calls each, CPU time of this process, garbage collector off), and the ratio is taken
round by round. Printed: the median of the per-round ratios with its 10th-90th percentiles, the
median times, and the CPU time of one copy of the arrays for scale: a ``ray.get`` that copied
would cost at least that; last, the CPU time ``pickle.loads`` spends per instance beyond the
same fields as plain dicts (the layers with float leaves). Before timing, both sides are
checked to come back zero-copy (read-only arrays sharing the object store's memory between two
gets).

Run: ``python benchmarks/bench_ray.py`` (needs ``pip install ray``; ~1 GiB of shared memory).
"""

from __future__ import annotations

import pickle
import statistics
import sys
import time
from typing import Any

import numpy as np
import ray
from _workload import paired_times

import treeclass as tc

TOTAL = 256 * 2**20  # bytes of arrays in each tree
SHAPES = (32, 8, 128)  # layers; the first is the one with the target
NUMBER = 20  # ray.get calls per side per round
ROUNDS = 31
TARGET = 1.1


@tc.pytree_dataclass(name="bench.ray.Layer", frozen=True)
class Layer:
    w: np.ndarray[Any, Any]
    b: np.ndarray[Any, Any]
    act: str = tc.field(static=True, default="relu")


def trees(n_layers: int) -> tuple[dict[str, Layer], dict[str, dict[str, Any]]]:
    """``n_layers`` layers of ``TOTAL / n_layers`` bytes each: ``w`` 3/4 of it, ``b`` 1/4."""
    rng = np.random.default_rng(0)
    elements = TOTAL // n_layers // 4  # float32
    layers = {
        f"layer_{i}": Layer(
            rng.standard_normal(elements * 3 // 4, dtype=np.float32),
            rng.standard_normal(elements // 4, dtype=np.float32),
            act=("relu", "gelu")[i % 2],
        )
        for i in range(n_layers)
    }
    plain = {k: {"w": v.w, "b": v.b, "act": v.act} for k, v in layers.items()}
    return layers, plain


def arrays(tree: Any) -> list[np.ndarray[Any, Any]]:
    return [x for x in tc.tree_leaves(tree) if isinstance(x, np.ndarray)]


def check_zero_copy(ref: Any, want: Any) -> None:
    first, second = ray.get(ref), ray.get(ref)
    assert tc.tree_structure(first) == tc.tree_structure(want)
    for a, b, w in zip(arrays(first), arrays(second), arrays(want), strict=True):
        assert not a.flags.writeable and np.shares_memory(a, b), "ray.get copied an array"
        assert a.shape == w.shape and a[:8].tolist() == w[:8].tolist()


def measure(n_layers: int, target: float | None) -> bool:
    """Print one shape's line; whether it meets ``target``."""
    layers, plain = trees(n_layers)
    size = sum(a.nbytes for a in arrays(layers))
    ours_ref, theirs_ref = ray.put(layers), ray.put(plain)
    check_zero_copy(ours_ref, layers)
    check_zero_copy(theirs_ref, plain)
    assert type(ray.get(ours_ref)["layer_0"]) is Layer
    t_ours, t_theirs = paired_times(
        lambda: ray.get(ours_ref),
        lambda: ray.get(theirs_ref),
        number=NUMBER,
        repeat=ROUNDS,
        clock=time.process_time,
    )
    ratios = sorted(a / b for a, b in zip(t_ours, t_theirs, strict=True))
    deciles = statistics.quantiles(ratios, n=10)
    median = statistics.median(ratios)
    verdict = ""
    if target is not None:
        verdict = "  ok" if median <= target else f"  ABOVE TARGET {target}x"
    print(
        f"{size / 2**20:.0f} MiB in {n_layers:3d} layers ({2 * n_layers:3d} arrays): "
        f"by name {statistics.median(t_ours):7.1f} us vs plain {statistics.median(t_theirs):7.1f}"
        f" us, ratio {median:.2f}x (p10 {deciles[0]:.2f}x, p90 {deciles[-1]:.2f}x){verdict}"
    )
    return target is None or median <= target


def per_instance() -> None:
    """Print the CPU time ``pickle.loads`` spends per instance beyond the same plain dicts."""
    n = SHAPES[0]
    leaves: list[Any] = [float(i) for i in range(n)]
    ours = {f"layer_{i}": Layer(x, -x, ("relu", "gelu")[i % 2]) for i, x in enumerate(leaves)}
    plain = {k: {"w": v.w, "b": v.b, "act": v.act} for k, v in ours.items()}
    ours_data, plain_data = pickle.dumps(ours, 5), pickle.dumps(plain, 5)
    t_ours, t_plain = paired_times(
        lambda: pickle.loads(ours_data),
        lambda: pickle.loads(plain_data),
        number=200,
        repeat=ROUNDS,
        clock=time.process_time,
    )
    extra = [(a - b) / n * 1000 for a, b in zip(t_ours, t_plain, strict=True)]
    p10, *_, p90 = statistics.quantiles(extra, n=10)
    print(
        f"pickle.loads of {n} layers (float leaves): {statistics.median(extra):.0f} ns of CPU "
        f"time per instance beyond the same fields as plain dicts (p10 {p10:.0f}, p90 {p90:.0f})"
    )


def main() -> None:
    print(
        f"ray.get, CPU time of this process, {ROUNDS} interleaved rounds x {NUMBER} calls "
        f"(target for {SHAPES[0]} layers: <= {TARGET}x)"
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ok = [measure(n, TARGET if i == 0 else None) for i, n in enumerate(SHAPES)]
    finally:
        ray.shutdown()
    some = trees(SHAPES[0])[0]
    t0 = time.process_time()
    for a in arrays(some):
        a.copy()
    print(f"(for scale: one copy of the 256 MiB of arrays takes {time.process_time() - t0:.3f} s)")
    per_instance()
    if not all(ok):
        sys.exit(1)


if __name__ == "__main__":
    main()
