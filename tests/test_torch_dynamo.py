"""Dynamo (``torch.compile(fullgraph=True)``, ``torch.export.export(strict=True)``) traces the
unflatten of every kind of treeclass class without graph breaks, as it does for torch's own
``register_dataclass``; and unflatten still never runs ``__init__`` outside tracing.

Checked against torch 2.13.0. Before the fix, Dynamo refused the generated unflatten of frozen
classes ("Unsupported method call" on a descriptor's ``__set__``), with and without slots, and
of attrs classes (frozen, slotted by default).
"""

from __future__ import annotations

import collections
import dataclasses
import typing
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

torch = pytest.importorskip("torch")
pt = pytest.importorskip("torch.utils._pytree")
cxx = pytest.importorskip("torch.utils._cxx_pytree")
optree = pytest.importorskip("optree")

import treeclass as tc  # noqa: E402

pytestmark = pytest.mark.torch

Tensor = typing.Any  # annotations only; torch.Tensor would do as well

INIT_CALLS: list[str] = []


@tc.pytree_dataclass(name="tests.dynamo.Plain")
class Plain:
    x: Tensor
    y: Tensor
    none: Tensor = None
    tag: str = tc.field(static=True, default="plain")

    def __post_init__(self) -> None:
        INIT_CALLS.append("Plain")


@tc.pytree_dataclass(name="tests.dynamo.Frozen", frozen=True)
class Frozen:
    x: Tensor
    y: Tensor
    none: Tensor = None
    tag: str = tc.field(static=True, default="frozen")

    def __post_init__(self) -> None:
        INIT_CALLS.append("Frozen")


@tc.pytree_dataclass(name="tests.dynamo.FrozenSlots", frozen=True, slots=True)
class FrozenSlots:
    x: Tensor
    y: Tensor
    none: Tensor = None
    tag: str = tc.field(static=True, default="frozen-slots")

    def __post_init__(self) -> None:
        INIT_CALLS.append("FrozenSlots")


@attrs.frozen
class AttrsFrozen:  # attrs: slotted by default
    x: Tensor
    y: Tensor
    none: Tensor = None
    tag: str = attrs.field(default="attrs", metadata={"static": True})

    def __attrs_post_init__(self) -> None:
        INIT_CALLS.append("AttrsFrozen")


tc.register_dataclass(AttrsFrozen, name="tests.dynamo.AttrsFrozen")


@attrs.frozen(slots=False)
class AttrsFrozenDict:
    x: Tensor
    y: Tensor
    none: Tensor = None
    tag: str = attrs.field(default="attrs-dict", metadata={"static": True})

    def __attrs_post_init__(self) -> None:
        INIT_CALLS.append("AttrsFrozenDict")


tc.register_dataclass(AttrsFrozenDict, name="tests.dynamo.AttrsFrozenDict")


@tc.pytree_dataclass(name="tests.dynamo.OutputLike")
class OutputLike(collections.OrderedDict):  # type: ignore[type-arg]
    """Shaped like HuggingFace's ModelOutput: a mapping with its own ``__setattr__``."""

    x: Tensor = None
    y: Tensor = None
    none: Tensor = None

    def __post_init__(self) -> None:
        INIT_CALLS.append("OutputLike")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)


@dataclasses.dataclass(frozen=True)
class TorchReference:
    """The reference: a frozen dataclass registered with torch's own ``register_dataclass``."""

    x: Tensor
    y: Tensor
    none: Tensor = None


torch.export.register_dataclass(TorchReference, serialized_type_name="tests.dynamo.TorchRef")

CLASSES: dict[str, type] = {
    "torch-register_dataclass": TorchReference,
    "dataclass": Plain,
    "frozen": Frozen,
    "frozen-slots": FrozenSlots,
    "attrs-frozen-slots": AttrsFrozen,
    "attrs-frozen-dict": AttrsFrozenDict,
    "mapping-with-setattr": OutputLike,
}


TAGS: dict[type, str] = {
    Plain: "plain",
    Frozen: "frozen",
    FrozenSlots: "frozen-slots",
    AttrsFrozen: "attrs",
    AttrsFrozenDict: "attrs-dict",
}


def make(cls: type) -> Any:
    return cls(x=torch.ones(2), y=torch.full((2,), 3.0))


def check(out: Any, cls: type, scale: float = 2.0) -> None:
    assert type(out) is cls
    torch.testing.assert_close(out.x, torch.ones(2) * scale)
    torch.testing.assert_close(out.y, torch.full((2,), 3.0) * scale)
    assert out.none is None
    tag = TAGS.get(cls)
    if tag is not None:
        assert out.tag == tag
    if isinstance(out, dict):  # the mapping view is rebuilt too
        assert list(out.keys()) == ["x", "y"]
        assert out["y"] is out.y


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def pt_tree_map(obj: Any) -> Any:
    return pt.tree_map(lambda v: v * 2, obj)


def cxx_tree_map(obj: Any) -> Any:
    return cxx.tree_map(lambda v: v * 2, obj)


def pt_unflatten(obj: Any) -> Any:
    leaves, spec = pt.tree_flatten(obj)
    return pt.tree_unflatten([v * 2 for v in leaves], spec)


def tc_tree_map(obj: Any) -> Any:
    return tc.tree_map(lambda v: v * 2, obj)


def optree_tree_map(obj: Any) -> Any:
    return optree.tree_map(lambda v: v * 2, obj, none_is_leaf=False)


TORCH_OPS: dict[str, Callable[[Any], Any]] = {
    "torch.utils._pytree.tree_map": pt_tree_map,
    "torch.utils._cxx_pytree.tree_map": cxx_tree_map,
    "torch.utils._pytree.tree_unflatten": pt_unflatten,
}


# (torch's register_dataclass registers the Python pytree only: no C++ pytree case for it)
def torch_ops(cls: type) -> dict[str, Callable[[Any], Any]]:
    """The torch operations ``cls`` is traced through."""
    if cls is TorchReference:
        return {k: op for k, op in TORCH_OPS.items() if op is not cxx_tree_map}
    return TORCH_OPS


@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_compile_fullgraph_traces_unflatten(cls: type) -> None:
    """Every torch operation of ``torch_ops(cls)`` in one compiled function (one trace)."""
    ops = torch_ops(cls)
    obj = make(cls)
    INIT_CALLS.clear()
    outs = torch.compile(lambda o: [op(o) for op in ops.values()], fullgraph=True, backend="eager")(
        obj
    )
    assert len(outs) == len(ops)
    for out in outs:
        check(out, cls)
    assert INIT_CALLS == []  # neither traced nor replayed: no __init__, no __post_init__


@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_export_strict_traces_unflatten(cls: type) -> None:
    class Double(torch.nn.Module):
        def forward(self, obj: Any) -> Any:
            return pt.tree_map(lambda v: v * 2, obj)

    obj = make(cls)
    ep = torch.export.export(Double(), (obj,), strict=True)
    check(ep.module()(obj), cls)
    assert ep.call_spec.out_spec.type is cls


# attrs' own frozen __init__ (``object.__setattr__.__get__(self)``) is refused by Dynamo
# whatever the registration (torch 2.13.0): building an attrs instance inside traced code is not
# treeclass's to fix, so attrs classes are only passed in as inputs.
BUILT_INSIDE = {k: c for k, c in CLASSES.items() if c not in (AttrsFrozen, AttrsFrozenDict)}


@pytest.mark.parametrize("cls", BUILT_INSIDE.values(), ids=BUILT_INSIDE.keys())
def test_export_strict_builds_the_output_inside_forward(cls: type) -> None:
    """The model builds the instance itself (``cls(...)`` traced), then maps over it."""

    class Build(torch.nn.Module):
        def forward(self, x: Any, y: Any) -> Any:
            return pt.tree_map(lambda v: v * 2, cls(x=x, y=y))

    ep = torch.export.export(Build(), (torch.ones(2), torch.full((2,), 3.0)), strict=True)
    check(ep.module()(torch.ones(2), torch.full((2,), 3.0)), cls)


EMBEDDED_OPS: dict[str, Callable[[Any], Any]] = {
    "treeclass.tree_map": tc_tree_map,
    "optree.tree_map": optree_tree_map,
}


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES.values() if c is not TorchReference], ids=list(CLASSES)[1:]
)
def test_compile_fullgraph_traces_embedded_and_optree_unflatten(cls: type) -> None:
    """treeclass's own tree_map and optree's (which Dynamo also traces) inside compiled code,
    both in one compiled function (one trace)."""
    obj = make(cls)
    INIT_CALLS.clear()
    ops = list(EMBEDDED_OPS.values())
    outs = torch.compile(lambda o: [op(o) for op in ops], fullgraph=True, backend="eager")(obj)
    assert len(outs) == len(ops)
    for out in outs:
        check(out, cls)
    assert INIT_CALLS == []


@pytest.mark.parametrize("cls", CLASSES.values(), ids=CLASSES.keys())
def test_outside_tracing_unflatten_never_runs_init(cls: type) -> None:
    obj = make(cls)
    INIT_CALLS.clear()
    check(pt_tree_map(obj), cls)
    if cls is TorchReference:
        assert INIT_CALLS == []  # (it has no __post_init__; torch calls cls(**fields))
        return
    check(cxx_tree_map(obj), cls)
    check(tc_tree_map(obj), cls)
    check(optree_tree_map(obj), cls)
    assert INIT_CALLS == []


def test_transformers_model_output_compiles_and_exports_strict() -> None:
    transformers = pytest.importorskip("transformers")

    @tc.pytree_dataclass(name="tests.dynamo.HFOutput", override=True)
    class HFOutput(transformers.utils.ModelOutput):
        x: Tensor = None
        y: Tensor = None
        none: Tensor = None

    obj = make(HFOutput)
    out = torch.compile(pt_tree_map, fullgraph=True, backend="eager")(obj)
    check(out, HFOutput)
    assert out.to_tuple()[1] is out.y

    class Double(torch.nn.Module):
        def forward(self, obj: Any) -> Any:
            return pt.tree_map(lambda v: v * 2, obj)

    check(torch.export.export(Double(), (obj,), strict=True).module()(obj), HFOutput)


def test_attrs_own_frozen_init_is_refused_by_dynamo() -> None:
    """Why attrs instances are not built inside traced code above (torch 2.13.0, attrs 26.1)."""
    with pytest.raises(
        torch._dynamo.exc.Unsupported,
        match=r"(?s)Unsupported method call.*method `__get__` of class `wrapper_descriptor`",
    ):
        torch.compile(lambda t: AttrsFrozen(t, t).x + 1, fullgraph=True, backend="eager")(
            torch.ones(2)
        )
