"""Never written but unreadable: every writer refuses a static value its reader would refuse.

For each questionable static value and each writer, the writer either raises a treeclass
error, or its reader loads the value back equal (issue 17, item 1).
"""

from __future__ import annotations

import dataclasses
import enum
import io
import pickle
from pathlib import Path
from typing import Any

import pytest

import treeclass as tc

np = pytest.importorskip("numpy")


class Color(enum.Enum):
    RED = "red"


tc.register_static(Color, name="tests.sw.Color")


@tc.pytree_dataclass(name="tests.sw.Named", frozen=True)
class Named:
    x: Any
    label: str = tc.field(static=True, default="a")
    sizes: tuple[int, ...] = tc.field(static=True, default=(1,))
    anything: Any = tc.field(static=True, default=None)


@tc.pytree_dataclass(name="tests.sw.Hashed")
class Hashed:
    x: Any
    cfg: Any = tc.field(static=True, default=None)

    def __hash__(self) -> int:
        return id(self)


QUESTIONABLE: dict[str, Any] = {
    "enum in a str field": lambda: Named(np.ones(2), label=Color.RED),
    "list in a tuple field": lambda: Named(np.ones(2), sizes=[1, 2]),
    "list in a hashable class": lambda: Hashed(np.ones(2), cfg=[1, 2]),
    "list in a frozen class's Any field": lambda: Named(np.ones(2), anything=[1]),
    "dict in a frozen class's Any field": lambda: Named(np.ones(2), anything={"k": 1}),
    "str subclass enum value": lambda: Named(np.ones(2), label="b"),
}


def _treespec(obj: Any, tmp: Path) -> Any:
    spec = tc.treespec_loads(tc.treespec_dumps(tc.tree_structure(obj)))
    return tc.tree_unflatten(spec, tc.tree_leaves(obj))


def _file(obj: Any, tmp: Path) -> Any:
    tc.save(tmp / "f.safetensors", obj)
    return tc.load(tmp / "f.safetensors")


def _orbax(obj: Any, tmp: Path) -> Any:
    pytest.importorskip("orbax.checkpoint")  # treeclass.orbax raises its own ImportError
    orbax = pytest.importorskip("treeclass.orbax")
    orbax.save(tmp / "ckpt", obj)
    return orbax.restore(tmp / "ckpt")


def _pickle(obj: Any, tmp: Path) -> Any:
    return pickle.loads(pickle.dumps(obj))


def _torch_load(obj: Any, tmp: Path) -> Any:
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save(dataclasses.replace(obj, x=torch.ones(2)), buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def _jax_export(obj: Any, tmp: Path) -> Any:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    tree = jax.tree_util.tree_map(jnp.asarray, obj)
    data = jax.export.export(jax.jit(lambda t: t))(tree).serialize()
    exported = jax.export.deserialize(data)
    (back,), _ = jax.tree_util.tree_unflatten(exported.in_tree, tc.tree_leaves(obj))
    return back


def _torch_treespec(obj: Any, tmp: Path) -> Any:
    pytest.importorskip("torch")
    import torch.utils._pytree as pt

    leaves, spec = pt.tree_flatten(obj)
    return pt.tree_unflatten(leaves, pt.treespec_loads(pt.treespec_dumps(spec)))


WRITERS = {
    "treespec_dumps": _treespec,
    "tc.save": _file,
    "treeclass.orbax.save": _orbax,
    "pickle": _pickle,
    "torch.save": _torch_load,
    "jax.export": _jax_export,
    "torch treespec_dumps": _torch_treespec,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("value", sorted(QUESTIONABLE))
def test_written_means_readable(value: str, writer: str, tmp_path: Path) -> None:
    obj = QUESTIONABLE[value]()
    try:
        back = WRITERS[writer](obj, tmp_path)
    except tc.TreeclassError as e:
        # A refusal names the class and says why (at write time, or a reader's own refusal
        # before anything was written; never "the document was edited").
        assert type(obj).__qualname__ in str(e), str(e)
        assert "was not written by this class" not in str(e), str(e)
        return
    assert type(back) is type(obj)
    for f in obj.__dataclass_fields__:
        if f == "x":
            continue  # the data leaf (array types differ between frameworks)
        assert getattr(back, f) == getattr(obj, f), f


@dataclasses.dataclass(frozen=True)
class Cfg:
    n: int = 1


tc.register_static(Cfg, name="tests.sw.Cfg")

QUESTIONABLE["registered static type with a field its annotation refuses"] = lambda: Named(
    np.ones(2),
    anything=Cfg(n="oops"),  # type: ignore[arg-type]
)

_CFG_REASON = "field 'n': the value is a str, but the field is int"


@pytest.mark.parametrize("writer", ["treespec_dumps", "tc.save", "treeclass.orbax.save"])
def test_registered_static_fields_are_checked_when_written(writer: str, tmp_path: Path) -> None:
    # The one rule of a registered type's fields (field_checks) runs when writing too, with the
    # reason the reader gives: nothing is written that treespec_loads would refuse.
    obj = Named(np.ones(2), anything=(1, Cfg(n="oops")))  # type: ignore[arg-type]
    with pytest.raises(
        tc.UnserializableStaticError, match=rf"'anything' of .*Named.*{_CFG_REASON}"
    ):
        WRITERS[writer](obj, tmp_path)


def test_registered_static_field_reason_is_the_reader_one() -> None:
    text = tc.treespec_dumps(tc.tree_structure(Named(np.ones(2), anything=Cfg(n=2))))
    with pytest.raises(tc.TreespecLoadError, match=_CFG_REASON):
        tc.treespec_loads(text.replace('"n":2', '"n":"oops"'))
    # A value the annotation allows is written and read back equal.
    spec = tc.treespec_loads(text)
    assert tc.tree_unflatten(spec, [np.ones(2)]).anything == Cfg(n=2)
