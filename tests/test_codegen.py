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


def _filename_start(cls: type, fields: str, tag: str = "") -> str:
    """How the linecache filename of ``cls``'s generated source starts.

    From a template, the source is shared by every class of the same shape and field names and
    its filename names the fields; compiled for the class alone, it names the class.
    """
    from treeclass._core import codegen

    label = fields if codegen._TEMPLATES_ON else f"{cls.__module__}.{cls.__qualname__}"
    return f"<treeclass generated {label}{tag}"


def test_generated_source_is_in_linecache_and_getsource() -> None:
    node = node_for_class(Shown)
    assert node is not None
    src = inspect.getsource(node.flatten)
    assert src.startswith("def flatten(obj):")
    assert "obj.a" in src and "obj.tag" in src
    filename = node.flatten.__code__.co_filename
    assert filename.startswith(_filename_start(Shown, "fields a, b; static tag"))
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
    assert f'File "{node.flatten.__code__.co_filename}", line 2, in flatten' in text
    assert "v0 = obj.a" in text


def test_rerun_gets_a_new_linecache_name() -> None:
    def make() -> type:
        @tc.pytree_dataclass
        class Again:
            x: int

        return Again

    from treeclass._core import codegen

    a, b = make(), make()
    na, nb = node_for_class(a), node_for_class(b)
    assert na is not None and nb is not None
    fa, fb = na.flatten.__code__.co_filename, nb.flatten.__code__.co_filename
    # Each definition's source stays readable in tracebacks: its own (compiled per class), or
    # the one both share (made from a template: same shape, same names, same source).
    assert (fa == fb) is codegen._TEMPLATES_ON
    assert inspect.getsource(na.flatten) == inspect.getsource(nb.flatten)
    assert inspect.getsource(nb.flatten).startswith("def flatten")
    assert (
        na.flatten.__qualname__
        == "test_rerun_gets_a_new_linecache_name.<locals>.make.<locals>.Again.<treeclass flatten>"
    )


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
    filename = one.__code__.co_filename
    assert filename.startswith(_filename_start(Shown, "fields a, b; static tag", " [rev]"))
    assert filename.endswith(" [rev]>") or " [rev] #" in filename
    assert filename == node.generated.filename(family)
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
    assert f'File "{node.flatten.__code__.co_filename}", line 3, in flatten' in text
    assert "    v1 = obj.b\n" in text


def test_classes_with_the_same_fields_share_code_but_keep_their_own_functions() -> None:
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
    # One code object per function for both classes (issue 18: memory per class), under a
    # filename naming the fields they share ...
    assert n1.flatten.__code__ is n2.flatten.__code__
    assert n1.unflatten.__code__ is n2.unflatten.__code__
    f2 = n2.flatten.__code__.co_filename
    assert f2.startswith("<treeclass generated fields left, right; static tag")
    assert inspect.getsource(n2.unflatten).startswith("def unflatten(aux, children):")
    # ... while each class keeps its own function objects, globals and qualified names.
    assert n1.flatten is not n2.flatten
    assert n1.unflatten.__globals__["_cls"] is one and n2.unflatten.__globals__["_cls"] is two
    assert n2.flatten.__qualname__.endswith("Twin.<treeclass flatten>")
    assert n2.unflatten(*reversed(n2.flatten(two(1.0, 2.0)))).__class__ is two

    class Broken:
        @property
        def left(self) -> float:
            raise RuntimeError("no left")

    with pytest.raises(RuntimeError) as info:
        n2.flatten(Broken())
    text = "".join(traceback.format_exception(info.value))
    assert f'File "{f2}", line 2, in flatten' in text  # the shared source's line
    assert "v0 = obj.left" in text
    from treeclass._core.codegen import class_in_traceback

    assert class_in_traceback(info.value) is two  # the class, from the function's globals


def test_a_refused_registration_leaves_the_shared_source_in_linecache() -> None:
    from treeclass._core import codegen

    if not codegen._TEMPLATES_ON:
        pytest.skip("templates are off on this interpreter")

    @tc.pytree_dataclass(name="tests.codegen.Kept")
    class Kept:
        kept_a: float
        kept_b: Any = None

    node = node_for_class(Kept)
    assert node is not None
    filename = node.flatten.__code__.co_filename
    with pytest.raises(tc.NameConflictError, match=r"tests\.codegen\.Kept"):

        @tc.pytree_dataclass(name="tests.codegen.Kept")
        class Other:  # same fields, another class: its registration is refused
            kept_a: float
            kept_b: Any = None

    assert filename in linecache.cache  # the source Kept's functions run stays readable
    assert inspect.getsource(node.flatten).startswith("def flatten(obj):")
