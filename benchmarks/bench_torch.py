"""PyTorch benchmark: flatten + unflatten of the workload through torch's Python pytree
(``torch.utils._pytree``), treeclass's registration side by side (one process) with
``torch.utils._pytree.register_dataclass`` (which has no static fields: ``s0``/``s1`` become
leaves there, as a torch user would get).

Target (issue 5): at most 0.7x torch's ``register_dataclass``. Also shown: the same through
torch's C++ pytree (``torch.utils._cxx_pytree``, where torch's ``register_dataclass`` classes are
leaves, so minimal hand-written ``register_pytree_node`` callbacks are the comparison), and
``treespec_dumps`` / ``treespec_loads``.
Run: ``python benchmarks/bench_torch.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from _workload import make_class, make_tree, median_us, paired, show

import treeclass as tc


def paired_row(
    label: str,
    ours: Callable[[], object],
    theirs: Callable[[], object],
    target: float | None = None,
    **kw: int,
) -> str:
    return show(label, paired(ours, theirs, **kw), target)


def main() -> None:
    import torch
    import torch.utils._pytree as pt

    Ours = make_class("Ours", lambda c: tc.register_dataclass(c, name="bench.torch.Ours"))
    ours_tree = make_tree(Ours)
    Theirs = make_class("Theirs", static_meta=False)
    pt.register_dataclass(Theirs)
    theirs_tree = make_tree(Theirs)

    def roundtrip(flatten: Callable[[Any], Any], unflatten: Callable[..., Any], tree: Any) -> Any:
        def run() -> None:
            leaves, spec = flatten(tree)
            unflatten(leaves, spec)

        return run

    ol, ospec = pt.tree_flatten(ours_tree)
    tl, tspec = pt.tree_flatten(theirs_tree)
    assert pt.tree_unflatten(ol, ospec) == ours_tree
    assert pt.tree_unflatten(tl, tspec) == theirs_tree

    print(
        f"Python {sys.version.split()[0]}, torch {torch.__version__}; workload: list of 100 "
        "dataclasses, 8 leaves + 2 static; ratios are medians of alternating runs"
    )
    py = (pt.tree_flatten, pt.tree_unflatten)
    print(
        paired_row(
            "flatten+unflatten (Python pytree) vs register_dataclass",
            roundtrip(*py, ours_tree),
            roundtrip(*py, theirs_tree),
            0.7,
        )
    )
    print(
        paired_row(
            "  flatten only",
            lambda: pt.tree_flatten(ours_tree),
            lambda: pt.tree_flatten(theirs_tree),
        )
    )
    print(
        paired_row(
            "  unflatten only",
            lambda: pt.tree_unflatten(ol, ospec),
            lambda: pt.tree_unflatten(tl, tspec),
        )
    )

    # Frozen classes (with and without slots) store through descriptors and carry a check
    # for Dynamo tracing (issue 11): torch.compiler.is_dynamo_compiling(), ~12 ns per node.
    for label, options in (
        ("frozen", {"frozen": True}),
        ("frozen+slots", {"frozen": True, "slots": True}),
    ):
        tag = label.replace("+", "_")
        OursF = make_class(
            f"Ours_{tag}",
            lambda c, tag=tag: tc.register_dataclass(c, name=f"bench.torch.Ours_{tag}"),
            **options,
        )
        TheirsF = make_class(f"Theirs_{tag}", static_meta=False, **options)
        pt.register_dataclass(TheirsF)
        of, tf = make_tree(OursF), make_tree(TheirsF)
        print(
            paired_row(
                f"  {label}: flatten+unflatten (Python pytree)",
                roundtrip(*py, of),
                roundtrip(*py, tf),
                0.7,
            )
        )
        ofl, ofspec = pt.tree_flatten(of)
        tfl, tfspec = pt.tree_flatten(tf)
        print(
            paired_row(
                f"  {label}: unflatten only",
                lambda ofl=ofl, ofspec=ofspec: pt.tree_unflatten(ofl, ofspec),
                lambda tfl=tfl, tfspec=tfspec: pt.tree_unflatten(tfl, tfspec),
            )
        )

    import torch.utils._cxx_pytree as cx

    # The minimal hand-written callbacks: fields read by name into a list, the instance made
    # with object.__new__ and its fields stored one by one (no getattr loop, no __init__).
    Hand = make_class("Hand")
    new = object.__new__

    def hand_flatten(o: Any) -> tuple[list[Any], Any]:
        return [o.a0, o.a1, o.a2, o.a3, o.a4, o.a5, o.a6, o.a7], (o.s0, o.s1)

    def hand_unflatten(values: Any, ctx: Any) -> Any:
        obj = new(Hand)
        obj.a0, obj.a1, obj.a2, obj.a3, obj.a4, obj.a5, obj.a6, obj.a7 = values
        obj.s0, obj.s1 = ctx
        return obj

    pt.register_pytree_node(
        Hand, hand_flatten, hand_unflatten, serialized_type_name="bench.torch.Hand"
    )
    hand_tree = make_tree(Hand)
    cxx = (cx.tree_flatten, cx.tree_unflatten)
    print(
        paired_row(
            "flatten+unflatten (C++ pytree) vs hand-written callbacks",
            roundtrip(*cxx, ours_tree),
            roundtrip(*cxx, hand_tree),
        )
    )
    hspec = pt.tree_structure(hand_tree)
    print(
        paired_row(
            "treespec_dumps vs hand-written (json.dumps context)",
            lambda: pt.treespec_dumps(ospec),
            lambda: pt.treespec_dumps(hspec),
            number=10,
            repeat=11,
        )
    )
    text = pt.treespec_dumps(ospec)
    load = pt.treespec_loads.__wrapped__
    print(
        f"{'treespec_loads (uncached) of the workload spec':<58} "
        f"{median_us(lambda: load(text), number=10, repeat=11):9.1f} us"
    )


if __name__ == "__main__":
    main()
