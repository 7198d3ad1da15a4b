"""Registration time: decorating a class (``@pytree_dataclass``) with and without frameworks.

Also the cost of declaring how a class evolved (``aliases=``, a field alias,
``removed_fields=``; issue 12), measured in alternating runs against the same class without.

For scale, the same class made with ``dataclasses.dataclass`` alone and registered with JAX's
``register_dataclass`` (with jax imported). Each run makes fresh classes, as a notebook or an
import of many model classes does. Run: ``python benchmarks/bench_register.py [--frameworks]``.

With ``--frameworks`` (jax, torch and optree imported) it also compares declaring a class with
``@pytree_dataclass(name=...)`` against declaring it with ``@dataclasses.dataclass`` and
registering it by hand in the three (``benchmarks/_by_hand.py``): CPU time
(``time.process_time``), in interleaved rounds, the median of the round-by-round ratios with
their 10th-90th percentiles (issue 18's target: at most 1.5x).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from typing import Any

import treeclass as tc

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _by_hand import register_by_hand
from _workload import paired_times, ratio_spread

N = 200


def fields() -> dict[str, Any]:
    ns: dict[str, Any] = {"__annotations__": {f"a{i}": float for i in range(8)}}
    ns["__annotations__"]["s0"] = str
    ns["s0"] = tc.field(static=True, default="s")
    return ns


def per_class_us(make: Any) -> float:
    times = []
    for run in range(5):
        t0 = time.perf_counter()
        for i in range(N):
            make(f"C{run}_{i}")
        times.append((time.perf_counter() - t0) / N * 1e6)
    return statistics.median(times)


def main() -> None:
    if "--frameworks" in sys.argv:
        import jax
        import optree  # noqa: F401
        import torch  # noqa: F401
    print(f"active backends: {tc.active_backends() or '(none)'}")

    def plain(name: str) -> type:
        return dataclasses.dataclass(type(name, (), fields()))

    def ours(name: str) -> type:
        cls = type(name, (), fields())
        cls.__module__ = __name__
        return tc.pytree_dataclass(name=f"bench.register.{name}")(cls)

    def evolved(name: str) -> type:
        ns = fields()
        ns["a7"] = tc.field(default=0.0, aliases=(f"old_a7_{name}",))
        cls = type(name, (), ns)
        cls.__module__ = __name__
        return tc.pytree_dataclass(
            name=f"bench.register.{name}",
            aliases=(f"bench.register.old.{name}",),
            removed_fields=("gone",),
        )(cls)

    base = per_class_us(plain)
    mine = per_class_us(ours)
    print(f"dataclasses.dataclass alone:        {base:8.1f} us per class")
    print(f"tc.pytree_dataclass(name=...):       {mine:8.1f} us per class  (+{mine - base:.1f} us)")
    # Side by side in alternating runs (the machine's load drifts between sequential ones).
    runs: dict[str, list[float]] = {"plain": [], "evolved": []}
    for run in range(7):
        for label, make in (("plain", ours), ("evolved", evolved)):
            t0 = time.perf_counter()
            for i in range(N // 2):
                make(f"E{label}{run}_{i}")
            runs[label].append((time.perf_counter() - t0) / (N // 2) * 1e6)
    plain_us, evolved_us = (statistics.median(runs[k]) for k in ("plain", "evolved"))
    print(
        f"  with aliases, a field alias and removed_fields: {evolved_us:8.1f} us per class vs "
        f"{plain_us:.1f} without ({evolved_us / plain_us:.2f}x, alternating runs)"
    )
    if "jax" in sys.modules:
        import jax

        def jx(name: str) -> type:
            cls = dataclasses.dataclass(type(name, (), fields()))
            jax.tree_util.register_dataclass(cls)
            return cls

        print(f"dataclass + jax register_dataclass: {per_class_us(jx):8.1f} us per class")
    if "--frameworks" in sys.argv:
        versus_by_hand()


def versus_by_hand() -> None:
    """``@pytree_dataclass(name=...)`` against a dataclass registered by hand in the three."""
    count = iter(range(10**9))

    def ours() -> None:
        name = f"H{next(count)}"
        cls = type(name, (), fields())
        cls.__module__ = __name__
        tc.pytree_dataclass(name=f"bench.hand.{name}")(cls)

    def by_hand() -> None:
        name = f"H{next(count)}"
        ns: dict[str, Any] = {"__annotations__": {f"a{i}": float for i in range(8)}}
        ns["__annotations__"]["s0"] = str
        ns["s0"] = dataclasses.field(default="s", metadata={"static": True})
        cls = type(name, (), ns)
        cls.__module__ = __name__
        cls = dataclasses.dataclass(cls)
        data = tuple(f"a{i}" for i in range(8))
        register_by_hand(cls, f"bench.hand.{name}", data, ("s0",))

    t_ours, t_hand = paired_times(ours, by_hand, number=20, repeat=21, clock=time.process_time)
    ratio, p10, p90 = ratio_spread(t_ours, t_hand)
    print(
        f"declare + register in jax, torch, optree (CPU time, {len(t_ours)} interleaved rounds):"
        f"\n  @pytree_dataclass(name=...) {statistics.median(t_ours):8.1f} us per class"
        f"\n  dataclass + by hand         {statistics.median(t_hand):8.1f} us per class"
        f"\n  ratio {ratio:.2f}x (p10-p90 {p10:.2f}-{p90:.2f}x; target <= 1.5x)"
    )


if __name__ == "__main__":
    main()
