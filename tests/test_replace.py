"""``.replace(**changes)`` on classes made by ``@tc.pytree_dataclass`` (as flax.struct and chex).

Part 1 is the issue's promise: the decorator gives the method (unless the class defines
``replace`` or has a field of that name). It fails until the lead attaches the helper in the
decorator. Part 2 tests the helper (``treeclass._core.replace``) directly.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest

import treeclass as tc
from treeclass._core.replace import attach_replace, replace

# --- part 1: on decorated classes -------------------------------------------------------------


@tc.pytree_dataclass(name="tests.replace.State", frozen=True)
class State:
    params: Any
    step: int
    ema: Any = None
    run: str = tc.field(static=True, default="r")


def test_decorated_classes_have_replace() -> None:
    s = State({"w": 1.0}, 1)
    s2 = s.replace(step=2, run="r2")  # type: ignore[attr-defined]
    assert type(s2) is State
    assert (s2.step, s2.run, s2.ema) == (2, "r2", None)
    assert s.step == 1  # unchanged
    assert s.replace() == s  # type: ignore[attr-defined]
    assert State.replace.__qualname__ == "State.replace"  # type: ignore[attr-defined]
    with pytest.raises(tc.TreeclassTypeError, match=r"State.replace\(\) got 'stp', which is not"):
        s.replace(stp=3)  # type: ignore[attr-defined]


def test_a_class_with_its_own_replace_keeps_it() -> None:
    @tc.pytree_dataclass
    class Own:
        x: float

        def replace(self, x: float) -> str:
            return f"own {x}"

    assert Own(1.0).replace(2.0) == "own 2.0"


def test_a_field_named_replace_stays_a_field() -> None:
    @tc.pytree_dataclass
    class Field:
        replace: int
        other: int = 0

    assert Field(3).replace == 3
    assert "replace" not in vars(Field) or vars(Field)["replace"] != 3


def test_replace_inside_jit() -> None:
    jax = pytest.importorskip("jax")

    @jax.jit
    def bump(s: State) -> State:
        return s.replace(step=s.step + 1)  # type: ignore[attr-defined,no-any-return]

    out = bump(State({"w": 1.0}, 1, run="jit"))
    assert type(out) is State and int(out.step) == 2 and out.run == "jit"


# --- part 2: the helper -----------------------------------------------------------------------


def test_replace_runs_init_like_dataclasses_replace() -> None:
    calls: list[Any] = []

    @tc.pytree_dataclass(frozen=True, slots=True)
    class Counted:
        x: float
        doubled: float = dataclasses.field(init=False, default=0.0)
        tag: str = tc.field(static=True, default="t")

        def __post_init__(self) -> None:
            calls.append(self.x)
            object.__setattr__(self, "doubled", self.x * 2)

    c = Counted(1.0)
    c2 = replace(c, x=5.0, tag="u")
    assert (c2.x, c2.doubled, c2.tag) == (5.0, 10.0, "u")
    assert calls == [1.0, 5.0]
    with pytest.raises(
        tc.TreeclassTypeError,
        match=r"Counted.replace\(\) got 'doubled', a field with init=False",
    ):
        replace(c, doubled=3.0)
    with pytest.raises(
        tc.TreeclassTypeError,
        match=r"got 'y', which is not a field of .*Counted; its fields are x, doubled, tag",
    ):
        replace(c, y=3.0)
    assert issubclass(tc.TreeclassTypeError, TypeError)


def test_replace_on_attrs_classes_uses_init_names() -> None:
    attrs = pytest.importorskip("attrs")

    @tc.pytree_dataclass(name="tests.replace.Attrs")
    @attrs.frozen
    class A:
        _x: int = attrs.field(validator=attrs.validators.instance_of(int))
        mode: str = attrs.field(default="m", metadata={"static": True})

    a = A(1)
    assert replace(a, x=2, mode="n") == A(2, "n")
    with pytest.raises(TypeError):
        replace(a, x="not an int")  # the validator runs
    with pytest.raises(tc.TreeclassTypeError, match="not a field"):
        replace(a, _x=2)


def test_replace_on_namedtuples_and_other_objects() -> None:
    class P(typing.NamedTuple):
        a: int
        b: int = 0

    assert replace(P(1), b=2) == P(1, 2)
    with pytest.raises(
        tc.TreeclassTypeError, match=r"'c', which is not a field of .*P; its fields are a, b"
    ):
        replace(P(1), c=2)
    with pytest.raises(tc.TreeclassTypeError, match=r"got a builtins\.dict"):
        replace({"a": 1}, a=2)


def test_attach_replace_rules() -> None:
    @dataclasses.dataclass
    class Plain:
        x: int

    assert attach_replace(Plain) is True
    assert Plain(1).replace(x=2) == Plain(2)  # type: ignore[attr-defined]
    assert Plain.replace.__qualname__.endswith("Plain.replace")  # type: ignore[attr-defined]
    assert attach_replace(Plain) is False  # it has one now

    @dataclasses.dataclass
    class Own:
        x: int

        def replace(self) -> str:
            return "own"

    assert attach_replace(Own) is False
    assert Own(1).replace() == "own"

    @dataclasses.dataclass
    class Named:
        replace: int

    assert attach_replace(Named) is False
    assert Named(4).replace == 4

    class Base:
        def replace(self) -> str:
            return "base"

    @dataclasses.dataclass
    class Derived(Base):
        x: int

    assert attach_replace(Derived) is False
    assert Derived(1).replace() == "base"

    @dataclasses.dataclass
    class Child(Plain):
        y: int = 0

    # Inherits Plain's attached replace, which builds a Child.
    assert attach_replace(Child) is False
    assert Child(1, 2).replace(y=3) == Child(1, 3)  # type: ignore[attr-defined]


# --- tc.PytreeNode ------------------------------------------------------------------------------


class Node(tc.PytreeNode, name="tests.replace.Node", frozen=True):
    w: Any
    b: Any = None
    act: str = tc.field(static=True, default="relu")


class Child(Node, name="tests.replace.Child", frozen=True):
    extra: Any = 0


def test_pytree_node_subclasses_are_registered_pytree_dataclasses() -> None:
    n = Node(1.0)
    assert dataclasses.is_dataclass(n) and tc.name_of(Node) == "tests.replace.Node"
    leaves, spec = tc.tree_flatten(n)
    assert leaves == [1.0] and spec.unflatten([2.0]) == Node(2.0)
    assert n.replace(b=3.0) == Node(1.0, 3.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        n.w = 2.0  # type: ignore[misc]
    c = Child(1.0, extra=5)
    assert tc.name_of(Child) == "tests.replace.Child"
    assert tc.tree_leaves(c) == [1.0, 5]
    assert type(c.replace(extra=6)) is Child


def test_pytree_node_refuses_unknown_options() -> None:
    with pytest.raises(TypeError):

        class Bad(tc.PytreeNode, nmae="x"):  # type: ignore[call-arg]
            x: int


def test_positional_values_are_refused() -> None:
    # On Python 3.13 tc.replace takes *args (its typing there is a ParamSpec's); a value given
    # by position is a clear treeclass error, as Python's own TypeError is before 3.13.
    from treeclass._core.replace import replace_changes

    @dataclasses.dataclass
    class P:
        x: int

    with pytest.raises(TypeError):
        tc.replace(P(1), 2)  # type: ignore[call-arg,misc,unused-ignore]  # pyright: ignore
    with pytest.raises(tc.TreeclassTypeError, match=r"P\.replace\(\) takes the new values by key"):
        replace_changes(P(1), {}, (2,))
