"""Hypothesis strategies: randomly shaped nested trees of registered classes and containers."""

from __future__ import annotations

import collections
import dataclasses
import typing
from typing import Any

import attrs
from hypothesis import strategies as st

import treeclass as tc
from treeclass import testing


@tc.pytree_dataclass(name="tests.strategies.Plain")
class Plain:
    a: Any
    b: Any = None
    tag: str = tc.field(static=True, default="p")


@tc.pytree_dataclass(name="tests.strategies.FrozenSlots", frozen=True, slots=True)
class FrozenSlots:
    x: Any
    level: tuple[int, ...] = tc.field(static=True, default=(1,))


@tc.pytree_dataclass(name="tests.strategies.KeepNone", return_none_fields=True)
class KeepNone:
    p: Any
    q: Any = None


@tc.pytree_dataclass(name="tests.strategies.AttrsNode")
@attrs.frozen
class AttrsNode:
    u: Any
    v: Any
    mode: str = attrs.field(default="m", metadata={"static": True})


@tc.register_namedtuple(name="tests.strategies.Pair")
class Pair(typing.NamedTuple):
    left: Any
    right: Any


@dataclasses.dataclass
class ThirdParty:
    value: Any
    kind: str = "k"


tc.register_dataclass(ThirdParty, name="tests.strategies.ThirdParty", static=("kind",))

leaves = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
)
statics = st.one_of(st.text(max_size=3), st.integers(0, 5))


def _fixed_nodes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The fixed classes above (every registration path) and OrderedDict."""
    maybe = st.one_of(st.none(), children)
    return st.one_of(
        st.dictionaries(st.text(max_size=3), children, max_size=3).map(collections.OrderedDict),
        st.builds(Plain, children, maybe, statics.map(str)),
        st.builds(FrozenSlots, children, st.tuples(st.integers(0, 3))),
        st.builds(KeepNone, maybe, maybe),
        st.builds(AttrsNode, children, maybe, st.sampled_from(["m", "n"])),
        st.builds(Pair, maybe, children),
        st.builds(ThirdParty, maybe, st.sampled_from(["k", "j"])),
    )


#: Random trees: lists, tuples, dicts and instances of random classes (treeclass.testing's
#: public strategies), plus the fixed classes and OrderedDicts.
trees = testing.trees(leaves, extra_nodes=_fixed_nodes, max_leaves=25)
