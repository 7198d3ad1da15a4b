"""Issue 29, item 4: ``replace`` returns the receiver's type (``Self``, a TypeVar, a union).

The stdlib twin is ``dataclasses.replace``, which mypy types by its dataclasses plugin (always
on) and pyright by the 3.13 ``__replace__``. treeclass's: ``tc.replace`` is generic in the
receiver before Python 3.13; on 3.13+ targets it is typed by the class's ``__replace__`` (so
that the fields are checked without a plugin), which mypy declares to return the class, not
``Self``: there mypy without the plugin gives the class for a ``Self`` or TypeVar receiver and
``object`` for a union (marked below; the plugin, and pyright, give the receiver's type).
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from typing_extensions import Self, assert_type

import treeclass as tc


@tc.pytree_dataclass(frozen=True)
class A:
    x: int = 0

    def bumped(self) -> Self:
        return tc.replace(self, x=self.x + 1)

    @classmethod
    def made(cls) -> Self:
        return tc.replace(cls(), x=1)


@tc.pytree_dataclass(frozen=True)
class B:
    x: int = 0


@dataclasses.dataclass(frozen=True)
class Twin:
    x: int = 0

    def bumped(self) -> Self:
        return dataclasses.replace(self, x=self.x + 1)

    @classmethod
    def made(cls) -> Self:
        return dataclasses.replace(cls(), x=1)


class N(tc.PytreeNode, frozen=True):
    x: int = 0

    def bumped(self) -> Self:
        return self.replace(x=self.x + 1)

    def bumped_by_function(self) -> Self:
        return tc.replace(self, x=self.x + 1)


TA = TypeVar("TA", bound=A)
TN = TypeVar("TN", bound=N)
TT = TypeVar("TT", bound=Twin)


def on_a(a: TA) -> TA:
    return tc.replace(a, x=2)


def on_n(n: TN) -> TN:
    return n.replace(x=2)


def on_twin(t: TT) -> TT:
    return dataclasses.replace(t, x=2)


def on_union(u: A | B) -> None:
    assert_type(tc.replace(u, x=2), A | B)


def on_twin_union(u: Twin | A) -> None:
    assert_type(dataclasses.replace(u, x=2), Twin | A)


assert_type(A().bumped(), A)
assert_type(A.made(), A)
assert_type(N().bumped(), N)
assert_type(on_n(N()), N)


@tc.pytree_dataclass(frozen=True)
class C:
    x: int = 0

    def bumped(self) -> Self:
        return self.replace(x=self.x + 1)  # E: pyright[reportAttributeAccessIssue,reportUnknownMemberType,reportUnknownVariableType]


assert_type(C().bumped(), C)
N().replace(x="1")  # E: mypy[arg-type]
N().replace(y=1)  # E: mypy[call-arg]
