"""Issue 29, item 5: which checker knows the ``.replace`` method, and what it checks.

``tc.PytreeNode`` declares ``replace`` (returning ``Self``), so both checkers know it on every
target, with or without the mypy plugin; the fields are checked by mypy with the plugin (any
target) and by both checkers for a Python 3.13+ target. The ``.replace`` that
``@tc.pytree_dataclass`` adds is known only to mypy with the plugin: a decorator cannot add a
method a checker sees, so elsewhere call ``tc.replace(obj, ...)``, or derive from
``tc.PytreeNode``. (The stdlib twin has no method: ``dataclasses.replace`` / ``copy.replace``.)
"""

from __future__ import annotations

from typing import Generic, TypeVar

from typing_extensions import assert_type

import treeclass as tc

T = TypeVar("T")


class Node(tc.PytreeNode, frozen=True):
    w: float
    act: str = tc.field(static=True, default="relu")


class Sub(Node, frozen=True):
    extra: int = 0


class Box(tc.PytreeNode, Generic[T]):
    item: T


@tc.pytree_dataclass(frozen=True)
class Decorated:
    w: float


n = Node(1.0)
assert_type(n.replace(w=2.0), Node)
assert_type(n.replace(), Node)
assert_type(Sub(1.0).replace(extra=2), Sub)
assert_type(Box(1).replace(item=2), Box[int])
assert_type(tc.replace(Decorated(1.0), w=2.0), Decorated)
n.replace(ww=2.0)  # E: mypy[call-arg] pyright[reportCallIssue]
n.replace(w="2")  # E: mypy[arg-type] pyright[reportArgumentType]
Sub(1.0).replace(extra="2")  # E: mypy[arg-type] pyright[reportArgumentType]
Decorated(1.0).replace(w=2.0)  # E: pyright[reportAttributeAccessIssue,reportUnknownMemberType]
