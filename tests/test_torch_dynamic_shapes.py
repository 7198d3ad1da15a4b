"""``dynamic_shapes`` for treeclass inputs of ``torch.export.export``.

torch matches ``dynamic_shapes`` against a registered class's *flattened children*
(``torch/export/dynamic_shapes.py: _tree_map_with_path``, torch 2.13.0): the shapes given for
an instance must be a container of the same type as the sequence its ``flatten_fn`` returns,
with one entry per child. For torch's own ``register_dataclass`` that is a ``list`` of the
non-``None`` fields, in field order; no other container (tuple, dict by field name, an instance
of the class) is accepted, because torch compares container types exactly. ``ShapesCollection``
(shapes keyed by the input tensors) and ``AdditionalInputs`` work for any registered class.

treeclass must accept every form torch accepts for its own ``register_dataclass``.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import treeclass as tc  # noqa: E402

pytestmark = pytest.mark.torch

Dim = torch.export.Dim
B = Dim("b")
Tensor = typing.Any


@dataclasses.dataclass
class TorchBatch:
    x: Tensor
    y: Tensor = None
    z: Tensor = None


torch.export.register_dataclass(TorchBatch, serialized_type_name="tests.dynshapes.TorchBatch")


@tc.pytree_dataclass(name="tests.dynshapes.Batch")
class Batch:
    x: Tensor
    y: Tensor = None
    z: Tensor = None


class Model(torch.nn.Module):
    def forward(self, b: Any) -> Any:
        out = b.x * 2
        if b.y is not None:
            out = out + b.y
        return out


def export(cls: type, shapes: Any) -> Any:
    inp = cls(torch.randn(4, 3), y=torch.randn(4, 3))
    return torch.export.export(Model(), (inp,), dynamic_shapes={"b": shapes})


def placeholder_shapes(ep: Any) -> list[str]:
    """The inputs' shapes, with torch's (arbitrary) symbol numbers taken out: ``[s?, 3]``."""
    shapes = [str(n.meta["val"].shape) for n in ep.graph.nodes if n.op == "placeholder"]
    symbols = {s for shape in shapes for s in re.findall(r"\bs\d+\b", shape)}
    assert len(symbols) <= 1  # one Dim shared by every input here
    return [re.sub(r"\bs\d+\b", "s?", shape) for shape in shapes]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield


def outcome(cls: type, shapes: Any) -> str:
    try:
        ep = export(cls, shapes)
    except Exception as e:  # what torch says, with the class name taken out
        text = str(e).splitlines()[0].replace(cls.__qualname__, "<cls>")
        return f"{type(e).__name__}: {text}"
    return "ok " + " ".join(placeholder_shapes(ep))


FORMS: dict[str, Any] = {
    "list of the non-None fields": [{0: B}, {0: B}],
    "tuple of the non-None fields": ({0: B}, {0: B}),
    "list with the None field": [{0: B}, {0: B}, None],
    "dict by field name": {"x": {0: B}, "y": {0: B}},
    "instance of the class": "instance",
    "None for the whole input": None,
}


@pytest.mark.parametrize("shapes", FORMS.values(), ids=FORMS.keys())
def test_same_forms_as_torch_register_dataclass(shapes: Any) -> None:
    """Every form torch accepts for its own register_dataclass, and no other, the same way."""
    forms = {
        cls: cls(x={0: B}, y={0: B}) if shapes == "instance" else shapes
        for cls in (TorchBatch, Batch)
    }
    theirs = outcome(TorchBatch, forms[TorchBatch])
    ours = outcome(Batch, forms[Batch])
    assert ours == theirs


def test_list_form_is_what_torch_accepts() -> None:
    """The reference: what torch's own register_dataclass accepts (pinned for torch 2.13.0)."""
    ep = export(TorchBatch, [{0: B}, {0: B}])
    assert placeholder_shapes(ep) == ["torch.Size([s?, 3])"] * 2
    with pytest.raises(ValueError, match=r"Node type mismatch; expected <class 'list'>, but got"):
        export(TorchBatch, ({0: B}, {0: B}))


def test_list_form_with_static_and_none_fields(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class WithStatics:
        x: Tensor
        mask: Tensor = None
        bias: Tensor = None
        scale: float = tc.field(static=True, default=2.0)

    class Scale(torch.nn.Module):
        def forward(self, b: Any) -> Any:
            return b.x * b.scale + b.bias

    inp = WithStatics(torch.randn(4, 3), bias=torch.randn(4, 3), scale=3.0)
    # One entry per non-None data field, in field order; static fields have none.
    ep = torch.export.export(Scale(), (inp,), dynamic_shapes={"b": [{0: B}, {0: B}]})
    assert placeholder_shapes(ep) == ["torch.Size([s?, 3])"] * 2
    out = ep.module()(WithStatics(torch.ones(7, 3), bias=torch.ones(7, 3), scale=3.0))
    torch.testing.assert_close(out, torch.full((7, 3), 4.0))


def test_nested_classes_take_nested_lists(uname: str) -> None:
    @tc.pytree_dataclass(name=uname + ".Inner")
    class Inner:
        h: Tensor

    @tc.pytree_dataclass(name=uname + ".Outer")
    class Outer:
        x: Tensor
        inner: Any
        tag: str = tc.field(static=True, default="t")

    class Add(torch.nn.Module):
        def forward(self, o: Any) -> Any:
            return o.x + o.inner.h

    inp = Outer(torch.randn(4, 3), Inner(torch.randn(4, 3)))
    ep = torch.export.export(Add(), (inp,), dynamic_shapes={"o": [{0: B}, [{0: B}]]})
    assert placeholder_shapes(ep) == ["torch.Size([s?, 3])"] * 2


def test_shapes_collection_and_additional_inputs() -> None:
    """The forms that need no knowledge of the flattened layout, for any registered class."""
    inp = Batch(torch.randn(4, 3), y=torch.randn(4, 3))
    shapes = torch.export.ShapesCollection()
    shapes[inp.x] = {0: B}
    shapes[inp.y] = {0: B}
    ep = torch.export.export(Model(), (inp,), dynamic_shapes=shapes)
    assert placeholder_shapes(ep) == ["torch.Size([s?, 3])"] * 2
    torch._dynamo.reset()
    more = torch.export.AdditionalInputs()
    more.add((inp,))
    more.add((Batch(torch.randn(6, 3), y=torch.randn(6, 3)),))
    ep = torch.export.export(Model(), (inp,), dynamic_shapes=more)
    assert placeholder_shapes(ep) == ["torch.Size([s?, 3])"] * 2
