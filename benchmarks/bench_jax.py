"""JAX benchmark: treeclass classes through ``jax.tree_util`` against JAX's own C++
``jax.tree_util.register_dataclass``, side by side in one process, on the shared workload
(a list of 100 dataclasses with 8 leaves and 2 static fields).

Targets (issue 4): flatten at most 1.3x (a Python callback's floor is about 1.2x), unflatten
at most 0.35x, flatten + unflatten at most 0.5x. The rows without a target are for
information: ``flatten_with_path`` and the dispatch of a jitted function taking the tree.

Timing: each case alternates the two sides run by run (``_workload.paired``) and reports the
median times and the median of the per-run ratios, so load from other processes hits both
sides alike.

Run: ``python benchmarks/bench_jax.py``.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
from _workload import Timing, make_class, make_tree, paired, show

import treeclass as tc


def main() -> None:
    Ours = make_class("Ours", lambda c: tc.register_dataclass(c, name="bench.jax.Ours"))
    Theirs = make_class("Theirs")
    jax.tree_util.register_dataclass(Theirs)
    ours = make_tree(Ours)
    theirs = make_tree(Theirs)

    flatten = jax.tree_util.tree_flatten
    unflatten = jax.tree_util.tree_unflatten
    o_leaves, o_def = flatten(ours)
    t_leaves, t_def = flatten(theirs)
    assert o_leaves == t_leaves, "the two registrations must give the same leaves"
    assert unflatten(o_def, o_leaves) == ours

    def o_rt() -> None:
        ls, td = flatten(ours)
        unflatten(td, ls)

    def t_rt() -> None:
        ls, td = flatten(theirs)
        unflatten(td, ls)

    results: dict[str, tuple[Timing, float | None]] = {}
    cases = [
        ("flatten", lambda: flatten(ours), lambda: flatten(theirs), 1.3),
        ("unflatten", lambda: unflatten(o_def, o_leaves), lambda: unflatten(t_def, t_leaves), 0.35),
        ("flatten+unflatten", o_rt, t_rt, 0.5),
        (
            "flatten_with_path",
            lambda: jax.tree_util.tree_flatten_with_path(ours),
            lambda: jax.tree_util.tree_flatten_with_path(theirs),
            None,
        ),
    ]
    for label, ours_fn, theirs_fn, target in cases:
        results[label] = (paired(ours_fn, theirs_fn), target)

    small_o = Ours(*(jnp.float32(i) for i in range(8)), s0="s", s1=1)
    small_t = Theirs(*(jnp.float32(i) for i in range(8)), s0="s", s1=1)
    jf = jax.jit(lambda x: x.a0 + x.a7)
    jf(small_o).block_until_ready()
    jf(small_t).block_until_ready()
    results["jit dispatch, one instance in, array out"] = (
        paired(lambda: jf(small_o), lambda: jf(small_t)),
        None,
    )

    print(
        f"Python {sys.version.split()[0]}, jax {jax.__version__}; workload: list of 100 "
        "dataclasses, 8 leaves + 2 static fields"
    )
    print("treeclass (generated Python callbacks) vs jax.tree_util.register_dataclass (C++):")
    for label, (timing, target) in results.items():
        print(show(label, timing, target))


if __name__ == "__main__":
    main()
