"""Annotations that name what the module defines after the class (PEP 649/749, Python 3.14).

From Python 3.14 a class's annotations are evaluated when first read, so a field may be
annotated with a class or an alias the module defines further down, unquoted and without
``from __future__ import annotations``. Registration must not evaluate them (that would raise
``NameError``), and the checks of static values, which do, must see the names once they exist.

``MODULE`` is written that way on 3.14, and with those annotations quoted before (where an
unquoted one is a ``NameError`` when the class is made): the forward references each version
allows. It is imported from a file, not compiled here, so that 3.10 to 3.13 can run this file.
The mypy plugin evaluates no annotation (mypy reads the source, the same on every target): the
last test runs it with a 3.14 target where mypy is installed, which CPython for WebAssembly
(CI's py314 job) is not.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import treeclass as tc
from tests._subproc import write_modules

DEFERRED = sys.version_info >= (3, 14)

# ``{Q}`` quotes a forward reference before 3.14 and is nothing from it.
MODULE = """
from typing import Literal, NamedTuple

import attrs

import treeclass as tc

NAME = {name!r}


@tc.pytree_dataclass(name=NAME + ".Model", frozen=True)
class Model:
    body: {Q}Body{Q}
    kind: {Q}Kind{Q} = tc.field(static=True, default="dense")
    width: {Q}Width{Q} = tc.field(static=True, default=4)


@tc.pytree_dataclass(name=NAME + ".Slotted", frozen=True, slots=True)
class Slotted:
    body: {Q}Body{Q}
    kind: {Q}Kind{Q} = tc.field(static=True, default="dense")


class Head(tc.PytreeNode, name=NAME + ".Head"):
    out: {Q}Body{Q}
    act: {Q}Act{Q} = tc.field(static=True, default="relu")


@attrs.frozen
class Pair:
    left: {Q}Body{Q}
    unit: {Q}Width{Q} = attrs.field(default=1, metadata={{"static": True}})


tc.register_dataclass(Pair, name=NAME + ".Pair")


@tc.register_namedtuple(name=NAME + ".Edge")
class Edge(NamedTuple):
    start: {Q}Body{Q}


@tc.pytree_dataclass(name=NAME + ".Loose")
class Loose:
    x: float
    tag: {Q}Undefined{Q} = tc.field(static=True, default="a")


@tc.pytree_dataclass(name=NAME + ".Body")
class Body:
    w: float


Kind = Literal["dense", "sparse"]
Act = Literal["relu", "gelu"]
Width = int
"""


@pytest.fixture
def mod(tmp_path: Path) -> Iterator[ModuleType]:
    """The module above, imported (as a module of its own, so the annotations see its names)."""
    module_name = f"deferred_{uuid.uuid4().hex[:12]}"
    source = MODULE.format(name=f"tests.{module_name}", Q="" if DEFERRED else '"')
    write_modules(tmp_path, {module_name: source})
    spec = importlib.util.spec_from_file_location(module_name, tmp_path / f"{module_name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[module_name]


def test_the_module_is_written_with_unquoted_forward_references_on_3_14(mod: ModuleType) -> None:
    model = vars(mod)["Model"]
    if DEFERRED:
        import annotationlib  # type: ignore[import-not-found,unused-ignore]

        # Unquoted names, not yet evaluated when the class was made: a ForwardRef until then.
        made = annotationlib.get_annotations(model, format=annotationlib.Format.STRING)
        assert made == {"body": "Body", "kind": "Kind", "width": "Width"}
    assert model.__annotations__["body"] in (mod.Body, "Body")


def test_classes_annotated_with_later_names_register_and_round_trip(mod: ModuleType) -> None:
    for obj in (
        mod.Model(mod.Body(1.0), kind="sparse", width=8),
        mod.Slotted(mod.Body(1.5), kind="sparse"),
        mod.Head(mod.Body(2.0), act="gelu"),
        mod.Pair(mod.Body(3.0), unit=2),
        mod.Loose(4.0, tag="b"),
        mod.Edge(mod.Body(5.0)),
    ):
        leaves, spec = tc.tree_flatten(obj)
        assert len(leaves) == 1
        assert spec.unflatten(leaves) == obj
        assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda m: m.Model(m.Body(1.0), kind="diagonal"), r"'diagonal' is not one of the field"),
        (lambda m: m.Model(m.Body(1.0), width="4"), r"the value is a str, but the field is int"),
        (lambda m: m.Slotted(m.Body(1.0), kind="diagonal"), r"'diagonal' is not one of the"),
        (lambda m: m.Head(m.Body(1.0), act="tanh"), r"'tanh' is not one of the field"),
        (lambda m: m.Pair(m.Body(1.0), unit=1.5), r"the value is a float, but the field is int"),
    ],
    ids=["literal-alias", "type-alias", "slots", "pytree-node", "attrs"],
)
def test_static_checks_resolve_names_defined_after_the_class(
    mod: ModuleType, make: object, message: str
) -> None:
    obj = make(mod)  # type: ignore[operator]
    spec = tc.tree_structure(obj)
    with pytest.raises(tc.UnserializableStaticError, match=message):
        tc.treespec_dumps(spec)


def test_a_loader_refuses_a_static_value_the_later_alias_does_not_allow(mod: ModuleType) -> None:
    text = tc.treespec_dumps(tc.tree_structure(mod.Model(mod.Body(1.0))))
    assert '"dense"' in text
    with pytest.raises(tc.TreespecLoadError, match=r"'diagonal' is not one of the field"):
        tc.treespec_loads(text.replace('"dense"', '"diagonal"'))


def test_an_annotation_naming_nothing_leaves_the_field_unchecked(mod: ModuleType) -> None:
    # ``Undefined`` is never defined: the class's annotations cannot be resolved (as before
    # 3.14 with a quoted name), so its static values are not checked against them.
    obj = mod.Loose(1.0, tag=5)
    text = tc.treespec_dumps(tc.tree_structure(obj))
    assert tc.treespec_loads(text).unflatten([1.0]) == obj


def test_mypy_plugin_checks_replace_of_a_class_annotated_with_later_names(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    user = tmp_path / "user.py"
    user.write_text(
        "import treeclass as tc\n"
        "\n"
        "@tc.pytree_dataclass\n"
        "class Model:\n"
        "    body: Body\n"
        "    width: Width = tc.field(static=True, default=4)\n"
        "\n"
        "class Body:\n"
        "    w: float\n"
        "\n"
        "Width = int\n"
        "\n"
        "m = Model(Body())\n"
        "tc.replace(m, width=5)\n"
        'tc.replace(m, width="5")\n'
        "m.replace(body=Body())\n"
        "m.replace(depth=1)\n"
    )
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nplugins = treeclass.mypy\n")
    out, err, status = api.run(
        [
            "--strict",
            "--no-incremental",
            "--python-version=3.14",
            f"--config-file={config}",
            "--cache-dir=/dev/null",  # (mypy 1.10, the floor, fails writing one for treeclass)
            str(user),
        ]
    )
    assert status == 1, out + err
    errors = [line.split(": error: ")[0] for line in out.splitlines() if ": error: " in line]
    assert errors == [f"{user}:15", f"{user}:17"], out
