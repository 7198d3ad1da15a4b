"""Registration time: decorating a class (``@pytree_dataclass``) with and without frameworks.

For scale, the same class made with ``dataclasses.dataclass`` alone and registered with JAX's
``register_dataclass`` (with jax imported). Each run makes fresh classes, as a notebook or an
import of many model classes does. Run: ``python benchmarks/bench_register.py [--frameworks]``.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from typing import Any

import treeclass as tc

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

    base = per_class_us(plain)
    mine = per_class_us(ours)
    print(f"dataclasses.dataclass alone:        {base:8.1f} us per class")
    print(f"tc.pytree_dataclass(name=...):       {mine:8.1f} us per class  (+{mine - base:.1f} us)")
    if "jax" in sys.modules:
        import jax

        def jx(name: str) -> type:
            cls = dataclasses.dataclass(type(name, (), fields()))
            jax.tree_util.register_dataclass(cls)
            return cls

        print(f"dataclass + jax register_dataclass: {per_class_us(jx):8.1f} us per class")


if __name__ == "__main__":
    main()
