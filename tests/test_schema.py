"""Schema locks: ``treeclass schema dump`` / ``check`` and ``assert_schema_compatible`` (issue 30).

What each loader family does with each change is pinned in ``tests/test_schema_verdicts.py``;
this file pins the lock's content and stability, the command line (output, exit statuses,
modes) and the pytest helper.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typing_extensions
from _subproc import FRAMEWORKS, Outcome, run_module, write_modules

from treeclass import SchemaLockError
from treeclass._io import schema
from treeclass.testing import assert_schema_compatible

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def readme_classes() -> str:
    """The README's example (its one python block), the classes a user starts from."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return str(block)


KINDS = """
import enum, typing
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Optional
import treeclass as tc

class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"

tc.register_static(Act, name="locktest.Act")

@dataclass(frozen=True)
class Opt:
    lr: float
    decay: Optional[float] = None

tc.register_static(Opt, name="locktest.Opt")

class Span:
    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Span) and (self.a, self.b) == (other.a, other.b)
    def __hash__(self) -> int:
        return hash((self.a, self.b))

tc.register_static(Span, name="locktest.Span", to_json=lambda s: [s.a, s.b],
                   from_json=lambda v: Span(*v))

def _hook(state):
    return state

@tc.pytree_dataclass(name="locktest.Layer", aliases=("locktest.OldLayer",), frozen=True,
                     removed_fields=("scratch",), migrate=_hook, return_none_fields=True)
class Layer:
    w: Any = tc.field(aliases=("weight",))
    b: Any = None
    scale: Any = 1.0
    act: Act = tc.field(static=True, default=Act.RELU)
    mode: Literal["train", "eval"] = tc.field(static=True, default="train")
    width: int = tc.field(static=True, default=4)
    opt: Opt = tc.field(static=True, default=Opt(0.1))
    span: Span = tc.field(static=True, default=Span(0, 1))

@tc.register_namedtuple(name="locktest.Pair", pickle_by_name=False)
class Pair(NamedTuple):
    left: Any
    right: Any
"""


def cli(*args: str, cwd: Path) -> Outcome:
    return run_module("treeclass", *args, cwd=cwd, timeout=600, preload=FRAMEWORKS)


# --- the lock -------------------------------------------------------------------------------------


def test_the_lock_holds_every_part_of_the_contract(tmp_path: Path) -> None:
    write_modules(tmp_path, {"kinds": KINDS})
    out = cli("schema", "dump", "kinds", cwd=tmp_path).checked().stdout
    lock = json.loads(out)
    assert lock["format"] == "treeclass.schema-lock" and lock["version"] == 1
    assert sorted(lock["classes"]) == ["locktest.Layer", "locktest.Pair"]
    assert lock["classes"]["locktest.Layer"] == {
        "aliases": ["locktest.OldLayer"],
        "kind": "dataclass",
        "data": [
            {"name": "w", "aliases": ["weight"], "default": "none"},
            {"name": "b", "aliases": [], "default": "None"},
            {"name": "scale", "aliases": [], "default": "other"},
        ],
        "static": [
            {
                "name": "act",
                "aliases": [],
                "default": "other",
                "default_value": {"registered": ["locktest.Act", "relu"]},
                "holds": {"kinds": [], "types": ["locktest.Act"], "values": []},
            },
            {
                "name": "mode",
                "aliases": [],
                "default": "other",
                "default_value": "train",
                "holds": {"kinds": [], "types": [], "values": ["eval", "train"]},
            },
            {
                "name": "width",
                "aliases": [],
                "default": "other",
                "default_value": 4,
                "holds": {"kinds": ["int"], "types": [], "values": []},
            },
            {
                "name": "opt",
                "aliases": [],
                "default": "other",
                "default_value": {
                    "registered": ["locktest.Opt", {"dict": {"decay": None, "lr": 0.1}}]
                },
                "holds": {"kinds": [], "types": ["locktest.Opt"], "values": []},
            },
            {
                "name": "span",
                "aliases": [],
                "default": "other",
                "default_value": {"registered": ["locktest.Span", [0, 1]]},
                "holds": {"kinds": [], "types": ["locktest.Span"], "values": []},
            },
        ],
        "removed_fields": ["scratch"],
        "return_none_fields": True,
        "pickle_by_name": True,
        "migrate": True,
    }
    assert lock["classes"]["locktest.Pair"] == {
        "aliases": [],
        "kind": "namedtuple",
        "data": [
            {"name": "left", "aliases": [], "default": "none"},
            {"name": "right", "aliases": [], "default": "none"},
        ],
        "removed_fields": [],
        "pickle_by_name": False,
        "migrate": False,
    }
    assert lock["static_types"] == {
        "locktest.Act": {
            "kind": "enum",
            "members": {
                "GELU": {"registered": ["locktest.Act", "gelu"]},
                "RELU": {"registered": ["locktest.Act", "relu"]},
            },
        },
        "locktest.Opt": {"kind": "fields", "fields": ["lr", "decay"]},
        "locktest.Span": {"kind": "converters"},
    }
    # Diff-friendly: a block per class, a line per field.
    assert '\n    "locktest.Layer": {\n' in out
    assert '\n        {"aliases": ["weight"], "default": "none", "name": "w"},\n' in out
    assert "kinds" not in out.split('"locktest.Pair"')[0].split('"locktest.Layer"')[0]


def _pythons(path: str) -> list[str]:
    """Other interpreters (3.10-3.14) that run treeclass's command line from this checkout.

    Those listed in ``TREECLASS_TEST_PYTHONS`` (paths, separated by ``os.pathsep``), then
    ``python3.1x`` on the path and pyenv's, with ``path`` as their ``PYTHONPATH``.
    """
    found: dict[str, str] = {}
    listed = os.environ.get("TREECLASS_TEST_PYTHONS", "")
    candidates = [p for p in listed.split(os.pathsep) if p]
    candidates += [shutil.which(f"python3.{minor}") for minor in range(10, 15)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob("3.1[0-4]*/bin/python"))]
    for exe in filter(None, candidates):
        run = subprocess.run(
            [exe, "-c", "import sys, treeclass._io.cli; print(sys.version_info[:2])"],
            env={**os.environ, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode == 0:
            found.setdefault(run.stdout.strip(), exe)
    return [exe for version, exe in found.items() if version != str(sys.version_info[:2])]


def test_the_readme_classes_lock_is_stable_across_runs_pythons_and_moves(tmp_path: Path) -> None:
    source = readme_classes() + KINDS
    write_modules(tmp_path / "a", {"models": source})
    write_modules(tmp_path / "b" / "lab" / "nested", {"moved": source, "__init__": ""})
    (tmp_path / "b" / "lab" / "__init__.py").write_text("")
    first = cli("schema", "dump", "models", cwd=tmp_path / "a").checked().stdout
    again = cli("schema", "dump", "models", cwd=tmp_path / "a").checked().stdout
    moved = cli("schema", "dump", "lab.nested.moved", cwd=tmp_path / "b").checked().stdout
    assert "mylab.ModelOutput" in first
    assert "models" not in first.replace("mylab.ModelOutput", "")
    assert first == again == moved
    # treeclass's one dependency, a single pure-Python file, beside the checkout's src/ (so
    # that a bare interpreter, such as pyenv's, can run the command line too).
    deps = tmp_path / "deps"
    deps.mkdir()
    shutil.copy(typing_extensions.__file__, deps)
    path = os.pathsep.join([str(SRC), str(deps)])
    pythons = _pythons(path)
    if not pythons:
        pytest.skip("no other Python 3.10-3.14 here to compare the lock with")
    for exe in pythons:
        run = subprocess.run(
            [exe, "-m", "treeclass", "schema", "dump", "models"],
            cwd=tmp_path / "a",
            env={**os.environ, "PYTHONPATH": os.pathsep.join([path, "."])},
            capture_output=True,
            text=True,
            check=True,
        )
        assert run.stdout == first, exe


# --- schema check -----------------------------------------------------------------------------

V1 = """
from typing import Any
import treeclass as tc

@tc.pytree_dataclass(name="ci.Model", frozen=True)
class Model:
    w: Any
    s: str = tc.field(static=True, default="a")
"""
# A compatible change: a renamed field keeps its old name as an alias; a new None field.
V2_OK = """
from typing import Any
import treeclass as tc

@tc.pytree_dataclass(name="ci.Model", frozen=True)
class Model:
    weight: Any = tc.field(aliases=("w",))
    bias: Any = None
    s: str = tc.field(static=True, default="a")
"""
# A breaking one: renamed without an alias.
V2_BAD = V1.replace("    w: Any", "    weight: Any")
# Compatible backward, not forward: a new static field.
V2_STATIC = V1 + '    mode: str = tc.field(static=True, default="m")\n'


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_schema_check_exit_statuses_and_report(tmp_path: Path) -> None:
    write_modules(tmp_path, {"models": V1})
    cli("schema", "dump", "models", "-o", "treeclass.lock.json", cwd=tmp_path).checked()
    same = cli("schema", "check", "models", "--against", "treeclass.lock.json", cwd=tmp_path)
    assert same.returncode == 0, same.describe()
    assert "no changes" in same.stdout

    write_modules(tmp_path, {"models": V2_OK})
    ok = cli("schema", "check", "models", "--against", "treeclass.lock.json", cwd=tmp_path)
    assert ok.returncode == 0, ok.describe()
    # Where a framework is not installed its family's verdict is "-" (not checked).
    jax_, torch_ = ("loads" if _installed(m) else "-" for m in ("jax", "torch"))
    assert re.search(
        rf"ci\.Model +data field 'w' renamed to 'weight' \(aliases=\['w'\]\) +loads +loads"
        rf" +{jax_} +{torch_}",
        ok.stdout,
    ), ok.stdout
    assert "new data field 'bias' (default: None)" in ok.stdout

    write_modules(tmp_path, {"models": V2_BAD})
    bad = cli("schema", "check", "models", "--against", "treeclass.lock.json", cwd=tmp_path)
    assert bad.returncode == 1, bad.describe()
    jax_, torch_ = ("BREAKS" if _installed(m) else "-" for m in ("jax", "torch"))
    assert re.search(rf"data field 'w' removed +BREAKS +BREAKS +{jax_} +{torch_}", bad.stdout)
    assert "names the field 'w', which the class no longer has" in bad.stdout
    assert "fix: data field 'w' removed: if it was renamed, give the new field aliases=" in (
        bad.stdout
    )
    as_json = cli(
        "schema", "check", "models", "--against", "treeclass.lock.json", "--json", cwd=tmp_path
    )
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["compatible"] is False and report["mode"] == "backward"
    (row,) = report["changes"]
    assert row["class"] == "ci.Model"
    assert {f: v["loads"] for f, v in row["verdicts"].items()} == {
        f: False if f in ("objects", "pickle") or _installed(f.split(".")[0]) else None
        for f in schema.FAMILIES
    }
    assert row["fixes"]


def test_forward_and_full_modes(tmp_path: Path) -> None:
    write_modules(tmp_path, {"models": V1})
    cli("schema", "dump", "models", "-o", "lock.json", cwd=tmp_path).checked()
    write_modules(tmp_path, {"models": V2_STATIC})
    statuses = {}
    for mode in ("backward", "forward", "full"):
        run = cli(
            "schema", "check", "models", "--against", "lock.json", "--mode", mode, cwd=tmp_path
        )
        statuses[mode] = run.returncode
        if mode != "backward":
            assert "names the field 'mode', which the class no longer has" in run.stdout
    assert statuses == {"backward": 0, "forward": 1, "full": 1}


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "cannot read the lock"),
        ("{not json", "it is not JSON"),
        ('{"format": "x", "version": 1, "classes": {}, "static_types": {}}', "not 'treeclass"),
        ('{"format": "treeclass.schema-lock", "version": 1}', r"it lacks \['classes'"),
    ],
)
def test_an_unreadable_lock_exits_2(tmp_path: Path, content: str | None, match: str) -> None:
    write_modules(tmp_path, {"models": V1})
    if content is not None:
        (tmp_path / "lock.json").write_text(content)
    run = cli("schema", "check", "models", "--against", "lock.json", cwd=tmp_path)
    assert run.returncode == 2, run.describe()
    assert re.search(match, run.stderr), run.stderr
    with pytest.raises(SchemaLockError, match=match):
        schema.read_lock_file(str(tmp_path / "lock.json"))


# --- the pytest helper --------------------------------------------------------------------------


def test_assert_schema_compatible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tag = tmp_path.name.replace("-", "_")
    monkeypatch.syspath_prepend(str(tmp_path))
    write_modules(tmp_path, {f"v1_{tag}": V1.replace("ci.", "h1.")})
    __import__(f"v1_{tag}")
    lock = tmp_path / "treeclass.lock.json"
    lock.write_text(schema.dumps_lock(schema.lock_of([f"v1_{tag}"])).replace("h1.", "h2."))
    write_modules(tmp_path, {f"ok_{tag}": V2_OK.replace("ci.", "h2.")})
    assert_schema_compatible(lock, modules=[f"ok_{tag}"])
    with pytest.raises(AssertionError, match=r"(?s)BREAKS.*fix: data field 'w' removed"):
        write_modules(tmp_path, {f"bad_{tag}": V2_BAD.replace("ci.", "h3.")})
        bad = tmp_path / "bad.lock.json"
        bad.write_text(lock.read_text().replace("h2.", "h3."))
        assert_schema_compatible(bad, modules=[f"bad_{tag}"])
    with pytest.raises(SchemaLockError, match=r"mode='sideways' is not one of"):
        assert_schema_compatible(lock, modules=[f"ok_{tag}"], mode="sideways")


def test_the_pre_commit_hook_runs_schema_check() -> None:
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "- id: treeclass-schema-check" in text
    assert "entry: treeclass schema check" in text
    assert "pass_filenames: false" in text
