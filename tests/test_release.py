"""Packaging facts users meet: the install name in errors, the version, the frameworks' floors."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from _subproc import run_script

import treeclass as tc
from treeclass._errors import DISTRIBUTION, install_hint
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
    ],
)
def test_a_missing_framework_names_the_install_command(
    blocked: str, action: str, extra: str
) -> None:
    code = f"import sys; sys.modules[{blocked!r}] = None\n" + _REPORT.format(action=action)
    result = json.loads(run_script(code, timeout=300).checked().stdout.strip().splitlines()[-1])
    assert result is not None, f"{action} worked without {blocked}"
    name, is_import_error, message = result
    assert name == "MissingDependencyError"
    assert is_import_error
    assert re.search(rf"needs {extra}, which is not installed", message)
    assert f"pip install '{DISTRIBUTION}[{extra}]'" in message


def test_an_old_torch_is_refused_with_the_version_it_needs() -> None:
    pytest.importorskip("torch")
    # torch 2.5 and 2.6 have no torch.utils._pytree.CONSTANT_NODES: take it away from torch
    # (the external party) before treeclass sees it.
    code = (
        "import torch.utils._pytree as p\n"
        "del p.CONSTANT_NODES\n"
        "import warnings; warnings.simplefilter('ignore')\n"
        "import treeclass as tc\n"
        + _REPORT.format(
            action="tc.pytree_dataclass(name='old.A')(type('A', (), {'__annotations__': {}}))"
        )
    )
    result = json.loads(run_script(code, timeout=300).checked().stdout.strip().splitlines()[-1])
    assert result is not None
    name, _, message = result
    assert name == "RegistrationError"
    assert "needs torch>=2.7" in message
    assert "lacks CONSTANT_NODES" in message
    assert install_hint("torch") in message


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"treeclass {tc.__version__}\n"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_pyproject_agrees_with_the_code() -> None:
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["name"] == DISTRIBUTION
    assert project["dynamic"] == ["version"]
    assert meta["tool"]["hatch"]["version"]["path"] == "src/treeclass/__init__.py"
    assert project["scripts"] == {"treeclass": "treeclass.__main__:main"}
    extras = project["optional-dependencies"]
    if importlib.util.find_spec("torch") is not None:  # the adapter imports torch
        from treeclass._backends.torch import MIN_TORCH_VERSION

        assert f"torch>={MIN_TORCH_VERSION}" in extras["torch"]
    assert "ml_dtypes>=0.5" in extras["files"]
    assert any(r.startswith("absl-py") for r in extras["jax"])
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
