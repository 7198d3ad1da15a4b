"""``treeclass.testing``: assert_roundtrip passes on good trees and names what fails."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import treeclass as tc
from treeclass.testing import assert_roundtrip, pytree_classes, trees


@tc.pytree_dataclass(name="tests.testing.Layer")
class Layer:
    w: Any
    b: Any = None
    act: str = tc.field(static=True, default="relu")


class _Identity:
    """A leaf equal only to itself: pickle gives back a different, unequal object."""


def test_good_trees_round_trip() -> None:
    assert_roundtrip(Layer(1.0))
    assert_roundtrip({"l": [Layer(np.arange(3, dtype=np.float32), 2.0), (Layer(3), None)]})


def test_a_leaf_pickle_changes_is_reported_naming_pickle() -> None:
    with pytest.raises(AssertionError, match=r"^pickle did not give the tree back"):
        assert_roundtrip(Layer(_Identity()))


def test_an_array_that_changes_dtype_is_caught() -> None:
    from treeclass.testing import _leaves_equal

    assert not _leaves_equal([np.zeros(2, np.float32)], [np.zeros(2, np.float64)])
    assert _leaves_equal([np.array([np.nan])], [np.array([np.nan])])


@settings(max_examples=25, deadline=None)
@given(pytree_classes())
def test_drawn_classes_are_registered_and_named(cls: type) -> None:
    assert tc.is_registered(cls)
    assert tc.name_of(cls) == f"treeclass.testing.{cls.__qualname__}"


@settings(max_examples=60, deadline=None)
@given(trees())
def test_random_trees_round_trip_everywhere(tree: Any) -> None:
    assert_roundtrip(tree)
