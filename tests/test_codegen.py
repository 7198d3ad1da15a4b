"""Generated functions: readable source in linecache, qualnames, tracebacks."""

from __future__ import annotations

import importlib.util
import inspect
import linecache
import sys
import traceback
from typing import Any

import pytest

import treeclass as tc
from treeclass._core.registry import registered_node as node_for_class


@tc.pytree_dataclass(name="tests.codegen.Shown")
class Shown:
    a: float
    b: Any = None
    tag: str = tc.field(static=True, default="t")


def test_generated_source_is_in_linecache_and_getsource() -> None:
    node = node_for_class(Shown)
    assert node is not None
    src = inspect.getsource(node.flatten)
    assert src.startswith("def flatten(obj):")
    assert "obj.a" in src and "obj.tag" in src
    filename = node.flatten.__code__.co_filename
    assert filename == f"<treeclass generated {__name__}.Shown>"
    assert node.unflatten.__code__.co_filename == filename  # one source per class
    assert linecache.getline(filename, 1).startswith("def flatten")
    assert inspect.getsource(node.unflatten).startswith("def unflatten(aux, children):")


def test_generated_functions_have_qualname_and_module() -> None:
    node = node_for_class(Shown)
    assert node is not None
    assert node.flatten.__qualname__ == "Shown.<treeclass flatten>"
    assert node.unflatten.__qualname__ == "Shown.<treeclass unflatten>"
    assert node.flatten.__module__ == __name__


def test_traceback_shows_generated_line() -> None:
    class Broken:
        @property
        def a(self) -> float:
            raise RuntimeError("no a")

    node = node_for_class(Shown)
    assert node is not None
    with pytest.raises(RuntimeError) as info:
        node.flatten(Broken())
    text = "".join(traceback.format_exception(info.value))
    assert f"<treeclass generated {__name__}.Shown>" in text
    assert "v0 = obj.a" in text


def test_rerun_gets_a_new_linecache_name() -> None:
    def make() -> type:
        @tc.pytree_dataclass
        class Again:
            x: int

        return Again

    a, b = make(), make()
    na, nb = node_for_class(a), node_for_class(b)
    assert na is not None and nb is not None
    fa, fb = na.flatten.__code__.co_filename, nb.flatten.__code__.co_filename
    assert fa != fb  # each definition's source stays readable in tracebacks
    assert inspect.getsource(nb.flatten).startswith("def flatten")


def _reversed_source(info: Any) -> str:
    """An adapter's own template: the children in reverse order (builders of the core)."""
    from treeclass._core.codegen import flatten_lines, join_blocks

    n = len(info.data_fields)
    return join_blocks(
        [flatten_lines(info, "def flatten(obj):", lambda i, v: f"v{n - 1 - i}", "", as_list=True)]
    )


def test_an_adapter_family_is_compiled_once_per_class_and_bound_per_registry() -> None:
    from treeclass._core.codegen import Family

    family = Family("rev", ("flatten",), _reversed_source)
    node = node_for_class(Shown)
    assert node is not None and node.generated is not None
    assert node.generated.filename(family) is None  # not compiled before it is first bound
    one = node.bind("one", str, family=family)["flatten"]
    two = node.bind("two", str, family=family)["flatten"]
    assert one(Shown(1.0, 2.0)) == ([2.0, 1.0], ("t",))
    assert one is not two and one.__code__ is two.__code__  # compiled once, bound twice
    filename = f"<treeclass generated {__name__}.Shown [rev]>"
    assert one.__code__.co_filename == node.generated.filename(family) == filename
    assert inspect.getsource(one).startswith("def flatten(obj):")
    assert one.__qualname__ == "Shown.<treeclass flatten[one]>"
    assert two.__qualname__ == "Shown.<treeclass flatten[two]>"
    assert one.__module__ == __name__
    # The core family is untouched by it.
    assert node.flatten(Shown(1.0, 2.0)) == ((1.0, 2.0), ("t",))


# --- templates: one compile per shape (issue 18) -------------------------------------------------


def _same_code(made: Any, compiled: Any) -> None:
    """``made`` does what ``compiled`` does: same instructions on the same names and constants.

    (Not the same bytes: where a field's name is also another name the code uses, compiling the
    class's own source stores the name once, the template twice.)
    """
    import dis
    import types

    def steps(code: Any) -> list[tuple[str, str]]:
        return [
            (i.opname, "<code>" if isinstance(i.argval, types.CodeType) else i.argrepr)
            for i in dis.get_instructions(code)
        ]

    assert steps(made) == steps(compiled)
    assert made.co_varnames == compiled.co_varnames
    if sys.version_info >= (3, 11):  # lines per instruction
        assert [p[0] for p in made.co_positions()] == [p[0] for p in compiled.co_positions()]
    else:  # Python 3.10: lines per range of instructions
        assert list(made.co_lines()) == list(compiled.co_lines())
    inner = [c for c in made.co_consts if isinstance(c, types.CodeType)]
    others = [c for c in compiled.co_consts if isinstance(c, types.CodeType)]
    assert len(inner) == len(others)
    for a, b in zip(inner, others):
        _same_code(a, b)


def _classes() -> list[type]:
    import dataclasses

    @tc.pytree_dataclass
    class Plain:
        weight: float
        bias: Any = None
        unit: str = tc.field(static=True, default="m")

    @tc.pytree_dataclass(frozen=True, slots=True)
    class Slotted:
        obj: float  # a field named like the generated functions' parameter
        children: Any = None

    @tc.pytree_dataclass(unflatten_calls_init=True)
    class ByInit:
        append: float  # a field named like a method the generated code calls
        hidden: Any = dataclasses.field(default=None, init=False)

    return [Plain, Slotted, ByInit]


@pytest.mark.parametrize("index", range(3))
def test_code_named_from_a_template_is_the_code_of_the_class_own_source(index: int) -> None:
    from treeclass._core.codegen import CORE

    node = node_for_class(_classes()[index])
    assert node is not None and node.generated is not None
    families = [CORE]
    if importlib.util.find_spec("torch") is not None:  # the torch adapter's families too
        from treeclass._backends.torch import _family

        families.append(_family(node))
    for family in families:
        made = node.generated.compile(family)
        filename = node.generated.filename(family)
        assert filename is not None
        source = node.generated.source(family)
        assert "".join(linecache.getlines(filename)) == source  # the class's own source
        assert made.co_filename == filename
        _same_code(made, compile(source, filename, "exec"))


def test_classes_of_one_shape_share_a_compiled_template() -> None:
    from treeclass._core import codegen

    if not codegen._TEMPLATES_ON:
        pytest.skip("templates are off on this interpreter")

    def make(names: tuple[str, str]) -> Any:
        ns: dict[str, Any] = {"__annotations__": {names[0]: float, names[1]: Any}}
        ns[names[1]] = None
        return tc.pytree_dataclass(type("Shaped", (), ns))

    make(("p", "q"))
    before = len(codegen._TEMPLATES)
    second = make(("longer_name", "other"))
    assert len(codegen._TEMPLATES) == before  # nothing compiled for the second class
    node = node_for_class(second)
    assert node is not None
    assert "obj.longer_name" in inspect.getsource(node.flatten)
    assert node.flatten(second(1.0, 2.0)) == ((1.0, 2.0), ())


def test_traceback_from_template_code_names_the_class_line() -> None:
    node = node_for_class(Shown)
    assert node is not None

    class Broken:
        @property
        def b(self) -> Any:
            raise RuntimeError("boom")

        a = 1.0
        tag = "t"

    with pytest.raises(RuntimeError) as info:
        node.flatten(Broken())
    text = "".join(traceback.format_exception(info.value))
    assert f'File "<treeclass generated {__name__}.Shown>", line 3, in flatten' in text
    assert "    v1 = obj.b\n" in text


def test_classes_with_the_same_fields_share_source_lines_but_keep_their_own_filename() -> None:
    from treeclass._core import codegen

    if not codegen._TEMPLATES_ON:
        pytest.skip("templates are off on this interpreter")

    def make() -> Any:
        @tc.pytree_dataclass
        class Twin:
            left: float
            right: Any = None
            tag: str = tc.field(static=True, default="t")

        return Twin

    one, two = make(), make()
    n1, n2 = node_for_class(one), node_for_class(two)
    assert n1 is not None and n2 is not None
    f1, f2 = n1.flatten.__code__.co_filename, n2.flatten.__code__.co_filename
    assert f1 != f2 and f1.startswith(f"<treeclass generated {__name__}.")
    assert n1.flatten.__code__.co_code == n2.flatten.__code__.co_code
    assert linecache.getlines(f1) is linecache.getlines(f2)  # one list of lines for both
    assert inspect.getsource(n2.unflatten).startswith("def unflatten(aux, children):")

    class Broken:
        @property
        def left(self) -> float:
            raise RuntimeError("no left")

    with pytest.raises(RuntimeError) as info:
        n2.flatten(Broken())
    text = "".join(traceback.format_exception(info.value))
    assert f'File "{f2}", line 2, in flatten' in text  # the second class's own name
    assert "v0 = obj.left" in text
