"""Nested trees (issue 18): a model's parameters, and chains on both sides of the recursion limit.

1. **Model parameters**: a ``dict`` of 24 ``Layer`` instances, each holding 6 arrays and a
   nested ``Norm`` (2 arrays and a static ``eps``): 192 leaves, 73 nodes. treeclass's
   embedded registry (``tc.tree_flatten``) against JAX's C++ ``tree_flatten`` of the same tree
   with both classes registered by ``jax.tree_util.register_dataclass``.
   Targets: flatten at most 1.5x, flatten + unflatten at most 1.0x.
2. **Chains**: ``Link(value, next)`` nested ``depth`` deep. The cost per level of
   ``tc.tree_flatten``, against JAX's per level where JAX can (its C++ walker refuses chains
   near 1000 deep), and on both sides of the depth where treeclass's walker stops recursing.
   Target: no cliff (the cost per level within 1.5x on either side of that depth).

Timing: CPU time (``time.process_time``), the two sides alternating run by run; the ratio is
the median of the per-run ratios, with its 10th-90th percentiles (``_workload.paired``).
Run: ``python benchmarks/bench_nested.py``.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _workload import paired, show

import treeclass as tc

N_LAYERS = 24
ARRAYS = ("wq", "wk", "wv", "wo", "w1", "w2")


def layer_classes(register: Callable[[type, str], type]) -> tuple[type, type]:
    """Fresh ``Norm`` and ``Layer`` dataclasses, registered by ``register(cls, tag)``."""
    norm_ns: dict[str, Any] = {
        "__annotations__": {"scale": Any, "bias": Any, "eps": float},
        "eps": dataclasses.field(default=1e-5, metadata={"static": True}),
    }
    norm = register(dataclasses.dataclass(type("Norm", (), norm_ns)), "Norm")
    layer_ns: dict[str, Any] = {"__annotations__": {**dict.fromkeys(ARRAYS, Any), "norm": Any}}
    layer = register(dataclasses.dataclass(type("Layer", (), layer_ns)), "Layer")
    return norm, layer


def make_params(norm: type, layer: type) -> dict[str, Any]:
    rng = np.random.default_rng(0)

    def arr(*shape: int) -> Any:
        return rng.standard_normal(shape, dtype=np.float32)

    return {
        f"layer_{i:02d}": layer(*(arr(4, 4) for _ in ARRAYS), norm=norm(scale=arr(4), bias=arr(4)))
        for i in range(N_LAYERS)
    }


def model_params() -> None:
    import jax

    def ours_register(cls: type, tag: str) -> type:
        cls.__module__ = __name__
        return tc.register_dataclass(cls, name=f"bench.nested.{tag}")

    def jax_register(cls: type, tag: str) -> type:
        data = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("static")]
        meta = [f.name for f in dataclasses.fields(cls) if f.metadata.get("static")]
        return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)

    ours = make_params(*layer_classes(ours_register))
    theirs = make_params(*layer_classes(jax_register))
    o_leaves, o_spec = tc.tree_flatten(ours)
    t_leaves, t_def = jax.tree_util.tree_flatten(theirs)
    assert len(o_leaves) == len(t_leaves) == N_LAYERS * 8
    assert all(a is b or np.array_equal(a, b) for a, b in zip(o_leaves, t_leaves))
    assert o_spec.num_nodes == t_def.num_nodes, (o_spec.num_nodes, t_def.num_nodes)
    assert o_spec.unflatten(o_leaves)["layer_03"].norm.scale is o_leaves[3 * 8 + 6]

    def o_rt() -> None:
        ls, sp = tc.tree_flatten(ours)
        sp.unflatten(ls)

    def t_rt() -> None:
        ls, td = jax.tree_util.tree_flatten(theirs)
        jax.tree_util.tree_unflatten(td, ls)

    print(
        f"model parameters: dict of {N_LAYERS} Layer (6 arrays + Norm(2 arrays, static eps)); "
        f"{len(o_leaves)} leaves; vs jax {jax.__version__} register_dataclass (C++)"
    )
    flatten = jax.tree_util.tree_flatten
    print(show("  flatten", paired(lambda: tc.tree_flatten(ours), lambda: flatten(theirs)), 1.5))
    print(
        show(
            "  unflatten (jax runs __init__)",
            paired(
                lambda: o_spec.unflatten(o_leaves),
                lambda: jax.tree_util.tree_unflatten(t_def, t_leaves),
            ),
        )
    )
    print(show("  flatten+unflatten", paired(o_rt, t_rt), 1.0))


@dataclasses.dataclass
class Link:
    value: Any
    next: Any


def chain(depth: int) -> Any:
    tree = None
    for i in range(depth):
        tree = Link(float(i), tree)
    return tree


def per_level_us(fn: Callable[[], Any], depth: int, repeat: int = 15) -> float:
    """The median CPU time of ``fn`` over ``repeat`` runs, per level of a ``depth`` chain."""
    fn()
    number = max(1, 20_000 // depth)
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        times.append((time.process_time() - t0) / number / depth * 1e6)
    return statistics.median(times)


def recursion_switch() -> int:
    """The smallest chain depth that ``tc.tree_flatten`` does not walk by recursion alone.

    Found by watching for a call of the walker's explicit-stack part (``_flatten_stack``).
    """
    from treeclass._core import tree

    stack_walk = tree._flatten_stack
    used: list[bool] = []

    def watched(*args: Any) -> None:
        used.append(True)
        stack_walk(*args)

    def recursive(depth: int) -> bool:
        used.clear()
        tree._flatten_stack = watched
        try:
            tc.tree_flatten(chain(depth))
        finally:
            tree._flatten_stack = stack_walk
        return not used

    lo, hi = 1, 4 * sys.getrecursionlimit()
    if recursive(hi):
        return hi
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if recursive(mid) else (lo, mid)
    return hi


def chains() -> None:
    import jax

    tc.register_dataclass(Link, name="bench.nested.Link")
    JLink = dataclasses.make_dataclass("JLink", [("value", Any), ("next", Any)])
    jax.tree_util.register_dataclass(JLink, data_fields=["value", "next"], meta_fields=[])

    def jchain(depth: int) -> Any:
        tree = None
        for i in range(depth):
            tree = JLink(float(i), tree)
        return tree

    limit = sys.getrecursionlimit()
    print(f"chains Link(value, next): recursion limit {limit}")
    for depth in (10, 100, 400):
        ours, theirs = chain(depth), jchain(depth)
        timing = paired(
            lambda ours=ours: tc.tree_flatten(ours),
            lambda theirs=theirs: jax.tree_util.tree_flatten(theirs),
            number=max(1, 5000 // depth),
            repeat=21,
        )
        print(show(f"  depth {depth}: flatten vs jax (C++)", timing))
    # The cost per level at depths on both sides of where the walker stops recursing (or of
    # the recursion limit, if it never does in that range), the two depths in alternating runs.
    switch = recursion_switch()
    at = switch if switch < 4 * limit else limit
    below, above = int(at * 0.9), int(at * 1.1)
    short, deep = chain(below), chain(above)
    timing = paired(
        lambda: tc.tree_flatten(deep), lambda: tc.tree_flatten(short), number=10, repeat=21
    )
    scale = below / above  # per level: divide each side's time by its depth
    print(
        f"  the walker recurses up to depth {switch - 1}"
        + (" (no switch below 4x the limit)" if switch >= 4 * limit else "")
    )
    print(
        f"  per level at depth {above} / at depth {below}: {timing.ratio * scale:.2f}x "
        f"(p10-p90 {timing.p10 * scale:.2f}-{timing.p90 * scale:.2f}; target within 1.5x)"
    )
    for depth in (limit // 4, 2 * limit, 8 * limit):
        tree = chain(depth)
        us = per_level_us(lambda tree=tree: tc.tree_flatten(tree), depth)
        print(f"  depth {depth:6d}: {us * 1000:7.1f} ns per level")


def main() -> None:
    print(f"Python {sys.version.split()[0]}; CPU time, alternating runs, median ratio (p10-p90)")
    model_params()
    chains()


if __name__ == "__main__":
    main()
