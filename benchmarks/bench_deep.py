"""Deep and class-heavy trees in the embedded registry (issue 32), JAX's C++ side by side.

1. ``tc.tree_flatten`` of a chain ``Link(value, next)`` 100 deep against JAX's C++
   ``tree_flatten`` of the same chain registered with ``jax.tree_util.register_dataclass``.
   Target: at most 2.5x.
2. ``tc.tree_flatten_with_path`` against ``jax.tree_util.tree_flatten_with_path`` on the chain
   (target at most 2.5x) and on the params tree (target at most 1.5x): a ``dict`` of 24
   ``Layer(w, b, norm=Norm(scale, bias, eps static))`` plus an ``embed`` array, 97 leaves.
   The same tree flattened again, as a training loop does: its key paths are kept. Each row
   is followed by the same with a structure not seen before (no key paths kept), untargeted.
3. ``tc.treespec_loads`` of the chain's document at depth 10, 30 and 100 against
   ``pickle.loads`` of JAX's ``PyTreeDef`` of the same chain. Target: at most 1.5x.
4. Unflatten cost per leaf from 1,000 to 100,000 leaves (a list of ``Pair(a, b)`` instances,
   and the params shape repeated): ``spec.unflatten`` against JAX's ``tree_unflatten``, and the
   growth of each side's cost per leaf from the smallest tree to the largest. Target: flat
   (treeclass's growth at most JAX's, within noise).

Timing: CPU time, the two sides in alternating runs, median of the per-run ratios with their
10th-90th percentiles (``_workload.paired``).
Run: ``python benchmarks/bench_deep.py``.
"""

from __future__ import annotations

import dataclasses
import pickle
import sys
from typing import Any

import numpy as np
from _workload import paired, show

import treeclass as tc

N_LAYERS = 24


@dataclasses.dataclass
class Link:
    value: Any
    next: Any


@dataclasses.dataclass
class JLink:
    value: Any
    next: Any


@dataclasses.dataclass
class RLink:  # the chain's link, the other way round: the leaf after the node
    next: Any
    value: Any


@dataclasses.dataclass
class JRLink:
    next: Any
    value: Any


@dataclasses.dataclass
class Norm:
    scale: Any
    bias: Any
    eps: float = dataclasses.field(default=1e-5, metadata={"static": True})


@dataclasses.dataclass
class JNorm:
    scale: Any
    bias: Any
    eps: float = dataclasses.field(default=1e-5, metadata={"static": True})


@dataclasses.dataclass
class Layer:
    w: Any
    b: Any
    norm: Any


@dataclasses.dataclass
class JLayer:
    w: Any
    b: Any
    norm: Any


@dataclasses.dataclass
class Pair:
    a: Any
    b: Any


@dataclasses.dataclass
class JPair:
    a: Any
    b: Any


def register() -> None:
    import jax

    for cls in (Link, RLink, Norm, Layer, Pair):
        tc.register_dataclass(cls, name=f"bench.deep.{cls.__name__}")
    jax.tree_util.register_dataclass(JLink, data_fields=["value", "next"], meta_fields=[])
    jax.tree_util.register_dataclass(JRLink, data_fields=["next", "value"], meta_fields=[])
    jax.tree_util.register_dataclass(JNorm, data_fields=["scale", "bias"], meta_fields=["eps"])
    jax.tree_util.register_dataclass(JLayer, data_fields=["w", "b", "norm"], meta_fields=[])
    jax.tree_util.register_dataclass(JPair, data_fields=["a", "b"], meta_fields=[])


def chain(link: type, depth: int) -> Any:
    tree = None
    for i in range(depth):
        tree = link(float(i), tree)
    return tree


def rchain(link: type, depth: int) -> Any:
    tree = None
    for i in range(depth):
        tree = link(tree, float(i))
    return tree


def params(layer: type, norm: type) -> dict[str, Any]:
    rng = np.random.default_rng(0)

    def arr(*shape: int) -> Any:
        return rng.standard_normal(shape, dtype=np.float32)

    tree: dict[str, Any] = {
        f"layer_{i:02d}": layer(arr(4, 4), arr(4), norm(arr(4), arr(4))) for i in range(N_LAYERS)
    }
    tree["embed"] = arr(8, 4)
    return tree


def flatten_rows() -> None:
    import jax

    jtu = jax.tree_util
    ours, theirs = chain(Link, 100), chain(JLink, 100)
    assert tc.tree_leaves(ours) == jtu.tree_leaves(theirs)
    print("chain Link(value, next), 100 deep (100 leaves, 101 nodes)")
    timing = paired(lambda: tc.tree_flatten(ours), lambda: jtu.tree_flatten(theirs), number=50)
    print(show("  tc.tree_flatten vs jax (C++)", timing, 2.5))
    timing = paired(
        lambda: tc.tree_flatten_with_path(ours),
        lambda: jtu.tree_flatten_with_path(theirs),
        number=50,
    )
    print(show("  tc.tree_flatten_with_path vs jax (C++)", timing, 2.5))
    cold_rows(ours, theirs)

    ours, theirs = rchain(RLink, 100), rchain(JRLink, 100)
    assert tc.tree_leaves(ours) == jtu.tree_leaves(theirs)
    timing = paired(lambda: tc.tree_flatten(ours), lambda: jtu.tree_flatten(theirs), number=50)
    print(show("  the same, RLink(next, value): tc.tree_flatten", timing, 2.5))

    ours, theirs = params(Layer, Norm), params(JLayer, JNorm)
    o_pairs = tc.tree_flatten_with_path(ours)[0]
    t_pairs = jtu.tree_flatten_with_path(theirs)[0]
    assert len(o_pairs) == len(t_pairs) == 4 * N_LAYERS + 1
    assert [tc.keystr(p) for p, _ in o_pairs] == [jtu.keystr(p) for p, _ in t_pairs]
    print(f"params: dict of {N_LAYERS} Layer(w, b, Norm(scale, bias, static eps)) + embed")
    timing = paired(lambda: tc.tree_flatten(ours), lambda: jtu.tree_flatten(theirs), number=50)
    print(show("  tc.tree_flatten vs jax (C++)", timing))
    timing = paired(
        lambda: tc.tree_flatten_with_path(ours),
        lambda: jtu.tree_flatten_with_path(theirs),
        number=50,
    )
    print(show("  tc.tree_flatten_with_path vs jax (C++)", timing, 1.5))
    cold_rows(ours, theirs)


def cold_rows(ours: Any, theirs: Any) -> None:
    """``tc.tree_flatten_with_path`` of a structure not seen before: its key paths read off
    the spec, none kept (the rows above: a structure seen before, its paths kept)."""
    import jax

    from treeclass._core import tree as tree_module

    kept = getattr(tree_module, "_PATHS_KEPT", None)
    if kept is None:  # (a checkout that keeps none)
        return

    def cold() -> Any:
        kept.clear()
        return tc.tree_flatten_with_path(ours)

    timing = paired(cold, lambda: jax.tree_util.tree_flatten_with_path(theirs), number=50)
    print(show("    the same, a structure not seen before (no paths kept)", timing))


def loads_rows() -> None:
    import jax

    from treeclass._treespec import format as fmt

    print("treespec_loads of a chain's document vs pickle.loads of JAX's PyTreeDef")
    for depth in (10, 30, 100):
        text = tc.treespec_dumps(tc.tree_structure(chain(Link, depth)))
        data = pickle.dumps(jax.tree_util.tree_structure(chain(JLink, depth)))
        assert tc.treespec_loads(text) == tc.tree_structure(chain(Link, depth))
        assert pickle.loads(data) == jax.tree_util.tree_structure(chain(JLink, depth))
        timing = paired(
            lambda text=text: tc.treespec_loads(text),
            lambda data=data: pickle.loads(data),
            number=max(5, 2000 // depth),
        )
        print(show(f"  depth {depth:3d} ({len(text)} B vs {len(data)} B)", timing, 1.5))
        kept = getattr(fmt, "_KEPT", None)
        if kept is not None:  # the first document naming its classes in the process

            def cold(text: str = text, kept: dict[str, Any] = kept) -> None:
                kept.clear()
                tc.treespec_loads(text)

            timing = paired(
                cold, lambda data=data: pickle.loads(data), number=max(5, 2000 // depth)
            )
            print(show("    the same, no node texts kept from earlier documents", timing))


def unflatten_rows() -> None:
    import jax

    jtu = jax.tree_util
    print("unflatten cost per leaf, 1k -> 100k leaves (ns per leaf: treeclass / jax)")
    shared = object()
    for label, ours_of, theirs_of, one_leaf in (
        (
            "list of Pair(a, b)",
            lambda n: [Pair(i, i) for i in range(n // 2)],
            lambda n: [JPair(i, i) for i in range(n // 2)],
            False,
        ),
        (
            "params trees",
            lambda n: [params(Layer, Norm) for _ in range(n // 97)],
            lambda n: [params(JLayer, JNorm) for _ in range(n // 97)],
            False,
        ),
        (  # the same, every leaf one object: no leaf's memory read
            "params trees, one leaf object",
            lambda n: [params(Layer, Norm) for _ in range(n // 97)],
            lambda n: [params(JLayer, JNorm) for _ in range(n // 97)],
            True,
        ),
    ):
        first: tuple[float, float] | None = None
        for n in (1_000, 10_000, 100_000):
            o_leaves, o_spec = tc.tree_flatten(ours_of(n))
            t_leaves, t_def = jtu.tree_flatten(theirs_of(n))
            count = len(o_leaves)
            if one_leaf:
                o_leaves = t_leaves = [shared] * count
            timing = paired(
                lambda o_spec=o_spec, o_leaves=o_leaves: o_spec.unflatten(o_leaves),
                lambda t_def=t_def, t_leaves=t_leaves: jtu.tree_unflatten(t_def, t_leaves),
                number=max(1, 20_000 // count),
                repeat=11 if n == 100_000 else 21,
            )
            o_ns, t_ns = timing.ours * 1000 / count, timing.theirs * 1000 / count
            if first is None:
                first = (o_ns, t_ns)
            growth = f"growth {o_ns / first[0]:.2f}x / {t_ns / first[1]:.2f}x"
            print(show(f"  {label}, {count} leaves: {o_ns:.0f} / {t_ns:.0f} ns, {growth}", timing))


def plain_build(n_trees: int, leaf: object) -> list[dict[str, Any]]:
    """``n_trees`` params trees made by plain Python code, no walker (the unflatten floor)."""
    new = object.__new__
    out = []
    for _ in range(n_trees):
        tree: dict[str, Any] = {}
        for i in range(N_LAYERS):
            norm = new(Norm)
            norm.scale, norm.bias, norm.eps = leaf, leaf, 1e-5
            layer = new(Layer)
            layer.w, layer.b, layer.norm = leaf, leaf, norm
            tree[f"layer_{i:02d}"] = layer
        tree["embed"] = leaf
        out.append(tree)
    return out


def plain_rows() -> None:
    """The growth of plain Python code making the same objects: what is left is allocation."""
    print("plain Python code making params trees' objects (one leaf object), ns per leaf")
    first: float | None = None
    leaf = object()
    for n_trees in (10, 103, 1030):
        timing = paired(
            lambda n_trees=n_trees: plain_build(n_trees, leaf),
            lambda: None,
            number=max(1, 200 // n_trees),
            repeat=11,
        )
        ns = timing.ours * 1000 / (n_trees * 97)
        first = first or ns
        print(f"  {n_trees * 97} leaves: {ns:.0f} ns, growth {ns / first:.2f}x")


def path_costs() -> None:
    """Where ``tc.tree_flatten_with_path``'s time goes: flatten, key paths read off the spec
    (a structure not seen before), pairing, and JAX's flatten against its flatten_with_path
    (CPU time, medians of alternating runs)."""
    import jax

    from treeclass._core import tree as tree_module

    key_paths = getattr(tree_module, "_read_key_paths", getattr(tree_module, "_key_paths", None))
    if key_paths is None:
        print("(no _key_paths in this checkout: no split)")
        return
    jtu = jax.tree_util
    print(
        "tree_flatten_with_path split (us): flatten + key paths read (kept) + pairs; "
        "jax: flatten, with path"
    )
    for label, ours, theirs in (
        ("chain of 100", chain(Link, 100), chain(JLink, 100)),
        ("params", params(Layer, Norm), params(JLayer, JNorm)),
    ):
        leaves, spec = tc.tree_flatten(ours)
        entries = spec._entries
        paths = key_paths(entries)
        flat = paired(lambda ours=ours: tc.tree_flatten(ours), lambda: None, number=50)
        walk = paired(lambda entries=entries: key_paths(entries), lambda: None, number=50)
        pair = paired(lambda p=paths, x=leaves: list(zip(p, x)), lambda: None, number=50)
        jax_times = paired(
            lambda theirs=theirs: jtu.tree_flatten(theirs),
            lambda theirs=theirs: jtu.tree_flatten_with_path(theirs),
            number=50,
        )
        kept = ""
        if hasattr(tree_module, "_read_key_paths"):  # paths kept for a structure seen before
            for _ in range(8):
                tree_module._key_paths(entries)
            found = paired(lambda e=entries: tree_module._key_paths(e), lambda: None, number=50)
            kept = f" (kept: {found.ours:.1f})"
        print(
            f"  {label}: {flat.ours:.1f} + {walk.ours:.1f}{kept} + {pair.ours:.1f} "
            f"({len(entries)} entries: {walk.ours * 1000 / len(entries):.0f} ns each); "
            f"jax {jax_times.ours:.1f}, {jax_times.theirs:.1f}"
        )


def main() -> None:
    import jax

    print(
        f"Python {sys.version.split()[0]}, jax {jax.__version__}; CPU time, alternating runs, "
        "median ratio (p10-p90)"
    )
    register()
    flatten_rows()
    loads_rows()
    unflatten_rows()
    plain_rows()
    path_costs()


if __name__ == "__main__":
    main()
