"""optax's state namedtuples under ``optax.<ClassName>``, with no user code (issue 19).

An ``optax.chain(clip_by_global_norm, adamw(schedule))`` state is written by ``tc.save``,
``treeclass.orbax`` (no target) and ``jax.export``, then read back in a fresh process that
imports optax (before or after treeclass) and registers nothing itself. Also: which classes
are named, that naming changes nothing for JAX, optree and pickle, and that treeclass's error
about unnamed classes lists all of them at once (``jax.export`` raises JAX's own error).
"""

from __future__ import annotations

import json
import pickle
import typing
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _subproc import run_script  # noqa: E402

import treeclass as tc  # noqa: E402
from treeclass._backends import optax as optax_adapter  # noqa: E402

pytestmark = pytest.mark.jax

EXPECTED = {
    "optax.EmptyState": optax.EmptyState,
    "optax.MaskedNode": optax.MaskedNode,
    "optax.ScaleByAdamState": optax.ScaleByAdamState,
    "optax.ScaleByScheduleState": optax.ScaleByScheduleState,
    "optax.InjectHyperparamsState": optax.InjectHyperparamsState,
    "optax.MaskedState": optax.MaskedState,
    "optax.PartitionState": optax.PartitionState,
    "optax.MultiStepsState": optax.MultiStepsState,
    "optax.TraceState": optax.TraceState,
    "optax.COCOBState": optax.contrib.COCOBState,
    "optax.ScheduleFreeState": optax.contrib.ScheduleFreeState,
}


def _opt() -> Any:
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10)
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule))


def _trained_state() -> tuple[Any, Any]:
    opt = _opt()
    params = {"b": jnp.zeros(3), "w": jnp.arange(6.0).reshape(2, 3)}
    state = opt.init(params)
    for _ in range(2):
        grads = jax.tree.map(lambda p: p * 0.5 + 1.0, params)
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return params, state


def _summary(state: Any) -> dict[str, Any]:
    """What must survive: the classes along the structure, and every leaf's value."""
    return {
        "structure": str(jax.tree.structure(state)),  # names every namedtuple class
        "leaves": [np.asarray(v).tolist() for v in jax.tree.leaves(state)],
    }


def test_every_optax_state_class_is_named() -> None:
    for name, cls in EXPECTED.items():
        assert tc.name_of(cls) == name
        assert tc.class_for_name(name) is cls
    named = optax_adapter.state_classes()
    assert set(EXPECTED) <= set(named)
    # Deterministic, every name optax.<ClassName> of a class optax defines.
    assert list(named) == sorted(named)
    for name, cls in named.items():
        assert name == f"optax.{cls.__name__}" and cls.__module__.startswith("optax")
        assert tc.name_of(cls) == name
    # A state a public optimizer builds that optax does not export is named too.
    state = optax.rmsprop(1e-3, bias_correction=True).init({"w": jnp.ones(2)})
    assert tc.name_of(type(state[0])) == f"optax.{type(state[0]).__name__}"


def test_naming_changes_nothing_for_jax_optree_and_pickle() -> None:
    _, state = _trained_state()
    leaves, treedef = jax.tree.flatten(state)
    again = jax.tree.unflatten(treedef, leaves)
    assert type(again[1][0]) is optax.ScaleByAdamState
    assert jax.tree.structure(again) == treedef
    optree = pytest.importorskip("optree")
    o_leaves, o_spec = optree.tree_flatten(state, none_is_leaf=False)
    assert len(o_leaves) == len(leaves)
    assert type(optree.tree_unflatten(o_spec, o_leaves)[1][0]) is optax.ScaleByAdamState
    # pickle_by_name=False: optax's states pickle as optax defines them.
    data = pickle.dumps(state)
    assert b"rebuild_by_name" not in data and b"optax._src" in data
    assert type(pickle.loads(data)[1][0]) is optax.ScaleByAdamState


_READER = """
import json, sys
order = sys.argv[2]
if order == "optax-first":
    import optax
    import treeclass as tc
else:
    import treeclass as tc
    import optax
import jax, numpy as np
import treeclass.orbax as tco

folder = sys.argv[1]

def summary(state):
    return {"structure": str(jax.tree.structure(state)),
            "leaves": [np.asarray(v).tolist() for v in jax.tree.leaves(state)]}

from_file = tc.load(folder + "/state.tc", to="jax")
from_orbax = tco.restore(folder + "/ckpt")
exported = jax.export.deserialize(bytearray(open(folder + "/step.jaxexport", "rb").read()))
params = {"b": jax.numpy.zeros(3), "w": jax.numpy.ones((2, 3))}
new_params, new_state = exported.call(params, from_orbax)
print(json.dumps({
    "file": summary(from_file), "orbax": summary(from_orbax), "out": summary(new_state),
    "in_tree_matches": exported.in_tree == jax.tree.structure(((params, from_file), {})),
    "adam_type": type(from_orbax[1][0]) is optax.ScaleByAdamState,
}))
"""


@pytest.mark.parametrize("order", ["optax-first", "treeclass-first"])
def test_chain_state_round_trips_in_a_fresh_process(tmp_path: Path, order: str) -> None:
    import treeclass.orbax as tco

    params, state = _trained_state()
    tc.save(tmp_path / "state.tc", state)
    tco.save(tmp_path / "ckpt", state)
    opt = _opt()

    def step(p: Any, s: Any) -> Any:
        grads = jax.tree.map(jnp.ones_like, p)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s

    exported = jax.export.export(jax.jit(step))(params, state)
    (tmp_path / "step.jaxexport").write_bytes(exported.serialize())
    expected_out = step({"b": jnp.zeros(3), "w": jnp.ones((2, 3))}, state)[1]

    report = run_script(_READER, str(tmp_path), order, timeout=300).report()
    want = json.loads(json.dumps(_summary(state)))
    assert report["file"] == want
    assert report["orbax"] == want
    assert report["adam_type"] and report["in_tree_matches"]
    out = json.loads(json.dumps(_summary(expected_out)))
    assert report["out"]["structure"] == out["structure"]
    np.testing.assert_allclose(
        np.concatenate([np.ravel(v) for v in report["out"]["leaves"]]),
        np.concatenate([np.ravel(v) for v in out["leaves"]]),
        rtol=1e-6,
    )
    assert want["structure"].startswith(
        "PyTreeDef((CustomNode(namedtuple[EmptyState], []), (CustomNode(namedtuple"
        "[ScaleByAdamState], [*, {'b': *, 'w': *}, {'b': *, 'w': *}]), CustomNode(namedtuple"
        "[EmptyState], []), CustomNode(namedtuple[ScaleByScheduleState], [*]))))"
    )


# --- one error for every unnamed class ------------------------------------------------------


@tc.pytree_dataclass
class _NoName1:
    x: Any


@tc.pytree_dataclass
class _NoName2:
    y: Any


class _NoNameTuple(typing.NamedTuple):
    z: Any


def _three_unnamed() -> Any:
    return {"a": _NoName1(jnp.ones(1)), "b": [_NoName2(jnp.ones(1))], "c": _NoNameTuple(1.0)}


_ALL_THREE = (
    r"(?s)3 classes in the structure cannot be serialized; fix them all.*"
    r"1\. .*_NoName1 was registered without a name.*name=\"pkg\._NoName1\".*"
    r"2\. .*_NoName2 was registered without a name.*name=\"pkg\._NoName2\".*"
    r"3\. namedtuple .*_NoNameTuple has no registered name.*"
    r"register_namedtuple\(_NoNameTuple, name=\"pkg\._NoNameTuple\"\)"
)

# A JAX structure's unnamed namedtuple is a node JAX knows and treeclass does not.
_ALL_THREE_JAX = (
    r"(?s)3 classes in the structure cannot be serialized; fix them all.*"
    r"1\. .*_NoName1 was registered without a name.*name=\"pkg\._NoName1\".*"
    r"2\. .*_NoName2 was registered without a name.*name=\"pkg\._NoName2\".*"
    r"3\. the JAX structure has a node of type .*_NoNameTuple at child position .*"
    r"register_namedtuple\(_NoNameTuple, name=\"pkg\._NoNameTuple\"\)"
)


def test_tc_save_names_every_unnamed_class_at_once(tmp_path: Path) -> None:
    with pytest.raises(tc.UnnamedClassError, match=_ALL_THREE):
        tc.save(tmp_path / "x.tc", _three_unnamed())
    assert not (tmp_path / "x.tc").exists()


def test_orbax_names_every_unnamed_class_at_once(tmp_path: Path) -> None:
    import treeclass.orbax as tco

    with pytest.raises(tc.UnnamedClassError, match=_ALL_THREE):
        tco.save(tmp_path / "ckpt", _three_unnamed())


def test_treespec_dumps_names_every_unnamed_class_at_once() -> None:
    with pytest.raises(tc.UnnamedClassError, match=_ALL_THREE_JAX):
        tc.treespec_dumps(jax.tree.structure(_three_unnamed()))


def test_jax_export_raises_jax_own_error_and_treespec_dumps_lists_all() -> None:
    # treeclass registers nothing in jax.export for an unnamed class (issue 17), so
    # serialize() raises JAX's own error, naming one class; docs/jax.md says so.
    tree = {"a": _NoName1(jnp.ones(1)), "b": [_NoName2(jnp.ones(1))]}
    exported = jax.export.export(jax.jit(lambda t: (t, _NoNameTuple(t["a"].x))))(tree)
    with pytest.raises(ValueError, match=r"Cannot serialize PyTreeDef containing an unregistered"):
        exported.serialize()
    # The documented way to see every class at once: treespec_dumps of the exported tree.
    with pytest.raises(tc.UnnamedClassError, match=_ALL_THREE_JAX):
        tc.treespec_dumps(exported.out_tree)


def test_one_unnamed_class_keeps_its_own_message(tmp_path: Path) -> None:
    with pytest.raises(tc.UnnamedClassError, match=r"^[^\n]*_NoName1 was registered without"):
        tc.save(tmp_path / "x.tc", [_NoName1(1.0), _NoName1(2.0)])


# A user class holding an optax.<Name> before optax is imported: that one optax class is left
# unnamed, with one warning and an ERROR log naming it; every other optax class is named, the
# optax backend is active, and later registrations work.
_TAKEN = """
import json, logging, warnings
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelname, record.getMessage()])
logging.getLogger("treeclass").addHandler(Keep())
import treeclass as tc

@tc.pytree_dataclass(name="optax.EmptyState")
class Mine:
    x: int

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import optax
report = {
    "warnings": [str(w.message) for w in caught if w.category is RuntimeWarning],
    "errors": [m for name, level, m in records if name == "treeclass" and level == "ERROR"],
    "active": list(tc.active_backends()),
    "empty": tc.name_of(optax.EmptyState),
    "adam": tc.name_of(optax.ScaleByAdamState),
    "mine": tc.class_for_name("optax.EmptyState") is Mine,
}
try:
    @tc.pytree_dataclass(name="tests.optax.Other")
    class Other:
        y: int
    report["other"] = "registered"
except Exception as e:
    report["other"] = f"{type(e).__name__}: {e}"
print(json.dumps(report))
"""


def test_an_optax_name_taken_by_a_user_class_skips_that_class_only() -> None:
    report: dict[str, Any] = run_script(_TAKEN, timeout=120).report()
    assert len(report["warnings"]) == 1, report
    (warning,) = report["warnings"]
    assert "optax._src.base.EmptyState" in warning and "__main__.Mine" in warning, warning
    assert "'optax.EmptyState'" in warning, warning
    assert report["errors"] == [warning], report
    assert "optax" in report["active"], report
    assert report["empty"] is None and report["mine"] is True, report
    assert report["adam"] == "optax.ScaleByAdamState", report
    assert report["other"] == "registered", report
