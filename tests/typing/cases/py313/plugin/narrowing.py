"""Issue 29, item 1: a decorated subclass narrows a field its base declares (model outputs).

``logits: Tensor | None = None`` in a base, ``logits: Tensor`` in the subclass: mypy's plugin
declares ``replace`` once per hierarchy and types each call by the receiver's fields, so the
subclass gets no ``[override]`` error from a ``replace`` of its own. The stdlib twins next to
each class get the same verdicts (pyright refuses narrowing a mutable field, for both).
"""

from __future__ import annotations

import dataclasses

from typing_extensions import assert_type

import treeclass as tc


class Tensor:
    pass


@tc.pytree_dataclass(frozen=True)
class Output:
    logits: Tensor | None = None
    loss: float | None = None


@tc.pytree_dataclass(frozen=True)
class Narrowed(Output):
    logits: Tensor = Tensor()


@dataclasses.dataclass(frozen=True)
class OutputTwin:
    logits: Tensor | None = None
    loss: float | None = None


@dataclasses.dataclass(frozen=True)
class NarrowedTwin(OutputTwin):
    logits: Tensor = Tensor()


@tc.pytree_dataclass
class Mutable:
    logits: Tensor | None = None


@tc.pytree_dataclass
class MutableNarrowed(Mutable):
    logits: Tensor = Tensor()  # E: pyright[reportIncompatibleVariableOverride]


@dataclasses.dataclass
class MutableTwin:
    logits: Tensor | None = None


@dataclasses.dataclass
class MutableNarrowedTwin(MutableTwin):
    logits: Tensor = Tensor()  # E: pyright[reportIncompatibleVariableOverride]


@tc.pytree_dataclass
class Redeclared(Mutable):
    logits: int = 0  # E: mypy[assignment] pyright[reportIncompatibleVariableOverride]


@dataclasses.dataclass
class RedeclaredTwin(MutableTwin):
    logits: int = 0  # E: mypy[assignment] pyright[reportIncompatibleVariableOverride]


class NodeOutput(tc.PytreeNode, frozen=True):
    logits: Tensor | None = None


class NodeNarrowed(NodeOutput, frozen=True):
    logits: Tensor = Tensor()


n = Narrowed()
assert_type(tc.replace(n, logits=Tensor()), Narrowed)
assert_type(dataclasses.replace(NarrowedTwin(), logits=Tensor()), NarrowedTwin)
assert_type(tc.replace(n, loss=1.0).logits, Tensor)
assert_type(NodeNarrowed().replace(logits=Tensor()), NodeNarrowed)
assert_type(n.replace(loss=2.0), Narrowed)  # E: pyright[reportAssertTypeFailure,reportAttributeAccessIssue,reportUnknownMemberType]
n.replace(logits=None)  # E: mypy[arg-type] pyright[reportAttributeAccessIssue,reportUnknownMemberType]
tc.replace(n, logits=None)  # E: mypy[call-overload] pyright[reportArgumentType,reportCallIssue]
dataclasses.replace(NarrowedTwin(), logits=None)  # E: mypy[arg-type]
NodeNarrowed().replace(logits=None)  # E: mypy[arg-type] pyright[reportArgumentType]
