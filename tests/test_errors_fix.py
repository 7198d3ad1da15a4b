"""Errors that name the fix (issue 29, items 7, 8, 9, 10 and 12).

7. a load names every class that is not registered, once each;
8. ``assert_roundtrip``'s pickle check fails with an ``AssertionError`` naming a class that
   pickle cannot find by module path, and the fix;
9. a static callable (function, class, optimizer) says that a callable cannot be saved, and
   what works, not ``register_static``;
10. ``tc.load`` of another kind of file (zip / ``.pt2``, ``jax.export`` blob, treespec document)
    says which loader reads it;
12. ``replace`` of an unknown field, a static value of the wrong type, and an assignment to a
    frozen instance name the class and the field.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import uuid
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

import treeclass as tc
from treeclass.testing import assert_roundtrip

np = pytest.importorskip("numpy")


def _prefix() -> str:
    """A name prefix no other test uses (always 18 characters: renames keep the length)."""
    return f"tests.{uuid.uuid4().hex[:12]}"


# --- 7: every unregistered name, once -----------------------------------------------------------


def _five_classes(prefix: str) -> list[type]:
    made = []
    for i in range(5):
        cls = type(f"C{i}", (), {"__annotations__": {"x": Any}})
        made.append(tc.pytree_dataclass(name=f"{prefix}.C{i}")(cls))
    return made


def _missing_pattern(prefix: str) -> str:
    listed = ", ".join(re.escape(repr(f"{prefix}.C{i}")) for i in range(5))
    return (
        rf"uses the serialized names {listed}, which no class is registered under in this "
        r"process; import the modules that define the classes"
    )


def _assert_each_once(message: str, prefix: str) -> None:
    for i in range(5):
        assert message.count(f"{prefix}.C{i}") == 1, message


def test_treespec_loads_names_every_unregistered_class_once() -> None:
    prefix = _prefix()
    classes = _five_classes(prefix)
    tree = [cls(1.0) for cls in classes] + [classes[0](2.0)]  # C0 twice
    text = tc.treespec_dumps(tc.tree_structure(tree))
    gone = _prefix()
    with pytest.raises(tc.UnregisteredNameError, match=_missing_pattern(gone)) as info:
        tc.treespec_loads(text.replace(prefix, gone))
    _assert_each_once(str(info.value), gone)


def test_load_names_every_unregistered_class_once(tmp_path: Path) -> None:
    prefix = _prefix()
    classes = _five_classes(prefix)
    tree = {"a": [cls(np.ones(2, np.float32)) for cls in classes], "b": classes[3](1.0)}
    path = tmp_path / "five.safetensors"
    tc.save(path, tree)
    gone = _prefix()  # (the same length: the header keeps its size)
    path.write_bytes(path.read_bytes().replace(prefix.encode(), gone.encode()))
    with pytest.raises(tc.UnregisteredNameError, match=_missing_pattern(gone)) as info:
        tc.load(path)
    _assert_each_once(str(info.value), gone)
    assert str(info.value).startswith(repr(str(path)))


def test_one_unregistered_class_is_named_in_the_singular() -> None:
    prefix = _prefix()
    (cls, *_) = _five_classes(prefix)
    text = tc.treespec_dumps(tc.tree_structure([cls(1.0), cls(2.0)]))
    gone = _prefix()
    with pytest.raises(
        tc.UnregisteredNameError,
        match=rf"the serialized name {re.escape(repr(gone + '.C0'))}, which .* import the "
        r"module that defines the class",
    ):
        tc.treespec_loads(text.replace(prefix, gone))


# --- 8: assert_roundtrip on a class pickle cannot find ------------------------------------------


def _local_class(name: str | None, pickle_by_name: bool = True) -> type:
    @tc.pytree_dataclass(name=name, pickle_by_name=pickle_by_name)
    class Local:
        x: int

    return Local


def test_assert_roundtrip_names_a_local_class_and_the_fix() -> None:
    cls = _local_class(None)
    with pytest.raises(
        AssertionError,
        match=r"^pickle failed on .*Local\(x=1\): (AttributeError|PicklingError): .*; pickle finds "
        r"a class by its module path, and the class (tests\.)?test_errors_fix\._local_class\."
        r"<locals>\.Local is not importable by module path \(defined inside a function.*\)\. "
        r"Define it at module level, or register it with a name .*pickle_by_name=True",
    ):
        assert_roundtrip(cls(1))


def test_assert_roundtrip_of_a_local_class_pickled_by_module_path_fails_naming_it() -> None:
    cls = _local_class(f"{_prefix()}.Local", pickle_by_name=False)
    with pytest.raises(AssertionError, match=r"^pickle failed on .*<locals>\.Local is not"):
        assert_roundtrip({"a": [cls(1)]})


def test_assert_roundtrip_of_a_local_class_pickled_by_name_passes() -> None:
    assert_roundtrip(_local_class(f"{_prefix()}.Local")(1))


# --- 9: a static callable cannot be saved -------------------------------------------------------


@tc.pytree_dataclass(name="tests.errors_fix.Holder")
class Holder:
    x: float
    value: Any = tc.field(static=True, default=None)


def _double(v: float) -> float:
    return 2 * v


_CALLABLE_FIX = (
    r"a callable cannot be saved: a file holds data, never code \(registering its type with "
    r"register_static would not help\)\. Keep it out of the saved tree: hold it outside the "
    r"class whose instances are saved, or save the config it is made from and rebuild it on load"
)


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (lambda v: v, r"the function '<lambda>'"),
        (_double, r"the function '_double'"),
        (print, r"the builtin_function_or_method 'print'"),
        (Holder, r"the class 'Holder'"),
        (((1, _double)), r"the function '_double' \(inside its tuple value\)"),
        # A callable wrapping a function (functools.wraps; jax.jit's objects alike).
        (functools.lru_cache(_double), r"the [\w.]+ '_double'"),
    ],
)
def test_a_static_callable_says_it_cannot_be_saved(value: Any, what: str) -> None:
    pattern = (
        rf"static field 'value' of (tests\.)?test_errors_fix\.Holder cannot be serialized: it "
        rf"holds {what}, which has no JSON form; {_CALLABLE_FIX}"
    )
    with pytest.raises(tc.UnserializableStaticError, match=pattern) as info:
        tc.treespec_dumps(tc.tree_structure(Holder(1.0, value)))
    assert "register the type with" not in str(info.value)


def test_a_static_optimizer_says_it_cannot_be_saved(tmp_path: Path) -> None:
    optax = pytest.importorskip("optax")
    with pytest.raises(
        tc.UnserializableStaticError,
        match=r"static field 'value' of .*Holder cannot be serialized: it holds a value of type "
        r"optax\..*GradientTransformation.*, a tuple of callables, which has no JSON form; "
        + _CALLABLE_FIX
        + r".*flax's TrainState.*make tx= again from the config",
    ):
        tc.save(tmp_path / "s.safetensors", Holder(1.0, optax.adam(1e-3)))


def test_other_unsupported_statics_still_suggest_register_static() -> None:
    class Opaque:
        pass

    with pytest.raises(tc.UnserializableStaticError, match=r"register_static\(.*Opaque, name="):
        tc.treespec_dumps(tc.tree_structure(Holder(1.0, Opaque())))


# --- 10: another kind of file names its loader --------------------------------------------------

_NOT_SAFETENSORS = r"is a {kind}, not a safetensors file \(what treeclass\.save writes\): load it "


def _assert_names_loader(path: Path, kind: str, loader: str) -> None:
    pattern = rf"^{re.escape(repr(str(path)))} {_NOT_SAFETENSORS.format(kind=kind)}with {loader}"
    for load in (tc.load, tc.load_metadata):
        with pytest.raises(tc.FileLoadError, match=pattern):
            load(path)


def test_a_pt2_archive_names_treeclass_torch_load(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")

    class Add(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x + 1

    path = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(Add(), (torch.ones(2),)), path)
    _assert_names_loader(
        path, r"torch\.export archive \(\.pt2\)", r"treeclass\.torch\.load \(or torch\.export"
    )


def test_a_zip_names_torch_load(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "weights.pt"
    torch.save({"w": torch.ones(2)}, path)
    _assert_names_loader(
        path, "zip archive", r"torch\.load \(a torch\.save file\) or treeclass\.torch\.load"
    )


def test_a_jax_export_blob_names_jax_export_deserialize(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    from jax import export

    path = tmp_path / "f.bin"
    path.write_bytes(export.export(jax.jit(_double))(np.float32(1.0)).serialize())
    _assert_names_loader(path, r"jax\.export blob", r"jax\.export\.deserialize\.$")


def test_a_treespec_document_names_treespec_loads(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(tc.treespec_dumps(tc.tree_structure({"a": Holder(1.0)})))
    _assert_names_loader(path, "treespec document", r"treeclass\.treespec_loads\.$")
    # (a document that names a class not registered here is still one)
    path.write_text(path.read_text().replace("tests.errors_fix.Holder", "nowhere.Holder"))
    _assert_names_loader(path, "treespec document", r"treeclass\.treespec_loads\.$")


def test_other_bytes_keep_the_safetensors_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(tc.FileLoadError, match=r"is not a loadable safetensors file: its header"):
        tc.load(path)
    path.write_text('{"not": "a treespec"}')
    with pytest.raises(tc.FileLoadError, match=r"is not a loadable safetensors file: its header"):
        tc.load(path)
    path.write_bytes(os.urandom(4) + b"ML\xefR")  # MLIR's magic, but no blob around it
    with pytest.raises(tc.FileLoadError, match=r"is not a loadable safetensors file"):
        tc.load(path)


def test_a_broken_safetensors_file_keeps_its_own_error(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    tc.save(path, {"w": np.ones(3)})
    data = path.read_bytes()
    path.write_bytes(data[:-4])  # truncated
    with pytest.raises(tc.FileLoadError, match=r"is not a loadable safetensors file"):
        tc.load(path)


# --- 12: replace and frozen errors name the class and the field ---------------------------------


@tc.pytree_dataclass(name="tests.errors_fix.Frozen", frozen=True)
class Frozen:
    x: float
    mode: str = tc.field(static=True, default="a")
    kind: Literal["a", "b"] = tc.field(static=True, default="a")
    opts: Any = tc.field(static=True, default=None)


class FrozenNode(tc.PytreeNode, name="tests.errors_fix.FrozenNode", frozen=True):
    x: float
    mode: str = tc.field(static=True, default="a")


class FrozenChild(FrozenNode, name="tests.errors_fix.FrozenChild", frozen=True):
    y: float = 0.0


@dataclasses.dataclass(frozen=True)
class PlainDataclass:
    x: float
    mode: str = tc.field(static=True, default="a")


tc.register_dataclass(PlainDataclass, name="tests.errors_fix.PlainDataclass")


@attrs.frozen
class AttrsClass:
    x: float
    mode: str = attrs.field(default="a", metadata={"static": True})


tc.register_dataclass(AttrsClass, name="tests.errors_fix.AttrsClass")


@pytest.mark.parametrize(
    "obj", [Frozen(1.0), FrozenNode(1.0), PlainDataclass(1.0), AttrsClass(1.0)], ids=type
)
def test_replace_of_an_unknown_field_names_the_class_and_field(obj: Any) -> None:
    name = type(obj).__name__
    pattern = rf"{name}\.replace\(\) got 'y', which is not a field of {name}; its fields are x, "
    with pytest.raises(tc.TreeclassTypeError, match=pattern):
        tc.replace(obj, y=1.0)
    if hasattr(obj, "replace"):
        with pytest.raises(tc.TreeclassTypeError, match=pattern):
            obj.replace(y=1.0)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"mode": 3}, r"static field 'mode' of .*Frozen: the value is a int, but the field is str"),
        ({"kind": "c"}, r"static field 'kind' of .*Frozen: 'c' is not one of the field's values"),
        ({"opts": [1]}, r"static field 'opts' of .*Frozen: the value is an unhashable list"),
    ],
)
def test_a_replaced_static_of_the_wrong_type_names_the_class_and_field(
    changes: dict[str, Any], problem: str, tmp_path: Path
) -> None:
    obj = tc.replace(Frozen(1.0), **changes)  # replace itself keeps any value (jit may use it)
    with pytest.raises(tc.UnserializableStaticError, match=rf"cannot save {problem}"):
        tc.treespec_dumps(tc.tree_structure(obj))
    with pytest.raises(tc.UnserializableStaticError, match=rf"cannot save {problem}"):
        tc.save(tmp_path / "x.safetensors", obj)


def test_a_replaced_unhashable_static_names_the_class_and_field_when_hashed() -> None:
    spec = tc.tree_structure({"a": [Frozen(1.0), tc.replace(Frozen(1.0), opts=[1, 2])]})
    with pytest.raises(
        tc.UnhashableStaticError,
        match=r"static field 'opts' of (tests\.)?test_errors_fix\.Frozen holds an unhashable list "
        r"\(\[1, 2\]\); a TreeSpec's hash .* covers its static values, so they must be hashable\. "
        r"Use a tuple or frozenset",
    ):
        hash(spec)


@pytest.mark.parametrize(
    ("obj", "label"),
    [
        (Frozen(1.0), "Frozen"),
        (FrozenNode(1.0), "FrozenNode"),
        (FrozenChild(1.0), "FrozenChild"),
    ],
)
@pytest.mark.parametrize("field", ["x", "mode"])
def test_assigning_to_a_frozen_instance_names_the_class_field_and_replace(
    obj: Any, label: str, field: str
) -> None:
    where = rf"field '{field}' of (tests\.)?test_errors_fix\.{label}: {label} is frozen"
    fix = rf"make a changed copy with obj\.replace\({field}=\.\.\.\) \(or treeclass\.replace"
    with pytest.raises(dataclasses.FrozenInstanceError, match=rf"^cannot assign to {where}; {fix}"):
        setattr(obj, field, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError, match=rf"^cannot delete {where}; {fix}"):
        delattr(obj, field)
    assert getattr(obj, field) == getattr(type(obj)(1.0), field)  # unchanged


def test_assigning_a_new_attribute_to_a_frozen_instance_names_the_class() -> None:
    with pytest.raises(
        dataclasses.FrozenInstanceError,
        match=r"^cannot assign to attribute 'extra' of (tests\.)?test_errors_fix\.Frozen: "
        r"Frozen is frozen, and its instances hold only their fields\.$",
    ):
        Frozen(1.0).extra = 1  # type: ignore[attr-defined]


class PlainSubclassOfFrozen(Frozen):
    """A plain (not dataclass) subclass: it keeps the base's frozen ``__setattr__``."""


def test_the_frozen_refusal_names_the_instance_s_class() -> None:
    with pytest.raises(
        dataclasses.FrozenInstanceError,
        match=r"^cannot assign to field 'x' of (tests\.)?test_errors_fix\.PlainSubclassOfFrozen: "
        r"PlainSubclassOfFrozen is frozen",
    ):
        PlainSubclassOfFrozen(1.0).x = 2.0  # type: ignore[misc]


def test_a_frozen_class_still_rebuilds_pickles_and_copies() -> None:
    import copy
    import pickle

    obj = FrozenChild(1.0, mode="b", y=2.0)
    leaves, spec = tc.tree_flatten(obj)
    assert spec.unflatten(leaves) == obj
    assert pickle.loads(pickle.dumps(obj)) == obj
    assert copy.deepcopy(obj) == obj
    assert obj.replace(y=3.0) == FrozenChild(1.0, mode="b", y=3.0)


@pytest.mark.threads
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_a_pipe_that_is_not_safetensors_is_a_load_error(tmp_path: Path) -> None:
    # A file that cannot seek (a pipe) is never read past its header for the other kinds.
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(b"X" * 64)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with pytest.raises(tc.FileLoadError, match="header"):
            tc.load(fifo)
    finally:
        writer.join()
