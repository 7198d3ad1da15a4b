"""Children, None fields, rebuilding without __init__, names, re-runs and atomicity."""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any, ClassVar, Generic, TypeVar

import attrs
import pytest

import treeclass as tc
from treeclass._core import registry as _registry

T = TypeVar("T")


def test_children_are_data_fields_in_order_including_init_false(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class C:
        b: float
        a: float
        s: str = tc.field(static=True, default="s")
        derived: float = tc.field(init=False, default=0.0)

        def __post_init__(self) -> None:
            self.derived = self.a + self.b

    c = C(1.0, 2.0)
    leaves, spec = tc.tree_flatten(c)
    assert leaves == [1.0, 2.0, 3.0]
    out = spec.unflatten([10.0, 20.0, 99.0])
    assert (out.b, out.a, out.derived, out.s) == (10.0, 20.0, 99.0, "s")


def test_none_fields_are_no_leaves(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Out:
        logits: Any
        loss: Any = None
        hidden: Any = None

    o = Out(1.0, hidden=2.0)
    leaves, spec = tc.tree_flatten(o)
    assert leaves == [1.0, 2.0]
    # None is a child with no children of its own (an empty node), as in JAX.
    assert tc.tree_leaves(o, is_leaf=lambda v: v is None) == [1.0, None, 2.0]
    assert repr(spec) == "TreeSpec(Out(logits=*, loss=None, hidden=*))"
    back = spec.unflatten([3.0, 4.0])
    assert back == Out(3.0, None, 4.0)
    pairs, _ = tc.tree_flatten_with_path(o)
    assert [tc.keystr(p) for p, _ in pairs] == [".logits", ".hidden"]
    # A None in another field gives another structure...
    assert tc.tree_structure(Out(1.0, 2.0, None)) != spec
    # ...but the node data do not depend on which fields are None: a tree with None in place
    # of leaves is a prefix of the original (how JAX libraries build "prefix trees").
    nones = tc.tree_map(lambda x: None, o)
    assert tc.tree_map(lambda p, x: (p, x), nones, o, is_leaf=lambda v: v is None) == Out(
        (None, 1.0), (None, None), (None, 2.0)
    )


def test_return_none_fields_true_makes_none_a_child(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, return_none_fields=True)
    class Out:
        logits: Any
        loss: Any = None

    leaves, spec = tc.tree_flatten(Out(1.0))
    # None is a node with no children in the embedded registry, so it is no leaf...
    assert leaves == [1.0]
    # ...but it is a child, visible with is_leaf.
    assert tc.tree_leaves(Out(1.0), is_leaf=lambda v: v is None) == [1.0, None]
    assert spec.unflatten([5.0]) == Out(5.0, None)


def test_return_none_fields_must_be_bool() -> None:
    with pytest.raises(tc.RegistrationTypeError, match="return_none_fields= must be True or False"):
        tc.pytree_dataclass(return_none_fields="yes")  # type: ignore[call-overload]


def test_unflatten_skips_init_post_init_and_validators(uname: str) -> None:
    calls: list[str] = []

    @tc.pytree_dataclass(name=uname)
    class Strict:
        x: float

        def __post_init__(self) -> None:
            calls.append("post_init")
            if not isinstance(self.x, float):
                raise TypeError("x must be a float")

    @tc.pytree_dataclass(name=uname + "a")
    @attrs.frozen
    class Validated:
        x: float = attrs.field(validator=attrs.validators.instance_of(float))

    _, spec = tc.tree_flatten([Strict(1.0), Validated(2.0)])
    calls.clear()
    placeholder = object()
    out = spec.unflatten([placeholder, placeholder])
    assert calls == []
    assert out[0].x is placeholder and out[1].x is placeholder


def test_frozen_and_slots_classes_rebuild(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, frozen=True, slots=True)
    class FS:
        a: float
        s: tuple[int, ...] = tc.field(static=True, default=(1, 2))

    @tc.pytree_dataclass(name=uname + "b")
    @attrs.frozen(slots=True)
    class AF:
        a: float

    out = tc.tree_map(lambda v: v * 2, [FS(1.0), AF(2.0)])
    assert out == [FS(2.0), AF(4.0)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        out[0].a = 3.0  # type: ignore[misc]


def test_unflatten_calls_init_opt_in(uname: str) -> None:
    seen: list[Any] = []

    @tc.pytree_dataclass(name=uname, unflatten_calls_init=True)
    class Derived:
        x: float
        total: float = tc.field(init=False, default=0.0)

        def __post_init__(self) -> None:
            seen.append(self.x)
            self.total = self.x * 10

    leaves, spec = tc.tree_flatten(Derived(1.0))
    assert leaves == [1.0, 10.0]
    seen.clear()
    out = spec.unflatten([2.0, 5.0])
    assert seen == [2.0]
    # init=False fields are restored from the leaves after __init__ ran.
    assert out.total == 5.0


def test_generic_class(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Box(Generic[T]):
        item: T
        label: str = tc.field(static=True, default="box")

    b: Box[int] = Box(3)
    assert tc.tree_map(lambda v: v + 1, b) == Box(4)
    assert tc.tree_map(lambda v: v + 1, Box[int](5)) == Box(6)


def test_inheritance_base_fields_first(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Base:
        a: float
        tag: str = tc.field(static=True, default="base")

    @tc.pytree_dataclass(name=uname + "c")
    class Child(Base):
        b: float = 0.0

    leaves, spec = tc.tree_flatten(Child(1.0, b=2.0))
    assert leaves == [1.0, 2.0]
    assert type(spec.unflatten(leaves)) is Child
    # The subclass is its own node type; an unregistered subclass is a leaf.

    @dataclasses.dataclass
    class Unregistered(Base):
        c: float = 0.0

    u = Unregistered(1.0)
    assert tc.tree_leaves(u) == [u]


def test_kw_only_initvar_classvar_and_self_field(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, kw_only=True)
    class K:
        self: float
        scale: dataclasses.InitVar[float] = 1.0
        counter: ClassVar[int] = 0
        value: float = 0.0

        def __post_init__(self, scale: float) -> None:
            self.value = self.self * scale

    k = K(self=2.0, scale=3.0)
    leaves, spec = tc.tree_flatten(k)
    assert leaves == [2.0, 6.0]
    out = spec.unflatten([4.0, 5.0])
    assert (out.self, out.value) == (4.0, 5.0)
    assert K.counter == 0


def test_unnamed_class_cannot_be_serialized() -> None:
    @tc.pytree_dataclass
    class Anon:
        x: int

    node = _registry.registered_node(Anon)
    assert node is not None
    with pytest.raises(tc.UnnamedClassError, match=r"Anon was registered without a name.*name="):
        node.require_name()


def test_duplicate_name_names_both_classes(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class First:
        x: int

    @dataclasses.dataclass
    class Second:
        x: int

    with pytest.raises(tc.NameConflictError, match=rf"{uname}' is taken by .*First, so .*Second"):
        tc.register_dataclass(Second, name=uname)
    assert not tc.is_registered(Second)
    assert tc.class_for_name(uname) is First


def test_same_class_twice(uname: str) -> None:
    @dataclasses.dataclass
    class Twice:
        x: int

    tc.register_dataclass(Twice, name=uname)
    tc.register_dataclass(Twice, name=uname)  # the same registration again: no-op
    with pytest.raises(tc.NameConflictError, match="already registered with treeclass"):
        tc.register_dataclass(Twice, name=uname + "x")


def _define_in_module(modname: str, name: str, extra_field: bool) -> type:
    """Run a class statement in module ``modname``'s namespace (as a notebook cell runs in
    ``__main__``'s, or ``importlib.reload`` in the module's own)."""
    mod = sys.modules.get(modname) or types.ModuleType(modname)
    sys.modules[modname] = mod
    ns: dict[str, Any] = vars(mod)
    ns.update(tc=tc, name=name)
    src = "@tc.pytree_dataclass(name=name)\nclass Cell:\n    x: float\n"
    if extra_field:
        src += "    y: float = 0.0\n"
    exec(src, ns)
    cls: type = ns["Cell"]
    return cls


def test_rerun_of_same_definition_replaces_the_class(uname: str) -> None:
    modname = "notebook_" + uname.replace(".", "_")
    old = _define_in_module(modname, uname, extra_field=False)
    new = _define_in_module(modname, uname, extra_field=True)
    assert old is not new
    assert tc.class_for_name(uname) is new
    assert tc.tree_leaves(new(1.0, 2.0)) == [1.0, 2.0]
    # A different module claiming the name is still refused.
    with pytest.raises(tc.NameConflictError, match="is taken by"):
        _define_in_module(modname + "_other", uname, extra_field=False)


class _FailingBackend:
    """A backend that refuses in check() or fails in register(), to test atomicity."""

    name = "failing-test-backend"
    can_unregister = True

    def __init__(self, fail_in: str) -> None:
        self.fail_in = fail_in
        self.registered: list[type] = []
        self.unregistered: list[type] = []

    def check(self, change: Any) -> None:
        if self.fail_in == "check":
            raise tc.RegistrationError(f"{change.node.qualname} refused by the test backend")

    def add(self, change: Any) -> Any:
        if self.fail_in == "register":
            raise RuntimeError("boom")
        cls = change.node.type
        self.registered.append(cls)
        return lambda: self.unregistered.append(cls)


@pytest.mark.parametrize("fail_in", ["check", "register"])
def test_registration_is_atomic(uname: str, fail_in: str) -> None:
    ok = _FailingBackend("never")
    ok.name = "ok-test-backend"
    bad = _FailingBackend(fail_in)
    _registry._BACKENDS[:0] = [ok, bad]  # type: ignore[list-item]
    try:

        @dataclasses.dataclass
        class Atomic:
            x: int

        with pytest.raises((tc.RegistrationError, RuntimeError)):
            tc.register_dataclass(Atomic, name=uname)
    finally:
        del _registry._BACKENDS[:2]
    assert not tc.is_registered(Atomic)
    assert tc.class_for_name(uname) is None
    assert tc.tree_leaves(Atomic(1)) == [Atomic(1)]  # still a leaf
    if fail_in == "check":
        assert ok.registered == []
    else:
        assert ok.registered == [Atomic] and ok.unregistered == [Atomic]


def test_registered_after_being_seen_as_leaf() -> None:
    @dataclasses.dataclass
    class Late:
        x: int

    assert tc.tree_leaves([Late(1)]) == [Late(1)]
    tc.register_dataclass(Late)
    assert tc.tree_leaves([Late(1)]) == [1]


def test_mapping_based_class_with_custom_setattr_rebuilds_through_its_protocol(uname: str) -> None:
    from collections import OrderedDict

    class OutputBase(OrderedDict[str, Any]):
        """A miniature of HuggingFace's ModelOutput."""

        def __post_init__(self) -> None:
            for f in dataclasses.fields(self):  # type: ignore[arg-type]
                v = getattr(self, f.name)
                if v is not None:
                    self[f.name] = v

        def __setitem__(self, key: str, value: Any) -> None:
            super().__setitem__(key, value)
            super().__setattr__(key, value)

        def __setattr__(self, name: str, value: Any) -> None:
            if name in self.keys() and value is not None:
                super().__setitem__(name, value)
            super().__setattr__(name, value)

        def to_tuple(self) -> tuple[Any, ...]:
            return tuple(self[k] for k in self.keys())

    @tc.pytree_dataclass(name=uname)
    class MyOutput(OutputBase):
        last_hidden_state: Any = None
        pooler: Any = None
        attentions: Any = None

    node = _registry.registered_node(MyOutput)
    assert node is not None and node.info.rebuild == "protocol"
    out = MyOutput(last_hidden_state=1.0, attentions=3.0)
    leaves, spec = tc.tree_flatten(out)
    assert leaves == [1.0, 3.0]
    back = spec.unflatten([10.0, 30.0])
    assert type(back) is MyOutput
    assert back["last_hidden_state"] == 10.0
    assert back.attentions == 30.0 and back.pooler is None
    assert list(back.keys()) == ["last_hidden_state", "attentions"]
    assert back.to_tuple() == (10.0, 30.0)


def test_attrs_validating_setattr_keeps_the_direct_path(uname: str) -> None:
    @attrs.define
    class Validated:
        v: float = attrs.field(validator=attrs.validators.instance_of(float))

    tc.register_dataclass(Validated, name=uname)
    node = _registry.registered_node(Validated)
    assert node is not None and node.info.rebuild == "direct"
    out = tc.tree_structure(Validated(1.0)).unflatten(["not a float"])
    assert out.v == "not a float"


def test_unflatten_calls_init_uses_attrs_aliases(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, unflatten_calls_init=True)
    @attrs.define
    class Aliased:
        _private: float
        y: float = attrs.field(alias="why", default=0.0)

    assert tc.tree_map(lambda v: v + 1, Aliased(1.0, why=2.0)) == Aliased(2.0, why=3.0)


def test_unflatten_calls_init_refuses_initvar_without_default() -> None:
    with pytest.raises(tc.RegistrationError, match="InitVar 'scale' without a default"):

        @tc.pytree_dataclass(unflatten_calls_init=True)
        class NeedsScale:
            x: float
            scale: dataclasses.InitVar[float]


def test_own_setattr_that_refuses_is_a_clear_rebuild_error() -> None:
    @tc.pytree_dataclass
    class Immutable:
        x: float

        def __setattr__(self, name: str, value: Any) -> None:
            raise AttributeError("immutable")

    obj = object.__new__(Immutable)
    object.__setattr__(obj, "x", 1.0)
    with pytest.raises(
        tc.RebuildError, match=r"Immutable could not be rebuilt.*unflatten_calls_init"
    ):
        tc.tree_map(lambda v: v, obj)


def test_stdlib_subclass_of_attrs_class_is_refused() -> None:
    @attrs.define
    class AttrsBase:
        a: float

    with pytest.raises(tc.RegistrationError, match=r"Sub derives from the attrs class .*AttrsBase"):

        @tc.pytree_dataclass
        class Sub(AttrsBase):
            b: float = 0.0
