"""Classes registered as JAX's C++ dataclass node (issue 32): which ones, and that nothing changes.

A class declared ``unflatten_calls_init=True`` with no static field and at most three fields,
all ``__init__`` keywords of their own names, is registered with
``jax.tree_util.register_dataclass`` (``treeclass._backends.jax.native_data_fields``); every
other class keeps treeclass's generated callbacks. Everything JAX users see is compared between
the two paths here.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers")  # Exported.serialize() needs it; jax does not declare it

import attrs  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import treeclass as tc  # noqa: E402
from treeclass._backends import jax as backend  # noqa: E402
from treeclass._core import registry as _registry  # noqa: E402

pytestmark = pytest.mark.jax


@contextmanager
def python_calls() -> Iterator[list[str]]:
    """The names of the Python functions called inside the block (``sys.setprofile``)."""
    names: list[str] = []

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        yield names
    finally:
        sys.setprofile(None)


def _native(cls: type) -> tuple[str, ...] | None:
    node = _registry.registered_node(cls)
    assert node is not None
    return backend.native_data_fields(node)


def _pair(uname: str) -> tuple[type, type]:
    """The same class twice: rebuilt through ``__init__`` (C++ node) and by default (callbacks)."""

    @tc.pytree_dataclass(name=uname + ".init", unflatten_calls_init=True)
    class ByInit:
        a: Any
        b: Any = None

    @tc.pytree_dataclass(name=uname + ".default")
    class ByDefault:
        a: Any
        b: Any = None

    return ByInit, ByDefault


def test_which_classes_are_cpp_dataclass_nodes(uname: str) -> None:
    ByInit, ByDefault = _pair(uname)
    assert _native(ByInit) == ("a", "b")
    assert _native(ByDefault) is None  # rebuilt without __init__: treeclass's callbacks

    @tc.pytree_dataclass(unflatten_calls_init=True)
    class WithStatic:  # the hashability check of statics needs treeclass's unflatten
        x: Any
        tag: str = tc.field(static=True, default="t")

    @tc.pytree_dataclass(unflatten_calls_init=True)
    class WithInitFalse:  # restored after __init__: not a keyword of it
        x: Any
        total: float = tc.field(init=False, default=0.0)

    @tc.pytree_dataclass(unflatten_calls_init=True)
    @attrs.define
    class Aliased:  # __init__ takes _private as private
        _private: Any

    @tc.pytree_dataclass(unflatten_calls_init=True)
    class WithInitVar:  # an InitVar with a default: cls(**fields) uses it, as treeclass does
        x: Any
        scale: dataclasses.InitVar[float] = 1.0

    @tc.pytree_dataclass(unflatten_calls_init=True)
    @attrs.define
    class AttrsPlain:
        x: Any

    @tc.pytree_dataclass(unflatten_calls_init=True)
    class Wide:  # more fields than the C++ node is faster for
        a: Any
        b: Any
        c: Any
        d: Any

    assert backend.NATIVE_MAX_FIELDS == 3
    assert _native(Wide) is None
    assert _native(WithStatic) is None
    assert _native(WithInitFalse) is None
    assert _native(Aliased) is None
    assert _native(WithInitVar) == ("x",)
    assert _native(AttrsPlain) == ("x",)


def _extra_calls(fn: Any, tree: Any, builtin_tree: Any) -> list[str]:
    """The Python calls ``fn(tree)`` makes beyond those of ``fn(builtin_tree)`` (tuples only)."""
    with python_calls() as base:
        fn(builtin_tree)
    with python_calls() as calls:
        fn(tree)
    for name in base:
        calls.remove(name)
    return calls


def test_cpp_node_runs_no_python_on_flatten_and_only_init_on_unflatten(uname: str) -> None:
    ByInit, ByDefault = _pair(uname)
    tree = [ByInit(1.0, ByInit(2.0)), ByInit(3.0)]
    builtin = [(1.0, (2.0, None)), (3.0, None)]
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    assert leaves == [1.0, 2.0, 3.0]
    assert _extra_calls(jax.tree_util.tree_flatten, tree, builtin) == []
    builtin_def = jax.tree_util.tree_structure(builtin)
    calls = _extra_calls(lambda d: d.unflatten(leaves), treedef, builtin_def)
    assert calls == ["__init__"] * 3
    assert treedef.unflatten(leaves) == tree
    # A default class: treeclass's generated callback, once per node.
    tree = [ByDefault(1.0, ByDefault(2.0)), ByDefault(3.0)]
    jax.tree_util.tree_flatten(tree)  # (the first call compiles the generated functions)
    assert _extra_calls(jax.tree_util.tree_flatten, tree, builtin) == ["flatten"] * 3


def test_leaves_key_paths_and_node_data_match_the_callbacks_path(uname: str) -> None:
    ByInit, ByDefault = _pair(uname)
    for b in (None, np.float32(2.0), (np.float32(3.0), None)):
        one = jax.tree_util.tree_flatten_with_path(ByInit(np.float32(1.0), b))
        other = jax.tree_util.tree_flatten_with_path(ByDefault(np.float32(1.0), b))
        assert [(jax.tree_util.keystr(p), v) for p, v in one[0]] == [
            (jax.tree_util.keystr(p), v) for p, v in other[0]
        ]
        assert [p for p, _ in one[0]] == [p for p, _ in other[0]]  # GetAttrKey both
        assert one[1].num_leaves == other[1].num_leaves and one[1].num_nodes == other[1].num_nodes
        assert one[1].node_data() == (ByInit, ()) and other[1].node_data() == (ByDefault, ())
    # A None field is a None child: no leaf, no key path, a node of its own.
    treedef = jax.tree_util.tree_structure(ByInit(1.0, None))
    assert [str(c) for c in treedef.children()] == ["PyTreeDef(*)", "PyTreeDef(None)"]


def test_prefix_trees_and_in_axes(uname: str) -> None:
    ByInit, _ = _pair(uname)
    full = ByInit(jnp.ones(2), jnp.float32(0.5))
    nones = jax.tree.map(lambda x: None, full)
    assert nones == ByInit(None, None) and jax.tree.leaves(nones) == []
    assert jax.tree_util.tree_structure(nones).node_data() == (ByInit, ())
    tripled = jax.tree.map(lambda _, x: x * 3, nones, full, is_leaf=lambda x: x is None)
    assert float(tripled.b) == 1.5
    batch = ByInit(jnp.ones((4, 2)), jnp.float32(0.5))
    rows = jax.vmap(lambda o: o.a.sum() + o.b, in_axes=(ByInit(0, None),))(batch)
    assert rows.shape == (4,) and float(rows[0]) == 2.5


def test_jit_and_export_round_trip_under_the_name(uname: str) -> None:
    ByInit, _ = _pair(uname)

    def f(o: Any) -> Any:
        return ByInit(o.a * 2, o.a.sum())

    x = ByInit(jnp.ones(2))
    out = jax.jit(f)(x)
    assert type(out) is ByInit and float(out.b) == 2.0
    exported = jax.export.export(jax.jit(f))(x)
    blob = exported.serialize()
    assert (uname + ".init").encode() in bytes(blob)
    loaded = jax.export.deserialize(blob)
    assert loaded.in_tree == exported.in_tree
    result = loaded.call(x)
    assert type(result) is ByInit and float(result.b) == 2.0
    assert tc.treespec_loads(tc.treespec_dumps(loaded.out_tree)) == tc.tree_structure(out)


def test_init_class_with_a_static_keeps_the_hashability_check(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, unflatten_calls_init=True)
    class Cfg:
        x: Any
        layers: Any = tc.field(static=True, default=(1, 2))

    f = jax.jit(lambda c: c.x * len(c.layers))
    assert float(f(Cfg(1.0))) == 2.0
    with pytest.raises(tc.UnhashableStaticError, match=r"static field 'layers' of .*Cfg"):
        f(Cfg(1.0, [1, 2, 3]))


def test_init_errors_reach_the_caller_unchanged(uname: str) -> None:
    """An ``__init__`` that refuses a leaf raises its own error through JAX on either path."""

    @tc.pytree_dataclass(name=uname, unflatten_calls_init=True)
    class Positive:
        x: Any

        def __post_init__(self) -> None:
            if isinstance(self.x, float) and self.x < 0:
                raise ValueError(f"x must be positive, got {self.x}")

    treedef = jax.tree_util.tree_structure(Positive(1.0))
    assert _native(Positive) == ("x",)
    with pytest.raises(ValueError, match=r"x must be positive, got -1\.0"):
        jax.tree_util.tree_unflatten(treedef, [-1.0])
