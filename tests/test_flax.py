"""flax.serialization on treeclass classes: state dicts keyed by field name, msgpack bytes.

Part 1 is the issue's promise, end to end: with flax imported, ``to_state_dict`` /
``from_state_dict`` / ``to_bytes`` / ``from_bytes`` work on treeclass classes with no user
code (the adapter is activated when flax is imported), and a checkpoint written from a
``flax.struct.dataclass`` loads into the treeclass class that replaced it. These fail until
the adapter is wired into the framework table.

Part 2 tests the adapter's own behaviour: nesting, rebuilding without ``__init__``, errors,
conflicts with other registrations and rollback.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")

import flax.serialization as fs  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _subproc import report_in  # noqa: E402
from flax import struct  # noqa: E402

import treeclass as tc  # noqa: E402
from treeclass._backends import flax as adapter  # noqa: E402
from treeclass._core import registry as _registry  # noqa: E402

pytestmark = pytest.mark.jax


# --- part 1: automatic, end to end ------------------------------------------------------------


@struct.dataclass
class OldState:
    """The class before the migration."""

    params: Any
    step: Any
    ema: Any = None
    run: str = struct.field(pytree_node=False, default="old-run")


@tc.pytree_dataclass(name="tests.flax.State", frozen=True)
class State:
    """The same class after the migration to treeclass."""

    params: Any
    step: Any
    ema: Any = None
    run: str = tc.field(static=True, default="new-run")


@tc.pytree_dataclass(name="tests.flax.Outer")
class Outer:
    inner: State
    extras: dict[str, Any]
    tag: str = tc.field(static=True, default="outer")


def _params() -> dict[str, Any]:
    return {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}


def test_to_state_dict_is_keyed_by_data_field_names() -> None:
    s = State(_params(), jnp.int32(3))
    sd = fs.to_state_dict(s)
    assert list(sd) == ["params", "step", "ema"]  # field order; the static field is not state
    assert sd["ema"] is None
    assert sorted(sd["params"]) == ["b", "w"]
    # The same state dict as the flax.struct class it replaces.
    old = fs.to_state_dict(OldState(_params(), jnp.int32(3)))
    assert list(old) == list(sd)
    assert jax.tree_util.tree_structure(old) == jax.tree_util.tree_structure(sd)


def test_to_bytes_from_bytes_round_trip() -> None:
    s = Outer(State(_params(), jnp.int32(3), run="r1"), {"lr": np.float32(0.1)}, tag="t1")
    data = fs.to_bytes(s)
    target = Outer(State(_params(), jnp.int32(0), run="r1"), {"lr": np.float32(0.0)}, tag="t1")
    got = fs.from_bytes(target, data)
    assert type(got) is Outer and type(got.inner) is State
    assert (got.tag, got.inner.run) == ("t1", "r1")
    assert int(got.inner.step) == 3
    assert got.inner.ema is None
    np.testing.assert_array_equal(got.inner.params["w"], np.arange(6.0).reshape(2, 3))
    assert float(got.extras["lr"]) == pytest.approx(0.1)


def test_from_state_dict_keeps_the_targets_statics() -> None:
    sd = fs.to_state_dict(State(_params(), jnp.int32(5), run="saved-run"))
    got = fs.from_state_dict(State(_params(), jnp.int32(0), run="target-run"), sd)
    assert got.run == "target-run"  # statics are not state, as with flax.struct
    assert int(got.step) == 5


def test_a_flax_struct_checkpoint_loads_after_the_migration() -> None:
    """Bytes written from the flax.struct class load into the treeclass class, and back."""
    old = OldState(_params(), jnp.int32(9), ema={"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)})
    data = fs.to_bytes(old)
    target = State(_params(), jnp.int32(0), ema={"w": jnp.ones((2, 3)), "b": jnp.ones(3)})
    got = fs.from_bytes(target, data)
    assert type(got) is State and int(got.step) == 9 and got.run == "new-run"
    np.testing.assert_array_equal(got.ema["w"], np.zeros((2, 3)))
    # And a checkpoint written after the migration still loads into the old class.
    back = fs.from_bytes(OldState(_params(), jnp.int32(0), ema=target.ema), fs.to_bytes(got))
    assert type(back) is OldState and int(back.step) == 9


def test_none_fields_as_flax_struct_handles_them() -> None:
    """A None field is saved as None; a None in the target takes whatever was saved."""
    for cls in (OldState, State):
        saved = cls(_params(), jnp.int32(1), ema=jnp.float32(0.5))
        got = fs.from_bytes(cls(_params(), jnp.int32(0)), fs.to_bytes(saved))
        assert float(got.ema) == 0.5, cls
        got = fs.from_bytes(cls(_params(), jnp.int32(0), ema=1.0), fs.to_bytes(cls(_params(), 2)))
        assert got.ema is None, cls


_IMPORT_ORDER = """
import json, sys
from typing import Any
if sys.argv[1] == "flax-first":
    import flax.serialization as fs
import treeclass as tc

@tc.pytree_dataclass(name="tests.flax_fresh.S")
class S:
    x: Any
    extra: Any = None
    note: str = tc.field(static=True, default="n")

if sys.argv[1] == "classes-first":
    import flax.serialization as fs
sd = fs.to_state_dict(S(1.0))
back = fs.from_bytes(S(0.0, note="target"), fs.to_bytes(S(2.0, note="saved")))
print(json.dumps({"sd": sd, "back": [type(back).__name__, back.x, back.extra, back.note]}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("order", ["classes-first", "flax-first"])
def test_flax_knows_the_classes_in_both_import_orders(order: str, tmp_path: pathlib.Path) -> None:
    got = report_in(tmp_path, _IMPORT_ORDER, order)
    assert got == {"sd": {"x": 1.0, "extra": None}, "back": ["S", 2.0, None, "target"]}


# --- part 2: the adapter's behaviour ----------------------------------------------------------


@tc.pytree_dataclass(name="tests.flax.direct.Opt")
class Opt:
    mu: Any
    count: Any
    extra: Any = None
    kind: str = tc.field(static=True, default="adam")

    def __post_init__(self) -> None:
        # unflatten-style rebuilding never gets here with what from_state_dict passes
        if isinstance(self.count, np.ndarray) and self.count.ndim != 0:
            raise ValueError("count must be a scalar")


@tc.pytree_dataclass(name="tests.flax.direct.Holder", frozen=True, slots=True)
class Holder:
    opt: Opt
    old: Any  # a flax.struct dataclass inside a treeclass class
    items: list[Any]
    note: str = tc.field(static=True, default="h")


def _holder(count: int) -> Holder:
    old = OldState({"w": jnp.full(2, float(count))}, jnp.int32(count))
    opt = Opt({"w": jnp.full(2, float(count))}, jnp.int32(count))
    return Holder(opt, old, [jnp.float32(count), (count, np.int64(count))], note="n")


def test_adapter_round_trips_nested_classes() -> None:
    data = fs.to_bytes(_holder(4))
    got = fs.from_bytes(_holder(0), data)
    assert type(got) is Holder and type(got.opt) is Opt and type(got.old) is OldState
    assert (got.note, got.opt.kind) == ("n", "adam")
    assert int(got.opt.count) == 4 and int(got.old.step) == 4
    assert got.opt.extra is None
    assert float(got.items[0]) == 4.0
    assert type(got.items[1]) is tuple and int(got.items[1][1]) == 4
    sd = fs.to_state_dict(_holder(1))
    assert list(sd) == ["opt", "old", "items"]
    assert list(sd["opt"]) == ["mu", "count", "extra"]


def test_adapter_rebuilds_without_init() -> None:
    target = Opt({"w": np.zeros(2)}, np.zeros(()))
    # A state whose count is not a scalar: __post_init__ would refuse it, unflatten does not.
    got = fs.from_state_dict(target, {"mu": {"w": np.ones(2)}, "count": np.ones(3), "extra": None})
    assert got.count.shape == (3,)
    assert got.kind == "adam"


def test_adapter_sets_a_none_field_from_the_state() -> None:
    target = Opt({"w": np.zeros(2)}, 0)
    got = fs.from_state_dict(target, {"mu": {"w": np.ones(2)}, "count": 1, "extra": np.ones(1)})
    assert type(got) is Opt
    np.testing.assert_array_equal(got.extra, np.ones(1))
    assert target.extra is None  # the target is not changed


def test_adapter_errors_name_the_class_the_field_and_the_path() -> None:
    target = _holder(0)
    sd = fs.to_state_dict(_holder(1))
    del sd["opt"]["count"]
    with pytest.raises(
        tc.StructureMismatchError,
        match=r"flax state for tests.flax.direct.Opt at path '\./opt' has no entry for the data "
        r"field 'count'",
    ):
        fs.from_state_dict(target, sd)
    sd = fs.to_state_dict(_holder(1))
    sd["opt"]["kind"] = "sgd"
    sd["opt"]["bogus"] = 1
    with pytest.raises(
        tc.StructureMismatchError,
        match=r"has entries for \['bogus', 'kind'\], which are not data fields of "
        r"tests.flax.direct.Opt \('kind' is static in treeclass, so not part of the state\)",
    ):
        fs.from_state_dict(target, sd)
    with pytest.raises(
        tc.StructureMismatchError, match=r"Holder at path '.' is a list, not a dict"
    ):
        fs.from_state_dict(target, [1, 2])
    assert issubclass(tc.StructureMismatchError, ValueError)


def test_adapter_refuses_classes_flax_already_knows(uname: str) -> None:
    @dataclasses.dataclass
    class Foreign:
        x: Any

    theirs = (lambda f: {"x": f.x}, lambda f, s: Foreign(s["x"]))
    fs.register_serialization_state(Foreign, *theirs)
    with pytest.raises(
        tc.RegistrationError,
        match=r"Foreign is already registered with flax.serialization \(flax.struct",
    ):
        tc.register_dataclass(Foreign, name=uname)
    assert not tc.is_registered(Foreign)  # refused everywhere, atomically
    assert adapter._state_dict_registry()[Foreign] == theirs
    # override=True replaces flax's registration with treeclass's.
    tc.register_dataclass(Foreign, name=uname, override=True)
    assert adapter._state_dict_registry()[Foreign] != theirs
    assert fs.to_state_dict(Foreign(1)) == {"x": 1}


class _FailsLast:
    """A backend that fails after every other one registered (it cannot unregister)."""

    name = "fails-last"
    can_unregister = False

    def check(self, change: Any) -> None:
        pass

    def add(self, change: Any) -> Any:
        raise RuntimeError("boom")


def test_a_failed_registration_leaves_flax_as_it_was(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    @dataclasses.dataclass
    class Temp:
        x: Any

    monkeypatch.setattr(_registry, "_BACKENDS", [*_registry._BACKENDS, _FailsLast()])
    with pytest.raises(RuntimeError, match="boom"):
        tc.register_dataclass(Temp, name=uname)
    assert not fs.is_serializable(Temp)
    monkeypatch.undo()
    tc.register_dataclass(Temp, name=uname)  # and it can be registered again
    assert fs.to_state_dict(Temp(1)) == {"x": 1}


@pytest.mark.checked_release
def test_flax_under_test_is_the_release_the_private_access_was_checked_against() -> None:
    assert flax.__version__ == adapter.CHECKED_FLAX_VERSION


def test_private_state_dict_registry_access() -> None:
    """The one private access (checked on CHECKED_FLAX_VERSION): flax's registry dict."""
    registry = adapter._state_dict_registry()
    assert registry[dict][0] is fs._dict_state_dict
    assert Opt in registry
