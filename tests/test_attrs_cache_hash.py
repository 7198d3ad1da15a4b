"""``@attrs.frozen(cache_hash=True)`` classes stay hashable after unflatten, in every registry.

attrs keeps the cached hash in a hidden attribute (``_attrs_cached_hash``, a slot of slotted
classes, an instance-dict entry otherwise) that ``__init__`` sets to ``None``; an object rebuilt
without ``__init__`` must set it too, or ``hash(obj)`` raises ``AttributeError``. Checked with
attrs 26.1 (the attribute name is the same since attrs 19.x).
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import treeclass as tc


@attrs.frozen(cache_hash=True)
class Slotted:
    a: Any
    b: Any = None
    tag: str = attrs.field(default="s", metadata={"static": True})


@attrs.frozen(cache_hash=True, slots=False)
class DictBased:
    a: Any
    b: Any = None
    tag: str = attrs.field(default="d", metadata={"static": True})


@attrs.define(frozen=True, cache_hash=True)
class Validated:
    a: int = attrs.field(validator=attrs.validators.instance_of(int))
    b: Any = None


@attrs.define(unsafe_hash=True, cache_hash=True)
class Mutable:
    """Not frozen: attrs allows cache_hash with an explicit hash."""

    a: Any
    b: Any = None


@attrs.frozen(cache_hash=True)
class ByInit:
    a: Any
    b: Any = None


tc.register_dataclass(Slotted, name="tests.cache_hash.Slotted")
tc.register_dataclass(DictBased, name="tests.cache_hash.DictBased")
tc.register_dataclass(Validated, name="tests.cache_hash.Validated")
tc.register_dataclass(Mutable, name="tests.cache_hash.Mutable")
tc.register_dataclass(ByInit, name="tests.cache_hash.ByInit", unflatten_calls_init=True)

CLASSES = {c.__name__: c for c in (Slotted, DictBased, Validated, Mutable, ByInit)}


def make(cls: type) -> Any:
    return cls(a=1, b=(2, 3))


def hash_after(rebuild: Callable[[Any], Any], cls: type) -> None:
    original = make(cls)
    expected = hash(original)  # fills the cache of the original ...
    rebuilt = rebuild(original)
    assert type(rebuilt) is cls
    assert rebuilt == original
    assert rebuilt is not original
    assert hash(rebuilt) == expected  # ... the rebuilt one computes its own
    assert hash(rebuilt) == expected  # and caches it
    assert rebuilt._attrs_cached_hash == expected


@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_embedded_unflatten(cls: type) -> None:
    hash_after(lambda o: tc.tree_map(lambda v: v, o), cls)
    leaves, spec = tc.tree_flatten(make(cls))
    rebuilt = spec.unflatten(leaves)
    assert hash(rebuilt) == hash(make(cls))


@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_embedded_unflatten_of_a_changed_tree_hashes_its_own_values(cls: type) -> None:
    original = make(cls)
    hash(original)
    doubled = tc.tree_map(lambda v: v * 2, original)
    assert doubled == cls(a=2, b=(4, 6))
    assert hash(doubled) == hash(cls(a=2, b=(4, 6)))  # not the original's cached hash


@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_cached_hash_is_not_carried_over_by_treespec_roundtrip(cls: type) -> None:
    original = make(cls)
    hash(original)
    leaves, spec = tc.tree_flatten(original)
    loaded = tc.treespec_loads(tc.treespec_dumps(spec))
    assert hash(loaded.unflatten(leaves)) == hash(original)


@pytest.mark.torch
@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_torch_python_and_cxx_pytrees(cls: type) -> None:
    pytest.importorskip("torch")
    import torch.utils._cxx_pytree as cxx
    import torch.utils._pytree as pt

    hash_after(lambda o: pt.tree_map(lambda v: v, o), cls)
    hash_after(lambda o: cxx.tree_map(lambda v: v, o), cls)


@pytest.mark.jax
@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_jax_tree_util(cls: type) -> None:
    jax = pytest.importorskip("jax")
    hash_after(lambda o: jax.tree_util.tree_map(lambda v: v, o), cls)
    leaves, treedef = jax.tree_util.tree_flatten(make(cls))
    assert hash(jax.tree_util.tree_unflatten(treedef, leaves)) == hash(make(cls))


@pytest.mark.optree
@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_optree(cls: type) -> None:
    optree = pytest.importorskip("optree")
    hash_after(lambda o: optree.tree_map(lambda v: v, o, none_is_leaf=False), cls)


@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_copy_and_pickle_keep_hashing(cls: type) -> None:
    """(attrs' own __getstate__/__setstate__ reset the cache; pickling by name must too.)"""
    hash_after(copy.copy, cls)
    hash_after(copy.deepcopy, cls)
    hash_after(lambda o: pickle.loads(pickle.dumps(o)), cls)
