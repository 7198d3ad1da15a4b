"""JAX's own idioms on treeclass nodes: prefix trees, ``in_axes`` / ``out_axes``, jax.export errors.

Every idiom is run on a treeclass class and, as the reference, on the same dataclass registered
with ``jax.tree_util.register_dataclass`` (static fields as ``meta_fields``): whatever JAX's own
registration does is what a treeclass node must do. The classes have what users' classes have:
an optional data field that is ``None``, a data field holding a single array (the one that
``jax.tree.map(lambda x: None, t)`` turns into ``None``), and static fields.

Issue 10: with a ``None``-valued field in the auxdata (``return_none_fields=False``, as before
issue 10), a tree with ``None`` in place of leaves has other node data than the tree, so none of
the prefix idioms work on the treeclass side (JAX crashes with ``'GetAttrKey' object has no
attribute 'key'``).
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
import types
from typing import Any

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers")  # Exported.serialize() needs it

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import treeclass as tc  # noqa: E402

pytestmark = pytest.mark.jax


# --- the classes: treeclass, and the register_dataclass reference ----------------------------


@tc.pytree_dataclass(name="tests.jax_idioms.State")
class State:
    params: Any
    step: Any
    ema: Any = None  # optional: None in most runs
    run: str = tc.field(static=True, default="run-1")
    layers: tuple[int, ...] = tc.field(static=True, default=(4, 2))


@tc.pytree_dataclass(name="tests.jax_idioms.P", frozen=True)
class P:
    a: Any
    b: Any = None


@dataclasses.dataclass
class RefState:
    params: Any
    step: Any
    ema: Any = None
    run: str = dataclasses.field(default="run-1", metadata={"static": True})
    layers: tuple[int, ...] = dataclasses.field(default=(4, 2), metadata={"static": True})


@dataclasses.dataclass(frozen=True)
class RefP:
    a: Any
    b: Any = None


jax.tree_util.register_dataclass(RefState)
jax.tree_util.register_dataclass(RefP)

KINDS = {"treeclass": (State, P), "register_dataclass": (RefState, RefP)}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> tuple[type, type]:
    return KINDS[request.param]


def _state(cls: type, ema: Any = None) -> Any:
    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    return cls(params, jnp.int32(7), ema, run="run-2")


def _is_none(x: Any) -> bool:
    return x is None


# --- the prefix idiom -------------------------------------------------------------------------


@pytest.mark.parametrize("ema", [None, 0.5])
def test_none_tree_is_a_prefix_of_the_tree(kind: tuple[type, type], ema: Any) -> None:
    """``jax.tree.map(f, jax.tree.map(lambda x: None, t), t, is_leaf=lambda x: x is None)``:
    the way orbax builds ``save_args`` and equinox ``partition`` / ``combine`` work."""
    cls, _ = kind
    t = _state(cls, ema)
    prefix = jax.tree.map(lambda x: None, t)
    assert type(prefix) is cls
    assert prefix.run == "run-2"
    assert prefix.step is None
    seen: list[Any] = []

    def f(p: Any, x: Any) -> Any:
        # As with JAX's own dataclasses, a None field of ``t`` meets the prefix's None.
        seen.append((p, x is None))
        return None if x is None else x * 2

    doubled = jax.tree.map(f, prefix, t, is_leaf=_is_none)
    assert type(doubled) is cls
    assert (doubled.run, doubled.layers) == ("run-2", (4, 2))
    assert int(doubled.step) == 14
    np.testing.assert_allclose(doubled.params["w"], np.arange(6.0).reshape(2, 3) * 2)
    if ema is None:
        assert doubled.ema is None
    else:
        assert float(doubled.ema) == 1.0
    # One call per field subtree that holds leaves or is None: params b, w, step, ema.
    assert seen == [(None, False), (None, False), (None, False), (None, ema is None)]
    # And the other way round: the None tree, mapped against the tree, stays a None tree.
    back = jax.tree.map(lambda p, x: p, prefix, t, is_leaf=_is_none)
    assert jax.tree_util.tree_leaves(back) == []
    assert type(back) is cls


def test_partial_prefix_with_none_fields(kind: tuple[type, type]) -> None:
    """A prefix whose fields are ``None`` or a value, mapped with ``is_leaf=x is None``."""
    cls, _ = kind
    t = _state(cls, jnp.float32(3.0))
    prefix = cls(None, 1, None, run="run-2")
    out = jax.tree.map(
        lambda p, x: x if p is None else jax.tree.map(lambda v: v + p, x),
        prefix,
        t,
        is_leaf=_is_none,
    )
    assert int(out.step) == 8
    assert float(out.ema) == 3.0
    np.testing.assert_allclose(out.params["b"], np.ones(3))


def test_prefix_structure_errors_name_the_mismatch(kind: tuple[type, type]) -> None:
    """A prefix that really does not match gives JAX's own error (not a crash inside it)."""
    cls, _ = kind
    t = _state(cls)
    other = cls(None, None, None, run="another-run")
    # JAX's own wording, which older releases (0.4.36, 0.6) phrase differently.
    with pytest.raises(
        ValueError, match=r"different pytree metadata|Mismatch custom (dataclass )?node data"
    ):
        jax.tree.map(lambda p, x: x, other, t, is_leaf=_is_none)


# --- in_axes / out_axes ------------------------------------------------------------------------


def test_vmap_in_axes_with_a_none_field(kind: tuple[type, type]) -> None:
    """``jax.vmap(f, in_axes=(P(0, None),))``: ``b`` is broadcast, ``a`` is mapped."""
    _, pcls = kind
    p = pcls(jnp.arange(3.0), jnp.float32(2.0))
    out = jax.vmap(lambda q: q.a * q.b, in_axes=(pcls(0, None),))(p)
    np.testing.assert_allclose(out, [0.0, 2.0, 4.0])
    # None as a whole-argument axis and as a field of an output axis spec.
    out2 = jax.vmap(
        lambda q, s: pcls(q.a * s, q.b), in_axes=(pcls(0, None), None), out_axes=pcls(0, None)
    )(p, jnp.float32(10.0))
    assert type(out2) is pcls
    np.testing.assert_allclose(out2.a, [0.0, 10.0, 20.0])
    assert float(out2.b) == 2.0


def test_vmap_in_axes_on_a_state_with_statics(kind: tuple[type, type]) -> None:
    cls, _ = kind
    batched = cls({"w": jnp.ones((4, 2)), "b": jnp.zeros((4,))}, jnp.int32(1), None, run="r")
    axes = cls({"w": 0, "b": 0}, None, None, run="r")
    out = jax.vmap(lambda s: s.params["w"].sum() + s.step, in_axes=(axes,))(batched)
    np.testing.assert_allclose(out, [3.0, 3.0, 3.0, 3.0])


def test_pmap_style_axis_spec_tree_map(kind: tuple[type, type]) -> None:
    """``jax.tree.map`` of an axis spec over the tree, as shard_map / pjit specs are built."""
    _, pcls = kind
    spec = pcls(0, None)
    p = pcls(jnp.ones((2, 3)), jnp.float32(1.0))
    shapes = jax.tree.map(
        lambda axis, x: None if axis is None else x.shape[axis], spec, p, is_leaf=_is_none
    )
    assert shapes.a == 2
    assert shapes.b is None


# --- jax.export: JAX's error at its call site, treeclass's (naming the fix) at treeclass's

_JAX_UNREGISTERED = "Cannot serialize PyTreeDef containing an unregistered type"


def test_export_of_an_unnamed_class_names_the_fix() -> None:
    @tc.pytree_dataclass
    class Unnamed:
        x: Any
        note: str = tc.field(static=True, default="n")

    exported = jax.export.export(jax.jit(lambda v: Unnamed(v * 2)))(jnp.ones(2))
    with pytest.raises(ValueError, match=_JAX_UNREGISTERED):
        exported.serialize()
    with pytest.raises(tc.UnnamedClassError, match=r"Unnamed was registered without a name.*name="):
        tc.treespec_dumps(exported.out_tree)
    # As an input too.
    exported = jax.export.export(jax.jit(lambda u: u.x))(Unnamed(jnp.ones(2)))
    with pytest.raises(ValueError, match=_JAX_UNREGISTERED):
        exported.serialize()
    with pytest.raises(tc.UnnamedClassError, match=r"Unnamed.*name="):
        tc.treespec_dumps(exported.in_tree)
    # Everything else about the class still works in JAX.
    assert type(jax.jit(lambda d: d)(Unnamed(1.0))) is Unnamed


_CELL = textwrap.dedent(
    """
    import treeclass as tc

    @tc.pytree_dataclass(name=NAME)
    class Cell:
        x: object
        note: str = tc.field(static=True, default="n")
    """
)


def test_export_of_an_instance_of_a_rerun_class_names_the_fix(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("notebook_" + uname.replace(".", "_"))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    module.NAME = uname  # type: ignore[attr-defined]
    exec(_CELL, vars(module))
    old = module.Cell(jnp.ones(2))  # type: ignore[attr-defined]
    exec(_CELL, vars(module))  # the cell is run again: a new class takes the name
    new_cls = module.Cell  # type: ignore[attr-defined]
    exported = jax.export.export(jax.jit(lambda c: c))(old)
    with pytest.raises(ValueError, match=_JAX_UNREGISTERED):
        exported.serialize()
    with pytest.raises(
        tc.UnnamedClassError,
        match=rf"Cell was defined again.*{uname}.*rebuild the object from the current class",
    ):
        tc.treespec_dumps(exported.in_tree)
    # The current class exports fine.
    fresh = new_cls(jnp.ones(2))
    loaded = jax.export.deserialize(jax.export.export(jax.jit(lambda c: c))(fresh).serialize())
    assert type(loaded.call(fresh)) is new_cls


# --- no registrations of treeclass's own in jax.export but the classes' names ----------------


def test_unnamed_classes_have_no_jax_export_registration() -> None:
    """A file cannot name anything treeclass did not register under a name."""
    import importlib

    @tc.pytree_dataclass
    class Direct:
        x: Any

    registries = importlib.import_module("jax._src.export._export")
    assert Direct not in registries.serialization_registry
    assert all(entry[0] is not Direct for entry in registries.deserialization_registry.values())
