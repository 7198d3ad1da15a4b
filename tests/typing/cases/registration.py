"""tc.register_dataclass and tc.register_namedtuple return the class unchanged; name is required.

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import attrs
from typing_extensions import assert_type

import treeclass as tc

# --- register_dataclass ----------------------------------------------------------------------


@dataclasses.dataclass
class ThirdParty:
    hidden: float
    kind: str = "x"


Registered = tc.register_dataclass(ThirdParty, name="cases.ThirdParty", static=("kind",))
assert_type(Registered, type[ThirdParty])
assert_type(Registered(1.0), ThirdParty)
assert_type(
    tc.register_dataclass(
        ThirdParty, name=None, static=["kind"], return_none_fields=True, unflatten_calls_init=True
    ),
    type[ThirdParty],
)
assert_type(tc.register_dataclass(ThirdParty, override=True), type[ThirdParty])


@tc.register_dataclass
@dataclasses.dataclass(frozen=True)
class Decorated:
    a: int
    b: str = dataclasses.field(default="b", metadata={"static": True})


assert_type(Decorated, type[Decorated])
assert_type(Decorated(1), Decorated)
Decorated("1")  # E: mypy[arg-type] pyright[reportArgumentType]
Decorated(1).a = 2  # E: mypy[misc] pyright[reportAttributeAccessIssue]


@attrs.define
class AttrsClass:
    x: int
    label: str = attrs.field(default="a", metadata={"static": True})


assert_type(tc.register_dataclass(AttrsClass, name="cases.AttrsClass"), type[AttrsClass])
assert_type(AttrsClass(1), AttrsClass)

tc.register_dataclass(ThirdParty, name=1)  # E: mypy[arg-type] pyright[reportArgumentType]
tc.register_dataclass(ThirdParty, static=[1])  # E: mypy[list-item] pyright[reportArgumentType]
tc.register_dataclass(ThirdParty, frozen=True)  # E: mypy[call-arg] pyright[reportCallIssue]
tc.register_dataclass(ThirdParty, "cases.Positional")  # E: mypy[call-arg] pyright[reportCallIssue]
tc.register_dataclass()  # E: mypy[call-arg] pyright[reportCallIssue]
tc.register_dataclass(ThirdParty(1.0))  # E: mypy[type-var] pyright[reportArgumentType]


# --- register_namedtuple ---------------------------------------------------------------------


class Pair(NamedTuple):
    first: int
    second: str


RegisteredPair = tc.register_namedtuple(Pair, name="cases.Pair")
assert_type(RegisteredPair, type[Pair])
assert_type(RegisteredPair(1, "a"), Pair)
assert_type(RegisteredPair(1, "a").second, str)


@tc.register_namedtuple(name="cases.Triple")
class Triple(NamedTuple):
    a: int
    b: int
    c: float = 0.0


assert_type(Triple, type[Triple])
assert_type(Triple(1, 2), Triple)
assert_type(Triple(1, 2)[2], float)
Triple(1, "2")  # E: mypy[arg-type] pyright[reportArgumentType]

Functional = NamedTuple("Functional", [("x", int), ("y", int)])
assert_type(tc.register_namedtuple(Functional, name="cases.Functional"), type[Functional])

# name is required in every form.
tc.register_namedtuple(Pair)  # E: mypy[call-overload] pyright[reportCallIssue]
tc.register_namedtuple()  # E: mypy[call-overload] pyright[reportCallIssue]
tc.register_namedtuple(Pair, name=None)  # E: mypy[call-overload] pyright[reportArgumentType]
tc.register_namedtuple(Pair, "cases.Pair")  # E: mypy[call-overload] pyright[reportCallIssue]
tc.register_namedtuple(Pair, name="cases.Pair", static=("first",))  # E: mypy[call-overload] pyright[reportCallIssue]


# mypy reports a bad bare class decorator on the class line, pyright on the decorator line.
@tc.register_namedtuple  # E: pyright[reportCallIssue,reportUntypedClassDecorator]
class Unnamed(NamedTuple):  # E: mypy[call-overload]
    a: int


@tc.register_namedtuple()  # E: mypy[call-overload] pyright[reportCallIssue,reportUntypedClassDecorator]
class CalledUnnamed(NamedTuple):
    a: int


# Only namedtuple classes: a dataclass is registered with register_dataclass.
tc.register_namedtuple(ThirdParty, name="cases.NotATuple")  # E: mypy[type-var] pyright[reportArgumentType]
