"""Parity: the same tree means the same thing in every registry.

For hypothesis-generated nested trees of registered dataclasses (plain, frozen + slots, static
fields, ``None`` fields, ``return_none_fields=True``), attrs classes, namedtuples (registered
and not), dicts, ``OrderedDict``s, ``defaultdict``s, lists and tuples, the embedded registry,
JAX (``jax.tree_util``), torch's Python pytree (``torch.utils._pytree``), torch's C++ pytree
(``torch.utils._cxx_pytree``) and optree (global namespace) give

- the same leaves, in the same order;
- the same key paths, as ``keystr`` strings (treeclass ``tc.keystr``, ``jax.tree_util.keystr``,
  ``torch.utils._pytree.keystr``, optree accessors' ``codify()``);
- equal objects of the same types when they unflatten their own spec with the leaves.

``agreeing_trees`` keeps to what every framework does alike: dicts built in sorted key
order, and no ``None`` where a child would be (a ``None`` field of a class registered with
``return_none_fields=False`` is part of the structure, not a child, so it is fine). Each
difference by design has its own ``test_difference_*`` test below, asserting the actual
behaviour; ``docs/parity.md`` lists them all in one table.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import AttrsNode, FrozenSlots, KeepNone, Pair, Plain, ThirdParty

import treeclass as tc

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
optree = pytest.importorskip("optree")
jtu = pytest.importorskip("jax.tree_util")
tp = pytest.importorskip("torch.utils._pytree")
cp = pytest.importorskip("torch.utils._cxx_pytree")

#: A namedtuple treeclass has no name for: every registry flattens it all the same.
Anon = collections.namedtuple("Anon", "first second")

PARITY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Leaves every framework takes as leaves: Python ints and floats (no nan, so == holds).
leaves = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
)
keys = st.text(alphabet="abcxyz_", max_size=3)
tags = st.sampled_from(["p", "q", ""])


def _sorted_dict(d: dict[str, Any]) -> dict[str, Any]:
    return dict(sorted(d.items()))


def _sorted_ddict(d: dict[str, Any]) -> collections.defaultdict[str, Any]:
    return collections.defaultdict(list, sorted(d.items()))


def _containers(children: st.SearchStrategy[Any], maybe: st.SearchStrategy[Any]) -> Any:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4).map(_sorted_dict),
        st.dictionaries(keys, children, max_size=3).map(collections.OrderedDict),
        st.dictionaries(keys, children, max_size=3).map(_sorted_ddict),
        st.builds(Plain, children, maybe, tags),
        st.builds(FrozenSlots, children, st.tuples(st.integers(0, 3))),
        st.builds(AttrsNode, children, maybe, st.sampled_from(["m", "n"])),
        st.builds(ThirdParty, maybe, st.sampled_from(["k", "j"])),
    )


def _agreeing(children: st.SearchStrategy[Any], *, unnamed: bool = True) -> Any:
    # ``maybe`` goes only into fields of return_none_fields=False classes, where None is part
    # of the structure and never a child.
    maybe = st.one_of(st.none(), children)
    return st.one_of(
        _containers(children, maybe),
        st.builds(KeepNone, children, children),  # return_none_fields=True, no None values
        st.builds(Pair, children, children),
        *([st.builds(Anon, children, children)] if unnamed else []),
    )


def _named(children: st.SearchStrategy[Any]) -> Any:
    return _agreeing(children, unnamed=False)


def _with_none(children: st.SearchStrategy[Any]) -> Any:
    maybe = st.one_of(st.none(), children)
    return st.one_of(
        _containers(maybe, maybe),
        st.builds(KeepNone, maybe, maybe),
        st.builds(Pair, maybe, maybe),
    )


#: Trees every registry treats alike.
agreeing_trees = st.recursive(leaves, _agreeing, max_leaves=20)
#: The same, without the unnamed namedtuple (whose structure cannot be serialized).
named_trees = st.recursive(leaves, _named, max_leaves=20)
#: Trees with ``None`` where children are (dicts still in sorted key order).
trees_with_none = st.recursive(st.one_of(leaves, st.none()), _with_none, max_leaves=20)


def _same_leaves(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y or (type(x) is type(y) and x == y) for x, y in zip(a, b))


def _same_object(rebuilt: Any, tree: Any) -> None:
    """Equal, and of the same types at every node (the embedded spec compares node types)."""
    assert rebuilt == tree
    assert tc.tree_structure(rebuilt) == tc.tree_structure(tree)


# --- where every registry agrees ----------------------------------------------------------


@PARITY
@given(agreeing_trees)
def test_same_leaves_in_the_same_order(tree: Any) -> None:
    expected = tc.tree_leaves(tree)
    assert _same_leaves(jtu.tree_leaves(tree), expected)
    assert _same_leaves(tp.tree_leaves(tree), expected)
    assert _same_leaves(cp.tree_leaves(tree), expected)
    assert _same_leaves(optree.tree_leaves(tree), expected)


@PARITY
@given(agreeing_trees)
def test_same_key_paths(tree: Any) -> None:
    expected = [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]]
    assert [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]] == expected
    assert [tp.keystr(p) for p, _ in tp.tree_flatten_with_path(tree)[0]] == expected
    accessors, _, _ = optree.tree_flatten_with_accessor(tree)
    assert [a.codify("") for a in accessors] == expected


@PARITY
@given(agreeing_trees)
def test_rebuild_equal_objects_of_the_same_types(tree: Any) -> None:
    leaves_, spec = tc.tree_flatten(tree)
    _same_object(spec.unflatten(leaves_), tree)
    leaves_, treedef = jtu.tree_flatten(tree)
    _same_object(jtu.tree_unflatten(treedef, leaves_), tree)
    leaves_, tspec = tp.tree_flatten(tree)
    _same_object(tp.tree_unflatten(leaves_, tspec), tree)
    leaves_, cspec = cp.tree_flatten(tree)
    _same_object(cp.tree_unflatten(leaves_, cspec), tree)
    leaves_, ospec = optree.tree_flatten(tree)
    _same_object(optree.tree_unflatten(ospec, leaves_), tree)


@PARITY
@given(named_trees)
def test_same_treespec_document(tree: Any) -> None:
    """The conversion writes one document for one structure, whatever framework made it."""
    expected = tc.treespec_dumps(tc.tree_structure(tree))
    assert tc.treespec_dumps(jtu.tree_structure(tree)) == expected
    assert tc.treespec_dumps(tp.tree_structure(tree)) == expected
    assert tc.treespec_dumps(cp.tree_structure(tree)) == expected
    assert tc.treespec_dumps(optree.tree_structure(tree)) == expected


def test_agreeing_trees_cover_every_node_kind() -> None:
    """A fixed tree with one of each node kind (hypothesis may draw few of some)."""
    tree = {
        "a": Plain(1, None, "t"),
        "b": [FrozenSlots(2.5), (KeepNone(3, 4), Pair(5, Anon(6, 7)))],
        "c": AttrsNode(8, 9),
        "d": collections.defaultdict(list, {"p": 10, "q": 11}),
        "o": collections.OrderedDict([("z", 12), ("y", ThirdParty(13))]),
    }
    test_same_leaves_in_the_same_order.hypothesis.inner_test(tree)  # type: ignore[attr-defined]
    test_same_key_paths.hypothesis.inner_test(tree)  # type: ignore[attr-defined]
    test_rebuild_equal_objects_of_the_same_types.hypothesis.inner_test(tree)  # type: ignore[attr-defined]
    assert tc.tree_leaves(tree) == [1, 2.5, *range(3, 14)]
    assert [tc.keystr(p) for p, _ in tc.tree_flatten_with_path(tree)[0]] == [
        "['a'].a",
        "['b'][0].x",
        "['b'][1][0].p",
        "['b'][1][0].q",
        "['b'][1][1].left",
        "['b'][1][1].right.first",
        "['b'][1][1].right.second",
        "['c'].u",
        "['c'].v",
        "['d']['p']",
        "['d']['q']",
        "['o']['z']",
        "['o']['y'].value",
    ]


# --- differences by design: one test each -------------------------------------------------


def test_difference_torch_dict_keeps_insertion_order() -> None:
    """torch (both pytrees) orders a dict's children by insertion; the others by sorted key."""
    tree = {"b": 1, "a": 2, "c": {"z": 3, "y": 4}}
    assert tc.tree_leaves(tree) == [2, 1, 4, 3]
    assert jtu.tree_leaves(tree) == [2, 1, 4, 3]
    assert optree.tree_leaves(tree) == [2, 1, 4, 3]
    assert tp.tree_leaves(tree) == [1, 2, 3, 4]
    assert cp.tree_leaves(tree) == [1, 2, 3, 4]
    assert [tp.keystr(p) for p, _ in tp.tree_flatten_with_path(tree)[0]] == [
        "['b']",
        "['a']",
        "['c']['z']",
        "['c']['y']",
    ]
    # Two dicts with the same items are one structure except in torch.
    other = {"a": 2, "b": 1, "c": {"y": 4, "z": 3}}
    assert tc.tree_structure(tree) == tc.tree_structure(other)
    assert jtu.tree_structure(tree) == jtu.tree_structure(other)
    assert optree.tree_structure(tree) == optree.tree_structure(other)
    assert tp.tree_structure(tree) != tp.tree_structure(other)
    assert cp.tree_structure(tree) != cp.tree_structure(other)


def test_difference_torch_defaultdict_keeps_insertion_order() -> None:
    tree = collections.defaultdict(list, {"b": 1, "a": 2})
    assert tc.tree_leaves(tree) == jtu.tree_leaves(tree) == optree.tree_leaves(tree) == [2, 1]
    assert tp.tree_leaves(tree) == cp.tree_leaves(tree) == [1, 2]


@PARITY
@given(st.dictionaries(keys, leaves, min_size=2, max_size=5))
def test_difference_dict_rebuild_order(d: dict[str, Any]) -> None:
    """Which key order an unflattened dict has (dicts still compare equal everywhere).

    treeclass and JAX build it in sorted key order; optree and torch (both pytrees) in the
    original insertion order (optree remembers it in the spec; torch orders by it).
    """
    rebuilt = {
        "tc": tc.tree_unflatten(*reversed(tc.tree_flatten(d))),
        "jax": jtu.tree_unflatten(jtu.tree_structure(d), jtu.tree_leaves(d)),
        "optree": optree.tree_unflatten(optree.tree_structure(d), optree.tree_leaves(d)),
        "torch": tp.tree_unflatten(*tp.tree_flatten(d)),
        "cxx": cp.tree_unflatten(*cp.tree_flatten(d)),
    }
    for r in rebuilt.values():
        assert r == d
    assert list(rebuilt["tc"]) == list(rebuilt["jax"]) == sorted(d)
    assert list(rebuilt["optree"]) == list(rebuilt["torch"]) == list(rebuilt["cxx"]) == list(d)


def test_difference_ordered_dict_keeps_insertion_order_everywhere() -> None:
    """Not a difference: every registry keeps an OrderedDict's order (stated for the table)."""
    tree = collections.OrderedDict([("b", 1), ("a", 2)])
    for leaves_ in (
        tc.tree_leaves(tree),
        jtu.tree_leaves(tree),
        optree.tree_leaves(tree),
        tp.tree_leaves(tree),
        cp.tree_leaves(tree),
    ):
        assert leaves_ == [1, 2]
    other = collections.OrderedDict([("a", 2), ("b", 1)])
    assert tc.tree_structure(tree) != tc.tree_structure(other)
    assert jtu.tree_structure(tree) != jtu.tree_structure(other)
    assert optree.tree_structure(tree) != optree.tree_structure(other)
    assert tp.tree_structure(tree) != tp.tree_structure(other)


@PARITY
@given(trees_with_none)
def test_difference_torch_none_is_a_leaf(tree: Any) -> None:
    """torch (both pytrees) makes a None child a leaf; the others a node with no children.

    So torch's leaves are treeclass's leaves with ``is_leaf=lambda x: x is None``, except the
    None *fields* of a ``return_none_fields=False`` class, which torch keeps out of its
    children (in the context); everywhere else a None field is a child like any other.
    """
    with_none = tc.tree_leaves(tree, is_leaf=lambda x: x is None)
    without = tc.tree_leaves(tree)
    torch_leaves = _leaves_as_torch_sees_them(tree)
    assert _same_leaves(tp.tree_leaves(tree), torch_leaves)
    assert _same_leaves(cp.tree_leaves(tree), torch_leaves)
    assert _same_leaves(jtu.tree_leaves(tree), without)
    assert _same_leaves(optree.tree_leaves(tree), without)
    assert _same_leaves(optree.tree_leaves(tree, none_is_leaf=True), with_none)
    # Every registry still rebuilds the same object.
    _same_object(tp.tree_unflatten(*tp.tree_flatten(tree)), tree)
    _same_object(cp.tree_unflatten(*cp.tree_flatten(tree)), tree)
    _same_object(jtu.tree_unflatten(jtu.tree_structure(tree), jtu.tree_leaves(tree)), tree)
    leaves_, ospec = optree.tree_flatten(tree)
    _same_object(optree.tree_unflatten(ospec, leaves_), tree)


def _leaves_as_torch_sees_them(tree: Any) -> list[Any]:
    """treeclass's leaves with None as a leaf, less the None fields torch leaves out."""
    out = []
    for path, leaf in tc.tree_flatten_with_path(tree, is_leaf=lambda x: x is None)[0]:
        if leaf is None and path and isinstance(path[-1], tc.GetAttrKey):
            parent = tree
            for key in path[:-1]:
                parent = (
                    getattr(parent, key.name)
                    if isinstance(key, tc.GetAttrKey)
                    else parent[key.idx if isinstance(key, tc.SequenceKey) else key.key]
                )
            from treeclass._core.registry import registered_node

            node = registered_node(type(parent))
            if node is not None and node.kind != "namedtuple" and not node.return_none_fields:
                continue  # a None field torch keeps in the context
        out.append(leaf)
    return out


def test_difference_torch_none_is_a_leaf_examples() -> None:
    tree = {"a": None, "b": (1, None), "c": KeepNone(None, 2), "d": Plain(3, None)}
    assert tc.tree_leaves(tree) == jtu.tree_leaves(tree) == optree.tree_leaves(tree) == [1, 2, 3]
    assert tp.tree_leaves(tree) == cp.tree_leaves(tree) == [None, 1, None, None, 2, 3]
    assert [tp.keystr(p) for p, _ in tp.tree_flatten_with_path(tree)[0]] == [
        "['a']",
        "['b'][0]",
        "['b'][1]",
        "['c'].p",
        "['c'].q",
        "['d'].a",
    ]


def test_difference_cxx_pytree_has_no_key_paths() -> None:
    """torch's C++ pytree (torch 2.13) offers no key paths at all."""
    with pytest.raises(NotImplementedError, match="KeyPaths are not yet supported"):
        cp.tree_flatten_with_path([Plain(1)])


def test_difference_optree_paths_are_entries_not_keys() -> None:
    """optree's ``tree_paths`` gives raw entries; its accessors render like ``keystr``."""
    tree = {"k": [Plain(1)], "n": Anon(2, 3)}
    assert optree.tree_paths(tree) == [("k", 0, "a"), ("n", 0), ("n", 1)]
    accessors, _, _ = optree.tree_flatten_with_accessor(tree)
    assert [a.codify("") for a in accessors] == ["['k'][0].a", "['n'].first", "['n'].second"]
    assert [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]] == [
        "['k'][0].a",
        "['n'].first",
        "['n'].second",
    ]
