"""Core benchmark: tree_flatten + tree_unflatten of the workload through treeclass's embedded
registry, side by side (one process, paired runs) with JAX's C++ ``register_dataclass`` path
and PyTorch's Python pytree ``register_dataclass``.

Targets (issue 2): at most 0.5x JAX's C++ path, at most 0.15x PyTorch's Python pytree.
Run: ``python benchmarks/bench_core.py``.
"""

from __future__ import annotations

import sys

from _workload import make_class, make_tree, paired, show

import treeclass as tc


def main() -> None:
    ours_cls = make_class("Ours", lambda c: tc.register_dataclass(c, name="bench.Ours"))
    ours_tree = make_tree(ours_cls)
    leaves, spec = tc.tree_flatten(ours_tree)
    assert spec.unflatten(leaves) == ours_tree

    def ours_roundtrip() -> None:
        ls, sp = tc.tree_flatten(ours_tree)
        sp.unflatten(ls)

    print(
        f"Python {sys.version.split()[0]}; workload: list of 100 dataclasses, 8 leaves + 2 static"
    )
    print("paired runs: median times and the median of per-run ratios")
    try:
        import jax
    except ImportError:
        print("jax not installed: skipping the JAX comparison")
    else:
        jax_cls = make_class("Jx")
        jax.tree_util.register_dataclass(jax_cls)
        jtree = make_tree(jax_cls)

        def jax_roundtrip() -> None:
            ls, td = jax.tree_util.tree_flatten(jtree)
            jax.tree_util.tree_unflatten(td, ls)

        j_leaves, j_def = jax.tree_util.tree_flatten(jtree)
        print(
            show(
                "flatten vs jax (C++)",
                paired(
                    lambda: tc.tree_flatten(ours_tree), lambda: jax.tree_util.tree_flatten(jtree)
                ),
            )
        )
        print(
            show(
                "unflatten vs jax (C++, runs __init__)",
                paired(
                    lambda: spec.unflatten(leaves),
                    lambda: jax.tree_util.tree_unflatten(j_def, j_leaves),
                ),
            )
        )
        print(
            show(
                "flatten+unflatten vs jax register_dataclass (C++)",
                paired(ours_roundtrip, jax_roundtrip),
                0.5,
            )
        )

    try:
        import torch.utils._pytree as pt
    except ImportError:
        print("torch not installed: skipping the PyTorch comparison")
    else:
        torch_cls = make_class("Tx", static_meta=False)
        pt.register_dataclass(torch_cls)
        ttree = make_tree(torch_cls)

        def torch_roundtrip() -> None:
            ls, ts = pt.tree_flatten(ttree)
            pt.tree_unflatten(ls, ts)

        print(
            show(
                "flatten+unflatten vs torch _pytree register_dataclass",
                paired(ours_roundtrip, torch_roundtrip, number=20),
                0.15,
            )
        )


if __name__ == "__main__":
    main()
