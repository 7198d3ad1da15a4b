"""Packaging facts users meet: the install name in errors, the version, the frameworks' floors."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

import pytest
from _skips import allowed_missing, allowed_skip
from _subproc import FRAMEWORKS, run_script
from packaging.requirements import Requirement
from packaging.version import Version

import treeclass as tc
from treeclass._errors import DISTRIBUTION, EXTRA_PYTHON, install_hint
from treeclass._io.cli import main

ROOT = Path(__file__).resolve().parent.parent

# A module set to None in sys.modules cannot be imported (ModuleNotFoundError), as if the
# framework were not installed; treeclass's own modules are left alone.
_REPORT = (
    "import json\n"
    "try:\n"
    "    {action}\n"
    "except Exception as e:\n"
    "    print(json.dumps([type(e).__name__, isinstance(e, ImportError), str(e)]))\n"
    "else:\n"
    "    print(json.dumps(None))\n"
)


@pytest.mark.parametrize(
    ("blocked", "action", "extra"),
    [
        ("torch", "import treeclass.torch", "torch"),
        ("orbax", "import treeclass.orbax", "orbax"),
        ("optree", "import treeclass as tc; tc.optree.register_namespace('x')", "optree"),
        # tc.load's frameworks (the tree is read first: a file with an array leaf).
        ("jax", "import treeclass as tc; tc.load(PATH, to='jax')", "jax"),
        ("torch", "import treeclass as tc; tc.load(PATH, to='torch')", "torch"),
    ],
)
def test_a_missing_framework_names_the_install_command(
    blocked: str, action: str, extra: str, tmp_path: Path
) -> None:
    pytest.importorskip("numpy")
    import numpy as np

    path = tmp_path / "tree.safetensors"
    tc.save(path, {"w": np.ones(2, np.float32)})
    action = action.replace("PATH", repr(str(path)))
    code = f"import sys; sys.modules[{blocked!r}] = None\n" + _REPORT.format(action=action)
    result = json.loads(run_script(code, timeout=300).checked().stdout.strip().splitlines()[-1])
    assert result is not None, f"{action} worked without {blocked}"
    name, is_import_error, message = result
    assert name == "MissingDependencyError"
    assert is_import_error
    assert re.search(rf"needs {extra}, which is not installed", message)
    assert message.endswith(f"install it with pip install '{DISTRIBUTION}[{extra}]'.")


def test_a_treespec_for_a_missing_framework_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['jax'] = None\n"
        "import treeclass as tc\n"
        "text = tc.treespec_dumps(tc.tree_structure([1, 2]))\n"
        + _REPORT.format(action="tc.treespec_loads(text, to='jax')")
    )
    result = json.loads(run_script(code, timeout=300).checked().stdout.strip().splitlines()[-1])
    assert result is not None
    name, _, message = result
    assert name == "TreespecLoadError"
    assert re.fullmatch(
        r"treespec_loads\(to='jax'\) needs jax, which is not installed \(.*\); install it "
        rf"with pip install '{DISTRIBUTION}\[jax\]', or load with to=None\.",
        message,
    )


def test_an_extra_that_needs_a_newer_python_says_so() -> None:
    assert install_hint("docs", python=(3, 10)) == (
        f"pip install '{DISTRIBUTION}[docs]' on Python 3.11 or newer (this is Python 3.10)"
    )
    assert install_hint("docs", python=(3, 11)) == f"pip install '{DISTRIBUTION}[docs]'"
    assert install_hint("orbax", python=(3, 10)) == f"pip install '{DISTRIBUTION}[orbax]'"
    # pyproject.toml's markers say the same: every requirement of such an extra is for
    # python_version >= that version, and no other extra's is.
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, requirements in extras.items():
        oldest = EXTRA_PYTHON.get(extra, (3, 10))
        for minor in range(10, 15):
            python = {"python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0"}
            installed = [
                r
                for r in map(Requirement, requirements)
                if not r.marker or r.marker.evaluate(python)
            ]
            assert bool(installed) == ((3, minor) >= oldest), (extra, minor)


# --- URLs: none to a place the project does not own (docs/contributing.md, release checklist) --


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_no_url_points_to_a_place_the_project_does_not_own() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "urls" not in meta["project"]
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    for key in ("repo_url", "repo_name", "edit_uri", "site_url"):
        assert not re.search(rf"^{key}:", mkdocs, re.M), key
    assert re.search(r"^theme:\n  name: material\n(?:  #.*\n)*  font: false$", mkdocs, re.M)
    # The README's links are relative to the repository, and each names a file that exists.
    readme = (ROOT / "README.md").read_text()
    links = _LINK.findall(readme)
    assert len(links) > 20
    for link in links:
        assert "://" not in link, link
        assert (ROOT / link.split("#", 1)[0]).exists(), link


@pytest.mark.parametrize(
    ("make_old", "says"),
    [
        # torch 2.5 and 2.6 have no torch.utils._pytree.CONSTANT_NODES: take it away from torch
        # (the external party) before treeclass sees it.
        ("import torch.utils._pytree as p\ndel p.CONSTANT_NODES\n", "lacks CONSTANT_NODES"),
        # A release below the floor that has every name the adapter reads (torch 2.7.0).
        ("import torch\ntorch.__version__ = '2.7.0'\n", "but torch 2.7.0 is installed"),
    ],
    ids=["private-name-missing", "release-below-floor"],
)
def test_an_old_torch_is_refused_with_the_version_it_needs(make_old: str, says: str) -> None:
    pytest.importorskip("torch")
    from treeclass._backends.torch import MIN_TORCH_VERSION

    code = (
        make_old
        + "import warnings; warnings.simplefilter('ignore')\n"
        + "import treeclass as tc\n"
        + _REPORT.format(
            action="tc.pytree_dataclass(name='old.A')(type('A', (), {'__annotations__': {}}))"
        )
    )
    outcome = run_script(code, timeout=300, preload=FRAMEWORKS)  # torch first, then treeclass
    result = json.loads(outcome.checked().stdout.strip().splitlines()[-1])
    assert result is not None
    name, _, message = result
    assert name == "RegistrationError"
    assert f"needs torch>={MIN_TORCH_VERSION}" in message
    assert says in message
    assert install_hint("torch") in message


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"treeclass {tc.__version__}\n"


def test_pyproject_agrees_with_the_code() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["name"] == DISTRIBUTION
    assert project["dynamic"] == ["version"]
    assert meta["tool"]["hatch"]["version"]["path"] == "src/treeclass/_version.py"
    assert project["scripts"] == {"treeclass": "treeclass.__main__:main"}
    extras = project["optional-dependencies"]
    if importlib.util.find_spec("torch") is not None:  # the adapter imports torch
        from treeclass._backends.torch import MIN_TORCH_VERSION

        assert f"torch>={MIN_TORCH_VERSION}" in extras["torch"]
    assert "ml_dtypes>=0.5" in extras["files"]
    assert any(r.startswith("absl-py") for r in extras["jax"])
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


# --- the minimum-versions CI job's constraints (scripts/min_constraints.py) ------------------


def _min_constraints() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "min_constraints", ROOT / "scripts" / "min_constraints.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


def test_the_minimum_versions_job_pins_every_declared_floor() -> None:
    mc = _min_constraints()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    # Every extra but dev's tools and torch is installed by one of the job's venvs; lines for
    # another Python than the job's (mc.applies) are not its to pin.
    assert set().union(*mc.SETS.values()) == set(extras) - {"dev", "torch"}
    checked = set()
    for set_name, chosen in mc.SETS.items():
        lines = mc.render(set_name).splitlines()
        pinned = dict(line.split("==", 1) for line in lines if "==" in line and "#" not in line)
        groups = [project["dependencies"], extras["dev"], *(extras[g] for g in chosen)]
        for text in (t for group in groups for t in group):
            requirement = Requirement(text)
            if not mc.applies(str(requirement.marker) if requirement.marker else None):
                continue
            name = _name(text)
            if name in mc.TOOLS:
                continue  # test tools: at scripts/constraints.txt's versions
            floors = [s.version for s in requirement.specifier if s.operator == ">="]
            assert floors, f"{text} declares no floor"
            # The highest floor of the set's extras (jax: orbax's, where orbax is in the set).
            assert Version(pinned[name]) >= Version(floors[0]), (set_name, text)
            if pinned[name] == floors[0]:
                checked.add(text)
    # Each declared floor is some set's pin.
    declared = {
        t
        for g, reqs in extras.items()
        if g != "torch"
        for t in reqs
        if mc.applies(str(Requirement(t).marker) if Requirement(t).marker else None)
    }
    declared |= set(project["dependencies"])
    assert {t for t in declared if _name(t) not in mc.TOOLS} == checked
    # The build backend's floor.
    assert mc.main(["--build"]) == "hatchling==1.27.0"
    assert mc.main(["--sets"]).split() == list(mc.SETS)


def test_a_dependency_without_a_floor_is_refused(tmp_path: Path) -> None:
    mc = _min_constraints()
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = []\n'
        '[project.optional-dependencies]\nfast = ["numpy"]\n'
    )
    with pytest.raises(SystemExit, match=r"'numpy' \(extra 'fast'\) declares no lower bound"):
        mc.floors(None, pyproject)
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["jax>=0.5.10"]\n'
        '[project.optional-dependencies]\nfast = ["jax>=0.5.9"]\nslow = ["jax>=0.10"]\n'
    )
    assert mc.floors(("fast",), pyproject) == {"jax": "0.5.10"}  # compared as numbers
    assert mc.floors(None, pyproject) == {"jax": "0.10"}
    with pytest.raises(SystemExit, match=r"usage: .* got \['nope'\]"):
        mc.main(["nope"])


# --- TREECLASS_ALLOW_MISSING (tests/_skips.py, used by tests/conftest.py) ----------------------


def test_only_a_listed_framework_that_is_missing_may_be_skipped() -> None:
    allowed = allowed_missing({"TREECLASS_ALLOW_MISSING": " torch, not_installed_xyz ,"})
    assert allowed == {"torch", "not_installed_xyz"}
    assert allowed_missing({}) == frozenset()
    missing = "could not import 'not_installed_xyz.sub': No module named 'not_installed_xyz'"
    assert allowed_skip(missing, allowed)
    assert allowed_skip("Skipped: " + missing, allowed)
    assert not allowed_skip(missing, frozenset({"torch"}))  # not listed
    # Listed, but installed: the skip has another cause, which fails the run.
    assert not allowed_skip(
        "could not import 'pytest.nothing': No module named", frozenset({"pytest"})
    )
    assert not allowed_skip("templates are off on this interpreter", allowed)
