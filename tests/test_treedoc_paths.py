"""Key paths read from a treespec document's node list (``treeclass._treespec.treedoc``).

``leaf_paths(nodes, child_entries(nodes))`` must give, for every tree, exactly the key paths
``tc.keystr`` gives for its leaves (what ``tc.save`` names tensors by and ``tc.load`` looks
them up by): for handwritten trees, for many children alike (computed in bulk) with one that
differs anywhere, and for random trees. With stored lengths (version-1 files), ``None`` as
soon as one disagrees.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from _budget import cases

import treeclass as tc
from treeclass._treespec.format import loads_nodes, spec_to_nodes
from treeclass._treespec.treedoc import child_entries, leaf_paths


@tc.pytree_dataclass(name="tests.treedoc.Pair")
class Pair:
    a: Any
    b: Any = None
    tag: str = tc.field(static=True, default="x")


@tc.pytree_dataclass(name="tests.treedoc.Three")
class Three:
    x: Any
    y: Any
    z: Any


def expected(tree: Any) -> list[str]:
    pairs, _ = tc.tree_flatten_with_path(tree)
    return [tc.keystr(p) for p, _ in pairs]


def computed(tree: Any) -> list[str] | None:
    _, spec = tc.tree_flatten(tree)
    nodes = spec_to_nodes(spec)
    return leaf_paths(nodes, child_entries(nodes))


def reread(tree: Any) -> list[str] | None:
    """The same from the document's text (node lists parsed from JSON, as tc.load has them)."""
    nodes = loads_nodes(tc.treespec_dumps(tc.tree_structure(tree)))
    return leaf_paths(nodes, child_entries(nodes))


def alike(n: int, make: Any) -> dict[str, Any]:
    return {f"k{i:03d}": make(i) for i in range(n)}


TREES: list[Any] = [
    1,
    [],
    {},
    [1, 2, (3, [4, 5])],
    {"a": {"b": {"c": 1}}, "d": [None, 2]},
    alike(40, lambda i: Pair(i, i)),
    alike(40, lambda i: Pair(i)),  # a None child: a node without children under each
    alike(40, lambda i: Pair(i, None if i != 17 else 5)),  # one differs in the middle
    alike(40, lambda i: Pair(i, None if i != 39 else 5)),  # ... at the end
    alike(40, lambda i: Pair(i, None if i != 0 else 5)),  # ... at the start
    alike(40, lambda i: Pair(i, i, tag="y" if i % 2 else "x")),  # statics differ: still alike
    alike(40, lambda i: Pair(i, i) if i != 20 else (i, i)),  # same shape, other keys
    alike(40, lambda i: Pair(i, i) if i != 39 else {"a": i, "b": i}),
    alike(40, lambda i: Three(i, None, (i,))),  # a child with children: not alike in bulk
    alike(40, lambda i: Pair([i, i], {"q": i})),
    alike(30, lambda i: (i, i, None)),
    alike(30, lambda i: [i] * (1 + i % 3)),  # tuples of other lengths
    [Three(i, i, i) for i in range(50)],
    [Three(i, i, i) for i in range(50)] + [Pair(1)],  # more nodes after the alike ones
    {"outer": alike(20, lambda i: alike(20, lambda j: Pair(j)))},
    alike(20, lambda i: Pair(())),  # children without children of their own
    {1: alike(17, lambda i: Pair(i)), "s": [alike(17, lambda i: Three(i, i, None))]},
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_key_paths_from_the_document_are_keystrs(tree: Any) -> None:
    want = expected(tree)
    assert computed(tree) == want
    assert reread(tree) == want


def random_tree(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.25:
        return rng.choice([0, 1.5, None, "s"])
    if roll < 0.45 and depth <= 2:  # many children alike, sometimes one not (not nested deep)
        n = rng.randint(17, 24)
        template = random_tree(rng, depth - 1)
        odd = rng.randrange(n) if rng.random() < 0.5 else -1
        other = random_tree(rng, depth - 1)
        return {f"k{i:02d}": template if i != odd else other for i in range(n)}
    if roll < 0.6:
        return Pair(random_tree(rng, depth - 1), random_tree(rng, depth - 1))
    if roll < 0.7:
        return Three(*(random_tree(rng, depth - 1) for _ in range(3)))
    if roll < 0.85:
        return [random_tree(rng, depth - 1) for _ in range(rng.randint(0, 6))]
    return tuple(random_tree(rng, depth - 1) for _ in range(rng.randint(0, 4)))


@pytest.mark.fuzz
def test_key_paths_of_random_trees() -> None:
    rng = random.Random(18)
    for _ in range(cases(120)):
        tree = random_tree(rng, 3)
        want = expected(tree)
        assert computed(tree) == want
        assert reread(tree) == want


def test_a_dataclass_field_named_like_a_path_stays_distinct() -> None:
    @dataclasses.dataclass
    class Plain:  # not registered: a leaf
        v: int

    tree = alike(20, lambda i: Pair(Plain(i), i))
    assert computed(tree) == expected(tree)


@tc.pytree_dataclass(name="tests.treedoc.Flag")
class Flag:
    v: Any
    flag: Any = tc.field(static=True, default=None)


def test_equal_nodes_written_once_keep_their_statics_exact() -> None:
    # Equal auxdata of one class is one node object in the document's node list (written
    # once): True and 1, 0.0 and -0.0 are equal but not the same static value.
    flags = [True, 1, 1, True, 1.0, 0.0, -0.0, 0.0, "1", None, 2**40, 2**40]
    tree = [Flag(i, f) for i, f in enumerate(flags * 3)]
    doc = tc.treespec_dumps(tc.tree_structure(tree))
    leaves = tc.tree_leaves(tree)
    back = tc.treespec_loads(doc).unflatten(leaves)
    got = [f.flag for f in back]
    assert [type(g) for g in got] == [type(f) for f in flags * 3]
    assert [repr(g) for g in got] == [repr(f) for f in flags * 3]  # -0.0 stays -0.0
    _, spec = tc.tree_flatten(tree)
    nodes = spec_to_nodes(spec)
    assert nodes[3] is nodes[5] and nodes[1] is not nodes[3]  # 1, 1 (one node); True, 1 (two)
