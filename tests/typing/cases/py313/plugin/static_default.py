"""Issue 29, item 3: ``tc.field(static=True)`` without a default, in classes treeclass did not make.

``tc.field`` returns a ``dataclasses.Field``, so in a plain ``@dataclasses.dataclass`` a field
it gives no default is a required ``__init__`` argument (tests/test_typing_runtime.py). mypy's
``treeclass.mypy`` plugin tells mypy's dataclasses plugin so, and ``P()`` is an error as for the
twin spelled ``dataclasses.field(metadata={"static": True})``; without the plugin mypy, and
pyright always, take the call for a default value (only ``dataclasses.field`` is a field
specifier of plain dataclasses to them) and miss it: spell it with ``dataclasses.field`` there,
or use ``@tc.pytree_dataclass``, which declares ``tc.field`` a field specifier. In an attrs
class ``tc.field`` is a mistake at run time (attrs takes the ``Field`` for the default value):
``register_dataclass`` refuses it; the checkers cannot (use ``attrs.field``).
"""

from __future__ import annotations

import dataclasses

import attrs
from typing_extensions import assert_type

import treeclass as tc


@dataclasses.dataclass
class Plain:
    x: int = tc.field(static=True)
    y: int = tc.field(static=True, default=1)
    z: list[int] = tc.field(default_factory=list[int])


@dataclasses.dataclass
class PlainTwin:
    x: int = dataclasses.field(metadata={"static": True})
    y: int = dataclasses.field(default=1, metadata={"static": True})
    z: list[int] = dataclasses.field(default_factory=list[int])


@tc.pytree_dataclass
class Decorated:
    x: int = tc.field(static=True)
    y: int = tc.field(static=True, default=1)


@attrs.define
class AttrsTwin:
    x: int = attrs.field(metadata={"static": True})


assert_type(Plain(1), Plain)
assert_type(Plain(1, 2, [3]).z, list[int])
assert_type(PlainTwin(1), PlainTwin)
assert_type(Decorated(1), Decorated)
Plain()  # E: mypy[call-arg]
PlainTwin()  # E: mypy[call-arg] pyright[reportCallIssue]
Decorated()  # E: mypy[call-arg] pyright[reportCallIssue]
AttrsTwin()  # E: mypy[call-arg] pyright[reportCallIssue]
Plain(x="1")  # E: mypy[arg-type] pyright[reportArgumentType]
