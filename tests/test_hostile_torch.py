"""``treeclass.torch``'s loaders under hostile input (issue 13; the log item of issue 11).

``treeclass.torch.treespec_loads`` never imports or resolves anything by module path and raises
only treeclass errors. ``treeclass.torch.load`` never unpickles anything that can run code, never
imports by name from the archive, never hands the archive text that torch evaluates as Python,
and names a missing class whatever the logging configuration, showing the treeclass error alone.

Every archive attack is a real ``.pt2`` file: a program exported and saved by torch, with one part
replaced by a payload whose only effect is to create a marker file. Each is loaded in a fresh
process with a timeout; the test asserts the marker was never created and the load was refused
with a treeclass error. ``torch.export.load`` itself runs every one of these payloads (the
``plain_torch_runs_it`` column of each case records what plain torch does, checked too, so the
attacks are known to be live).
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import uuid
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _subproc import run_script

torch = pytest.importorskip("torch")
pt = pytest.importorskip("torch.utils._pytree")

import treeclass as tc  # noqa: E402
import treeclass.torch as tct  # noqa: E402

pytestmark = [pytest.mark.torch]

TIMEOUT = 180.0

# --- treespec_loads ------------------------------------------------------------------------------


def _node(type_: str | None, context: Any, children: list[Any] | None = None) -> dict[str, Any]:
    return {"type": type_, "context": context, "children_spec": children or []}


LEAF = _node(None, None)


def _doc(root: dict[str, Any]) -> str:
    return json.dumps([1, root])


@pytest.fixture
def marker_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """An importable module whose import creates a marker file (it must never be imported)."""
    name = f"tc_marker_{uuid.uuid4().hex[:10]}"
    marker = tmp_path / f"{name}.imported"
    (tmp_path / f"{name}.py").write_text(
        f"import enum\nopen({str(marker)!r}, 'w').write('imported')\n"
        "class E(enum.Enum):\n    A = 1\n"
        "def factory():\n    return 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name, marker


def test_a_defaultdict_factory_is_never_resolved_by_module_path() -> None:
    text = _doc(
        _node(
            "collections.defaultdict",
            {
                "default_factory_module": "os",
                "default_factory_name": "system",
                "dict_context": ["a"],
            },
            [LEAF],
        )
    )
    with pytest.raises(tc.TreespecLoadError, match=r"default_factory.*os\.system|os\.system"):
        tct.treespec_loads(text)


def test_a_defaultdict_factory_module_is_never_imported(marker_module: tuple[str, Path]) -> None:
    name, marker = marker_module
    text = _doc(
        _node(
            "collections.defaultdict",
            {"default_factory_module": name, "default_factory_name": "factory", "dict_context": []},
        )
    )
    with pytest.raises(tc.TreespecLoadError):
        tct.treespec_loads(text)
    assert not marker.exists() and name not in sys.modules


def test_an_enum_in_a_context_is_never_imported(marker_module: tuple[str, Path]) -> None:
    name, marker = marker_module
    key = {"__enum__": True, "fqn": f"{name}:E", "name": "A"}
    text = _doc(_node("builtins.dict", json.dumps([key]), [LEAF]))
    with pytest.raises(tc.TreespecLoadError, match="enum"):
        tct.treespec_loads(text)
    assert not marker.exists() and name not in sys.modules


def test_a_missing_module_in_an_enum_context_is_a_load_error() -> None:
    key = {"__enum__": True, "fqn": "nowhere_at_all_xyz:E", "name": "A"}
    with pytest.raises(tc.TreespecLoadError):
        tct.treespec_loads(_doc(_node("builtins.dict", json.dumps([key]), [LEAF])))


@pytest.mark.parametrize(
    "text",
    [
        _doc(_node("collections.defaultdict", json.dumps({"x": 1}))),  # torch: AssertionError
        _doc(_node("collections.defaultdict", "not an object")),
        _doc(_node("builtins.dict", "[1,", [LEAF])),  # a context that is not JSON
        _doc(_node("builtins.dict", json.dumps(["a", "b"]), [LEAF])),  # 2 keys, 1 child
        _doc(_node("builtins.tuple", "null", [LEAF, 5])),  # type: ignore[list-item]
        _doc(_node("collections.deque", json.dumps("x"), [LEAF])),
        json.dumps([1, LEAF, "extra"]),
        json.dumps([2, LEAF]),
        json.dumps({"protocol": 1}),
        '[1, {"type": null, "type": "builtins.list", "context": "null", "children_spec": []}]',
        "[1, " * 5000 + "]" * 5000,
        b"\xff\xfe",
        None,
    ],
)
def test_bad_input_is_a_treespec_load_error(text: Any) -> None:
    with pytest.raises(tc.TreespecLoadError):
        tct.treespec_loads(text)


def test_a_deep_spec_never_leaks_a_recursion_error() -> None:
    # Written as text: json.dumps itself cannot encode a 5000-deep object.
    opening = '{"type": "builtins.list", "context": "null", "children_spec": ['
    text = "[1, " + opening * 5000 + json.dumps(LEAF) + "]}" * 5000 + "]"
    try:
        spec = tct.treespec_loads(text)
    except tc.TreespecLoadError:
        return
    assert spec.num_leaves == 1


@pytest.mark.parametrize("name", ["NO_SERIALIZED_TYPE_NAME_FOUND", "nowhere.Missing"])
def test_an_unregistered_name_is_named(name: str) -> None:
    with pytest.raises(tc.UnregisteredNameError, match=re.escape(repr(name))):
        tct.treespec_loads(_doc(_node(name, "null", [LEAF])))
    with pytest.raises(tc.UnregisteredNameError, match=re.escape(repr(name))):
        tct.treespec_loads(_doc(_node("collections.namedtuple", name, [LEAF])))


@tc.pytree_dataclass(name="tests.hostile_torch.Out")
class Out:
    logits: Any
    loss: Any = None
    mode: str = tc.field(static=True, default="eval")
    dims: tuple[int, ...] = tc.field(static=True, default=(1, 2))


class Pair(NamedTuple):
    a: Any
    b: Any


tc.register_namedtuple(Pair, name="tests.hostile_torch.Pair")


@pytest.mark.parametrize(
    "tree",
    [
        1,
        (1, [2, 3]),
        {"b": 1, "a": (2, 3)},
        {1: "x", 2.5: "y"},
        OrderedDict([("z", 1), ("a", 2)]),
        defaultdict(list, {"k": 1}),
        deque([1, 2], maxlen=3),
        torch.Size([2, 3]),
        Out(1.0, mode="train"),
        [Out(1.0, loss=2.0), Pair(1, Out(3.0))],
        {"nested": [Pair(Out(1.0), None)]},
    ],
    ids=lambda t: type(t).__name__,
)
def test_what_torch_writes_loads_as_torch_loads_it(tree: Any) -> None:
    spec = pt.tree_structure(tree)
    text = pt.treespec_dumps(spec)
    loaded = tct.treespec_loads(text)
    assert loaded == spec
    assert loaded == pt.treespec_loads(text)
    leaves = pt.tree_leaves(tree)
    assert pt.tree_unflatten(leaves, loaded) == pt.tree_unflatten(leaves, spec)


# --- load: hostile archives ----------------------------------------------------------------------


class TinyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: Any, d: dict[str, Any]) -> Any:
        return self.lin(x) + d["k"]


class DynModel(torch.nn.Module):
    def forward(self, x: Any, y: Any) -> Any:
        return x + y * x.shape[0]


def _records(path: Path) -> dict[str, bytes]:
    from torch.export.pt2_archive import PT2ArchiveReader

    with PT2ArchiveReader(str(path)) as reader:
        return {n: reader.read_bytes(n) for n in reader.get_file_names()}


_WRITER_OWNED = {".data/version", ".data/serialization_id", "byteorder"}


def _write(path: Path, records: dict[str, bytes]) -> None:
    from torch.export.pt2_archive import PT2ArchiveWriter

    with PT2ArchiveWriter(str(path)) as writer:
        for name, data in records.items():
            if name not in _WRITER_OWNED:
                writer.write_bytes(name, data)


class _Payload:
    """Unpickling it creates the marker file (``open(marker, "w")``), nothing else."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str, str]]:
        return (open, (self.marker, "w"))


def _torch_pickle(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _edit_model(records: dict[str, bytes], edit: Callable[[dict[str, Any]], None]) -> None:
    model = json.loads(records["models/model.json"])
    edit(model)
    records["models/model.json"] = json.dumps(model).encode()


def _edit_in_spec(records: dict[str, bytes], edit: Callable[[list[Any]], None]) -> None:
    def change(model: dict[str, Any]) -> None:
        signature = model["graph_module"]["module_call_graph"][0]["signature"]
        spec = json.loads(signature["in_spec"])
        edit(spec)
        signature["in_spec"] = json.dumps(spec)

    _edit_model(records, change)


def _dict_node(spec: list[Any]) -> dict[str, Any]:
    """The spec node of the ``d`` argument of TinyModel: ``((x, d), {})``."""
    node: dict[str, Any] = spec[1]["children_spec"][0]["children_spec"][1]
    assert node["type"] == "builtins.dict"
    return node


class Archives:
    """Valid archives, and one hostile archive per attack, written once per session."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        torch.manual_seed(0)
        x = torch.randn(2, 3)
        self.tiny = torch.export.export(TinyModel(), (x, {"k": x}))
        torch.export.save(self.tiny, folder / "tiny.pt2")
        dim = torch.export.Dim("b", min=3, max=64)
        z = torch.randn(4, 3)
        dyn = torch.export.export(DynModel(), (z, z), dynamic_shapes=({0: dim}, {0: dim}))
        torch.export.save(dyn, folder / "dyn.pt2")
        self.x = x

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.pt2"

    def build(self, attack: str, marker: Path, marker_module: str) -> Path:
        """Write the archive of ``attack``; unpacking its payload would create ``marker``."""
        base = "dyn" if attack in ("sympy_expr", "guards_code") else "tiny"
        records = _records(self.path(base))
        payload = _Payload(str(marker))
        if attack == "sample_inputs_pickle":
            records["data/sample_inputs/model.pt"] = _torch_pickle(((payload,), {}))
        elif attack == "pickled_weight":
            config = json.loads(records["data/weights/model_weights_config.json"])
            entry = config["config"]["lin.weight"]
            entry["use_pickle"] = True
            records["data/weights/" + entry["path_name"]] = _torch_pickle(payload)
            records["data/weights/model_weights_config.json"] = json.dumps(config).encode()
        elif attack == "legacy_weights_pickle":
            records["data/weights/model.pt"] = _torch_pickle({"lin.weight": payload})
        elif attack == "opaque_constant":
            import pickle

            config = {
                "config": {
                    "evil": {
                        "path_name": "opaque_obj_0",
                        "is_param": False,
                        "use_pickle": True,
                        "tensor_meta": None,
                    }
                }
            }
            records["data/constants/model_constants_config.json"] = json.dumps(config).encode()
            records["data/constants/opaque_obj_0"] = pickle.dumps(payload)
        elif attack == "enum_context":
            key = {"__enum__": True, "fqn": f"{marker_module}:E", "name": "A"}

            def enum_key(spec: list[Any]) -> None:
                _dict_node(spec)["context"] = json.dumps([key])

            _edit_in_spec(records, enum_key)
        elif attack == "defaultdict_factory":

            def factory(spec: list[Any]) -> None:
                node = _dict_node(spec)
                node["type"] = "collections.defaultdict"
                node["context"] = {
                    "default_factory_module": marker_module,
                    "default_factory_name": "factory",
                    "dict_context": ["k"],
                }

            _edit_in_spec(records, factory)
        elif attack == "sympy_expr":
            code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
            text = records["models/model.json"].decode()
            text, n = re.subn(
                r'"expr_str": "[^"]*"', lambda _: f'"expr_str": {json.dumps(code)}', text
            )
            assert n
            records["models/model.json"] = text.encode()
        elif attack == "guards_code":
            code = f"__import__('pathlib').Path({str(marker)!r}).touch() is None"

            def guard(model: dict[str, Any]) -> None:
                model["guards_code"] = [code]

            _edit_model(records, guard)
        elif attack == "aotinductor":
            records["data/aotinductor/model/model.wrapper.so"] = b"\x7fELF not really"
        else:  # pragma: no cover
            raise AssertionError(attack)
        path = self.folder / f"{attack}_{uuid.uuid4().hex[:6]}.pt2"
        _write(path, records)
        return path


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Archives:
    return Archives(tmp_path_factory.mktemp("archives"))


_LOAD = """
import json, logging, os, sys
import torch
import treeclass as tc
import treeclass.torch as tct
loader, path, marker, call = sys.argv[1:5]
report = {}
try:
    if loader == "plain":
        ep = torch.export.load(path)
    else:
        ep = tct.load(path)
    report["loaded"] = True
    if call == "call":
        x = torch.randn(4, 3)
        ep.module()(x, x)
        report["called"] = True
except BaseException as e:
    report["error"] = type(e).__name__
    report["treeclass_error"] = isinstance(e, tc.TreeclassError)
    report["message"] = str(e)
report["marker"] = os.path.exists(marker)
print(json.dumps(report))
"""

ATTACKS = {
    # attack: (what the payload is, call the module after loading)
    "sample_inputs_pickle": ("example inputs", False),
    "pickled_weight": ("weight", False),
    "legacy_weights_pickle": ("weight", False),
    "opaque_constant": ("constant", False),
    "enum_context": ("enum", False),
    "defaultdict_factory": ("default_factory", False),
    "sympy_expr": ("expr", False),
    "guards_code": ("guard", True),
    "aotinductor": ("AOTInductor", False),
}


def _load_fresh(
    loader: str, path: Path, marker: Path, call: bool, module_dir: Path
) -> dict[str, Any]:
    outcome = run_script(
        _LOAD,
        loader,
        str(path),
        str(marker),
        "call" if call else "",
        timeout=TIMEOUT,
        env={"PYTHONPATH": f"{module_dir}"},
    )
    assert not outcome.timed_out and not outcome.crashed, outcome.describe()
    report: dict[str, Any] = outcome.report()
    return report


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_hostile_archive_is_refused_and_runs_nothing(
    archives: Archives, attack: str, tmp_path: Path
) -> None:
    what, call = ATTACKS[attack]
    name = f"tc_marker_{uuid.uuid4().hex[:10]}"
    marker = tmp_path / "payload.ran"
    (tmp_path / f"{name}.py").write_text(
        f"import enum\nopen({str(marker)!r}, 'w').write('imported')\n"
        "class E(enum.Enum):\n    A = 1\ndef factory():\n    return 0\n"
    )
    path = archives.build(attack, marker, name)

    ours = _load_fresh("treeclass", path, marker, call, tmp_path)
    assert ours["marker"] is False, f"treeclass.torch.load ran the {attack} payload: {ours}"
    assert ours.get("treeclass_error") is True, ours
    assert re.search(what, ours["message"], re.IGNORECASE), ours
    assert "trusted=True" in ours["message"] or attack in ("enum_context", "defaultdict_factory"), (
        ours
    )


@pytest.mark.slow
# The AOTInductor archive holds a fake shared library (building a real one needs a compiler
# toolchain), which torch fails to load, so that payload cannot be shown live here.
@pytest.mark.parametrize("attack", [a for a in ATTACKS if a != "aotinductor"])
def test_plain_torch_export_load_runs_the_payload(
    archives: Archives, attack: str, tmp_path: Path
) -> None:
    # Keeps the attacks honest: each payload is live against torch's own loader (torch 2.13.0).
    _, call = ATTACKS[attack]
    name = f"tc_marker_{uuid.uuid4().hex[:10]}"
    marker = tmp_path / "payload.ran"
    (tmp_path / f"{name}.py").write_text(
        f"import enum\nopen({str(marker)!r}, 'w').write('imported')\n"
        "class E(enum.Enum):\n    A = 1\ndef factory():\n    return 0\n"
    )
    path = archives.build(attack, marker, name)
    plain = _load_fresh("plain", path, marker, call, tmp_path)
    assert plain["marker"] is True, plain


# --- load: what must keep working ----------------------------------------------------------------


_VALID = """
import json, logging, sys
import torch
import treeclass as tc
import treeclass.torch as tct
path, trusted, disable_logging = sys.argv[1], sys.argv[2] == "trusted", sys.argv[3] == "quiet"
if disable_logging:
    logging.disable(logging.CRITICAL)
report = {}
try:
    ep = tct.load(path, trusted=True) if trusted else tct.load(path)
    x = torch.randn(2, 3)
    out = ep.module()(x, {"k": x})
    report["ok"] = tuple(out.shape) == (2, 3)
except BaseException as e:
    report["error"] = type(e).__name__
    report["message"] = str(e)
    report["cause"] = repr(e.__cause__)
print(json.dumps(report))
"""


@pytest.mark.slow
def test_a_tensor_only_archive_loads(archives: Archives, tmp_path: Path) -> None:
    outcome = run_script(_VALID, str(archives.path("tiny")), "", "", timeout=TIMEOUT)
    assert outcome.report() == {"ok": True}


@pytest.mark.slow
def test_example_inputs_holding_classes_load_by_name_and_module_paths_need_trust(
    tmp_path: Path,
) -> None:
    # torch pickles the example inputs. A named class pickles by its name (one allow-listed
    # treeclass global that never imports), so the safe loader reads it; a class registered with
    # pickle_by_name=False pickles by module path, which only trusted=True may import.
    folder = tmp_path / "defs"
    folder.mkdir()
    module = f"tc_hostile_defs_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(
        "import typing, torch\nimport treeclass as tc\n"
        f"@tc.pytree_dataclass(name='tests.{module}.In')\n"
        "class In:\n    x: torch.Tensor\n    y: typing.Optional[torch.Tensor] = None\n"
        f"@tc.pytree_dataclass(name='tests.{module}.ByPath', pickle_by_name=False)\n"
        "class ByPath:\n    x: torch.Tensor\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x, d):\n        return x + d['k'].x\n"
    )
    script = f"""
import json, sys, torch
sys.path.insert(0, {str(folder)!r})
import {module} as defs
import treeclass as tc, treeclass.torch as tct
x = torch.randn(2, 3)
report = {{}}
for cls in (defs.In, defs.ByPath):
    path = {str(tmp_path)!r} + "/" + cls.__name__ + ".pt2"
    ep = torch.export.export(defs.M(), (x, {{"k": cls(x)}}))
    torch.export.save(ep, path)
    try:
        got = tct.load(path).example_inputs[0][1]["k"]
        report[cls.__name__] = [type(got) is cls, bool(torch.equal(got.x, x))]
    except tc.TreeclassError as e:
        report[cls.__name__] = str(e)
    got = tct.load(path, trusted=True).example_inputs[0][1]["k"]
    report[cls.__name__ + "-trusted"] = [type(got) is cls, bool(torch.equal(got.x, x))]
print(json.dumps(report))
"""
    report = run_script(script, timeout=TIMEOUT).report()
    assert report["In"] == [True, True], report
    assert report["In-trusted"] == [True, True], report
    assert report["ByPath-trusted"] == [True, True], report
    refused = report["ByPath"]
    assert isinstance(refused, str), report
    assert "example inputs" in refused and "trusted=True" in refused, report
    assert f"{module}.ByPath" in refused, report


@pytest.mark.slow
def test_a_missing_name_is_named_whatever_the_logging(tmp_path: Path) -> None:
    script = """
import json, logging, sys, typing, torch
import treeclass as tc, treeclass.torch as tct
@tc.pytree_dataclass(name="tests.hostile_torch.Gone")
class Gone:
    x: torch.Tensor
class M(torch.nn.Module):
    def forward(self, g):
        return g.x * 2
x = torch.randn(2, 3)
tct.save(torch.export.export(M(), (Gone(x),)), sys.argv[1])
"""
    path = tmp_path / "gone.pt2"
    outcome = run_script(script, str(path), timeout=TIMEOUT)
    assert outcome.returncode == 0, outcome.describe()
    for trusted, quiet in (("", ""), ("", "quiet"), ("trusted", ""), ("trusted", "quiet")):
        outcome = run_script(_VALID, str(path), trusted, quiet, timeout=TIMEOUT)
        report = outcome.report()
        assert report["error"] == "UnregisteredNameError", report
        assert "'tests.hostile_torch.Gone'" in report["message"], report
        # The treeclass error alone: no torch warning traceback on stderr, no torch cause.
        assert "Traceback" not in outcome.stderr and "W1" not in outcome.stderr, outcome.stderr
        assert report["cause"] == "None", report


def test_load_takes_trusted_as_a_keyword_that_is_off_by_default() -> None:
    import inspect

    parameter = inspect.signature(tct.load).parameters["trusted"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is False


def test_no_torch_warning_is_logged_for_a_missing_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = """
import sys, torch
import treeclass as tc, treeclass.torch as tct
@tc.pytree_dataclass(name="tests.hostile_torch.Gone2")
class Gone2:
    x: torch.Tensor
class M(torch.nn.Module):
    def forward(self, g):
        return g.x * 2
tct.save(torch.export.export(M(), (Gone2(torch.randn(2, 3)),)), sys.argv[1])
print("{}")
"""
    path = tmp_path / "gone2.pt2"
    assert run_script(script, str(path), timeout=TIMEOUT).returncode == 0
    with caplog.at_level(logging.DEBUG), pytest.raises(tc.UnregisteredNameError):
        tct.load(path)
    torch_records = [r for r in caplog.records if r.name.startswith("torch")]
    assert torch_records == [], [r.getMessage()[:200] for r in torch_records]


_DYN = """
import json, sys, torch
import treeclass.torch as tct
ep = tct.load(sys.argv[1])
x = torch.randn(5, 3)
out = ep.module()(x, x)
print(json.dumps({"ok": bool(torch.allclose(out, x + x * 5))}))
"""


@pytest.mark.slow
def test_a_program_with_symbolic_sizes_loads(archives: Archives) -> None:
    # The symbolic sizes (sympy expressions) and range constraints torch writes pass the checks.
    outcome = run_script(_DYN, str(archives.path("dyn")), timeout=TIMEOUT)
    assert outcome.report() == {"ok": True}


def test_a_file_object_is_checked_and_left_where_it_was(archives: Archives, tmp_path: Path) -> None:
    marker = tmp_path / "payload.ran"
    hostile = archives.build("sample_inputs_pickle", marker, "unused_module_name")
    with open(hostile, "rb") as f:
        f.read(3)
        f.seek(0)
        with pytest.raises(tct.UnsafeArchiveError, match="example inputs"):
            tct.load(f)
        assert f.tell() == 0
    assert not marker.exists()
    with open(archives.path("tiny"), "rb") as f:
        ep = tct.load(f)
    x = torch.randn(2, 3)
    assert tuple(ep.module()(x, {"k": x}).shape) == (2, 3)


def test_the_unsafe_archive_error_is_a_load_error() -> None:
    assert issubclass(tct.UnsafeArchiveError, tc.TreespecLoadError)
    assert issubclass(tct.UnsafeArchiveError, ValueError)
