"""Issue 29, item 6: a bare ``str`` where treeclass takes a collection of names.

``aliases=``, ``removed_fields=`` and ``static=`` are typed as a collection of str that is not
one str (a str is a collection of one-letter strs), so both checkers refuse ``aliases="old"``,
as the run time does with a ``RegistrationTypeError`` (tests/test_typing_runtime.py). The
twin is the run time: the stdlib has no such option.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from typing_extensions import assert_type

import treeclass as tc


@dataclasses.dataclass
class Plain:
    a: int
    b: str = "b"


class Pair(NamedTuple):
    first: int


assert_type(tc.field(default=0, aliases=("old",)), int)
assert_type(tc.field(default=0, aliases=["old", "older"]), int)
assert_type(tc.register_dataclass(Plain, static=("b",), aliases={"pkg.Old"}), type[Plain])
assert_type(tc.register_dataclass(Plain, static={"b": 1}.keys()), type[Plain])
tc.field(default=0, aliases="old")  # E: mypy[call-overload] pyright[reportArgumentType]
tc.field(static=True, aliases="old")  # E: mypy[call-overload] pyright[reportArgumentType]
tc.register_dataclass(Plain, static="b")  # E: mypy[arg-type] pyright[reportArgumentType]
tc.register_dataclass(Plain, aliases="pkg.Old")  # E: mypy[arg-type] pyright[reportArgumentType]
tc.register_dataclass(Plain, removed_fields="c")  # E: mypy[arg-type] pyright[reportArgumentType]
tc.register_namedtuple(Pair, name="cases.names.Pair", aliases="pkg.OldPair")  # E: mypy[call-overload] pyright[reportArgumentType]


@tc.pytree_dataclass(aliases="pkg.Old")  # E: mypy[call-overload] pyright[reportArgumentType]
class Decorated:
    x: int


@tc.pytree_dataclass(removed_fields="gone")  # E: mypy[call-overload] pyright[reportArgumentType]
class Removed:
    x: int


class Node(tc.PytreeNode, aliases="pkg.OldNode"):  # E: mypy[arg-type] pyright[reportArgumentType,reportGeneralTypeIssues]
    x: int
