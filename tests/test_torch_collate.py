"""``torch.utils.data`` on treeclass instances (issue 19): ``default_collate`` batches them,
``pin_memory`` recurses into them as into a dict, and a ``DataLoader`` with two ``spawn``
workers carries them across processes by name."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from _subproc import FRAMEWORKS, run_script  # noqa: E402
from torch.utils.data import default_collate  # noqa: E402
from torch.utils.data._utils.pin_memory import pin_memory  # noqa: E402

import treeclass as tc  # noqa: E402

pytestmark = pytest.mark.torch


@tc.pytree_dataclass(name="tests.collate.Sample")
class Sample:
    image: Any
    label: Any
    extra: Any = None
    split: str = tc.field(static=True, default="train")


def test_collate_batches_every_data_field() -> None:
    batch = default_collate(
        [Sample(torch.full((2,), float(i)), i, {"w": float(i)}) for i in range(3)]
    )
    assert type(batch) is Sample and batch.split == "train"
    assert torch.equal(batch.image, torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]))
    assert torch.equal(batch.label, torch.tensor([0, 1, 2]))
    assert torch.equal(batch.extra["w"], torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64))
    # The same data as dicts: torch's own result, field by field.
    as_dicts = default_collate(
        [{"image": torch.full((2,), float(i)), "label": i} for i in range(3)]
    )
    assert torch.equal(batch.image, as_dicts["image"])
    assert torch.equal(batch.label, as_dicts["label"])


def test_collate_keeps_a_field_none_in_every_sample() -> None:
    batch = default_collate([Sample(torch.ones(1), 0), Sample(torch.ones(1), 1)])
    assert batch.extra is None


def test_collate_nested_instances() -> None:
    batch = default_collate([[Sample(torch.ones(1), 0, Sample(2.0, 3))] for _ in range(2)])
    assert type(batch[0].extra) is Sample
    assert torch.equal(batch[0].extra.label, torch.tensor([3, 3]))


def test_static_fields_that_differ_are_an_error() -> None:
    with pytest.raises(
        tc.StructureMismatchError,
        match=r"cannot batch tests\.collate\.Sample samples whose static field 'split' differs "
        r"\('train' in sample 0, 'val' in sample 2\)",
    ):
        default_collate([Sample(1.0, 0), Sample(2.0, 1), Sample(3.0, 2, split="val")])


def test_none_in_some_samples_only_is_an_error() -> None:
    with pytest.raises(
        tc.StructureMismatchError, match=r"data field 'extra' is None in some samples"
    ):
        default_collate([Sample(1.0, 0, 5.0), Sample(2.0, 1)])


def test_mixed_classes_are_an_error() -> None:
    with pytest.raises(tc.StructureMismatchError, match=r"sample 1 is a dict"):
        default_collate([Sample(1.0, 0), {"image": 1.0, "label": 0}])


def test_pin_memory_treats_an_instance_as_a_dict() -> None:
    """torch's pin_memory reaches the tensor inside an instance exactly as inside a dict.

    Without an accelerator, pinning a tensor raises; the instance raises the same error (it
    recursed to the tensor), while an instance without tensors comes back equal.
    """
    errors = []
    for value in ({"image": torch.ones(2), "label": 0}, Sample(torch.ones(2), 0)):
        if torch.accelerator.is_available():  # pragma: no cover - CPU-only CI
            pinned = pin_memory(value)
            image = pinned["image"] if isinstance(pinned, dict) else pinned.image
            assert image.is_pinned()
            continue
        with pytest.raises(RuntimeError) as info:
            pin_memory(value)
        errors.append(str(info.value))
    if errors:
        assert errors[0] == errors[1]
    plain = Sample(1.0, "x", [2.0], split="val")
    again = pin_memory(plain)
    assert again == plain and again is not plain and type(again) is Sample


def test_a_class_with_its_own_pin_memory_keeps_it() -> None:
    @tc.pytree_dataclass
    class Own:
        x: Any

        def pin_memory(self) -> str:
            return "own"

    assert pin_memory(Own(torch.ones(1))) == "own"


@tc.pytree_dataclass(name="tests.collate.Parent")
class Parent:
    a: Any


@tc.pytree_dataclass(name="tests.collate.Child")
class Child(Parent):
    b: Any = 5


class Unregistered(Parent):
    pass


def test_a_registered_subclass_gets_its_own_pin_memory() -> None:
    # The method treeclass added to Parent does not count as Child's own pin_memory: Child
    # gets one that keeps its class and its fields.
    assert "pin_memory" in vars(Child)
    assert Child(1, [2.0]).pin_memory() == Child(1, [2.0])
    assert type(pin_memory(Child(1, 2))) is Child
    assert Parent(1).pin_memory() == Parent(1)


def test_an_unregistered_subclass_is_refused_by_pin_memory() -> None:
    # Its fields are unknown to treeclass: pinning it as a Parent would drop its class (and
    # any field it adds), so the inherited method refuses, as default_collate does.
    with pytest.raises(
        tc.TreeclassTypeError,
        match=r"pin_memory\(\) of tests\.collate\.Parent got a .*Unregistered, a subclass "
        r"that is not registered itself.*register Unregistered too",
    ):
        pin_memory(Unregistered(1))


_MODULE = """
import torch
import treeclass as tc

@tc.pytree_dataclass(name="tests.collate.worker.Item")
class Item:
    x: object
    y: object
    kind: str = tc.field(static=True, default="a")

class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return Item(torch.full((3,), float(i)), i)
"""

_MAIN = """
import json, torch, warnings
warnings.simplefilter("ignore")
import collate_items as m

if __name__ == "__main__":
    loader = torch.utils.data.DataLoader(
        m.Data(), batch_size=4, num_workers=2, multiprocessing_context="spawn",
        pin_memory=True)
    out = []
    for batch in loader:
        out.append({"type": type(batch).__qualname__, "same_class": type(batch) is m.Item,
                    "x": batch.x.tolist(), "y": batch.y.tolist(), "kind": batch.kind})
    print(json.dumps(out))
"""


@pytest.mark.slow  # a fresh process that spawns two more
def test_dataloader_with_two_spawn_workers(tmp_path: Path) -> None:
    (tmp_path / "collate_items.py").write_text(textwrap.dedent(_MODULE))
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent(_MAIN))
    outcome = run_script(
        f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')",
        timeout=300,
        cwd=tmp_path,
        path=[tmp_path],
        preload=FRAMEWORKS,  # the main program imports torch first (the workers start afresh)
    )
    batches = outcome.report()
    assert [b["y"] for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert all(b["same_class"] and b["kind"] == "a" for b in batches)
    assert batches[1]["x"][0] == [4.0, 4.0, 4.0]


_UNDONE = """
import json
import jax
import torch
from torch.utils.data._utils.collate import default_collate_fn_map
import treeclass as tc

def fault(*args, **kwargs):
    raise RuntimeError("injected fault")

class Victim:
    x: object
import dataclasses
Victim = dataclasses.dataclass(Victim)

real = jax.export.register_pytree_node_serialization
jax.export.register_pytree_node_serialization = fault  # JAX is registered last
report = {}
try:
    tc.register_dataclass(Victim, name="tests.collate.Victim")
    report["first"] = "succeeded"
except Exception as e:
    report["first"] = type(e).__name__
finally:
    jax.export.register_pytree_node_serialization = real
report["after_fault"] = {"pin_memory": "pin_memory" in vars(Victim),
                         "collate": Victim in default_collate_fn_map}
tc.register_dataclass(Victim, name="tests.collate.Victim")
report["after_retry"] = {"pin_memory": "pin_memory" in vars(Victim),
                         "collate": Victim in default_collate_fn_map}
print(json.dumps(report))
"""


def test_a_failed_registration_takes_pin_memory_and_collate_back() -> None:
    # The undo of the collate backend runs when a later backend (JAX) refuses the class.
    pytest.importorskip("jax")
    report = run_script(_UNDONE, timeout=300, preload=FRAMEWORKS).report()  # jax, torch first
    assert report["first"] == "RuntimeError"
    assert report["after_fault"] == {"pin_memory": False, "collate": False}
    assert report["after_retry"] == {"pin_memory": True, "collate": True}


_EXTRA_FIRST = """
import json, warnings
warnings.simplefilter("error")  # no warning: the half-imported mirror is not a failure
import treeclass as tc
@tc.pytree_dataclass(name="tests.collate.first.Before")
class Before:
    x: object
import treeclass._backends.torch_collate  # imports torch, whose import activates the backend
from torch.utils.data._utils.collate import default_collate_fn_map as table
@tc.pytree_dataclass(name="tests.collate.first.After")
class After:
    x: object
print(json.dumps({"active": list(tc.active_backends()),
                  "collated": [Before in table, After in table],
                  "pin_memory": ["pin_memory" in vars(Before), "pin_memory" in vars(After)]}))
"""


def test_the_collate_mirror_imported_first_is_set_up_at_the_next_registration() -> None:
    # Importing the mirror's module imports torch, whose import activates torch's backend
    # while that module is still half-imported: the mirror waits (no warning) and is set up at
    # the next registration, with every class so far.
    report = run_script(_EXTRA_FIRST, timeout=300).report()
    assert report == {
        "active": ["torch"],
        "collated": [True, True],
        "pin_memory": [True, True],
    }, report
