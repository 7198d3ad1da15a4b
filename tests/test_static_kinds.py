"""Loading refuses static values the class could not have produced (issue 13).

From the fields' annotations where they are plain types, the class's hashability and attrs
validators; through every loader that decodes a class's state (``treespec_loads``, torch's
contexts, jax.export's auxdata).
"""

from __future__ import annotations

import enum
import json
import typing
from typing import Any, Literal

import attrs
import pytest

import treeclass as tc


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


tc.register_static(Mode, name="tests.kinds.Mode")


@tc.pytree_dataclass(name="tests.kinds.Frozen", frozen=True)
class Frozen:
    x: Any
    s: str = tc.field(static=True, default="a")
    n: int = tc.field(static=True, default=1)
    f: float = tc.field(static=True, default=1.5)
    b: bool = tc.field(static=True, default=False)
    t: tuple[int, ...] = tc.field(static=True, default=(1, 2))
    fs: frozenset[str] = tc.field(static=True, default=frozenset({"a"}))
    o: str | None = tc.field(static=True, default=None)
    u: int | str = tc.field(static=True, default=0)
    lit: Literal["x", "y"] = tc.field(static=True, default="x")
    size: int | Literal["scalar"] = tc.field(static=True, default="scalar")  # as equinox's
    mode: Mode = tc.field(static=True, default=Mode.TRAIN)
    anything: Any = tc.field(static=True, default=None)


@tc.pytree_dataclass(name="tests.kinds.Mutable")
class Mutable:  # eq=True and not frozen: instances are unhashable
    x: Any
    items: list[int] = tc.field(static=True, default_factory=list)


@attrs.frozen
class Validated:
    x: Any
    n: int = attrs.field(default=1, validator=attrs.validators.gt(0), metadata={"static": True})
    name: str = attrs.field(
        default="ok", validator=attrs.validators.matches_re("[a-z]+"), metadata={"static": True}
    )


tc.register_dataclass(Validated, name="tests.kinds.Validated")


def tamper(obj: Any, field: str, encoded: Any) -> str:
    doc = json.loads(tc.treespec_dumps(tc.tree_structure(obj)))
    doc["nodes"][0][1]["static"][field] = encoded
    return json.dumps(doc)


def test_the_class_own_values_load() -> None:
    obj = Frozen(1.0, o="q", u="s", lit="y", mode=Mode.EVAL, anything=(1,))
    spec = tc.tree_structure(obj)
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec
    # A union of a plain type and literals takes any value of the type (in either order).
    for size in (3, "scalar"):
        spec = tc.tree_structure(Frozen(1.0, size=size))
        assert tc.treespec_loads(tc.treespec_dumps(spec)).unflatten([0]).size == size
    # An int where a float is annotated, a bool where an int is: as Python's typing allows.
    assert tc.treespec_loads(tamper(obj, "f", 2)).unflatten([0]).f == 2
    assert tc.treespec_loads(tamper(obj, "n", True)).unflatten([0]).n is True


@pytest.mark.parametrize(
    ("field", "encoded", "message"),
    [
        (
            "s",
            [1],
            r"static field 's' of .*Frozen: the value is a list, but the field is str",
        ),
        ("s", 3, r"value is a int, but the field is str"),
        ("n", "1", r"static field 'n'.*value is a str, but the field is int"),
        ("f", "x", r"static field 'f'.*value is a str, but the field is float"),
        ("b", 0, r"static field 'b'.*value is a int, but the field is bool"),
        ("t", [1, 2], r"static field 't'.*value is a list, but the field is tuple\[int, \.\.\.\]"),
        ("fs", ["a"], r"static field 'fs'.*value is a list"),
        ("o", 1, r"static field 'o'.*value is a int"),
        ("u", 1.5, r"static field 'u'.*value is a float"),
        ("lit", "z", r"static field 'lit'.*'z' is not one of the field's values"),
        ("size", "vector", r"static field 'size'.*'vector' is not one of the field's values"),
        ("size", 1.5, r"static field 'size'.*1.5 is not one of the field's values"),
        ("mode", "train", r"static field 'mode'.*value is a str"),
        ("anything", [[1]], r"static field 'anything'.*unhashable list.*hashable"),
    ],
)
def test_values_the_class_could_not_have_produced_are_refused(
    field: str, encoded: Any, message: str
) -> None:
    with pytest.raises(tc.TreespecLoadError, match=message):
        tc.treespec_loads(tamper(Frozen(1.0), field, encoded))


def test_unhashable_statics_of_unhashable_classes_load() -> None:
    obj = Mutable(1.0, [1, 2])
    spec = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(obj)))
    assert spec.unflatten([2.0]) == Mutable(2.0, [1, 2])
    with pytest.raises(tc.TreespecLoadError, match=r"static field 'items'.*value is a tuple"):
        tc.treespec_loads(tamper(obj, "items", {"tuple": [1]}))


def test_attrs_validators_run_on_loaded_statics() -> None:
    obj = Validated(1.0)
    assert tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(obj))).unflatten([0]).n == 1
    with pytest.raises(tc.TreespecLoadError, match=r"static field 'n'.*attrs validator refuses -5"):
        tc.treespec_loads(tamper(obj, "n", -5))
    with pytest.raises(tc.TreespecLoadError, match=r"static field 'name'.*validator refuses 'A1'"):
        tc.treespec_loads(tamper(obj, "name", "A1"))


def test_defaults_filled_in_are_the_class_own_and_not_checked() -> None:
    @tc.pytree_dataclass(name="tests.kinds.Gained")
    class Gained:
        x: Any
        r: str = tc.field(static=True, default=typing.cast(str, ...))

    doc = json.loads(tc.treespec_dumps(tc.tree_structure(Gained(1, r="x"))))
    del doc["nodes"][0][1]["static"]["r"]  # written before the class had r
    assert tc.treespec_loads(json.dumps(doc)).unflatten([1]).r is ...


def test_unresolvable_annotations_are_not_checked() -> None:
    @tc.pytree_dataclass(name="tests.kinds.Forward")
    class Forward:
        x: Any
        s: NoSuchName = tc.field(static=True, default="a")  # type: ignore[name-defined]  # noqa: F821

    assert tc.treespec_loads(tamper(Forward(1), "s", [1])).unflatten([1]).s == [1]


def test_every_loader_checks() -> None:
    torch = pytest.importorskip("torch")
    import torch.utils._pytree as pt

    del torch
    text = pt.treespec_dumps(pt.tree_structure(Frozen(1.0)))
    forged = text.replace('\\"s\\":\\"a\\"', '\\"s\\":[1]')
    assert forged != text
    with pytest.raises(tc.TreespecLoadError, match=r"static field 's'.*value is a list"):
        pt.treespec_loads(forged)
    jax = pytest.importorskip("jax")
    blob = jax.export.export(jax.jit(lambda f: f))(Frozen(jax.numpy.ones(2))).serialize()
    forged_blob = bytes(blob).replace(b'"s":"a"', b'"s":"b"').replace(b'"lit":"x"', b'"lit":"z"')
    assert forged_blob != bytes(blob)
    with pytest.raises(tc.TreespecLoadError, match=r"static field 'lit'.*'z' is not one of"):
        jax.export.deserialize(bytearray(forged_blob))
