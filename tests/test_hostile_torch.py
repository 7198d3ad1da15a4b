"""``treeclass.torch``'s loaders: hostile treespecs, missing classes, the weights-only switch.

``treeclass.torch.treespec_loads`` never imports or resolves anything by module path and raises
only treeclass errors (issue 13). ``treeclass.torch.load`` is ``torch.export.load`` -- it adds
no safety: a ``.pt2`` archive can run code when torch loads it (issue 16) -- that names a class
that is not registered, whatever the logging configuration, with the treeclass error alone
(the log item of issue 11). ``treeclass.torch.allow_weights_only`` takes treeclass's by-name
rebuild global off torch's weights-only allow-list and puts it back (issue 16). Loads and the
switch run in fresh processes.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from collections import OrderedDict, defaultdict, deque
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _subproc import FRAMEWORKS, run_script

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


# --- load: what must keep working, and missing classes named ---------------------------------


class TinyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: Any, d: dict[str, Any]) -> Any:
        return self.lin(x) + d["k"]


class DynModel(torch.nn.Module):
    def forward(self, x: Any, y: Any) -> Any:
        return x + y * x.shape[0]


@tc.pytree_dataclass(name="tests.hostile_torch.Gone")
class Gone:
    """Registered in this process only: the loading process does not know the name."""

    x: Any


class GoneModel(torch.nn.Module):
    def forward(self, g: Gone) -> Any:
        return g.x * 2


# Each job of the loading process: (what, archive, as a file object?, logging disabled?).
_JOBS = [
    *(("valid", "gone.pt2", as_file, quiet) for as_file in ("", "file") for quiet in ("", "quiet")),
    ("valid", "tiny.pt2", "", ""),
    ("valid", "tiny.pt2", "file", ""),
    ("dyn", "dyn.pt2", "", ""),
]


@pytest.fixture(scope="module")
def loads(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], Any]:
    """What one fresh process reports for each of ``_JOBS``, with the stderr of each job.

    The archives are written here: ``gone.pt2`` (example inputs of a class the loading process
    does not define), ``tiny.pt2`` (tensor inputs) and ``dyn.pt2`` (symbolic sizes). The jobs
    share one process (an interpreter and a torch import each would cost seconds); the ones
    that must fail come first, and each job's stderr is captured on its own.
    """
    folder = tmp_path_factory.mktemp("archives")
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    tct.save(torch.export.export(GoneModel(), (Gone(x),)), folder / "gone.pt2")
    torch.export.save(torch.export.export(TinyModel(), (x, {"k": x})), folder / "tiny.pt2")
    dim = torch.export.Dim("b", min=3, max=64)
    z = torch.randn(4, 3)
    dyn = torch.export.export(DynModel(), (z, z), dynamic_shapes=({0: dim}, {0: dim}))
    torch.export.save(dyn, folder / "dyn.pt2")
    jobs = [[what, str(folder / name), as_file, quiet] for what, name, as_file, quiet in _JOBS]
    results = run_script(_LOADS, json.dumps(jobs), timeout=TIMEOUT, preload=FRAMEWORKS).report()
    return {job: result for job, result in zip(_JOBS, results, strict=True)}


_LOADS = """
import json, logging, os, sys, tempfile
import torch
import treeclass as tc
import treeclass.torch as tct


def valid(path, as_file, disable_logging):
    if disable_logging:
        logging.disable(logging.CRITICAL)
    report = {}
    try:
        if as_file:
            with open(path, "rb") as f:
                f.read(7)
                f.seek(0)
                try:
                    ep = tct.load(f)
                finally:
                    report["position"] = f.tell()
        else:
            ep = tct.load(path)
        x = torch.randn(2, 3)
        out = ep.module()(x, {"k": x})
        report["ok"] = tuple(out.shape) == (2, 3)
    except BaseException as e:
        report["error"] = type(e).__name__
        report["message"] = str(e)
        report["cause"] = repr(e.__cause__)
    finally:
        logging.disable(logging.NOTSET)
    return report


def dyn(path, *_):
    ep = tct.load(path)
    x = torch.randn(5, 3)
    out = ep.module()(x, x)
    return {"ok": bool(torch.allclose(out, x + x * 5))}


def with_stderr(job, *args):
    # The job's own stderr (torch's log handlers and C++ warnings write to file descriptor 2).
    sys.stderr.flush()
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            report = job(*args)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        return {"report": report, "stderr": err.read().decode(errors="replace")}


jobs = {"valid": valid, "dyn": dyn}
print(json.dumps([with_stderr(jobs[what], *args) for what, *args in json.loads(sys.argv[1])]))
"""


@pytest.mark.slow
def test_a_tensor_only_archive_loads_from_a_name_and_a_file(loads: Any) -> None:
    assert loads["valid", "tiny.pt2", "", ""]["report"] == {"ok": True}
    report = loads["valid", "tiny.pt2", "file", ""]["report"]
    assert report["ok"] is True, report


@pytest.mark.slow
def test_a_program_with_symbolic_sizes_loads(loads: Any) -> None:
    assert loads["dyn", "dyn.pt2", "", ""]["report"] == {"ok": True}


def test_load_has_no_trust_switch() -> None:
    # The archive checks are gone (issue 16): load takes torch.export.load's arguments only.
    import inspect

    assert list(inspect.signature(tct.load).parameters) == [
        "f",
        "extra_files",
        "expected_opset_version",
    ]


@pytest.mark.slow
def test_a_missing_name_is_named_whatever_the_logging(loads: Any) -> None:
    for as_file, quiet in (("", ""), ("", "quiet"), ("file", ""), ("file", "quiet")):
        job = loads["valid", "gone.pt2", as_file, quiet]
        report, stderr = job["report"], job["stderr"]
        assert report["error"] == "UnregisteredNameError", report
        assert "'tests.hostile_torch.Gone'" in report["message"], report
        assert "import the module that defines" in report["message"], report
        # The treeclass error alone: no torch warning traceback on stderr, no torch cause.
        assert "Traceback" not in stderr and "W1" not in stderr, stderr
        assert report["cause"] == "None", report
        if as_file:
            assert report["position"] == 0, report  # put back where the load started


_GONE = """
import sys, torch
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


def test_no_torch_warning_is_logged_for_a_missing_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = _GONE.replace("Gone", "Gone2") + "print('{}')\n"
    path = tmp_path / "gone2.pt2"
    assert run_script(script, str(path), timeout=TIMEOUT, preload=FRAMEWORKS).returncode == 0
    with caplog.at_level(logging.DEBUG), pytest.raises(tc.UnregisteredNameError, match="Gone2"):
        tct.load(path)
    torch_records = [r for r in caplog.records if r.name.startswith("torch")]
    assert torch_records == [], [r.getMessage()[:200] for r in torch_records]


def _defs_module(folder: Path) -> str:
    """A module defining a by-name class, a by-module-path class and a model taking them."""
    folder.mkdir(exist_ok=True)
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
    return module


_SAVE_WITH_EXAMPLE_INPUTS = """
x = torch.randn(2, 3)
for cls in (defs.In, defs.ByPath):
    ep = torch.export.export(defs.M(), (x, {"k": cls(x)}))
    torch.export.save(ep, files + "/" + cls.__name__ + ".pt2")
"""

_LOAD_WITH_EXAMPLE_INPUTS = """
import json, logging, sys, torch
import treeclass as tc, treeclass.torch as tct
folder, module, files, importable, save = sys.argv[1:6]


class Names(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(str(record.msg))


names = Names()
# torch sets propagate=False on some of its loggers: listen on each one torch.export.load uses.
for logger in ("torch", "torch.export", "torch._export.serde.serialize"):
    logging.getLogger(logger).addHandler(names)
if importable:
    sys.path.insert(0, folder)
    defs = __import__(module)
if save:
    exec(sys.argv[6])
reports = {}
# One load with treeclass's weights-only global on, then (where importable) one with it off.
for allow in ("on", "off") if importable else ("on",):
    if allow == "off":
        tct.allow_weights_only(False)
    report = reports[allow] = {}
    for cls in ("In", "ByPath"):
        del names.messages[:]
        try:
            (x, d), _ = tct.load(files + "/" + cls + ".pt2").example_inputs
            got = d["k"]
            report[cls] = {"type": type(got).__name__, "same": bool(torch.equal(got.x, x))}
        except Exception as e:
            report[cls] = {
                "error": type(e).__name__, "message": str(e), "cause": repr(e.__cause__)
            }
        report[cls]["fell_back"] = any("weights_only=False" in m for m in names.messages)
print(json.dumps(reports))
"""


@pytest.mark.slow
def test_example_inputs_load_by_name_and_missing_classes_are_named(tmp_path: Path) -> None:
    # torch pickles the example inputs. A named class pickles by its name: one global on the
    # weights-only allow-list, so torch reads it with weights_only=True (no fallback). A class
    # registered with pickle_by_name=False pickles by module path: torch falls back to full
    # unpickling, which imports the module (torch's behaviour; the log says so).
    folder = tmp_path / "defs"
    module = _defs_module(folder)
    files = str(tmp_path)

    def load(importable: str, *save: str) -> Any:
        args = (str(folder), module, files, importable, *save)
        return run_script(
            _LOAD_WITH_EXAMPLE_INPUTS, *args, timeout=TIMEOUT, preload=FRAMEWORKS
        ).report()

    # The process that imports the module saves the archives first, then loads them.
    reports = load("importable", "save", _SAVE_WITH_EXAMPLE_INPUTS)
    report = reports["on"]
    assert report["In"] == {"type": "In", "same": True, "fell_back": False}, report
    assert report["ByPath"] == {"type": "ByPath", "same": True, "fell_back": True}, report

    # Switched off, the by-name pickle is refused by weights-only loading: torch falls back.
    report = reports["off"]
    assert report["In"] == {"type": "In", "same": True, "fell_back": True}, report

    # Not imported (and not importable): each missing class is an UnregisteredNameError
    # naming its registered name; torch's log about the load is not shown.
    report = load("", "")["on"]
    for cls in ("In", "ByPath"):
        assert report[cls]["error"] == "UnregisteredNameError", report
        assert f"'tests.{module}.{cls}'" in report[cls]["message"], report
        assert report[cls]["fell_back"] is False, report
    # pickle_by_name=False: found in the program's treespec; the failed import is the cause.
    assert "ModuleNotFoundError" in report["ByPath"]["cause"], report


# --- torch.load(weights_only=True) and the by-name rebuild global ------------------------------

_WEIGHTS_ONLY = """
import io, json, pickle, sys, torch
import treeclass as tc

@tc.pytree_dataclass(name="tests.hostile_torch.Weights")
class Weights:
    w: torch.Tensor

buf = io.BytesIO()
torch.save({"p": Weights(torch.ones(2))}, buf)
data = buf.getvalue()
ENTRY = "treeclass._pickle.rebuild_by_name"


def listed():
    allowed = torch.serialization.get_safe_globals()
    return any(isinstance(g, tuple) and g[1] == ENTRY for g in allowed)


def weights_only_load():
    try:
        got = torch.load(io.BytesIO(data), weights_only=True)["p"]
        return [type(got).__name__, got.w.tolist()]
    except pickle.UnpicklingError as e:
        return "refused: " + str(e)


report = {"default": [listed(), weights_only_load()]}
import treeclass.torch as tct
report["off"] = [tct.allow_weights_only(False), listed(), weights_only_load()]
report["off again"] = [tct.allow_weights_only(False), listed()]
report["on"] = [tct.allow_weights_only(True), listed(), weights_only_load()]
print(json.dumps(report))
"""


def test_the_weights_only_switch_takes_the_global_off_and_puts_it_back() -> None:
    report = run_script(_WEIGHTS_ONLY, timeout=TIMEOUT, preload=FRAMEWORKS).report()
    loaded = ["Weights", [1.0, 1.0]]
    # On by default once treeclass and torch are both imported.
    assert report["default"] == [True, loaded], report
    was, listed, refused = report["off"]
    assert (was, listed) == (True, False), report
    assert isinstance(refused, str) and refused.startswith("refused: "), report
    assert "treeclass._pickle.rebuild_by_name" in refused, report
    assert report["off again"] == [False, False], report
    assert report["on"] == [False, True, loaded], report
