"""``treeclass.testing``: assert_roundtrip passes on good trees and names what fails."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

import treeclass as tc
from treeclass.testing import assert_roundtrip, pytree_classes, trees

np = pytest.importorskip("numpy")


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


# --- the jax.export check ----------------------------------------------------------------------


@tc.pytree_dataclass  # no name=: jax.export cannot serialize it
class Unnamed:
    w: Any


class _Calls:
    """Wraps ``jax.export.deserialize``, counting calls and optionally changing the result."""

    def __init__(self, real: Any, change: Any = None) -> None:
        self.real, self.change, self.n = real, change, 0

    def __call__(self, data: Any) -> Any:
        self.n += 1
        exported = self.real(data)
        return exported if self.change is None else self.change(exported)


class _Changed:
    def __init__(self, exported: Any, *, call: Any = None, out_tree: Any = None) -> None:
        self._exported, self._call, self._out_tree = exported, call, out_tree

    def __getattr__(self, name: str) -> Any:
        return getattr(self._exported, name)

    @property
    def out_tree(self) -> Any:
        return self._exported.out_tree if self._out_tree is None else self._out_tree

    def call(self, *args: Any) -> Any:
        out = self._exported.call(*args)
        return out if self._call is None else self._call(out)


def _array_tree() -> Any:
    jnp = pytest.importorskip("jax.numpy")
    return {"l": [Layer(np.arange(3, dtype=np.float32), np.int32(2)), Layer(jnp.ones((2, 2)))]}


@pytest.mark.jax
def test_jax_export_runs_on_array_trees_of_named_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    jax_export = pytest.importorskip("jax.export")
    spy = _Calls(jax_export.deserialize)
    monkeypatch.setattr(jax_export, "deserialize", spy)
    assert_roundtrip(_array_tree())
    # float64 numpy leaves are compared as jax.numpy.asarray makes them (float32 without x64).
    assert_roundtrip(Layer(np.arange(4.0), act="id"))
    assert spy.n == 2
    # Not applicable: an unnamed class, a Python scalar leaf, a tree without leaves.
    assert_roundtrip(Unnamed(np.ones(2, np.float32)))
    assert_roundtrip(Layer(np.ones(2, np.float32), 1.0))
    assert_roundtrip(Layer(None))
    assert spy.n == 2


@pytest.mark.jax
def test_jax_export_changing_the_values_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    jax = pytest.importorskip("jax")
    jax_export = pytest.importorskip("jax.export")

    def plus_one(exported: Any) -> Any:
        return _Changed(exported, call=lambda out: jax.tree.map(lambda x: x + 1, out))

    monkeypatch.setattr(jax_export, "deserialize", _Calls(jax_export.deserialize, plus_one))
    with pytest.raises(AssertionError, match=r"^jax\.export \(.*\) did not give the tree back"):
        assert_roundtrip(_array_tree())


@pytest.mark.jax
def test_jax_export_changing_a_class_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    jax = pytest.importorskip("jax")
    jax_export = pytest.importorskip("jax.export")

    @tc.pytree_dataclass(name="tests.testing.Other")
    class Other:
        w: Any

    other = jax.tree.structure(Other(np.ones(2)))

    def renamed(exported: Any) -> Any:
        return _Changed(exported, out_tree=other)

    monkeypatch.setattr(jax_export, "deserialize", _Calls(jax_export.deserialize, renamed))
    with pytest.raises(
        AssertionError, match=r"^jax\.export .* gave back the out_tree .*tests\.testing\.Other"
    ):
        assert_roundtrip(Layer(np.ones(2, np.float32)))


@pytest.mark.jax
def test_jax_export_failing_is_reported_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    jax_export = pytest.importorskip("jax.export")

    def broken(data: Any) -> Any:
        raise ValueError("cannot deserialize")

    monkeypatch.setattr(jax_export, "deserialize", broken)
    with pytest.raises(AssertionError, match=r"^jax\.export .* failed on .*cannot deserialize"):
        assert_roundtrip(Layer(np.ones(2, np.float32)))


@pytest.mark.jax
def test_jax_export_check_on_an_equinox_module_is_skipped() -> None:
    eqx = pytest.importorskip("equinox")
    jax = pytest.importorskip("jax")

    class Mod(eqx.Module):
        w: Any

    tc.register_dataclass(Mod, name="tests.testing.Mod")
    assert_roundtrip(Mod(jax.numpy.ones(2)))  # equinox's JAX node: nothing to export
