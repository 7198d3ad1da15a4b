"""``import treeclass`` stays light: no framework, no attrs, nothing heavy."""

from __future__ import annotations

import ast

import pytest
from _subproc import run_script


def test_import_pulls_in_no_framework_and_nothing_heavy() -> None:
    code = "import sys; import treeclass; print(repr(sorted(sys.modules)))"
    out = run_script(code, timeout=300).checked()
    modules = set(ast.literal_eval(out.stdout))
    assert "treeclass" in modules
    heavy = (
        "jax",
        "torch",
        "optree",
        "attr",
        "attrs",
        "numpy",
        "typing_extensions",
        "dataclasses",
        "inspect",
        "json",
        "orbax",
        "flax",
        "equinox",
        "optax",
        "chex",
        "treeclass.orbax",
        "treeclass._backends.flax",
    )
    imported = [m for m in heavy if m in modules]
    assert imported == [], f"import treeclass imported {imported}"


def test_decorating_after_import_works_in_a_fresh_process() -> None:
    code = (
        "import treeclass as tc\n"
        "@tc.pytree_dataclass(name='fresh.P')\n"
        "class P:\n    x: float\n"
        "print(tc.tree_leaves([P(1.0), P(2.0)]))\n"
    )
    out = run_script(code, timeout=300).checked()
    assert out.stdout.strip() == "[1.0, 2.0]"


@pytest.mark.parametrize("framework", ["jax", "torch", "optree"])
def test_importing_an_adapter_first_still_activates_it(framework: str) -> None:
    pytest.importorskip(framework)
    code = (
        f"import treeclass._backends.{framework}\n"
        "import treeclass as tc\n"
        "@tc.pytree_dataclass(name='fresh.Adapter')\n"
        "class P:\n    x: float\n"
        "print(tc.active_backends())\n"
    )
    out = run_script(code, timeout=300, env={"PYTHONWARNINGS": "error::RuntimeWarning"}).checked()
    assert framework in out.stdout
