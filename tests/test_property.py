"""Property-based round trips over randomly shaped trees (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from _budget import cases
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import trees

import treeclass as tc
from treeclass.testing import assert_roundtrip


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types, all the way down (a float nan is not generated)."""
    if type(a) is not type(b):
        return False
    la, sa = tc.tree_flatten(a)
    lb, sb = tc.tree_flatten(b)
    return sa == sb and la == lb and all(type(x) is type(y) for x, y in zip(la, lb))


@pytest.mark.fuzz
@settings(max_examples=cases(300), deadline=None)
@given(trees)
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    leaves, spec = tc.tree_flatten(tree)
    assert spec.num_leaves == len(leaves)
    back = spec.unflatten(leaves)
    assert back == tree
    assert _same(back, tree)
    assert tc.tree_structure(back) == spec
    assert hash(tc.tree_structure(back)) == hash(spec)


@pytest.mark.fuzz
@settings(max_examples=cases(100), deadline=None)
@given(trees)
def test_every_registry_and_serializer_round_trips(tree: Any) -> None:
    assert_roundtrip(tree)


@pytest.mark.fuzz
@settings(max_examples=cases(200), deadline=None)
@given(trees)
def test_paths_match_leaves_and_spec(tree: Any) -> None:
    pairs, spec = tc.tree_flatten_with_path(tree)
    leaves, spec2 = tc.tree_flatten(tree)
    assert [v for _, v in pairs] == leaves
    assert spec == spec2
    assert len({tc.keystr(p) for p, _ in pairs}) == len(pairs)


class _Mark:
    """A leaf type of the test's own."""

    def __init__(self, k: int) -> None:
        self.k = k


@pytest.mark.fuzz
@settings(max_examples=cases(200), deadline=None)
@given(trees, st.integers(0, 3))
def test_tree_map_replaces_every_leaf(tree: Any, k: int) -> None:
    out = tc.tree_map(lambda v: _Mark(k), tree)
    assert tc.tree_structure(out) == tc.tree_structure(tree)
    marks = tc.tree_leaves(out)
    assert len(marks) == len(tc.tree_leaves(tree))
    assert all(type(m) is _Mark and m.k == k for m in marks)


@pytest.mark.fuzz
@settings(max_examples=cases(200), deadline=None)
@given(trees)
def test_is_leaf_none_sees_every_none_child(tree: Any) -> None:
    with_none = tc.tree_leaves(tree, is_leaf=lambda v: v is None)
    without = tc.tree_leaves(tree)
    assert [v for v in with_none if v is not None] == without
