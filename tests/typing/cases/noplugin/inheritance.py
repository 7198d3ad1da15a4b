"""Issue 29, item 2: ``frozen`` is not inherited, by PytreeNode subclasses as by dataclasses.

A type checker reads ``frozen`` from the class statement alone, so a subclass of a frozen class
says ``frozen=True`` itself; without it, both checkers report the class (as for the stdlib twin),
and the run time raises a ``RegistrationTypeError`` saying to add ``frozen=True``
(tests/test_typing_runtime.py).
"""

from __future__ import annotations

import dataclasses

from typing_extensions import assert_type

import treeclass as tc


class Base(tc.PytreeNode, frozen=True):
    x: float


class Said(Base, frozen=True):
    y: float = 0.0


class Unsaid(Base):  # E: mypy[misc] pyright[reportGeneralTypeIssues]
    y: float = 0.0


class Loose(tc.PytreeNode):
    x: float


class TightOnLoose(Loose, frozen=True):  # E: mypy[misc] pyright[reportGeneralTypeIssues]
    y: float = 0.0


@dataclasses.dataclass(frozen=True)
class BaseTwin:
    x: float


@dataclasses.dataclass(frozen=True)
class SaidTwin(BaseTwin):
    y: float = 0.0


@dataclasses.dataclass  # E: pyright[reportGeneralTypeIssues]
class UnsaidTwin(BaseTwin):  # E: mypy[misc]
    y: float = 0.0


@tc.pytree_dataclass(frozen=True)
class DecoratedBase:
    x: float


@tc.pytree_dataclass  # E: pyright[reportGeneralTypeIssues]
class DecoratedUnsaid(DecoratedBase):  # E: mypy[misc]
    y: float = 0.0


said = Said(1.0, 2.0)
assert_type(said, Said)
assert_type(said.replace(y=3.0), Said)
said.y = 2.0  # E: mypy[misc] pyright[reportAttributeAccessIssue]
SaidTwin(1.0, 2.0).y = 2.0  # E: mypy[misc] pyright[reportAttributeAccessIssue]
Base(1.0).x = 2.0  # E: mypy[misc] pyright[reportAttributeAccessIssue]
loose = Loose(1.0)
loose.x = 2.0
