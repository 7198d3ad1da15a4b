"""optree benchmark: flatten + unflatten of the workload *through optree* (``optree.tree_flatten``
/ ``optree.tree_unflatten``, global namespace), a treeclass class side by side (one process) with
the same class made by ``optree.dataclasses.dataclass(namespace="")``.

Both sides pay optree's C++ traversal; what differs is the per-node Python callbacks: treeclass's
generated, loop-free flatten and its unflatten that stores fields without ``__init__``, against
``optree.dataclasses``' callbacks, which rebuild through ``cls(**kw)``.

Target (issue 6): flatten + unflatten at most 0.7x ``optree.dataclasses``.
Run: ``python benchmarks/bench_optree.py``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from _workload import LEAF_NAMES, make_class, make_tree, paired, show

import treeclass as tc


def _optree_dataclass(optree: Any) -> type:
    """The workload class, made by ``optree.dataclasses`` (statics: ``pytree_node=False``)."""
    ns: dict[str, Any] = {"__annotations__": {n: float for n in LEAF_NAMES}}
    ns["__annotations__"].update(s0=str, s1=int)
    ns["s0"] = optree.dataclasses.field(default="s", pytree_node=False)
    ns["s1"] = optree.dataclasses.field(default=1, pytree_node=False)
    cls = type("Od", (), ns)
    cls.__module__ = __name__
    try:
        return optree.dataclasses.dataclass(cls, namespace="")  # type: ignore[no-any-return]
    except ValueError:  # optree < 0.14 refuses "" here; its registry sentinel is the global one
        from optree.registry import __GLOBAL_NAMESPACE

        return optree.dataclasses.dataclass(cls, namespace=__GLOBAL_NAMESPACE)  # type: ignore[no-any-return]


def main() -> None:
    try:
        import optree
    except ImportError:
        print("optree not installed: nothing to compare")
        return

    Ours = make_class("Ours", lambda c: tc.register_dataclass(c, name="bench.optree.Ours"))
    Theirs = _optree_dataclass(optree)
    ours_tree = make_tree(Ours)
    their_tree = make_tree(Theirs)

    # Same structure, same leaves, same static values in the specs' metadata.
    ours_leaves, ours_spec = optree.tree_flatten(ours_tree)
    their_leaves, their_spec = optree.tree_flatten(their_tree)
    assert ours_leaves == their_leaves and len(ours_leaves) == 800
    assert optree.tree_unflatten(ours_spec, ours_leaves) == ours_tree
    assert [dataclasses.astuple(x) for x in optree.tree_unflatten(their_spec, their_leaves)] == [
        dataclasses.astuple(x) for x in their_tree
    ]

    def roundtrip(tree: Any) -> Any:
        def run() -> None:
            leaves, spec = optree.tree_flatten(tree)
            optree.tree_unflatten(spec, leaves)

        return run

    def flatten(tree: Any) -> Callable[[], Any]:
        return lambda: optree.tree_flatten(tree)

    def unflatten(spec: Any, leaves: list[Any]) -> Callable[[], Any]:
        return lambda: optree.tree_unflatten(spec, leaves)

    def with_path(tree: Any) -> Callable[[], Any]:
        return lambda: optree.tree_flatten_with_path(tree)

    print(
        f"Python {sys.version.split()[0]}, optree {optree.__version__}; workload: list of 100 "
        "dataclasses, 8 leaves + 2 static"
    )
    print("treeclass (through optree) vs optree.dataclasses, global namespace, paired runs:")
    print(show("flatten", paired(flatten(ours_tree), flatten(their_tree))))
    print(
        show(
            "unflatten",
            paired(unflatten(ours_spec, ours_leaves), unflatten(their_spec, their_leaves)),
        )
    )
    print(show("flatten_with_path", paired(with_path(ours_tree), with_path(their_tree))))
    print(show("flatten+unflatten", paired(roundtrip(ours_tree), roundtrip(their_tree)), 0.7))


if __name__ == "__main__":
    main()
