"""The ``treeclass.mypy`` plugin: the names it hooks are treeclass's, and it stays out of imports.

What it checks is pinned by the typing case files (``tests/typing/cases``, run by
``tests/test_typing.py`` with the plugin enabled).
"""

from __future__ import annotations

import importlib.util

import pytest

import treeclass as tc
from tests._subproc import run_script

pytest.importorskip("mypy")


def test_hooked_names_are_where_treeclass_defines_them() -> None:
    from treeclass import mypy as plugin

    replace = tc.replace
    assert f"{replace.__module__}.{replace.__qualname__}" == plugin.REPLACE_FUNCTION
    decorator = tc.pytree_dataclass
    assert f"{decorator.__module__}.{decorator.__qualname__}" == plugin.DECORATOR
    node = tc.PytreeNode
    assert f"{node.__module__}.{node.__qualname__}" == plugin.NODE
    field = tc.field
    assert f"{field.__module__}.{field.__qualname__}" == plugin.FIELD


def test_tc_field_is_a_field_specifier_of_plain_dataclasses() -> None:
    from mypy.plugins import dataclasses as dataclasses_plugin

    from treeclass import mypy as plugin

    plugin.plugin("2.4.1")
    plugin.plugin("2.4.1")  # once only, however often mypy loads the plugin
    spec = dataclasses_plugin._TRANSFORM_SPEC_FOR_DATACLASSES
    assert spec.field_specifiers.count(plugin.FIELD) == 1
    assert "dataclasses.field" in spec.field_specifiers


def test_entry_point_returns_the_plugin_class() -> None:
    from mypy.plugin import Plugin

    from treeclass import mypy as plugin

    made = plugin.plugin("2.4.1")
    assert issubclass(made, Plugin)
    assert made is plugin.TreeclassPlugin


def test_import_treeclass_does_not_import_mypy() -> None:
    assert importlib.util.find_spec("treeclass.mypy") is not None
    out = run_script(
        """
        import sys
        import treeclass as tc

        @tc.pytree_dataclass
        class A:
            x: int

        assert tc.replace(A(1), x=2) == A(2)
        print(sorted(m for m in sys.modules if m.split(".")[0] == "mypy" or "mypy" in m))
        """,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
