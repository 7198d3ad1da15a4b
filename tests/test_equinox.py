"""equinox on treeclass nodes: alone, inside ``eqx.Module``s, and holding ``eqx.Module``s.

``partition`` / ``combine`` / ``filter_grad`` / ``filter_value_and_grad`` / ``filter_jit`` /
``tree_at`` / ``tree_equal``. The standalone cases also run on the same dataclass registered with
``jax.tree_util.register_dataclass`` (the reference: what a native JAX node does).

``eqx.partition`` replaces the leaves it does not select by ``None`` and ``eqx.combine`` maps
the halves back together with ``is_leaf=lambda x: x is None``; ``filter_jit`` and
``filter_grad`` are built on the two. So they need a node's data to stay the same when leaves
become ``None`` (issue 10).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import treeclass as tc  # noqa: E402

pytestmark = pytest.mark.jax


@tc.pytree_dataclass(name="tests.equinox.Linear", frozen=True)
class Linear:
    w: Any
    b: Any
    scale: Any = None  # optional, None unless set
    steps: Any = 0  # a Python int leaf: not an array, so "static" to equinox's filters
    act: str = tc.field(static=True, default="tanh")

    def __call__(self, x: Any) -> Any:
        y = x @ self.w + self.b
        if self.scale is not None:
            y = y * self.scale
        return jnp.tanh(y) if self.act == "tanh" else y


@dataclasses.dataclass(frozen=True)
class RefLinear:
    w: Any
    b: Any
    scale: Any = None
    steps: Any = 0
    act: str = dataclasses.field(default="tanh", metadata={"static": True})

    def __call__(self, x: Any) -> Any:
        y = x @ self.w + self.b
        if self.scale is not None:
            y = y * self.scale
        return jnp.tanh(y) if self.act == "tanh" else y


jax.tree_util.register_dataclass(RefLinear)


class Net(eqx.Module):
    """An equinox module with a treeclass node inside."""

    layer: Linear
    head: jax.Array
    label: str = eqx.field(static=True, default="net")

    def __call__(self, x: Any) -> Any:
        return self.layer(x) @ self.head


@tc.pytree_dataclass(name="tests.equinox.Holder")
class Holder:
    """A treeclass node with equinox modules inside."""

    mlp: Any
    net: Any
    extra: Any = None
    tag: str = tc.field(static=True, default="holder")


@pytest.fixture(params=["treeclass", "register_dataclass"])
def lin_cls(request: pytest.FixtureRequest) -> type:
    return Linear if request.param == "treeclass" else RefLinear


def _linear(cls: type, **kw: Any) -> Any:
    return cls(jnp.arange(6.0).reshape(3, 2) / 10, jnp.ones(2), **kw)


def _net() -> Net:
    return Net(_linear(Linear, act="id"), jnp.ones((2, 1)))


def _holder() -> Holder:
    key = jax.random.PRNGKey(0)
    return Holder(eqx.nn.MLP(3, 2, 4, 1, key=key), _net(), tag="h1")


X = jnp.ones((4, 3))


# --- partition / combine ------------------------------------------------------------------------


def test_partition_combine_standalone(lin_cls: type) -> None:
    m = _linear(lin_cls, steps=3)
    dyn, static = eqx.partition(m, eqx.is_inexact_array)
    assert type(dyn) is type(static) is lin_cls
    assert dyn.steps is None and static.steps == 3
    assert static.w is None and static.b is None
    assert dyn.scale is None and static.scale is None
    assert dyn.act == static.act == "tanh"
    back = eqx.combine(dyn, static)
    assert type(back) is lin_cls
    assert bool(eqx.tree_equal(back, m))
    # A set optional field is an array like any other.
    m2 = _linear(lin_cls, scale=jnp.float32(2.0))
    dyn2, static2 = eqx.partition(m2, eqx.is_array)
    assert float(dyn2.scale) == 2.0 and static2.scale is None
    assert bool(eqx.tree_equal(eqx.combine(static2, dyn2), m2))


def test_partition_combine_treeclass_inside_module() -> None:
    net = _net()
    dyn, static = eqx.partition(net, eqx.is_inexact_array)
    assert type(dyn.layer) is Linear
    assert dyn.layer.act == "id" and static.layer.act == "id"
    assert static.layer.w is None
    assert bool(eqx.tree_equal(eqx.combine(dyn, static), net))


def test_partition_combine_modules_inside_treeclass() -> None:
    h = _holder()
    dyn, static = eqx.partition(h, eqx.is_array)
    assert type(dyn) is Holder and dyn.tag == "h1"
    assert type(dyn.mlp) is eqx.nn.MLP
    back = eqx.combine(dyn, static)
    assert bool(eqx.tree_equal(back, h))
    assert back.mlp(jnp.ones(3)).shape == (2,)


def test_partition_with_a_filter_spec_tree(lin_cls: type) -> None:
    """A filter spec that is itself a tree of the class (a prefix, with bools)."""
    m = _linear(lin_cls)
    spec = lin_cls(True, False, None, False, act="tanh")
    dyn, static = eqx.partition(m, spec)
    assert dyn.w is not None and dyn.b is None
    assert static.b is not None
    assert bool(eqx.tree_equal(eqx.combine(dyn, static), m))


# --- filter_grad / filter_value_and_grad / filter_jit -----------------------------------------


def _loss(model: Any, x: Any) -> Any:
    return jnp.sum(model(x) ** 2)


def test_filter_grad_and_value_and_grad_standalone(lin_cls: type) -> None:
    m = _linear(lin_cls, steps=5)
    grads = eqx.filter_grad(_loss)(m, X)
    assert type(grads) is lin_cls
    assert grads.act == "tanh"
    assert grads.steps is None  # not an inexact array: no gradient
    assert grads.scale is None
    assert grads.w.shape == (3, 2)
    expected = jax.grad(lambda w: _loss(dataclasses.replace(m, w=w), X))(m.w)
    np.testing.assert_allclose(grads.w, expected, rtol=1e-6)
    value, grads2 = eqx.filter_value_and_grad(_loss)(m, X)
    assert float(value) == pytest.approx(float(_loss(m, X)))
    assert bool(eqx.tree_equal(grads, grads2))


def test_filter_grad_nested_both_ways() -> None:
    net = _net()
    g = eqx.filter_grad(_loss)(net, X)
    assert type(g) is Net and type(g.layer) is Linear
    assert g.layer.act == "id"
    h = _holder()

    def loss(holder: Holder, x: Any) -> Any:
        return jnp.sum(holder.mlp(x[0])) + jnp.sum(holder.net(x))

    gh = eqx.filter_grad(loss)(h, X)
    assert type(gh) is Holder and gh.tag == "h1"
    assert type(gh.net.layer) is Linear
    assert gh.extra is None


def test_filter_jit_standalone_and_nested(lin_cls: type) -> None:
    traces = 0

    @eqx.filter_jit
    def step(model: Any, x: Any) -> Any:
        nonlocal traces
        traces += 1
        grads = eqx.filter_grad(_loss)(model, x)
        # ``grads`` has None where ``model`` has no inexact array (the Python-int leaf).
        return eqx.apply_updates(model, jax.tree.map(lambda g: -0.1 * g, grads))

    m = _linear(lin_cls, steps=2)
    out = step(m, X)
    assert type(out) is lin_cls and out.steps == 2 and out.act == "tanh"
    step(out, X)
    assert traces == 1  # same structure, same statics: no retrace
    step(_linear(lin_cls, steps=3), X)
    assert traces == 2  # a non-array leaf is static to filter_jit
    net = eqx.filter_jit(lambda n, x: n)(_net(), X)
    assert type(net.layer) is Linear
    h = eqx.filter_jit(lambda h: h)(_holder())
    assert type(h) is Holder and h.tag == "h1"


# --- tree_at / tree_equal -----------------------------------------------------------------------


def test_tree_at_replaces_leaves_and_none_fields(lin_cls: type) -> None:
    m = _linear(lin_cls)
    m2 = eqx.tree_at(lambda t: t.w, m, jnp.zeros((3, 2)))
    assert type(m2) is lin_cls and m2.act == "tanh"
    assert float(m2.w.sum()) == 0.0
    # A None field is targeted with is_leaf=lambda x: x is None (equinox's documented idiom).
    m3 = eqx.tree_at(lambda t: t.scale, m, jnp.float32(3.0), is_leaf=lambda x: x is None)
    assert float(m3.scale) == 3.0
    # ... and set back to None.
    m4 = eqx.tree_at(lambda t: t.scale, m3, None)
    assert m4.scale is None
    assert bool(eqx.tree_equal(m4, m))
    m5 = eqx.tree_at(lambda t: (t.w, t.b), m, replace_fn=lambda x: x * 0)
    assert float(m5.b.sum()) == 0.0


def test_tree_at_nested_both_ways() -> None:
    net = eqx.tree_at(lambda n: n.layer.b, _net(), jnp.full(2, 5.0))
    assert type(net.layer) is Linear and float(net.layer.b[0]) == 5.0
    h = eqx.tree_at(lambda h: h.net.layer.scale, _holder(), 2.0, is_leaf=lambda x: x is None)
    assert h.net.layer.scale == 2.0
    h2 = eqx.tree_at(lambda h: h.extra, _holder(), jnp.ones(1), is_leaf=lambda x: x is None)
    assert h2.extra.shape == (1,)


def test_tree_equal(lin_cls: type) -> None:
    a, b = _linear(lin_cls), _linear(lin_cls)
    # tree_equal gives a Python bool when the structures differ, else a JAX bool array.
    assert bool(eqx.tree_equal(a, b)) is True
    assert eqx.tree_equal(a, _linear(lin_cls, act="id")) is False  # statics differ
    assert eqx.tree_equal(a, _linear(lin_cls, scale=1.0)) is False  # a None field differs
    assert bool(eqx.tree_equal(a, eqx.tree_at(lambda t: t.b, a, jnp.zeros(2)))) is False
    assert bool(eqx.tree_equal(_holder(), _holder())) is True
    assert bool(eqx.tree_equal(_net(), _net(), typematch=True)) is True


# --- saving equinox modules: tc.save / tc.load and treeclass.orbax ------------------------------


class Block(eqx.Module):
    """A user Module: arrays, an eqx.nn layer, an optional array and static fields."""

    proj: eqx.nn.Linear
    gain: jax.Array
    bias: jax.Array | None
    act: str = eqx.field(static=True, default="tanh")
    sizes: tuple[int, ...] = eqx.field(static=True, default=(3, 2))

    def __call__(self, x: Any) -> Any:
        y = self.proj(x) * self.gain
        y = y if self.bias is None else y + self.bias
        return jnp.tanh(y) if self.act == "tanh" else y


tc.register_dataclass(Block, name="tests.equinox.Block")
# The name docs/jax-ecosystem.md uses too (one class, one name, in one process).
tc.register_dataclass(eqx.nn.Linear, name="equinox.nn.Linear")


def _block(**kw: Any) -> Block:
    proj = eqx.nn.Linear(3, 2, key=jax.random.PRNGKey(1))
    return Block(proj, jnp.full(2, 1.5), None, **kw)


def _same_module(back: Any, model: Any) -> None:
    assert type(back) is type(model)
    assert jax.tree.structure(back) == jax.tree.structure(model)  # statics included
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(model)):
        assert type(a) is type(b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert a.dtype == b.dtype


def test_jax_keeps_equinox_registration_of_a_registered_module() -> None:
    block = _block()
    assert tc.is_registered(Block) and tc.name_of(Block) == "tests.equinox.Block"
    # JAX's node is still equinox's: its flatten, its filters, its transformations.
    assert "tests.equinox.Block" not in str(jax.tree.structure(block))
    grads = eqx.filter_grad(lambda m: jnp.sum(m(jnp.ones(3))))(block)
    assert type(grads) is Block and grads.act == "tanh" and grads.bias is None
    assert type(grads.proj) is eqx.nn.Linear
    # treeclass's registry sees the same leaves, in the same order, and the same statics.
    assert len(tc.tree_leaves(block)) == len(jax.tree.leaves(block)) == 3
    spec = tc.tree_structure(block)
    assert "act='tanh'" in repr(spec) and "in_features=3" in repr(spec)


def test_tc_save_and_load_a_module_holding_arrays(tmp_path: Any) -> None:
    block = _block(act="id", sizes=(4,))
    tree = {"model": block, "step": 3}
    tc.save(tmp_path / "m.safetensors", tree)
    back = tc.load(tmp_path / "m.safetensors")
    assert back["step"] == 3
    _same_module(back["model"], block)
    assert back["model"].act == "id" and back["model"].sizes == (4,)
    assert back["model"].proj.in_features == 3 and back["model"].bias is None
    np.testing.assert_array_equal(back["model"](jnp.ones(3)), block(jnp.ones(3)))
    # Still a frozen equinox module after the rebuild.
    with pytest.raises(dataclasses.FrozenInstanceError):
        back["model"].gain = jnp.zeros(2)  # type: ignore[misc]


def test_treeclass_orbax_save_and_restore_a_module(tmp_path: Any) -> None:
    pytest.importorskip("orbax.checkpoint")  # treeclass.orbax raises its own ImportError
    tco = pytest.importorskip("treeclass.orbax")
    block = _block()
    tco.save(tmp_path / "ckpt", {"model": block})
    back = tco.restore(tmp_path / "ckpt")
    _same_module(back["model"], block)
    np.testing.assert_array_equal(back["model"](jnp.ones(3)), block(jnp.ones(3)))


def test_assert_roundtrip_on_a_module() -> None:
    from treeclass.testing import assert_roundtrip

    assert_roundtrip({"model": _block(), "x": np.ones(2, np.float32)})


def test_a_jax_structure_holding_a_module_is_refused_by_name() -> None:
    with pytest.raises(tc.UnnamedClassError, match=r"Block is an equinox\.Module.*tc\.save"):
        tc.treespec_dumps(jax.tree.structure({"m": _block()}))


def test_an_unregistered_module_is_a_leaf_and_the_error_says_register_it(tmp_path: Any) -> None:
    mlp = eqx.nn.MLP(3, 2, 4, 1, key=jax.random.PRNGKey(0))
    with pytest.raises(
        tc.TreeclassTypeError,
        match=r"leaf at \['mlp'\] is a equinox\.nn\._mlp\.MLP.*tc\.register_dataclass\(cls, name",
    ):
        tc.save(tmp_path / "m.safetensors", {"mlp": mlp})


def test_a_function_leaf_of_a_registered_module_is_refused_by_path(tmp_path: Any) -> None:
    """eqx.nn.MLP keeps its activation functions as leaves: not data, so never saved."""

    class Act(eqx.Module):
        w: jax.Array
        fn: Any

    tc.register_dataclass(Act, name="tests.equinox.Act")
    with pytest.raises(tc.TreeclassTypeError, match=r"leaf at \.fn is a .*custom_jvp"):
        tc.save(tmp_path / "a.safetensors", Act(jnp.ones(2), jax.nn.relu))


def test_a_class_jax_holds_from_elsewhere_is_still_refused() -> None:
    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class Other:
        x: Any

    with pytest.raises(tc.RegistrationError, match=r"already registered with JAX's pytree"):
        tc.register_dataclass(Other, name="tests.equinox.Other")
