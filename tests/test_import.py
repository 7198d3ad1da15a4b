"""``import treeclass`` stays light: no framework, no attrs, nothing heavy."""

from __future__ import annotations

import ast
import importlib.util

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


def test_listing_the_installed_frameworks_imports_none_of_them() -> None:
    # importlib.util.find_spec("flax.serialization") imports flax, and jax with it.
    code = (
        "import sys\n"
        "from treeclass._backends.activation import module_installed\n"
        "from treeclass._io.cli import main\n"
        "main(['version'])\n"
        "print([module_installed(m) for m in ('json.decoder', 'json.nope', 'nope.nope')])\n"
        "print(repr(sorted(sys.modules)))\n"
    )
    version, found, modules = run_script(code, timeout=300).checked().stdout.splitlines()
    assert found == "[True, False, False]"
    frameworks = ("jax", "flax", "torch", "optree", "optax", "orbax")
    imported = [m for m in frameworks if m in ast.literal_eval(modules)]
    assert imported == [], f"treeclass version imported {imported}"
    for name, module in (("flax", "flax.serialization"), ("torch", "torch")):
        if importlib.util.find_spec(module.split(".")[0]) is not None:
            assert name in version.split("installed: ")[1].split(", ")


def test_importing_treeclass_testing_pulls_in_no_framework_and_no_hypothesis() -> None:
    code = (
        "import sys; import treeclass\n"
        "assert 'treeclass.testing' not in sys.modules\n"
        "import treeclass.testing; print(repr(sorted(sys.modules)))\n"
    )
    modules = set(ast.literal_eval(run_script(code, timeout=300).checked().stdout))
    imported = [m for m in ("hypothesis", "numpy", "jax", "torch", "optree") if m in modules]
    assert imported == [], f"import treeclass.testing imported {imported}"


def _imports_inside_functions() -> set[tuple[str, str]]:
    """``(file, import)`` for every import of the package's own modules inside a function."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "src" / "treeclass"
    found: set[tuple[str, str]] = set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                own = False
                if isinstance(node, ast.ImportFrom):
                    own = node.level > 0 or (node.module or "").startswith("treeclass")
                elif isinstance(node, ast.Import):
                    own = any(a.name.split(".")[0] == "treeclass" for a in node.names)
                elif (
                    isinstance(node, ast.Call)
                    and ast.unparse(node.func) == "importlib.import_module"
                    and node.args
                    and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))
                ):
                    text = ast.unparse(node.args[0])
                    own = "treeclass" in text or "__name__" in text
                if own:
                    found.add((path.relative_to(root).as_posix(), ast.unparse(node)))
    return found


def test_the_imports_inside_functions_are_the_documented_ones() -> None:
    # CHANGELOG.md ("The package layout shows the design") and docs/contributing.md list these;
    # everything else imports the package's own modules at the top.
    assert _imports_inside_functions() == {
        ("__init__.py", "importlib.import_module('treeclass._core.api')"),
        ("__init__.py", "importlib.import_module(f'{__name__}.{name}')"),
        ("_backends/optree.py", "importlib.import_module('treeclass._backends.torch')"),
        ("_io/artifacts.py", "importlib.import_module('treeclass.torch')"),
        ("torch/__init__.py", "from .._backends.torch import allow_pickled_instances"),
    }


_WINGS = {
    "_errors": 0,
    "_version": 0,
    "_core": 1,
    "_pickle": 2,
    "_treespec": 2,
    "_backends": 3,
    "_io": 4,
}


def _wing(module: str) -> int:
    """The layer of a module of the package (``treeclass.x.y``): the public modules on top."""
    parts = module.split(".")
    return _WINGS.get(parts[1], 5) if len(parts) > 1 else 5


def test_no_module_imports_from_a_higher_wing() -> None:
    # docs/contributing.md: a wing imports only the wings listed before it.
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "src" / "treeclass"
    climbs = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("").as_posix().replace("/", ".")
        module = rel.removesuffix(".__init__")
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    target = f"{base}.{node.module}" if node.module else base
                    targets = [target] if node.module else [f"{base}.{a.name}" for a in node.names]
                elif (node.module or "").startswith("treeclass"):
                    targets = [node.module or ""]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "treeclass"]
            climbs += [(module, t) for t in targets if _wing(t) > _wing(module)]
    assert climbs == []
