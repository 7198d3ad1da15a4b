"""Instances of named classes pickle by their treeclass name (``copyreg``), not module path.

Registration installs the reducer of every named class (``pickle_by_name=True``, the
default); ``treeclass._pickle.install`` / ``uninstall`` do it by hand.
"""

from __future__ import annotations

import collections
import copy
import copyreg
import dataclasses
import linecache
import pickle
import pickletools
import sys
from pathlib import Path
from typing import Any, Literal, NamedTuple

import attrs
import pytest
from _subproc import FRAMEWORKS, report_in, run_script, write_modules

import treeclass as tc
from treeclass import _pickle

POST_INIT: list[str] = []


def named(cls: Any) -> Any:
    """Check that registration made ``cls`` pickle by name."""
    name = tc.name_of(cls)
    assert name is not None
    assert _pickle.is_installed(cls)
    assert _pickle.install(cls, name)  # idempotent
    return cls


@named
@tc.pytree_dataclass(name="tests.pbn.Plain")
class Plain:
    x: Any
    y: Any = None
    tag: str = tc.field(static=True, default="t")

    def __post_init__(self) -> None:
        POST_INIT.append("Plain")


@named
@tc.pytree_dataclass(name="tests.pbn.Frozen", frozen=True)
class Frozen:
    x: Any
    cfg: tuple[int, ...] = tc.field(static=True, default=(1, 2))

    def __post_init__(self) -> None:
        POST_INIT.append("Frozen")


@named
@tc.pytree_dataclass(name="tests.pbn.FrozenSlots", frozen=True, slots=True)
class FrozenSlots:
    x: Any
    y: Any = None
    label: str = tc.field(static=True, default="fs")


@named
@tc.pytree_dataclass(name="tests.pbn.Nones", return_none_fields=True)
class Nones:
    x: Any
    y: Any = None


@named
@tc.pytree_dataclass(name="tests.pbn.ByInit", unflatten_calls_init=True)
class ByInit:
    x: Any
    doubled: Any = dataclasses.field(init=False, default=None)

    def __post_init__(self) -> None:
        POST_INIT.append("ByInit")


@attrs.frozen
class AttrsSlots:
    a: Any
    b: int = attrs.field(default=1, metadata={"static": True})


@attrs.frozen(cache_hash=True, slots=False)
class AttrsCacheHash:
    a: Any
    b: Any = None


class NT(NamedTuple):
    p: Any
    q: Any


@tc.pytree_dataclass(name="tests.pbn.Mapping")
class Mapping(collections.OrderedDict):  # type: ignore[type-arg]
    """Shaped like HuggingFace's ModelOutput: a mapping with its own ``__setattr__``."""

    x: Any = None
    y: Any = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)


tc.register_dataclass(AttrsSlots, name="tests.pbn.AttrsSlots")
tc.register_dataclass(AttrsCacheHash, name="tests.pbn.AttrsCacheHash")
tc.register_namedtuple(NT, name="tests.pbn.NT")
for _cls in (AttrsSlots, AttrsCacheHash, NT, Mapping):
    named(_cls)

INSTANCES: dict[str, Any] = {
    "plain": Plain(1.0, [2.0], "u"),
    "plain-none": Plain(1.0),
    "frozen": Frozen({"k": 1.0}, (3, (4,))),
    "frozen-slots": FrozenSlots(1.0, None, "z"),
    "return-none-fields": Nones(None, 2),
    "attrs-slots": AttrsSlots((1, 2), 7),
    "attrs-cache-hash": AttrsCacheHash(1, (2,)),
    "namedtuple": NT(Plain(1), FrozenSlots(2)),
    "mapping": Mapping(x=1, y=None),
    "nested": {"a": [Frozen(FrozenSlots(1)), NT(1, 2)], "b": (Plain(Nones(3)),)},
}


def assert_same(back: Any, tree: Any) -> None:
    assert back == tree
    assert type(back) is type(tree)
    assert tc.tree_structure(back) == tc.tree_structure(tree)
    assert tc.tree_leaves(back) == tc.tree_leaves(tree)


@pytest.mark.parametrize("tree", INSTANCES.values(), ids=INSTANCES.keys())
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_roundtrip_by_name_without_init(tree: Any, protocol: int) -> None:
    POST_INIT.clear()
    data = pickle.dumps(tree, protocol=protocol)
    assert b"rebuild_by_name" in data  # by name ...
    back = pickle.loads(data)
    assert_same(back, tree)
    assert POST_INIT == []  # ... and without __init__ / __post_init__


def test_numpy_fields_stay_out_of_band_buffers_at_protocol_5() -> None:
    """The reducer hands field values to pickle as they are, so numpy's own reduction sends
    arrays through ``buffer_callback`` (what Ray and ``multiprocessing.shared_memory`` users
    rely on for zero-copy), and unpickling rebuilds the instance on the very buffers."""
    np = pytest.importorskip("numpy")
    obj = Frozen(x={"w": np.arange(4096.0), "b": np.ones((64, 64), np.float32)}, cfg=(1,))
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    assert b"rebuild_by_name" in data and b"tests.pbn.Frozen" in data
    assert len(buffers) == 2 and len(data) < 1024  # the 48 KiB of arrays are not in the pickle
    back = pickle.loads(data, buffers=buffers)
    assert type(back) is Frozen and back.cfg == (1,)
    for key in ("w", "b"):
        np.testing.assert_array_equal(back.x[key], obj.x[key])
        assert np.shares_memory(back.x[key], obj.x[key])  # no copy on the way


def test_unflatten_calls_init_classes_are_rebuilt_through_init() -> None:
    obj = ByInit(3)
    POST_INIT.clear()
    back = pickle.loads(pickle.dumps(obj))
    assert back == obj
    assert POST_INIT == ["ByInit"]  # as unflatten does for this class


def test_the_pickled_state_is_exactly_the_fields_pickled_by_pickle() -> None:
    obj = Frozen(x={"k": 1.0}, cfg=(3, (4,)))
    rebuild, args = copyreg.dispatch_table[Frozen](obj)
    assert rebuild is _pickle.rebuild_by_name
    # The fields by name, then the names of the static ones (how a later version tells them
    # apart when it migrates).
    assert args == (
        "tests.pbn.Frozen",
        __name__,
        "Frozen",
        {"x": {"k": 1.0}, "cfg": (3, (4,))},
        ("cfg",),
    )
    assert args[3]["x"] is obj.x  # the values themselves, not a converted form
    assert rebuild(*args) == obj
    # The static tuple is pickled as a tuple by pickle (no JSON text anywhere in the stream).
    ops = [op.name for op, _, _ in pickletools.genops(pickle.dumps(obj, protocol=4))]
    assert "TUPLE2" in ops
    assert b'"tuple"' not in pickle.dumps(obj)

    # A static value with no JSON form pickles too (the field allows it).
    @tc.pytree_dataclass(name="tests.pbn.AnyStatic")
    class AnyStatic:
        x: Any
        tag: Any = tc.field(static=True, default="t")

    weird = AnyStatic(1, tag=frozenset({1j}))
    assert copyreg.dispatch_table[AnyStatic](weird)[1][3]["tag"] == frozenset({1j})
    assert _pickle.rebuild_by_name(*copyreg.dispatch_table[AnyStatic](weird)[1]).tag == frozenset(
        {1j}
    )
    # One its annotation refuses is refused when pickled: no loader would read it back.
    with pytest.raises(
        tc.UnserializableStaticError,
        match=r"cannot save static field 'tag' of .*Plain: the value is a frozenset, but the "
        r"field is str; every loader refuses such a value",
    ):
        pickle.dumps(Plain(1, tag=frozenset({1j})))  # type: ignore[arg-type]


def test_the_global_and_the_name_are_stored_once_per_stream() -> None:
    data = pickle.dumps([Plain(i) for i in range(50)], protocol=4)
    assert data.count(b"tests.pbn.Plain") == 1
    assert data.count(b"rebuild_by_name") == 1


def test_attrs_hash_cache_is_reset() -> None:
    obj = AttrsCacheHash(1, (2,))
    h = hash(obj)
    back = pickle.loads(pickle.dumps(obj))
    assert back._attrs_cached_hash is None
    assert hash(back) == h


def test_mapping_outputs_roundtrip_with_their_items() -> None:
    back = pickle.loads(pickle.dumps(Mapping(x=1, y=None)))
    assert list(back.keys()) == ["x"]
    assert back["x"] == 1 and back.y is None


def test_transformers_model_output_roundtrips() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    tc.register_dataclass(
        BaseModelOutputWithPooling, name="tests.pbn.BaseModelOutputWithPooling", override=True
    )
    named(BaseModelOutputWithPooling)
    try:
        out = BaseModelOutputWithPooling(last_hidden_state=torch.ones(2), pooler_output=None)
        data = pickle.dumps(out)
        assert b"tests.pbn.BaseModelOutputWithPooling" in data
        back = pickle.loads(data)
        assert type(back) is BaseModelOutputWithPooling
        assert isinstance(back, transformers.utils.ModelOutput)
        assert list(back.keys()) == ["last_hidden_state"]
        assert back.pooler_output is None and back.hidden_states is None
        assert torch.equal(back[0], out[0]) and torch.equal(back.to_tuple()[0], torch.ones(2))
    finally:
        _pickle.uninstall(BaseModelOutputWithPooling)


# --- copy -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tree", INSTANCES.values(), ids=INSTANCES.keys())
def test_copy_and_deepcopy(tree: Any) -> None:
    POST_INIT.clear()
    assert_same(copy.copy(tree), tree)
    deep = copy.deepcopy(tree)
    assert_same(deep, tree)
    assert POST_INIT == []


def test_copy_is_shallow_and_deepcopy_is_deep() -> None:
    obj = Plain([1], [2])
    shallow = copy.copy(obj)
    assert shallow is not obj and shallow.x is obj.x
    deep = copy.deepcopy(obj)
    assert deep.x == obj.x and deep.x is not obj.x
    shared = [0]
    pair = copy.deepcopy(Plain(shared, shared))
    assert pair.x is pair.y  # the memo is honoured


# --- superseded classes ---------------------------------------------------------------------


def define_again(name: str) -> type:
    @tc.pytree_dataclass(name=name, frozen=True)
    class Rerun:
        x: Any
        tag: str = tc.field(static=True, default="r")

    return named(Rerun)


def test_superseded_instances_refuse_pickling_but_deepcopy(uname: str) -> None:
    Old = define_again(uname)
    old = Old(1)
    assert pickle.loads(pickle.dumps(old)) == old
    New = define_again(uname)
    assert New is not Old and tc.class_for_name(uname) is New
    with pytest.raises(
        tc.UnnamedClassError,
        match=rf"Rerun was defined again .* the name '{uname}' now belongs to the new class; "
        r"this object is an instance of the old class, so rebuild the object from the current "
        r"class before pickling it",
    ):
        pickle.dumps(old)
    with pytest.raises(tc.UnnamedClassError, match="defined again"):
        pickle.dumps([New(2), old])
    deep = copy.deepcopy(old)
    assert type(deep) is Old and deep == old
    assert type(copy.copy(old)) is Old
    assert type(pickle.loads(pickle.dumps(New(2)))) is New


# --- loading where the name is not registered -----------------------------------------------


@named
@tc.pytree_dataclass(name="tests.pbn.Fallback")
class Fallback:
    x: Any
    tag: str = tc.field(static=True, default="f")


def test_unregistered_name_falls_back_to_the_module_path() -> None:
    data = pickle.dumps(Fallback(1, "g"))
    renamed = data.replace(b"tests.pbn.Fallback", b"tests.pbn.Fxllback")  # same length
    assert tc.class_for_name("tests.pbn.Fxllback") is None
    back = pickle.loads(renamed)
    assert type(back) is Fallback and back == Fallback(1, "g")


def test_unregistered_name_and_missing_module_is_a_clear_error() -> None:
    data = pickle.dumps(Fallback(1))
    module = __name__.encode()
    gone = b"x" * len(module)
    tampered = data.replace(b"tests.pbn.Fallback", b"tests.pbn.Fxllback").replace(module, gone)
    with pytest.raises(
        tc.UnregisteredNameError,
        match=r"this pickle uses the serialized name 'tests\.pbn\.Fxllback' \(pickled from "
        r"x+\.Fallback, which cannot be imported: ModuleNotFoundError: .*\), which no class is "
        r"registered under in this process; import the module that defines the class",
    ):
        pickle.loads(tampered)


class _Crafted:
    """What a crafted by-name pickle reduces to: ``rebuild(name, module, qualname, fields)``."""

    def __init__(self, rebuild: Any, name: Any) -> None:
        self.args = (rebuild, name)

    def __reduce__(self) -> Any:
        rebuild, name = self.args
        return (rebuild, (name, __name__, "Fallback", {"x": 1, "tag": "s"}))


@pytest.mark.parametrize("name", [["tests.pbn.Fallback"], {"a": 1}, ("tests.pbn.Fallback",), 7])
@pytest.mark.parametrize("rebuild", [_pickle.rebuild_by_name, _pickle.rebuild_registered])
def test_a_name_that_is_not_a_str_is_an_unregistered_name(rebuild: Any, name: Any) -> None:
    data = pickle.dumps(_Crafted(rebuild, name))
    with pytest.raises(
        tc.UnregisteredNameError, match=r"by the name .*, which is not a serialized"
    ):
        pickle.loads(data)


def test_fields_that_changed_are_a_clear_error() -> None:
    data = pickle.dumps(Fallback(1))
    tampered = data.replace(b"\x8c\x01x", b"\x8c\x01z")  # the field name 'x' -> 'z'
    assert tampered != data
    with pytest.raises(
        tc.TreespecLoadError,
        match=r"of .*Fallback names the field 'z', which the class no longer has \(its fields "
        r"are \['x', 'tag'\]\); if it was renamed, give the field aliases=",
    ):
        pickle.loads(tampered)


# --- install / uninstall --------------------------------------------------------------------


def test_pickle_by_name_false_is_the_opt_out(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, pickle_by_name=False)
    class OptOut:
        x: Any

    assert not _pickle.is_installed(OptOut)
    # pickle's own behaviour: by module path, which a local class has not; Python 3.14's
    # pickle raises PicklingError for it, older ones AttributeError.
    refused = pickle.PicklingError if sys.version_info >= (3, 14) else AttributeError
    with pytest.raises(refused, match=r"Can't (pickle|get) local object"):
        pickle.dumps(OptOut(1))
    assert _pickle.install(OptOut, uname)
    assert _pickle.install(OptOut, uname)  # idempotent
    assert _pickle.is_installed(OptOut)
    assert b"rebuild_by_name" in pickle.dumps(OptOut(1))
    _pickle.uninstall(OptOut)
    assert not _pickle.is_installed(OptOut)
    assert OptOut not in copyreg.dispatch_table
    _pickle.uninstall(OptOut)  # nothing to do


def test_a_reducer_set_by_someone_else_is_kept(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Theirs:
        x: Any

    def reducer(obj: Any) -> Any:
        return (Theirs, (obj.x,))

    copyreg.pickle(Theirs, reducer)
    try:
        assert not _pickle.install(Theirs, uname)
        assert copyreg.dispatch_table[Theirs] is reducer
        _pickle.uninstall(Theirs)
        assert copyreg.dispatch_table[Theirs] is reducer
    finally:
        del copyreg.dispatch_table[Theirs]


# --- fresh processes: the class lives in a module of another name ---------------------------

DEFS = """
import typing
from typing import Any, Literal, NamedTuple
import treeclass as tc
from treeclass import _pickle

@tc.pytree_dataclass(name="{prefix}.Point", frozen=True, slots=True)
class Point:
    x: Any
    y: Any = None
    unit: str = tc.field(static=True, default="m")

@tc.register_namedtuple(name="{prefix}.Pair")
class Pair(NamedTuple):
    first: Any
    second: Any

for cls in (Point, Pair):  # registration did it
    assert _pickle.is_installed(cls)
"""

LOAD = """
import json, pickle, sys
module_b, data_file, mode = sys.argv[1:]  # the folders of modules A and B are on the path
if mode == "renamed":
    defs = __import__(module_b)
obj = pickle.load(open(data_file, "rb"))
point, pair = obj
print(json.dumps({
    "point_module": type(point).__module__,
    "pair_module": type(pair).__module__,
    "values": [point.x, point.y, point.unit, pair.first, pair.second],
    "modules": sorted(m for m in sys.modules if m.startswith("pbn_")),
}))
"""


@pytest.mark.slow
def test_fresh_process_where_the_class_lives_in_another_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uname: str
) -> None:
    tag = uname.rsplit(".", 1)[1]
    module_a, module_b = f"pbn_a_{tag}", f"pbn_b_{tag}"
    folder_a = write_modules(tmp_path / "a", {module_a: DEFS.format(prefix=uname)})
    folder_b = write_modules(tmp_path / "b", {module_b: DEFS.format(prefix=uname)})
    monkeypatch.syspath_prepend(str(folder_a))
    defs = __import__(module_a)
    try:
        data_file = tmp_path / "obj.pkl"
        data_file.write_bytes(pickle.dumps((defs.Point(1, None, "cm"), defs.Pair(2, 3))))
        args = (module_b, str(data_file))
        path = [folder_a, folder_b]
        # The loading program defines the classes in module B: by name, module A is never
        # imported (before, pickle imported it and its registration claimed the names again).
        renamed = report_in(tmp_path, LOAD, *args, "renamed", path=path)
        assert renamed == {
            "point_module": module_b,
            "pair_module": module_b,
            "values": [1, None, "cm", 2, 3],
            "modules": [module_b],
        }
        # No module registers the names: pickle's own module path is the fallback.
        fallback = report_in(tmp_path, LOAD, *args, "fallback", path=path)
        assert fallback["point_module"] == module_a
        assert fallback["values"] == [1, None, "cm", 2, 3]
    finally:
        sys.modules.pop(module_a, None)


@dataclasses.dataclass(frozen=True)
class NotRegistered:
    a: Any
    b: Any = None


def test_fallback_class_that_is_not_registered_is_rebuilt_field_by_field() -> None:
    def rebuild(fields: dict[str, Any]) -> Any:
        return _pickle.rebuild_by_name("tests.pbn.Nowhere", __name__, "NotRegistered", fields)

    POST_INIT.clear()
    assert rebuild({"a": 1, "b": [2]}) == NotRegistered(1, [2])
    with pytest.raises(tc.TreespecLoadError, match=r"has the fields \['a'\], but"):
        rebuild({"a": 1})
    # The safe variant never imports by module path.
    with pytest.raises(
        tc.UnregisteredNameError, match=r"'tests.pbn.Nowhere'.*never import anything"
    ):
        _pickle.rebuild_registered("tests.pbn.Nowhere", __name__, "NotRegistered", {"a": 1})


def test_torch_weights_only_loading_rebuilds_by_name_and_never_imports(tmp_path: Path) -> None:
    """torch's weights-only unpickler allows treeclass instances (the torch adapter lets it,
    with a rebuild that never imports), so torch.load and torch.export.load read them
    without falling back to unrestricted unpickling."""
    torch = pytest.importorskip("torch")
    obj = Frozen(x=torch.ones(2), cfg=(1, 2))
    torch.save([obj], tmp_path / "o.pt")
    (back,) = torch.load(tmp_path / "o.pt", weights_only=True)
    assert type(back) is Frozen and back.cfg == (1, 2) and back.x.tolist() == [1.0, 1.0]
    # A name nobody registered: the module path in the pickle is not imported.
    import zipfile

    with zipfile.ZipFile(tmp_path / "o.pt") as src, zipfile.ZipFile(tmp_path / "n.pt", "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl"):
                data = data.replace(b"tests.pbn.Frozen", b"tests.pbn.Frozzz")
            dst.writestr(info, data)
    with pytest.raises(Exception, match=r"tests.pbn.Frozzz.*never import anything"):
        torch.load(tmp_path / "n.pt", weights_only=True)


# --- the by-name global is no way around pickle_by_name=False (issue 16) ----------------------


def test_rebuild_by_name_refuses_a_class_registered_with_pickle_by_name_false(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, pickle_by_name=False)
    class OptedOut:
        x: Any

    for rebuild in (_pickle.rebuild_by_name, _pickle.rebuild_registered):
        with pytest.raises(
            tc.TreespecLoadError,
            match=rf"rebuild .*OptedOut by the name '{uname}', but the class is registered "
            r"with pickle_by_name=False: its instances are pickled by module path",
        ):
            rebuild(uname, __name__, OptedOut.__qualname__, {"x": 1})


def test_torch_weights_only_refuses_a_crafted_pickle_of_an_opted_out_class(
    tmp_path: Path,
) -> None:
    torch = pytest.importorskip("torch")
    _crafted_load_script = f"""
        import io, json, pickle, sys
        import torch
        import treeclass as tc
        from treeclass import _pickle

        @tc.pytree_dataclass(name="tests.pbn.OptedOut", pickle_by_name=False)
        class OptedOut:
            x: float

        class Crafty(pickle.Pickler):
            def reducer_override(self, obj):
                if type(obj) is OptedOut:
                    return _pickle.rebuild_by_name, (
                        "tests.pbn.OptedOut", "__main__", "OptedOut", {{"x": obj.x}}
                    )
                return NotImplemented

        path = {str(tmp_path / "c.pt")!r}
        torch.save([1.0], path)  # a real archive; its pickle is swapped below
        import zipfile
        buf = io.BytesIO()
        Crafty(buf, protocol=2).dump([OptedOut(1.0)])
        with zipfile.ZipFile(path) as src:
            items = [(i, src.read(i)) for i in src.infolist()]
        with zipfile.ZipFile(path, "w") as dst:
            for info, data in items:
                dst.writestr(info, buf.getvalue() if info.filename.endswith("data.pkl") else data)
        try:
            torch.load(path, weights_only=True)
        except Exception as e:
            print(json.dumps(str(e)))
        else:
            print(json.dumps("loaded"))
    """
    del torch
    out = run_script(_crafted_load_script, timeout=120, preload=FRAMEWORKS).report()
    assert "registered with pickle_by_name=False" in out, out


def test_rebuilding_is_linear_one_rebuilder_per_class(tmp_path: Path) -> None:
    """Each class compiles its rebuild once: loading N instances of a class found by module path
    (no reducer installed) takes linear time and adds one linecache entry, not one per
    instance (which made loading quadratic). 20,000 instances: a fraction of a second when
    linear; each compiling a function adds 20,000 entries (and takes minutes)."""
    module = """
        import treeclass as tc

        @tc.pytree_dataclass
        class Unnamed:
            x: float
            s: str = tc.field(static=True, default="a")
    """
    write_modules(tmp_path, {"pbn_linear_mod": module})
    script = """
        import io, json, linecache, pickle
        import pbn_linear_mod as m
        from treeclass import _pickle

        class Crafty(pickle.Pickler):
            def reducer_override(self, obj):
                if type(obj) is m.Unnamed:
                    return _pickle.rebuild_by_name, (
                        "nobody.Unnamed", m.__name__, "Unnamed", {"x": obj.x, "s": obj.s}
                    )
                return NotImplemented

        buf = io.BytesIO()
        Crafty(buf).dump([m.Unnamed(float(i)) for i in range(20_000)])
        before = len(linecache.cache)
        back = pickle.loads(buf.getvalue())
        assert back[-1] == m.Unnamed(19_999.0), back[-1]
        print(json.dumps(len(linecache.cache) - before))
    """
    out = run_script(script, timeout=240, path=[tmp_path])
    assert out.report() <= 2, out.stdout


# --- the by-name lookup goes straight to a generated rebuild (issue 19) -----------------------


def unpickle_entries(cls: type) -> list[str]:
    """The linecache entries of the generated by-name rebuilds of ``cls``."""
    return [
        k
        for k in linecache.cache
        if k.startswith(f"<treeclass generated {cls.__module__}.{cls.__qualname__} [unpickle]")
    ]


def test_static_values_are_checked_on_every_load_not_only_the_first(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, frozen=True)
    class Checked:
        x: Any
        tag: str = tc.field(static=True, default="a")
        mode: Literal["train", "eval"] = tc.field(static=True, default="eval")
        cfg: tuple[Any, ...] = tc.field(static=True, default=())

    good = Checked(1, "b", "train", (1, 2))
    assert pickle.loads(pickle.dumps(good)) == good  # the generated rebuild is in place now
    bad = [
        ({"tag": 3}, r"field 'tag' of .*Checked: the value is a int, but the field is str"),
        # a str, but not one of the values: the check is not skipped for a str here
        ({"mode": "test"}, r"field 'mode' of .*Checked: 'test' is not one of the field's values"),
        # a tuple, but unhashable: tuples are always checked in a hashable class
        ({"cfg": (1, [2])}, r"field 'cfg' of .*Checked: the value is an unhashable tuple"),
    ]
    for rebuild in (_pickle.rebuild_by_name, _pickle.rebuild_registered):
        for change, message in bad:
            fields = {"x": 1, "tag": "b", "mode": "train", "cfg": (1, 2), **change}
            with pytest.raises(tc.TreespecLoadError, match=rf"cannot load static {message}"):
                rebuild(uname, __name__, Checked.__qualname__, fields)
        assert rebuild(uname, __name__, Checked.__qualname__, vars(good).copy()) == good
    assert len(unpickle_entries(Checked)) == 1


def test_an_opted_out_class_is_refused_on_every_load(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, pickle_by_name=False)
    class OptedOut:
        x: Any

    def load() -> Any:
        return _pickle.rebuild_by_name(uname, __name__, OptedOut.__qualname__, {"x": 1})

    for _ in range(2):
        with pytest.raises(tc.TreespecLoadError, match="registered with pickle_by_name=False"):
            load()
    assert _pickle.install(OptedOut, uname)  # by hand: its pickles name it now
    assert load() == OptedOut(1) and load() == OptedOut(1)
    _pickle.uninstall(OptedOut)
    with pytest.raises(tc.TreespecLoadError, match="registered with pickle_by_name=False"):
        load()


def test_a_rerun_class_takes_the_pickles_loaded_before_by_its_name(uname: str) -> None:
    Old = define_again(uname)
    data = pickle.dumps([Old(1), Old(2)])
    assert [type(o) for o in pickle.loads(data)] == [Old, Old]
    New = define_again(uname)
    assert [type(o) for o in pickle.loads(data)] == [New, New]
    assert pickle.loads(data) == [New(1), New(2)]


def test_earlier_fields_still_evolve_after_current_ones_loaded(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, frozen=True, removed_fields=("gone",))
    class Evolved:
        x: Any = tc.field(aliases=("old_x",))
        new: Any = None
        tag: str = tc.field(static=True, default="t", aliases=("old_tag",))

    def load(fields: dict[str, Any]) -> Any:
        return _pickle.rebuild_by_name(uname, __name__, Evolved.__qualname__, fields)

    assert load({"x": 1, "new": 2, "tag": "u"}) == Evolved(1, 2, "u")
    assert load({"old_x": 1, "gone": 5, "old_tag": "u"}) == Evolved(1, None, "u")
    assert load({"tag": "u", "x": 1, "new": 2}) == Evolved(1, 2, "u")  # another order
    with pytest.raises(tc.TreespecLoadError, match=r"names the field 'y'"):
        load({"x": 1, "y": 2, "tag": "u"})
    with pytest.raises(tc.TreespecLoadError, match=r"cannot load static field 'tag'"):
        load({"old_x": 1, "old_tag": 7})


def test_namedtuples_rebuild_from_their_fields_by_name() -> None:
    name = "tests.pbn.NT"

    def load(fields: Any) -> Any:
        return _pickle.rebuild_by_name(name, __name__, "NT", fields)

    assert pickle.loads(pickle.dumps(NT(1, 2))) == NT(1, 2)
    back = load({"p": 1, "q": 2})
    assert type(back) is NT and back == NT(1, 2)
    assert load({"q": 2, "p": 1}) == NT(1, 2)
    for fields in ({"p": 1}, {"p": 1, "z": 2}, {"p": 1, "q": 2, "r": 3}):
        with pytest.raises(tc.TreespecLoadError, match=r"has the fields .*but .*NT has"):
            load(fields)
    with pytest.raises(tc.TreespecLoadError, match=r"has the fields 'list'"):
        load([1, 2])
    assert len(unpickle_entries(NT)) == 1


def test_one_generated_rebuild_per_class_across_install_and_uninstall(uname: str) -> None:
    @tc.pytree_dataclass(name=uname)
    class Cycled:
        x: Any

    for _ in range(3):
        assert pickle.loads(pickle.dumps([Cycled(1), Cycled(2)])) == [Cycled(1), Cycled(2)]
        _pickle.uninstall(Cycled)
        assert _pickle.rebuild_by_name(uname, __name__, "Cycled", {"x": 3}) == Cycled(3)
        assert _pickle.install(Cycled, uname)
    assert len(unpickle_entries(Cycled)) == 1


def test_a_class_registered_after_a_load_by_module_path_is_rebuilt_as_registered(
    uname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    @dataclasses.dataclass
    class Late:
        x: Any

        def __post_init__(self) -> None:
            POST_INIT.append("Late")

    qualname = f"Late_{uname.replace('.', '_')}"
    Late.__qualname__ = qualname
    monkeypatch.setattr(sys.modules[__name__], qualname, Late, raising=False)
    POST_INIT.clear()
    # Not registered yet: found by module path, rebuilt field by field without __init__.
    back = _pickle.rebuild_by_name(uname, __name__, qualname, {"x": 1})
    assert type(back) is Late and back.x == 1 and POST_INIT == []
    tc.register_dataclass(Late, name=uname, unflatten_calls_init=True)
    data = pickle.dumps(Late(2))
    POST_INIT.clear()
    back = pickle.loads(data)  # as registered: through __init__
    assert type(back) is Late and back.x == 2 and POST_INIT == ["Late"]
    back = _pickle.rebuild_by_name(uname, __name__, qualname, {"x": 3})
    assert type(back) is Late and back.x == 3 and POST_INIT == ["Late", "Late"]


# --- statics no reader takes; the writer's static fields; namedtuple fields ----------------


@tc.pytree_dataclass(name="tests.pbn.Loose", frozen=True)
class Loose:
    w: float
    act: str = tc.field(static=True, default="relu")
    dims: tuple[int, ...] = tc.field(static=True, default=(1,))


@pytest.mark.parametrize("obj", [Loose(1.0, act=abs), Loose(1.0, dims=[1, 2])])  # type: ignore[arg-type]
def test_an_object_no_reader_takes_is_copied_but_never_pickled(obj: Loose) -> None:
    # copy.copy / copy.deepcopy go through the same reducer as pickle: they still copy.
    for copier in (copy.copy, copy.deepcopy):
        twin = copier(obj)
        assert type(twin) is Loose and twin.w == obj.w
        assert (twin.act, twin.dims) == (obj.act, obj.dims)
    # pickle would write what every loader refuses: the writer's error, naming the field.
    with pytest.raises(tc.UnserializableStaticError, match=r"static field '(act|dims)'.*Loose"):
        pickle.dumps(obj)


def test_a_pickle_records_which_fields_were_static(tmp_path: Path) -> None:
    # v1 has data fields x and old; v2's hook renames old -> new. Whether the pickled value of
    # `old` is an array, a float or None, it is a data field: the pickle says so.
    v1 = """
        from typing import Any
        import treeclass as tc

        @tc.pytree_dataclass(name="tests.pbn.Mig")
        class Mig:
            x: Any
            old: Any
            tag: str = tc.field(static=True, default="t")
    """
    v2 = """
        from typing import Any
        import treeclass as tc

        def migrate(state):
            return {**state, "data": ["new" if d == "old" else d for d in state["data"]]}

        @tc.pytree_dataclass(name="tests.pbn.Mig", migrate=migrate)
        class Mig:
            x: Any
            new: Any
            tag: str = tc.field(static=True, default="t")
    """
    report_in(
        tmp_path,
        """
        import json, pickle
        import v1
        for tag, old in [("array", [1.0, 2.0]), ("float", 1.5), ("none", None)]:
            open(f"{tag}.pkl", "wb").write(pickle.dumps(v1.Mig(0, old, tag="s")))
        print(json.dumps(True))
        """,
        modules={"v1": v1},
    )
    (tmp_path / "v1.py").unlink()
    got = report_in(
        tmp_path,
        """
        import json, pickle
        import v2
        out = {}
        for tag in ("array", "float", "none"):
            m = pickle.loads(open(f"{tag}.pkl", "rb").read())
            out[tag] = [type(m).__name__, m.x, m.new, m.tag]
        print(json.dumps(out))
        """,
        modules={"v2": v2},
    )
    assert got == {
        "array": ["Mig", 0, [1.0, 2.0], "s"],
        "float": ["Mig", 0, 1.5, "s"],
        "none": ["Mig", 0, None, "s"],
    }


def test_namedtuple_fields_that_do_not_fit_are_a_load_error() -> None:
    class NTFit(NamedTuple):
        a: int
        b: int

    tc.register_namedtuple(NTFit, name="tests.pbn.NTFit")
    for fields in ({"a": 1}, {"a": 1, "b": 2, "c": 3}, 5):
        with pytest.raises(tc.TreespecLoadError, match=r"'tests.pbn.NTFit' has the fields"):
            _pickle.rebuild_by_name("tests.pbn.NTFit", "m", "q", fields)  # type: ignore[arg-type]


def test_reducer_is_generated_at_first_pickling_and_takes_the_table_entry() -> None:
    import copyreg
    import pickle

    @tc.pytree_dataclass(name="tests.pickle.Deferred")
    class Deferred:
        x: float

    first = copyreg.dispatch_table[Deferred]
    assert pickle.loads(pickle.dumps(Deferred(1.0))) == Deferred(1.0)
    made = copyreg.dispatch_table[Deferred]
    assert made is not first and _pickle.is_installed(Deferred)
    assert first(Deferred(2.0)) == made(Deferred(2.0))  # the first one still works
