"""The generated unflatten's second, traceable path (issue 11), without any framework.

Classes whose direct stores go through descriptors (frozen, slots, attrs) get a path that
stores with ``object.__setattr__``, taken when the tracing check returns ``True`` (torch sets
``torch.compiler.is_dynamo_compiling``); it must rebuild exactly what the direct path does.
INTERNAL: uses ``treeclass._core.codegen`` and ``treeclass._core.registry``.
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any

import attrs
import pytest

import treeclass as tc
from treeclass._core import codegen as _codegen
from treeclass._core import registry as _registry

INIT: list[str] = []


@tc.pytree_dataclass(name="tests.tracing.Plain")
class Plain:
    x: Any
    y: Any = None


@tc.pytree_dataclass(name="tests.tracing.Frozen", frozen=True)
class Frozen:
    x: Any
    y: Any = None
    tag: str = tc.field(static=True, default="f")

    def __post_init__(self) -> None:
        INIT.append("Frozen")


@tc.pytree_dataclass(name="tests.tracing.FrozenSlots", frozen=True, slots=True)
class FrozenSlots:
    x: Any
    y: Any = None
    tag: str = tc.field(static=True, default="fs")


@tc.pytree_dataclass(name="tests.tracing.NoneLeaves", frozen=True, return_none_fields=True)
class NoneLeaves:
    x: Any
    y: Any = None


@attrs.frozen(cache_hash=True)
class AttrsHash:
    x: Any
    y: Any = None
    tag: str = attrs.field(default="a", metadata={"static": True})


@attrs.frozen(cache_hash=True, slots=False)
class AttrsHashDict:
    x: Any
    y: Any = None


tc.register_dataclass(AttrsHash, name="tests.tracing.AttrsHash")
tc.register_dataclass(AttrsHashDict, name="tests.tracing.AttrsHashDict")

TRACEABLE = {c.__name__: c for c in (Frozen, FrozenSlots, NoneLeaves, AttrsHash, AttrsHashDict)}


def variants(cls: type) -> tuple[Any, Any]:
    node = _registry.registered_node(cls)
    assert node is not None
    direct = node.bind("t-direct", str, _tracing=lambda: False)["unflatten"]
    traced = node.bind("t-traced", str, _tracing=lambda: True)["unflatten"]
    return node, (direct, traced)


@pytest.mark.parametrize("cls", TRACEABLE.values(), ids=TRACEABLE.keys())
@pytest.mark.parametrize("y", [None, (2,)], ids=["none-field", "no-none"])
def test_traced_path_rebuilds_what_the_direct_path_does(cls: type, y: Any) -> None:
    obj = cls(1, y)
    node, (direct, traced) = variants(cls)
    children, aux = node.flatten(obj)
    INIT.clear()
    a, b = direct(aux, list(children)), traced(aux, list(children))
    assert INIT == []
    assert type(a) is type(b) is cls
    assert a == b == obj
    assert hash(a) == hash(b) == hash(obj)
    source = "".join(linecache.getlines(traced.__code__.co_filename))
    if cls in (FrozenSlots, AttrsHash):  # slot stores: Dynamo cannot trace them
        assert "def _unflatten_traced(" in source
        assert "object.__setattr__(obj, 'x', v0)" in source
    else:  # stores into the instance __dict__, which Dynamo traces: one path
        assert "_unflatten_traced" not in source


def test_classes_with_plain_stores_have_one_path() -> None:
    _, (direct, _) = variants(Plain)
    assert "_unflatten_traced" not in direct.__globals__
    assert "_tracing" not in inspect.getsource(direct)
    _codegen.set_tracing_check(direct, lambda: True)  # nothing to switch
    assert direct((), [1, 2]) == Plain(1, 2)


def test_set_tracing_check_switches_the_path() -> None:
    node = _registry.registered_node(FrozenSlots)
    assert node is not None
    fn = node.bind("t-switch", str)["unflatten"]
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        return True

    _codegen.set_tracing_check(fn, check)
    assert fn(("fs",), [1, 2]) == FrozenSlots(1, 2)
    assert calls == [1]
    _codegen.set_tracing_check(fn, None)
    assert fn(("fs",), [1, 2]) == FrozenSlots(1, 2)
    assert calls == [1]


def test_attrs_hash_cache_attribute_is_found() -> None:
    from treeclass._core.fields import describe

    def reset(cls: type) -> tuple[str, ...]:
        return tuple(name for name, _ in describe(cls).plan.reset)

    assert reset(AttrsHash) == ("_attrs_cached_hash",)
    assert reset(AttrsHashDict) == ("_attrs_cached_hash",)
    assert reset(Frozen) == ()

    @attrs.frozen
    class NoCache:
        x: Any

    assert reset(NoCache) == ()
