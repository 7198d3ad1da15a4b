"""Core benchmark: tree_flatten + tree_unflatten of the workload through treeclass's embedded
registry, side by side (one process) with JAX's C++ ``register_dataclass`` path and PyTorch's
Python pytree ``register_dataclass``.

Targets (issue 2): at most 0.5x JAX's C++ path, at most 0.15x PyTorch's Python pytree.
Run: ``python benchmarks/bench_core.py``.
"""

from __future__ import annotations

import sys

from _workload import make_class, make_tree, median_us, row

import treeclass as tc


def main() -> None:
    Ours = make_class("Ours", lambda c: tc.register_dataclass(c, name="bench.Ours"))
    ours_tree = make_tree(Ours)

    def ours_flatten() -> None:
        tc.tree_flatten(ours_tree)

    leaves, spec = tc.tree_flatten(ours_tree)

    def ours_roundtrip() -> None:
        ls, sp = tc.tree_flatten(ours_tree)
        sp.unflatten(ls)

    t_flat = median_us(ours_flatten)
    t_unflat = median_us(lambda: spec.unflatten(leaves))
    t_rt = median_us(ours_roundtrip)
    print(
        f"Python {sys.version.split()[0]}; workload: list of 100 dataclasses, 8 leaves + 2 static"
    )
    print(
        f"treeclass embedded: flatten {t_flat:.1f} us, unflatten {t_unflat:.1f} us, "
        f"flatten+unflatten {t_rt:.1f} us"
    )

    try:
        import jax
    except ImportError:
        print("jax not installed: skipping the JAX comparison")
    else:
        Jx = make_class("Jx")
        jax.tree_util.register_dataclass(Jx)
        jtree = make_tree(Jx)

        def jax_rt() -> None:
            ls, td = jax.tree_util.tree_flatten(jtree)
            jax.tree_util.tree_unflatten(td, ls)

        t_j = median_us(jax_rt)
        print(row("flatten+unflatten vs jax register_dataclass (C++)", t_rt, t_j, 0.5))

    try:
        import torch.utils._pytree as pt
    except ImportError:
        print("torch not installed: skipping the PyTorch comparison")
    else:
        Tx = make_class("Tx", static_meta=False)
        pt.register_dataclass(Tx)
        ttree = make_tree(Tx)

        def torch_rt() -> None:
            ls, ts = pt.tree_flatten(ttree)
            pt.tree_unflatten(ls, ts)

        t_t = median_us(torch_rt)
        print(row("flatten+unflatten vs torch _pytree register_dataclass", t_rt, t_t, 0.15))


if __name__ == "__main__":
    main()
