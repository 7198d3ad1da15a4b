"""optax and chex on treeclass trees.

optax: ``adamw`` (with and without a weight-decay mask function), ``optax.masked`` with a
treeclass mask (a prefix of the params, with a ``None`` field where the params have one) and
``optax.multi_transform`` with treeclass labels over treeclass params. chex:
``assert_trees_all_close`` and ``assert_tree_all_finite``, passing and failing.
"""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")
chex = pytest.importorskip("chex")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import treeclass as tc  # noqa: E402

pytestmark = pytest.mark.jax


@tc.pytree_dataclass(name="tests.optax.Dense", frozen=True)
class Dense:
    w: Any
    b: Any
    norm: Any = None  # optional layer-norm scale, absent here
    act: str = tc.field(static=True, default="relu")


@tc.pytree_dataclass(name="tests.optax.Model", frozen=True)
class Model:
    enc: Dense
    dec: Dense
    tag: str = tc.field(static=True, default="ae")


def _params() -> Model:
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return Model(
        Dense(jax.random.normal(k1, (3, 4)), jnp.zeros(4)),
        Dense(jax.random.normal(k2, (4, 3)), jnp.zeros(3), act="id"),
        tag="ae-1",
    )


def _loss(p: Model, x: Any) -> Any:
    h = jax.nn.relu(x @ p.enc.w + p.enc.b)
    y = h @ p.dec.w + p.dec.b
    return jnp.mean((y - x) ** 2)


X = jnp.linspace(-1.0, 1.0, 24).reshape(8, 3)


def _train(opt: Any, params: Model, steps: int = 5) -> tuple[Model, Any, list[float]]:
    state = opt.init(params)

    @jax.jit
    def step(p: Model, s: Any) -> tuple[Model, Any, Any]:
        loss, grads = jax.value_and_grad(_loss)(p, X)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    return params, state, losses


# --- optax --------------------------------------------------------------------------------------


def test_adamw_trains_treeclass_params() -> None:
    params, state, losses = _train(optax.adamw(1e-2), _params())
    assert type(params) is Model and type(params.enc) is Dense
    assert (params.tag, params.dec.act) == ("ae-1", "id")
    assert params.enc.norm is None
    assert losses[-1] < losses[0]
    mu = state[0].mu  # ScaleByAdamState
    assert type(mu) is Model and mu.enc.norm is None and mu.tag == "ae-1"


def test_adamw_with_a_weight_decay_mask_function() -> None:
    """The usual "no decay on biases" mask, returned as a treeclass tree by ``jax.tree.map``."""
    p0 = _params()
    opt = optax.adamw(0.0, weight_decay=0.5, mask=lambda p: jax.tree.map(lambda x: x.ndim > 1, p))
    # lr 0: nothing moves, so the decay part alone is visible in the updates.
    state = opt.init(p0)
    grads = jax.tree.map(jnp.zeros_like, p0)
    updates, _ = opt.update(grads, state, p0)
    assert type(updates) is Model
    np.testing.assert_allclose(updates.enc.b, 0.0)
    np.testing.assert_allclose(updates.enc.w, 0.0)  # scaled by the learning rate 0


def test_masked_with_a_treeclass_mask() -> None:
    """A hand-written mask: a prefix of the params (``dec`` masked as a whole), ``None``
    where the params have ``None``, statics equal to the params'."""
    p0 = _params()
    mask = Model(Dense(True, False, None), False, tag="ae-1")
    opt = optax.masked(optax.set_to_zero(), mask)
    state = opt.init(p0)
    grads = jax.tree.map(jnp.ones_like, p0)
    updates, _ = opt.update(grads, state, p0)
    assert type(updates) is Model and type(updates.enc) is Dense
    np.testing.assert_allclose(updates.enc.w, 0.0)  # masked in: set to zero
    np.testing.assert_allclose(updates.enc.b, 1.0)  # masked out: unchanged
    np.testing.assert_allclose(updates.dec.w, 1.0)
    assert updates.enc.norm is None


def test_multi_transform_with_treeclass_labels() -> None:
    p0 = _params()
    labels = Model(Dense("adam", "sgd", None), "frozen", tag="ae-1")
    opt = optax.multi_transform(
        {"adam": optax.adam(1e-2), "sgd": optax.sgd(1e-1), "frozen": optax.set_to_zero()},
        labels,
    )
    params, _, losses = _train(opt, p0, steps=3)
    assert type(params) is Model
    np.testing.assert_array_equal(params.dec.w, p0.dec.w)  # frozen
    np.testing.assert_array_equal(params.dec.b, p0.dec.b)
    assert not np.allclose(params.enc.w, p0.enc.w)
    assert losses[-1] < losses[0]
    # Labels from a function, as most users write them.
    opt2 = optax.multi_transform(
        {"decay": optax.adamw(1e-2), "plain": optax.adam(1e-2)},
        lambda p: jax.tree.map(lambda x: "decay" if x.ndim > 1 else "plain", p),
    )
    params2, _, _ = _train(opt2, p0, steps=2)
    assert type(params2.enc) is Dense and params2.enc.norm is None


# --- chex ---------------------------------------------------------------------------------------


def test_chex_assert_trees_all_close() -> None:
    a = _params()
    b = jax.tree.map(lambda x: x * (1 + 1e-7), a)
    chex.assert_trees_all_close(a, b)
    c = Model(a.enc, Dense(a.dec.w + 1.0, a.dec.b, act="id"), tag="ae-1")
    with pytest.raises(AssertionError, match=r"differ in leaves 'dec/w'"):
        chex.assert_trees_all_close(a, c)
    # Other statics: another structure.
    with pytest.raises(AssertionError):
        chex.assert_trees_all_close(a, Model(a.enc, a.dec, tag="other"))
    # A None field set on one side: another structure too.
    d = Model(Dense(a.enc.w, a.enc.b, norm=jnp.ones(4)), a.dec, tag="ae-1")
    with pytest.raises(AssertionError):
        chex.assert_trees_all_close(a, d)


def test_chex_assert_tree_all_finite() -> None:
    a = _params()
    chex.assert_tree_all_finite(a)
    bad = Model(a.enc, Dense(a.dec.w.at[0, 0].set(jnp.nan), a.dec.b, act="id"), tag="ae-1")
    with pytest.raises(AssertionError, match="finite"):
        chex.assert_tree_all_finite(bad)
