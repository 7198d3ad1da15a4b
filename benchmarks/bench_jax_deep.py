"""Class-heavy trees through JAX (issue 32): treeclass's two JAX paths and the peers side by side.

Three workloads, each built from fresh classes per side, all through ``jax.tree_util`` and
``jax.jit``:

- **params**: a ``dict`` of 24 ``Layer(w, b, norm)`` with ``norm = Norm(scale, bias, eps)``
  (``eps`` static) plus an ``embed`` array: 97 leaves, 49 class nodes;
- **chain**: ``Link(value, next)`` nested 100 deep: 100 leaves, 100 class nodes;
- **flat**: the shared workload (``_workload.py``), a list of 100 instances with 8 leaves and 2
  static fields (``s0: str``, ``s1: int``);
- **flat, no statics**: the same list with the two statics made data fields (10 leaves each).

A part times the two paths for ``unflatten_calls_init=True`` classes by their number of
fields (a list of 100 instances): where the C++ node stops being faster, which sets
``treeclass._backends.jax.NATIVE_MAX_FIELDS``. The last compares a default class's flatten of
the chain with the smallest hand-written Python callback: what is left is the callback's own
cost, the floor for any class JAX calls back.

Sides (each a fresh set of classes of the same shape):

- ``tc``: ``tc.register_dataclass`` (the default: unflatten stores the fields, never running
  ``__init__``), registered with JAX through treeclass's generated Python callbacks;
- ``tc init``: ``unflatten_calls_init=True``. Where the class has no static field and at most
  three fields (each an ``__init__`` keyword of its own name), treeclass registers it as
  JAX's C++ dataclass node (``Link``, ``Layer``); elsewhere (``Norm``, the flat classes) it
  keeps the generated callbacks;
- ``tc init, callbacks``: the same classes registered with JAX the way treeclass did before
  issue 32 (its generated callbacks). ``jax / tc init, callbacks`` is then the A/B of the two
  paths for any class: on the C++ path no treeclass code runs, so it costs what ``jax`` does;
- ``jax``: ``jax.tree_util.register_dataclass`` (C++), ``flax``: ``flax.struct.dataclass``
  (which calls it), ``equinox``: ``equinox.Module``, ``chex``: ``chex.dataclass`` (no static
  fields: only on the chain).

Operations: ``tree_flatten``; ``tree_flatten`` + ``tree_unflatten``; the dispatch of a jitted
function taking the tree (leaves as jax arrays) and returning one array; the dispatch of a
jitted identity (the tree in and out, so its unflatten is in the dispatch too). ``jax.jit``
for every side (``equinox.filter_jit`` adds its own wrapper's cost, which is not the pytree's).

Timing: CPU time (``time.process_time``), every side of a row run in each round, the order
rotating round by round; each ratio is the median of the per-round ratios (p10-p90 shown),
so load from other processes hits all sides alike.

Run: ``python benchmarks/bench_jax_deep.py`` (``--quick`` for fewer rounds).
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _workload import LEAF_NAMES, N_INSTANCES

import treeclass as tc

N_LAYERS = 24
CHAIN = 100
SIDES = ("tc", "tc init", "tc init, callbacks", "jax", "flax", "equinox", "chex")
#: The ratios printed per row: (numerator side, denominator side).
RATIOS = (
    ("tc init", "tc init, callbacks"),
    ("jax", "tc init, callbacks"),
    ("tc", "jax"),
    ("tc init", "jax"),
    ("tc", "flax"),
    ("tc", "equinox"),
    ("tc", "chex"),
)


# --- the classes, per side ------------------------------------------------------------------


def _dataclass(name: str, fields: list[tuple[str, bool]]) -> type:
    """A fresh dataclass ``name`` with ``fields`` (``(name, static)``; statics default)."""
    ns: dict[str, Any] = {"__annotations__": {}}
    for field, static in fields:
        ns["__annotations__"][field] = Any
        if static:
            default = 1e-5 if field == "eps" else ("s" if field == "s0" else 1)
            ns[field] = dataclasses.field(default=default, metadata={"static": True})
    cls = type(name, (), ns)
    cls.__module__ = __name__
    return dataclasses.dataclass(cls)


def _callbacks_register(cls: type) -> type:
    """Register ``cls`` with JAX the way treeclass did before issue 32 (generated callbacks,
    ``unflatten_calls_init=True``), without registering it with treeclass."""
    from treeclass._backends.jax import register_callbacks
    from treeclass._core.fields import describe
    from treeclass._core.nodes import class_node

    register_callbacks(class_node(describe(cls, rebuild="init"), None, False))
    return cls


def make_classes(side: str, shape: list[tuple[str, list[tuple[str, bool]]]]) -> list[type]:
    """Fresh classes of ``shape`` (``(name, fields)`` each) registered as ``side`` does."""
    import jax

    out: list[type] = []
    for name, fields in shape:
        if side == "equinox":
            import equinox as eqx

            ns: dict[str, Any] = {"__annotations__": {f: Any for f, _ in fields}}
            for f, static in fields:
                if static:
                    ns[f] = eqx.field(static=True, default=1e-5 if f == "eps" else 1)
            cls = type(name, (eqx.Module,), ns)
            cls.__module__ = __name__
            out.append(cls)
            continue
        if side == "chex":
            import chex

            if any(static for _, static in fields):
                raise LookupError("chex has no static fields")
            ns = {"__annotations__": {f: Any for f, _ in fields}}
            cls = type(name, (), ns)
            cls.__module__ = __name__
            out.append(chex.dataclass(cls))
            continue
        if side == "flax":
            import flax.struct

            ns = {"__annotations__": {f: Any for f, _ in fields}}
            for f, static in fields:
                if static:
                    ns[f] = flax.struct.field(pytree_node=False, default=1e-5)
            cls = type(name, (), ns)
            cls.__module__ = __name__
            out.append(flax.struct.dataclass(cls))
            continue
        cls = _dataclass(name, fields)
        if side == "tc":
            tc.register_dataclass(cls)
        elif side == "tc init":
            tc.register_dataclass(cls, unflatten_calls_init=True)
        elif side == "tc init, callbacks":
            _callbacks_register(cls)
        else:
            jax.tree_util.register_dataclass(cls)
        out.append(cls)
    return out


# --- the workloads ------------------------------------------------------------------------


def params(side: str) -> Any:
    norm, layer = make_classes(
        side,
        [
            ("Norm", [("scale", False), ("bias", False), ("eps", True)]),
            ("Layer", [("w", False), ("b", False), ("norm", False)]),
        ],
    )
    rng = np.random.default_rng(0)

    def arr(*shape: int) -> Any:
        return rng.standard_normal(shape, dtype=np.float32)

    tree: dict[str, Any] = {
        f"layer_{i:02d}": layer(w=arr(4, 4), b=arr(4), norm=norm(scale=arr(4), bias=arr(4)))
        for i in range(N_LAYERS)
    }
    tree["embed"] = arr(8, 4)
    return tree


def chain(side: str) -> Any:
    (link,) = make_classes(side, [("Link", [("value", False), ("next", False)])])
    tree = None
    for i in range(CHAIN):
        tree = link(value=np.float32(i), next=tree)
    return tree


def flat(side: str) -> Any:
    fields = [(n, False) for n in LEAF_NAMES] + [("s0", True), ("s1", True)]
    (cls,) = make_classes(side, [("Flat", fields)])
    return [
        cls(**{n: np.float32(i * 8 + j) for j, n in enumerate(LEAF_NAMES)})
        for i in range(N_INSTANCES)
    ]


def wide(side: str) -> Any:
    names = [*LEAF_NAMES, "a8", "a9"]
    (cls,) = make_classes(side, [("Wide", [(n, False) for n in names])])
    return [
        cls(**{n: np.float32(i * 10 + j) for j, n in enumerate(names)}) for i in range(N_INSTANCES)
    ]


WORKLOADS: dict[str, Callable[[str], Any]] = {
    "params": params,
    "chain": chain,
    "flat": flat,
    "flat, no statics": wide,
}


# --- timing -------------------------------------------------------------------------------


def interleaved(
    fns: dict[str, Callable[[], Any]], *, number: int, rounds: int
) -> dict[str, list[float]]:
    """CPU time per call (us) of every side, round by round; the order rotates per round."""
    names = list(fns)
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {n: [] for n in names}
    clock = time.process_time
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            for n in names[r % len(names) :] + names[: r % len(names)]:
                fn = fns[n]
                t0 = clock()
                for _ in range(number):
                    fn()
                times[n].append((clock() - t0) / number * 1e6)
    finally:
        if gc_was:
            gc.enable()
    return times


def ratio(times: dict[str, list[float]], a: str, b: str) -> tuple[float, float, float] | None:
    """The median of the per-round ratios ``a / b`` and their 10th and 90th percentiles."""
    if a not in times or b not in times:
        return None
    rs = [x / y for x, y in zip(times[a], times[b])]
    deciles = statistics.quantiles(rs, n=10)
    return statistics.median(rs), deciles[0], deciles[-1]


def operations(tree: Any) -> dict[str, Callable[[], Any]]:
    import jax

    flatten, unflatten = jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten

    def round_trip() -> Any:
        leaves, treedef = flatten(tree)
        return unflatten(treedef, leaves)

    arrays = jax.tree_util.tree_map(jax.numpy.asarray, tree)
    first = jax.jit(lambda t: jax.tree_util.tree_leaves(t)[0])
    same = jax.jit(lambda t: t)
    first(arrays).block_until_ready()
    jax.block_until_ready(same(arrays))
    return {
        "flatten": lambda: flatten(tree),
        "flatten+unflatten": round_trip,
        "jit dispatch, tree in": lambda: first(arrays),
        "jit dispatch, tree in and out": lambda: same(arrays),
    }


def main() -> None:
    import jax

    quick = "--quick" in sys.argv
    rounds, number = (11, 20) if quick else (31, 50)
    print(
        f"Python {sys.version.split()[0]}, jax {jax.__version__}; CPU time, sides interleaved "
        f"({rounds} rounds of {number} calls), median of per-round ratios (p10-p90)"
    )
    for label, build in WORKLOADS.items():
        trees: dict[str, Any] = {}
        for side in SIDES:
            try:
                trees[side] = build(side)
            except LookupError:
                continue
        reference = jax.tree_util.tree_leaves(trees["jax"])
        for side, tree in trees.items():  # the same leaves and the same structure everywhere
            leaves, treedef = jax.tree_util.tree_flatten(tree)
            assert len(leaves) == len(reference), (label, side)
            if side == "chex":  # (chex orders a node's fields by name)
                leaves = sorted(leaves, key=float)
                expected = sorted(reference, key=float)
            else:
                expected = reference
            assert all(np.array_equal(a, b) for a, b in zip(leaves, expected)), (label, side)
            assert treedef.num_nodes == jax.tree_util.tree_structure(trees["jax"]).num_nodes
        ops = {side: operations(tree) for side, tree in trees.items()}
        leaves_n = len(reference)
        print(f"\n{label} ({leaves_n} leaves; sides: {', '.join(trees)})")
        for op in ops["jax"]:
            times = interleaved(
                {side: ops[side][op] for side in trees}, number=number, rounds=rounds
            )
            medians = "  ".join(f"{side} {statistics.median(t):.1f}" for side, t in times.items())
            print(f"  {op}: us per call: {medians}")
            for a, b in RATIOS:
                r = ratio(times, a, b)
                if r is not None:
                    print(f"    {a} / {b}: {r[0]:.2f}x (p10-p90 {r[1]:.2f}-{r[2]:.2f})")

    by_field_count(rounds, number)
    callback_floor(rounds, number)


def by_field_count(rounds: int, number: int) -> None:
    """The C++ node (``jax``) against the callbacks of an ``unflatten_calls_init`` class."""
    print(
        "\nunflatten_calls_init=True, list of 100 instances with n fields: "
        "C++ node / generated callbacks"
    )
    for n in (1, 2, 3, 4, 6, 8):
        fields = [(f"f{i}", False) for i in range(n)]
        trees = {}
        for side in ("jax", "tc init, callbacks"):
            (cls,) = make_classes(side, [(f"Fields{n}", fields)])
            trees[side] = [cls(**{f: np.float32(i) for f, _ in fields}) for i in range(N_INSTANCES)]
        ops = {side: operations(tree) for side, tree in trees.items()}
        shown = []
        for op in ("flatten", "flatten+unflatten", "jit dispatch, tree in"):
            times = interleaved(
                {side: ops[side][op] for side in trees}, number=number, rounds=rounds
            )
            r = ratio(times, "jax", "tc init, callbacks")
            assert r is not None
            shown.append(f"{op} {r[0]:.2f}x ({r[1]:.2f}-{r[2]:.2f})")
        print(f"  n={n}: " + ", ".join(shown))


@dataclasses.dataclass
class _ByHand:
    value: Any
    next: Any


def _by_hand_flatten(obj: _ByHand) -> tuple[tuple[Any, Any], tuple[()]]:
    return (obj.value, obj.next), ()


def _by_hand_unflatten(aux: tuple[()], children: Any) -> _ByHand:
    obj = object.__new__(_ByHand)
    obj.value, obj.next = children
    return obj


def callback_floor(rounds: int, number: int) -> None:
    """What is left of a default class's flatten: the cost of any Python callback."""
    import jax

    jax.tree_util.register_pytree_node(_ByHand, _by_hand_flatten, _by_hand_unflatten)
    by_hand = None
    for i in range(CHAIN):
        by_hand = _ByHand(np.float32(i), by_hand)
    trees = {"tc": chain("tc"), "by hand": by_hand, "jax": chain("jax")}
    flatten = jax.tree_util.tree_flatten
    times = interleaved(
        {side: (lambda t=t: flatten(t)) for side, t in trees.items()},
        number=number,
        rounds=rounds,
    )
    print(
        "\nchain flatten: a default class, the smallest hand-written Python callback "
        "(register_pytree_node, `lambda o: ((o.value, o.next), ())`) and JAX's C++ node"
    )
    for side in ("tc", "by hand"):
        r = ratio(times, side, "jax")
        assert r is not None
        per_node = (statistics.median(times[side]) - statistics.median(times["jax"])) / CHAIN
        print(
            f"  {side} / jax: {r[0]:.2f}x (p10-p90 {r[1]:.2f}-{r[2]:.2f}), "
            f"{per_node * 1000:.0f} ns more per node"
        )


if __name__ == "__main__":
    main()
