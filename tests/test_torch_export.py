"""``torch.export`` with treeclass inputs and HuggingFace-style outputs: export, save, then load
and run in a fresh process that only imports the module defining the classes; and the error a
user sees when that module was not imported."""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _subproc import FRAMEWORKS, report_in

torch = pytest.importorskip("torch")
pt = pytest.importorskip("torch.utils._pytree")

import treeclass as tc  # noqa: E402
import treeclass.torch as tct  # noqa: E402

pytestmark = [pytest.mark.torch]

DEFS = """
import typing
import torch
import treeclass as tc

PREFIX = {prefix!r}

@tc.register_namedtuple(name=PREFIX + ".Hidden")
class Hidden(typing.NamedTuple):
    first: torch.Tensor
    second: torch.Tensor

@tc.pytree_dataclass(name=PREFIX + ".Batch")
class Batch:
    x: torch.Tensor
    mask: typing.Optional[torch.Tensor] = None
    scale: float = tc.field(static=True, default=2.0)

@tc.pytree_dataclass(name=PREFIX + ".Output", frozen=True)
class Output:
    logits: torch.Tensor
    loss: typing.Optional[torch.Tensor] = None
    hidden: typing.Optional[Hidden] = None
    attentions: typing.Optional[torch.Tensor] = None
    mode: str = tc.field(static=True, default="eval")
    dims: tuple = tc.field(static=True, default=(3, (4, 5)))

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, batch: Batch) -> Output:
        h = self.lin(batch.x) * batch.scale
        if batch.mask is not None:
            h = h * batch.mask
        return Output(h, hidden=Hidden(h + 1, h * 2), mode="train")
"""


@pytest.fixture(scope="module")
def defs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A module defining the classes, importable from a directory of its own."""
    folder = tmp_path_factory.mktemp("export_defs")
    module = f"tc_export_defs_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(DEFS.format(prefix=f"tests.{module}"))
    sys.path.insert(0, str(folder))
    try:
        mod = importlib.import_module(module)
    finally:
        sys.path.remove(str(folder))
    mod.FOLDER = folder
    return mod


def test_export_runs_and_returns_the_original_classes(defs: Any) -> None:
    batch = defs.Batch(torch.randn(2, 4), mask=torch.ones(2, 3))
    ep = torch.export.export(defs.Model(), (batch,))
    out = ep.module()(batch)
    assert type(out) is defs.Output
    assert out.loss is None and out.attentions is None
    assert out.mode == "train" and out.dims == (3, (4, 5))
    assert type(out.hidden) is defs.Hidden
    expected = defs.Model()(batch)
    torch.testing.assert_close(out.logits, expected.logits)
    torch.testing.assert_close(out.hidden.second, expected.hidden.second)
    # The signature keeps the structure, statics and None fields in the contexts.
    out_spec = ep.call_spec.out_spec
    assert out_spec.type is defs.Output
    assert out_spec.context == (("loss", "attentions"), "train", (3, (4, 5)))
    in_text = pt.treespec_dumps(ep.call_spec.in_spec)
    assert pt.treespec_loads(in_text) == ep.call_spec.in_spec


def test_export_rejects_input_with_other_static_value(defs: Any) -> None:
    ep = torch.export.export(defs.Model(), (defs.Batch(torch.randn(2, 4)),))
    with pytest.raises(ValueError, match=r"[Tt]ree ?spec|structure|pytree"):
        ep.module()(defs.Batch(torch.randn(2, 4), scale=3.0))


def test_save_leaves_the_program_unchanged(defs: Any, tmp_path: Path) -> None:
    batch = defs.Batch(torch.randn(2, 4))
    ep = torch.export.export(defs.Model(), (batch,))
    assert ep.example_inputs is not None
    tct.save(ep, tmp_path / "a.pt2")
    assert ep.example_inputs is not None and ep.example_inputs[0][0] is batch
    assert type(tct.load(tmp_path / "a.pt2").module()(batch)) is defs.Output


def test_treespec_loads_names_the_missing_name() -> None:
    text = '[1, {"type": "nowhere.Missing", "context": "{}", "children_spec": []}]'
    with pytest.raises(tc.UnregisteredNameError, match=r"serialized name 'nowhere\.Missing'"):
        tct.treespec_loads(text)
    nt = (
        '[1, {"type": "collections.namedtuple", "context": "nowhere.NT", "children_spec": '
        '[{"type": null, "context": null, "children_spec": []}]}]'
    )
    with pytest.raises(tc.UnregisteredNameError, match=r"serialized name 'nowhere\.NT'"):
        tct.treespec_loads(nt)
    with pytest.raises(tc.TreespecLoadError, match="not a torch treespec"):
        tct.treespec_loads("[1, {}]")
    with pytest.raises(tc.TreespecLoadError, match="not a torch treespec"):
        tct.treespec_loads("not json")


FRESH = """
import json, sys
import torch
import treeclass as tc
import treeclass.torch as tct

folder, module, plain_file, tc_file, io_file = sys.argv[1:]
report = {}
# 1. The module defining the classes is not imported: the error names the missing name.
try:
    tct.load(tc_file)
except tc.UnregisteredNameError as e:
    report["missing"] = str(e)
    report["missing_cause"] = repr(e.__cause__)
try:
    torch.export.load(tc_file)
except RuntimeError as e:
    report["torch_plain"] = str(e)

# 2. Import only the module defining the classes, then load and run.
sys.path.insert(0, folder)
defs = __import__(module)
batch, expected = torch.load(io_file, weights_only=False)
for key, path, loader in (("plain", plain_file, torch.export.load), ("tc", tc_file, tct.load)):
    ep = loader(path)
    out = ep.module()(batch)
    report[key] = {
        "type": type(out) is defs.Output,
        "hidden": type(out.hidden) is defs.Hidden,
        "nones": [out.loss is None, out.attentions is None],
        "mode": out.mode,
        "dims_is_tuple": out.dims == (3, (4, 5)) and type(out.dims[1]) is tuple,
        "close": bool(torch.allclose(out.logits, expected.logits))
        and bool(torch.allclose(out.hidden.first, expected.hidden.first)),
        "in_spec_type": ep.call_spec.in_spec.child(0).child(0).type is defs.Batch,
    }
print(json.dumps(report))
"""


@pytest.mark.slow
def test_save_then_load_in_fresh_process(defs: Any, tmp_path: Path) -> None:
    batch = defs.Batch(torch.randn(2, 4), mask=torch.ones(2, 3))
    model = defs.Model()
    ep = torch.export.export(model, (batch,))
    torch.export.save(ep, tmp_path / "plain.pt2")
    tct.save(ep, tmp_path / "tc.pt2")
    torch.save((batch, model(batch)), tmp_path / "io.pt")
    report = report_in(
        tmp_path,
        FRESH,
        str(defs.FOLDER),
        defs.__name__,
        str(tmp_path / "plain.pt2"),
        str(tmp_path / "tc.pt2"),
        str(tmp_path / "io.pt"),
        preload=FRAMEWORKS,
    )
    prefix = f"tests.{defs.__name__}"
    assert f"serialized name '{prefix}.Batch'" in report["missing"]
    assert "import the module that defines" in report["missing"]
    # The treeclass error alone (issues 11 and 13): torch's own error is not chained.
    assert report["missing_cause"] == "None"
    # What torch itself says (the reason treeclass.torch.load exists).
    assert "error when deserializing" in report["torch_plain"]
    expected = {
        "type": True,
        "hidden": True,
        "nones": [True, True],
        "mode": "train",
        "dims_is_tuple": True,
        "close": True,
        "in_spec_type": True,
    }
    assert report["plain"] == expected
    assert report["tc"] == expected
