"""``replace(**changes)``: ``tc.replace(obj, ...)``, and the method of ``tc.PytreeNode`` classes.

Type-checked by tests/test_typing.py, never run. A line ending in
``# E: mypy[<code>,...] pyright[<rule>,...]`` must get exactly those errors from those checkers;
every other line must get none.

Checked for a Python 3.10 target, mypy with the ``treeclass.mypy`` plugin (tests/typing/mypy.ini):
mypy then checks the fields of every ``replace``, and knows the ``.replace`` method that
``@tc.pytree_dataclass`` adds. pyright (no plugins) knows that method only on ``tc.PytreeNode``
subclasses, and before Python 3.13 checks only that ``tc.replace`` gets a dataclass, attrs or
namedtuple instance (``py313/replace.py``: what both check with no plugin on 3.13).
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

import attrs
from typing_extensions import assert_type

import treeclass as tc

T = TypeVar("T")


@tc.pytree_dataclass
class Base:
    base: int


@tc.pytree_dataclass(name="cases.replace.State", frozen=True)
class State:
    params: float
    step: int
    note: str | None = None
    run: str = tc.field(static=True, default="r")


s = State(1.0, 2)
assert_type(tc.replace(s, step=3), State)
assert_type(tc.replace(s, step=3, run="r2", note=None), State)
assert_type(tc.replace(tc.replace(s, params=2.0), step=4), State)
assert_type(s.replace(step=3), State)  # E: pyright[reportAttributeAccessIssue,reportUnknownMemberType,reportAssertTypeFailure]
tc.replace(s, stpe=3)  # E: mypy[call-arg]
tc.replace(s, step="3")  # E: mypy[arg-type]
s.replace(stpe=3)  # E: mypy[call-arg] pyright[reportAttributeAccessIssue,reportUnknownMemberType]
s.replace(note=1)  # E: mypy[arg-type] pyright[reportAttributeAccessIssue,reportUnknownMemberType]
tc.replace(3, x=1)  # E: mypy[type-var] pyright[reportArgumentType]
tc.replace("s")  # E: mypy[type-var] pyright[reportArgumentType]


class Pair(NamedTuple):
    a: int
    b: str


@attrs.define
class Evolving:
    x: int
    y: str = ""


@tc.pytree_dataclass
class Box(Generic[T]):
    item: T


@tc.pytree_dataclass
class SubState(Base):
    extra: int = 0


assert_type(tc.replace(Pair(1, "b"), a=2), Pair)
tc.replace(Pair(1, "b"), c=2)  # E: mypy[call-arg]
tc.replace(Pair(1, "b"), a="2")  # E: mypy[arg-type]
assert_type(tc.replace(Evolving(1), y="z"), Evolving)
tc.replace(Evolving(1), z=2)  # E: mypy[call-arg]
tc.replace(Evolving(1), x="2")  # E: mypy[arg-type]
assert_type(tc.replace(Box(1), item=2), Box[int])
assert_type(Box(1).replace(item=2), Box[int])  # E: pyright[reportAttributeAccessIssue,reportUnknownMemberType,reportAssertTypeFailure]
Box(1).replace(item="2")  # E: mypy[arg-type] pyright[reportAttributeAccessIssue,reportUnknownMemberType]
assert_type(SubState(1).replace(extra=2, base=3), SubState)  # E: pyright[reportAttributeAccessIssue,reportUnknownMemberType,reportAssertTypeFailure]
SubState(1).replace(extar=2)  # E: mypy[call-arg] pyright[reportAttributeAccessIssue,reportUnknownMemberType]


class Node(tc.PytreeNode, name="cases.replace.Node", frozen=True):
    w: float
    b: float = 0.0
    act: str = tc.field(static=True, default="relu")


n = Node(1.0)
assert_type(n, Node)
assert_type(n.replace(b=2.0), Node)
assert_type(n.replace(), Node)
assert_type(n.replace(w=2.0).replace(act="gelu").w, float)
n.replace(ww=2.0)  # E: mypy[call-arg]
n.replace(act=1)  # E: mypy[arg-type]


class Misspelled(tc.PytreeNode, nmae="cases.replace.Misspelled"):  # E: mypy[arg-type] pyright[reportArgumentType,reportGeneralTypeIssues]
    x: int
assert_type(tc.tree_leaves(n), list[object])  # E: mypy[assert-type] pyright[reportAssertTypeFailure]
Node("1")  # E: mypy[arg-type] pyright[reportArgumentType]
n.w = 2.0  # E: mypy[misc] pyright[reportAttributeAccessIssue]


class Mutable(tc.PytreeNode):
    x: int


m = Mutable(1)
m.x = 2
assert_type(m.replace(x=3), Mutable)
Mutable(x="a")  # E: mypy[arg-type] pyright[reportArgumentType]


# A class that defines replace itself keeps its own signature.
class OwnReplace(tc.PytreeNode):
    x: float

    def replace(self, x: float) -> OwnReplace:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return OwnReplace(x)


assert_type(OwnReplace(1.0).replace(2.0), OwnReplace)
