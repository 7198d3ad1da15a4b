"""Plain ``torch.export.save`` / ``torch.export.load`` (the docs' own example) where the loading
program defines the classes in a module of another name.

torch pickles ``ep.example_inputs`` into the file. By module path (what pickle does by itself),
loading then fails with ``ModuleNotFoundError`` for the old module, or, if the old module is
importable too, imports it and its registration claims the names a second time. With pickling
by name (what registration sets up for named classes unless ``pickle_by_name=False``), only the
names have to match.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _subproc import FRAMEWORKS, report_in, write_modules

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.slow]

DEFS = """
import typing
import torch
import treeclass as tc
from treeclass import _pickle

PREFIX = {prefix!r}

@tc.pytree_dataclass(name=PREFIX + ".Batch", frozen=True, pickle_by_name={by_name!r})
class Batch:
    x: torch.Tensor
    mask: typing.Optional[torch.Tensor] = None
    scale: float = tc.field(static=True, default=2.0)

@tc.pytree_dataclass(name=PREFIX + ".Output", pickle_by_name={by_name!r})
class Output:
    logits: torch.Tensor
    loss: typing.Optional[torch.Tensor] = None
    mode: str = tc.field(static=True, default="eval")

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, batch: Batch) -> Output:
        return Output(self.lin(batch.x) * batch.scale, mode="train")

assert _pickle.is_installed(Batch) is {by_name!r}
"""

LOAD = """
import json, sys, traceback
import torch
module, file = sys.argv[1:]
defs = __import__(module)
report = {}
try:
    ep = torch.export.load(file)
except Exception as e:
    report["error"] = type(e).__name__ + ": " + str(e)
else:
    (batch,), kwargs = ep.example_inputs
    out = ep.module()(batch)
    report = {
        "example_type": type(batch) is defs.Batch,
        "example_scale": batch.scale,
        "example_x": batch.x.tolist(),
        "out_type": type(out) is defs.Output,
        "out_mode": out.mode,
        "close": bool(torch.allclose(out.logits, defs.Model()(batch).logits)),
    }
report["modules"] = sorted(m for m in sys.modules if m.startswith("tc_rename_"))
print(json.dumps(report))
"""


def write_versions(tmp_path: Path, by_name: bool) -> tuple[Path, str, Path, str]:
    tag = uuid.uuid4().hex[:8]
    prefix = f"tests.rename_{tag}"
    mods = []
    for side in ("a", "b"):
        module = f"tc_rename_{side}_{tag}"
        text = DEFS.format(prefix=prefix, by_name=by_name)
        mods.append((write_modules(tmp_path / side, {module: text}), module))
    (fa, ma), (fb, mb) = mods
    return fa, ma, fb, mb


def save(tmp_path: Path, folder: Path, module: str) -> Path:
    """Save the program with version A, imported in this process (the loads are fresh ones)."""
    spec = importlib.util.spec_from_file_location(module, folder / f"{module}.py")
    assert spec is not None and spec.loader is not None
    defs = importlib.util.module_from_spec(spec)
    sys.modules[module] = defs  # (where pickle finds a class by module path)
    spec.loader.exec_module(defs)
    batch = defs.Batch(torch.arange(8.0).reshape(2, 4), scale=3.0)
    out = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(defs.Model(), (batch,)), out)
    return out


EXPECTED = {
    "example_type": True,
    "example_scale": 3.0,
    "example_x": [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]],
    "out_type": True,
    "out_mode": "train",
    "close": True,
}


def test_plain_save_load_across_a_module_rename(tmp_path: Path) -> None:
    fa, ma, fb, mb = write_versions(tmp_path, by_name=True)
    file = save(tmp_path, fa, ma)
    # Only module B exists in the loading program.
    report = report_in(tmp_path, LOAD, mb, str(file), path=[fb], preload=FRAMEWORKS)
    assert report == {**EXPECTED, "modules": [mb]}
    # Both modules importable: module A is not imported behind the user's back.
    report = report_in(tmp_path, LOAD, mb, str(file), path=[fb, fa], preload=FRAMEWORKS)
    assert report == {**EXPECTED, "modules": [mb]}


def test_by_module_path_a_rename_breaks_plain_load(tmp_path: Any) -> None:
    """What pickle does by itself (and what opting out of pickling by name gives)."""
    fa, ma, fb, mb = write_versions(tmp_path, by_name=False)
    file = save(tmp_path, fa, ma)
    report = report_in(tmp_path, LOAD, mb, str(file), path=[fb], preload=FRAMEWORKS)
    assert report["error"] == f"ModuleNotFoundError: No module named '{ma}'"
    report = report_in(tmp_path, LOAD, mb, str(file), path=[fb, fa], preload=FRAMEWORKS)
    assert report["error"].startswith("NameConflictError: the name 'tests.rename_")
    assert f"is taken by {mb}.Batch, so {ma}.Batch cannot have it" in report["error"]
    # (module A was imported by the unpickler and failed, so it is not left in sys.modules)
    assert report["modules"] == [mb]
