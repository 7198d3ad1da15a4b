"""The run-time half of the typing cases of issue 29: what the checkers are told, the run time does.

Each test names the case file under ``tests/typing/cases`` that pins the checkers' verdict on
the same code (``tests/test_typing.py`` runs them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import treeclass as tc

# --- frozen is not inherited (cases/inheritance.py) --------------------------------------------


def test_a_subclass_of_a_frozen_node_must_say_frozen() -> None:
    class Base(tc.PytreeNode, frozen=True):
        x: float

    with pytest.raises(
        tc.RegistrationTypeError,
        match=r"Sub derives from the frozen dataclass .*Base, so it must be frozen too \(frozen "
        r"is not inherited, as with dataclasses\); write class Sub\(Base, frozen=True\)\.$",
    ):

        class Sub(Base):
            y: float = 0.0

    class Said(Base, frozen=True):
        y: float = 0.0

    said = Said(1.0, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        said.y = 3.0  # type: ignore[misc]
    assert tc.tree_leaves(said.replace(y=4.0)) == [1.0, 4.0]


def test_a_decorated_subclass_of_a_frozen_class_must_say_frozen() -> None:
    @tc.pytree_dataclass(frozen=True)
    class Base:
        x: float

    with pytest.raises(
        tc.RegistrationTypeError,
        match=r"Sub derives from the frozen dataclass .*Base, so it must be frozen too .*; "
        r"write @pytree_dataclass\(frozen=True\)\.$",
    ):

        @tc.pytree_dataclass
        class Sub(Base):
            y: float = 0.0


def test_a_frozen_subclass_of_a_mutable_node_is_refused() -> None:
    class Loose(tc.PytreeNode):
        x: float

    with pytest.raises(
        tc.RegistrationTypeError,
        match=r"Tight is frozen but derives from the non-frozen dataclass .*Loose; make both "
        r"frozen, or neither\.$",
    ):

        class Tight(Loose, frozen=True):
            pass

    class Child(Loose):
        y: float = 0.0

    child = Child(1.0)
    child.x = 2.0
    assert child.x == 2.0


# --- a bare str where names are expected (cases/names.py) ---------------------------------------


def test_field_aliases_must_not_be_a_str() -> None:
    aliases: Any = "old"
    with pytest.raises(
        tc.RegistrationTypeError,
        match=r"aliases= of treeclass.field\(\) must be a collection of names, got the str "
        r"'old'; write aliases=\('old',\)\.",
    ):
        tc.field(default=0, aliases=aliases)


def test_register_dataclass_static_and_aliases_must_not_be_a_str() -> None:
    @dataclasses.dataclass
    class P:
        a: int
        b: str = "b"

    static: Any = "b"
    with pytest.raises(
        tc.RegistrationTypeError,
        match=r"static= of .*P must be a collection of names, got the str 'b'; "
        r"write static=\('b',\)\.",
    ):
        tc.register_dataclass(P, static=static)
    with pytest.raises(
        tc.RegistrationTypeError,
        match=r"aliases= of .*P must be a collection of names, got the str 'b'; "
        r"write aliases=\('b',\)\.",
    ):
        tc.register_dataclass(P, aliases=static)
    assert tc.register_dataclass(P, static=("b",)) is P


# --- tc.field(static=True) without a default (cases/fields_stdlib.py) ---------------------------


def test_a_static_field_without_default_is_required_in_a_plain_dataclass() -> None:
    @dataclasses.dataclass
    class P:
        x: int = tc.field(static=True)

    with pytest.raises(TypeError, match=r"missing 1 required positional argument: 'x'"):
        P()  # type: ignore[call-arg]
    tc.register_dataclass(P)
    assert tc.tree_leaves(P(1)) == []


def test_a_tc_field_in_an_attrs_class_is_refused() -> None:
    attrs = pytest.importorskip("attrs")

    @attrs.define
    class P:
        x: int = tc.field(static=True)

    with pytest.raises(
        tc.RegistrationError,
        match=r"P\.x has a dataclasses Field \(tc\.field\(\) or dataclasses\.field\(\)\) as its "
        r"default, which attrs takes for the value; in an attrs class write "
        r"attrs\.field\(metadata=\{\"static\": True\}\)",
    ):
        tc.register_dataclass(P)
