"""The documentation site builds with ``mkdocs build --strict`` and documents the whole API.

Needs the ``docs`` extra (mkdocs, mkdocs-material, mkdocstrings-python; pinned in
scripts/constraints.txt): without it these tests skip, which ``TREECLASS_REQUIRE_BACKENDS=1``
(CI) turns into a failure. Strict mode fails the build on any warning: a broken link or anchor
between pages, a page missing from the navigation, a cross reference mkdocstrings cannot
resolve, a docstring it cannot parse.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "treeclass"

#: API reference page (under docs/api/) -> the module whose ``__all__`` it documents.
API_PAGES = {
    "treeclass": SRC / "__init__.py",
    "torch": SRC / "torch" / "__init__.py",
    "orbax": SRC / "orbax.py",
    "optree": SRC / "optree.py",
    "testing": SRC / "testing.py",
}


def public_names(module: Path) -> list[str]:
    """The names in the module's ``__all__`` (read from its source, nothing imported)."""
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError(f"{module} has no __all__")


def build(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``out`` (never with ``-q``: mkdocs then
    does not count warnings, and strict mode passes whatever they say)."""
    for package in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(package)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        cwd=out.parent,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    proc = build(ROOT / "mkdocs.yml", out)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-5000:]}"
    return out


def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    # The same command and the same link checks as the site's, on a two-page site.
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    checks = config[config.index("validation:") : config.index("markdown_extensions:")]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[there](other.md#nowhere)\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n")
    (tmp_path / "mkdocs.yml").write_text(f"site_name: t\n{checks}")
    proc = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode != 0
    assert "does not contain an anchor '#nowhere'" in proc.stderr


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    for page in ("getting-started-jax", "getting-started-torch", "migrating/equinox"):
        assert (site / page / "index.html").is_file(), page


@pytest.mark.parametrize("page", sorted(API_PAGES))
def test_the_api_reference_has_every_public_name(site: Path, page: str) -> None:
    module = API_PAGES[page]
    prefix = "treeclass" if page == "treeclass" else f"treeclass.{page}"
    html = (site / "api" / page / "index.html").read_text(encoding="utf-8")
    documented = set(re.findall(r'id="([\w.]+)"', html))
    names = [n for n in public_names(module) if not n.startswith("_")]
    assert names
    missing = [n for n in names if f"{prefix}.{n}" not in documented]
    assert not missing, f"docs/api/{page}.md does not document {missing}"


def test_every_page_is_in_the_navigation() -> None:
    # (mkdocs --strict warns about omitted pages too; this names them without mkdocs.)
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if f": {p}\n" not in nav] == []


def test_the_docstring_rewrites() -> None:
    """scripts/griffe_roles.py: what mkdocstrings would show raw becomes Markdown."""
    pytest.importorskip("griffe")
    import importlib.util

    spec = importlib.util.spec_from_file_location("griffe_roles", ROOT / "scripts/griffe_roles.py")
    assert spec is not None and spec.loader is not None
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    doc = (
        "Uses :func:`~treeclass.save` and :class:`treeclass.TreeSpec`.\n\n"
        "* ``item``: a document::\n\n      {<a placeholder>}\n\n  More.\n\n"
        "Example:\n    >>> 1\n    1\n\n.. versionadded:: 0.1.0\n"
    )
    assert roles.rewrite(doc) == (
        "Uses `save` and `treeclass.TreeSpec`.\n\n"
        "* ``item``: a document:\n\n    ```text\n    {<a placeholder>}\n    ```\n\n  More.\n\n"
        "Examples:\n    >>> 1\n    1\n\n*Added in version 0.1.0.*\n"
    )
