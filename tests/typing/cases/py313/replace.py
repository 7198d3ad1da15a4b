"""``replace`` for a Python 3.13 target, with no plugin: both checkers check the fields.

Type-checked by tests/test_typing.py (mypy with ``--python-version 3.13`` and without the
``treeclass.mypy`` plugin; pyright in a 3.13 execution environment), never run. Both give every
dataclass a typed ``__replace__`` there (``copy.replace``'s protocol), which ``tc.replace`` and
``PytreeNode.replace`` take their keywords from. The ``.replace`` method that
``@tc.pytree_dataclass`` adds stays unknown to both (a decorator cannot add a method); mypy
knows it with the plugin.
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

import attrs
from typing_extensions import assert_type

import treeclass as tc

T = TypeVar("T")


@tc.pytree_dataclass(name="cases.py313.State", frozen=True)
class State:
    params: float
    step: int
    note: str | None = None


@tc.pytree_dataclass
class Box(Generic[T]):
    item: T


class Node(tc.PytreeNode, frozen=True):
    w: float
    act: str = tc.field(static=True, default="relu")


class Pair(NamedTuple):
    a: int


@attrs.define
class Evolving:
    x: int


s = State(1.0, 2)
assert_type(tc.replace(s, step=3), State)
assert_type(tc.replace(s, note=None, params=2.0), State)
assert_type(tc.replace(Box(1), item=2), Box[int])
tc.replace(s, stpe=3)  # E: mypy[call-overload] pyright[reportCallIssue]
tc.replace(s, step="3")  # E: mypy[call-overload] pyright[reportCallIssue,reportArgumentType]
tc.replace(3, x=1)  # E: mypy[call-overload] pyright[reportCallIssue,reportArgumentType]
s.replace(step=3)  # E: mypy[attr-defined] pyright[reportAttributeAccessIssue,reportUnknownMemberType]

n = Node(1.0)
assert_type(n.replace(w=2.0), Node)
assert_type(n.replace(act="gelu").replace(), Node)
n.replace(ww=2.0)  # E: mypy[call-arg] pyright[reportCallIssue]
n.replace(w="2")  # E: mypy[arg-type] pyright[reportArgumentType]

assert_type(tc.replace(Pair(1), a=2), Pair)
assert_type(tc.replace(Evolving(1), x=2), Evolving)


class Misspelled(tc.PytreeNode, frozn=True):  # E: mypy[arg-type] pyright[reportArgumentType,reportGeneralTypeIssues]
    x: int
