"""Generated functions: compiled on first call, readable source in linecache, qualnames,
tracebacks."""

from __future__ import annotations

import inspect
import linecache
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


def _filename_start(fields: str, tag: str = "") -> str:
    """How the linecache filename of a source shared by classes with ``fields`` starts."""
    return f"<treeclass generated {fields}{tag}"


def test_registering_compiles_nothing_and_the_first_call_compiles_the_family() -> None:
    @tc.pytree_dataclass
    class Late:
        late_a: float
        late_b: Any = None

    node = node_for_class(Late)
    assert node is not None and node.generated is not None
    assert node.generated.filename() is None  # nothing compiled at registration
    stub = node.unflatten.__code__
    functions = (node.flatten, node.unflatten, node.flatten_into)
    before = [inspect.signature(f) for f in functions]
    assert node.flatten(Late(1.0, 2.0)) == ((1.0, 2.0), ())
    # A stub has its function's parameters (a tracer keeps what it read of a function).
    assert before == [
        inspect.signature(f) for f in (node.flatten, node.unflatten, node.flatten_into)
    ]
    filename = node.generated.filename()
    assert filename is not None and filename.startswith(_filename_start("fields late_a, late_b"))
    # Every function bound from the family got the compiled code, not only the one called.
    assert node.unflatten.__code__ is not stub
    assert node.unflatten.__code__.co_filename == filename
    assert node.unflatten((), [3.0, 4.0]) == Late(3.0, 4.0)


@pytest.mark.threads
def test_first_calls_in_many_threads_compile_once() -> None:
    import threading

    @tc.pytree_dataclass
    class Raced:
        raced_a: float
        raced_b: Any = None

    node = node_for_class(Raced)
    assert node is not None
    bound = [node.bind(f"r{i}", str)["unflatten"] for i in range(8)]
    start = threading.Barrier(8)
    out: list[Any] = []

    def first(i: int) -> None:
        start.wait()
        out.append(bound[i]((), [float(i), None]))

    threads = [threading.Thread(target=first, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.raced_a for o in out) == [float(i) for i in range(8)]
    assert len({f.__code__ for f in [*bound, node.unflatten]}) == 1  # one compiled code


@pytest.mark.parametrize("mode", ["compile", "export"])
def test_a_first_call_inside_dynamo_compiles_and_traces(mode: str) -> None:
    """Dynamo inlines a stub: it runs the compile (``first_call``), then traces the code."""
    torch = pytest.importorskip("torch")
    import torch.utils._pytree as pt

    @tc.pytree_dataclass(frozen=True, slots=True)  # stores with a traceable twin path
    class FirstTraced:
        first_x: Any
        first_y: Any = None

    node = node_for_class(FirstTraced)
    assert node is not None and node.generated is not None
    assert node.generated.filename() is None

    def double(obj: Any) -> Any:
        return (
            pt.tree_map(lambda v: v * 2, obj),
            tc.tree_map(lambda v: v + 1, obj),
        )

    obj = FirstTraced(torch.ones(2), torch.zeros(1))
    if mode == "compile":
        out = torch.compile(double, fullgraph=True, backend="eager")(obj)
    else:

        class Double(torch.nn.Module):
            def forward(self, o: Any) -> Any:
                return double(o)

        out = torch.export.export(Double(), (obj,), strict=True).module()(obj)
    assert node.generated.filename() is not None
    assert type(out[0]) is FirstTraced and type(out[1]) is FirstTraced
    assert out[0].first_x.tolist() == [2.0, 2.0] and out[1].first_y.tolist() == [1.0]
    # Traced again (a new trace reads the compiled code of the same function objects).
    again = torch.compile(lambda o: double(o)[0], fullgraph=True, backend="eager")(obj)
    assert again.first_x.tolist() == [2.0, 2.0]


def test_generated_source_is_in_linecache_and_getsource() -> None:
    node = node_for_class(Shown)
    assert node is not None
    node.flatten(Shown(1.0))  # compiled on first call
    src = inspect.getsource(node.flatten)
    assert src.startswith("def flatten(obj):")
    assert "obj.a" in src and "obj.tag" in src
    filename = node.flatten.__code__.co_filename
    assert filename.startswith(_filename_start("fields a, b; static tag"))
    assert node.unflatten.__code__.co_filename == filename  # one source per family
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

    a, b = make(), make()
    na, nb = node_for_class(a), node_for_class(b)
    assert na is not None and nb is not None
    na.flatten(a(1)), nb.flatten(b(1))
    fa, fb = na.flatten.__code__.co_filename, nb.flatten.__code__.co_filename
    # Each definition's source stays readable in tracebacks: the one both share (same text).
    assert fa == fb
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
    one = node.bind("one", str, family=family)["flatten"]
    two = node.bind("two", str, family=family)["flatten"]
    assert node.generated.filename(family) is None  # not compiled before it is first called
    assert one(Shown(1.0, 2.0)) == ([2.0, 1.0], ("t",))
    assert one is not two and one.__code__ is two.__code__  # compiled once, bound twice
    filename = one.__code__.co_filename
    assert filename.startswith(_filename_start("fields a, b; static tag", " [rev]"))
    assert filename.endswith(" [rev]>") or " [rev] #" in filename
    assert filename == node.generated.filename(family)
    assert inspect.getsource(one).startswith("def flatten(obj):")
    assert one.__qualname__ == "Shown.<treeclass flatten[one]>"
    assert two.__qualname__ == "Shown.<treeclass flatten[two]>"
    assert one.__module__ == __name__
    # The core family is untouched by it.
    assert node.flatten(Shown(1.0, 2.0)) == ((1.0, 2.0), ("t",))


def test_traceback_names_the_line_of_the_field() -> None:
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
    n1.flatten(one(1.0)), n2.flatten(two(1.0))
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
    @tc.pytree_dataclass(name="tests.codegen.Kept")
    class Kept:
        kept_a: float
        kept_b: Any = None

    node = node_for_class(Kept)
    assert node is not None
    node.flatten(Kept(1.0))
    filename = node.flatten.__code__.co_filename
    with pytest.raises(tc.NameConflictError, match=r"tests\.codegen\.Kept"):

        @tc.pytree_dataclass(name="tests.codegen.Kept")
        class Other:  # same fields, another class: its registration is refused
            kept_a: float
            kept_b: Any = None

    assert filename in linecache.cache  # the source Kept's functions run stays readable
    assert inspect.getsource(node.flatten).startswith("def flatten(obj):")
