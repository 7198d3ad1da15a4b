"""Faults during registration and activation (issue 13, "Faults").

After any fault the state is either exactly the previous one or the new one, in treeclass, torch
and ``jax.export``; a failed activation can be retried and is reported as an error. Faults are
injected with monkeypatching inside fresh processes (a fault that leaves JAX half-registered
cannot be undone in the test process).

Retrying (docs/how-it-works.md, "When activation fails"):

- registering a class again with the same options retries exactly the backends that lack it;
- a backend whose activation failed is activated again at the next registration;
- ``tc.activate_backends()`` does both, for every framework and class;

each raising ``RegistrationError`` if it fails again.
"""

from __future__ import annotations

from typing import Any

import pytest
from _subproc import FRAMEWORKS, run_script

pytest.importorskip("jax")
pytest.importorskip("torch")
pytest.importorskip("flatbuffers")

pytestmark = [pytest.mark.slow, pytest.mark.jax, pytest.mark.torch]

TIMEOUT = 180.0

_RERUN_FAULT = """
import json, sys, types
import jax, jax.numpy as jnp
import torch.utils._pytree as pt
import treeclass as tc

framework = sys.argv[1]
SOURCE = '''
import treeclass as tc
@tc.pytree_dataclass(name="faults.victim.Config")
class Config:
    x: float
    tag: str = tc.field(static=True, default="t")
'''
mod = types.ModuleType("faults_victim")
sys.modules["faults_victim"] = mod
def run():
    exec(compile(SOURCE, "<faults_victim>", "exec"), mod.__dict__)
run()
Old = mod.Config
blob = jax.export.export(jax.jit(lambda c: c.x * 2))(Old(jnp.float32(1.0))).serialize()
text = pt.treespec_dumps(pt.tree_structure(Old(1.0)))

def holders():
    pt.treespec_loads.cache_clear()
    (arg,), _ = jax.tree_util.tree_unflatten(jax.export.deserialize(blob).in_tree, [1.0])
    return {
        "treeclass": tc.class_for_name("faults.victim.Config"),
        "torch": pt.treespec_loads(text).type,
        "jax.export": type(arg),
    }

def fault(*args, **kwargs):
    raise RuntimeError("injected fault")

if framework == "jax":
    target, attr = jax.export, "register_pytree_node_serialization"
else:
    target, attr = pt, "register_pytree_node"
real = getattr(target, attr)
setattr(target, attr, fault)
report = {}
try:
    run()
    report["rerun"] = "succeeded"
except Exception as e:
    report["rerun"] = f"{type(e).__name__}: {e}"
finally:
    setattr(target, attr, real)
try:
    after = holders()
    report["after_fault"] = {k: ("old" if v is Old else "new" if v is mod.Config else repr(v))
                             for k, v in after.items()}
except Exception as e:
    report["after_fault"] = f"{type(e).__name__}: {e}"
# Old artifacts still work with the class that holds the name; retrying succeeds.
try:
    run()
    report["retry"] = "succeeded"
    after = holders()
    report["after_retry"] = {k: ("new" if v is mod.Config and v is not Old else repr(v))
                             for k, v in after.items()}
except Exception as e:
    report["retry"] = f"{type(e).__name__}: {e}"
print(json.dumps(report))
"""


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_a_fault_during_a_rerun_leaves_the_previous_state_everywhere(framework: str) -> None:
    # jax and torch are imported before treeclass: a process that has them already runs it
    # as a fresh one does.
    outcome = run_script(_RERUN_FAULT, framework, timeout=TIMEOUT, preload=FRAMEWORKS)
    report = outcome.report()
    assert report["rerun"] != "succeeded", report
    assert report["after_fault"] == {"treeclass": "old", "torch": "old", "jax.export": "old"}, (
        report
    )
    assert report["retry"] == "succeeded", report
    assert report["after_retry"] == {"treeclass": "new", "torch": "new", "jax.export": "new"}, (
        report
    )


# A fault inside the post-import hook: JAX's tree_util registration of one class fails while the
# adapter activates (injected by wrapping jax.tree_util as it is imported).
_HOOK_FAULT = """
import importlib.abc, importlib.util, json, sys, warnings
warnings.simplefilter("always")
seen_warnings = []
warnings.showwarning = lambda m, c, *a, **k: seen_warnings.append(f"{c.__name__}: {m}")
import treeclass as tc

@tc.pytree_dataclass(name="faults.hook.C")
class C:
    x: float

broken = {"on": True}

class Wrap(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "jax.tree_util":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        sys.meta_path.insert(0, self)
        real_exec = spec.loader.exec_module
        def exec_module(module):
            real_exec(module)
            real = module.register_pytree_with_keys
            def register_pytree_with_keys(cls, *a, **k):
                if broken["on"] and cls is C:
                    raise RuntimeError("injected fault")
                return real(cls, *a, **k)
            module.register_pytree_with_keys = register_pytree_with_keys
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Wrap())
report = {}
try:
    import jax
    report["import_jax"] = "ok"
except Exception as e:
    report["import_jax"] = f"{type(e).__name__}: {e}"
report["warnings"] = seen_warnings[:]
report["node_after_fault"] = jax.tree_util.tree_structure(C(1.0)).num_nodes == 2
# While the fault lasts, asking again is an error, not a silent no-op.
try:
    tc.register_dataclass(C, name="faults.hook.C")
    report["reregister_during_fault"] = "no error"
except Exception as e:
    report["reregister_during_fault"] = type(e).__name__
broken["on"] = False
try:
    tc.register_dataclass(C, name="faults.hook.C")
    report["retry"] = "ok"
except Exception as e:
    report["retry"] = f"{type(e).__name__}: {e}"
report["node_after_retry"] = jax.tree_util.tree_structure(C(1.0)).num_nodes == 2
print(json.dumps(report))
"""


def test_a_fault_inside_the_post_import_hook_can_be_retried() -> None:
    report = run_script(_HOOK_FAULT, timeout=TIMEOUT).report()
    assert report["import_jax"] == "ok", report  # the user's import is never broken
    assert report["node_after_fault"] is False, report  # the fault did happen
    assert report["reregister_during_fault"] not in ("no error",), report
    assert report["retry"] == "ok", report
    assert report["node_after_retry"] is True, report


# A fault that makes the adapter itself fail to activate (its import raises once).
_ACTIVATION_FAULT = """
import importlib.abc, json, sys, warnings
warnings.simplefilter("always")
seen = []
warnings.showwarning = lambda m, c, *a, **k: seen.append(f"{c.__name__}: {m}")
import treeclass as tc

@tc.pytree_dataclass(name="faults.activation.C")
class C:
    x: float

class Fail(importlib.abc.MetaPathFinder):
    on = True
    def find_spec(self, name, path, target=None):
        if Fail.on and name == "treeclass._backends.jax":
            raise ImportError("injected fault")
        return None

sys.meta_path.insert(0, Fail())
report = {}
try:
    import jax
    report["import_jax"] = "ok"
except Exception as e:
    report["import_jax"] = f"{type(e).__name__}: {e}"
report["warnings"] = seen[:]
report["active_after_fault"] = "jax" in tc.active_backends()
Fail.on = False
# The next registration activates the backend again (and registers every class so far).
try:
    @tc.pytree_dataclass(name="faults.activation.D")
    class D:
        y: float
    report["next_registration"] = "ok"
except Exception as e:
    report["next_registration"] = f"{type(e).__name__}: {e}"
report["active_after_retry"] = "jax" in tc.active_backends()
report["nodes"] = [jax.tree_util.tree_structure(C(1.0)).num_nodes == 2,
                   jax.tree_util.tree_structure(D(1.0)).num_nodes == 2]
print(json.dumps(report))
"""


def test_a_failed_activation_is_retried_at_the_next_registration() -> None:
    report: dict[str, Any] = run_script(_ACTIVATION_FAULT, timeout=TIMEOUT).report()
    assert report["import_jax"] == "ok", report
    assert report["active_after_fault"] is False, report
    assert any("jax" in w for w in report["warnings"]), report
    assert report["next_registration"] == "ok", report
    assert report["active_after_retry"] is True, report
    assert report["nodes"] == [True, True], report


# tc.activate_backends() while the adapter's import keeps failing, then once it works: the
# errors name the framework and the cause; a registration meanwhile is refused and changes
# nothing. The wording is pinned with pytest.raises(match=) inside the fresh process.
_ACTIVATE_BACKENDS = """
import importlib.abc, json, sys, warnings
import pytest
warnings.simplefilter("always")
seen = []
warnings.showwarning = lambda m, c, *a, **k: seen.append(f"{c.__name__}: {m}")
import treeclass as tc

@tc.pytree_dataclass(name="faults.api.C")
class C:
    x: float

class Fail(importlib.abc.MetaPathFinder):
    on = True
    def find_spec(self, name, path, target=None):
        if Fail.on and name == "treeclass._backends.jax":
            raise ImportError("injected fault")
        return None

sys.meta_path.insert(0, Fail())
import jax
report = {"warnings": seen[:], "active_during_fault": list(tc.active_backends())}
with pytest.raises(
    tc.RegistrationError,
    match=r"^treeclass could not set up its jax backend \\(ImportError: injected fault\\), so "
    r"treeclass classes are not jax pytree nodes; fix the cause and call "
    r"treeclass\\.activate_backends\\(\\) again\\.$",
) as raised:
    tc.activate_backends()
report["cause"] = type(raised.value.__cause__).__name__
report["is_value_error"] = isinstance(raised.value, ValueError)
with pytest.raises(
    tc.RegistrationError,
    match=r"^treeclass could not set up its jax backend again \\(ImportError: injected fault\\), "
    r"so __main__\\.D was not registered \\(nothing changed\\); fix the cause and register it "
    r"again, or call treeclass\\.activate_backends\\(\\)\\.$",
):
    @tc.pytree_dataclass(name="faults.api.D")
    class D:
        y: float
report["name_taken_during_fault"] = tc.class_for_name("faults.api.D") is not None
Fail.on = False
report["returned"] = list(tc.activate_backends())
report["active"] = list(tc.active_backends())
report["again"] = list(tc.activate_backends())  # nothing left to retry: the same answer
report["node"] = jax.tree_util.tree_structure(C(1.0)).num_nodes == 2

@tc.pytree_dataclass(name="faults.api.D")
class D:
    y: float
report["node_registered_after"] = jax.tree_util.tree_structure(D(1.0)).num_nodes == 2
print(json.dumps(report))
"""


def test_activate_backends_retries_a_failed_activation_and_raises_while_it_fails() -> None:
    report: dict[str, Any] = run_script(_ACTIVATE_BACKENDS, timeout=TIMEOUT).report()
    assert "jax" not in report["active_during_fault"], report
    assert any(
        "could not set up its jax backend (ImportError: injected fault)" in w
        and "call treeclass.activate_backends() to retry now" in w
        for w in report["warnings"]
    ), report
    assert report["cause"] == "ImportError", report
    assert report["is_value_error"] is True, report
    assert report["name_taken_during_fault"] is False, report
    assert "jax" in report["returned"], report
    assert report["returned"] == report["active"] == report["again"], report
    assert report["node"] is True, report
    assert report["node_registered_after"] is True, report


# One class fails to register with JAX when the JAX backend activates (the backend itself is
# active): re-registering that class, or tc.activate_backends(), retries exactly that -- torch,
# which took the class, is not asked again.
_MISSING_CLASS = """
import importlib.abc, importlib.util, json, sys, warnings
import pytest
warnings.simplefilter("always")
seen = []
warnings.showwarning = lambda m, c, *a, **k: seen.append(f"{c.__name__}: {m}")
import torch.utils._pytree as pt
import treeclass as tc

@tc.pytree_dataclass(name="faults.missing.C")
class C:
    x: float

torch_calls = []
real_torch = pt.register_pytree_node
def counting(cls, *a, **k):
    torch_calls.append(cls.__qualname__)
    return real_torch(cls, *a, **k)
pt.register_pytree_node = counting

broken = {"on": True}

class Wrap(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "jax.tree_util":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        sys.meta_path.insert(0, self)
        real_exec = spec.loader.exec_module
        def exec_module(module):
            real_exec(module)
            real = module.register_pytree_with_keys
            def register_pytree_with_keys(cls, *a, **k):
                if broken["on"] and cls is C:
                    raise RuntimeError("injected fault")
                return real(cls, *a, **k)
            module.register_pytree_with_keys = register_pytree_with_keys
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Wrap())
import jax
report = {"warnings": seen[:], "active": list(tc.active_backends())}
report["node_after_fault"] = jax.tree_util.tree_structure(C(1.0)).num_nodes == 2
again = (
    r"^treeclass could not register __main__\\.C with jax again \\(RuntimeError: injected "
    r"fault\\), so it is still not a jax pytree node; fix the cause and register it again with "
    r"the same options, or call treeclass\\.activate_backends\\(\\)\\.$"
)
with pytest.raises(tc.RegistrationError, match=again):
    tc.register_dataclass(C, name="faults.missing.C")
with pytest.raises(tc.RegistrationError, match=again):
    tc.activate_backends()

@tc.pytree_dataclass(name="faults.missing.E")
class E:  # other classes register everywhere meanwhile
    y: float
report["other_class"] = jax.tree_util.tree_structure(E(1.0)).num_nodes == 2
broken["on"] = False
report["returned"] = list(tc.activate_backends())
report["node_after_retry"] = jax.tree_util.tree_structure(C(1.0)).num_nodes == 2
report["torch_node"] = pt.tree_structure(C(1.0)).num_nodes == 2
report["reregister"] = tc.register_dataclass(C, name="faults.missing.C") is C
report["torch_calls"] = torch_calls
print(json.dumps(report))
"""


def test_a_class_a_backend_failed_to_take_is_retried_there_only() -> None:
    report: dict[str, Any] = run_script(_MISSING_CLASS, timeout=TIMEOUT).report()
    assert report["active"] == ["torch", "jax"], report
    assert report["node_after_fault"] is False, report
    assert any(
        "could not register __main__.C with jax (RuntimeError: injected fault)" in w
        and "register it again with the same options, or call treeclass.activate_backends()" in w
        for w in report["warnings"]
    ), report
    assert report["other_class"] is True, report
    assert report["returned"] == ["torch", "jax"], report
    assert report["node_after_retry"] is True, report
    assert report["torch_node"] is True, report
    assert report["reregister"] is True, report
    assert report["torch_calls"] == ["E"], report  # C was never registered with torch again


# Lock order: a registration retries a failed activation before it takes the registry's lock.
# Thread "fw" retries the JAX activation and is paused inside it (holding JAX's activation
# lock) while thread "reg" registers a class; the registration must wait for the activation,
# and neither may deadlock (taking the registry's lock first would: "fw" needs it to finish).
_LOCK_ORDER = """
import importlib.abc, json, os, sys, threading, time, warnings
warnings.simplefilter("ignore")
import treeclass as tc

@tc.pytree_dataclass(name="faults.order.C")
class C:
    x: float

class Fail(importlib.abc.MetaPathFinder):
    on = True
    def find_spec(self, name, path, target=None):
        if Fail.on and name == "treeclass._backends.jax":
            raise ImportError("injected fault")
        return None

sys.meta_path.insert(0, Fail())
import jax
Fail.on = False
inside = threading.Event()
registering = threading.Event()

class Pause(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "treeclass._backends.jax" and threading.current_thread().name == "fw":
            inside.set()
            registering.wait(30)
            time.sleep(0.5)  # let "reg" reach the activation lock
        return None

sys.meta_path.insert(0, Pause())
events, errors = [], []

def retry():
    try:
        tc.activate_backends()
        events.append("activated")
    except BaseException as e:
        errors.append(f"activate_backends: {type(e).__name__}: {e}")

def register():
    inside.wait(30)
    registering.set()
    try:
        @tc.pytree_dataclass(name="faults.order.D")
        class D:
            y: float
        events.append("registered")
        globals()["D"] = D
    except BaseException as e:
        errors.append(f"register: {type(e).__name__}: {e}")

threads = [threading.Thread(target=retry, name="fw", daemon=True),
           threading.Thread(target=register, name="reg", daemon=True)]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
report = {"hung": [t.name for t in threads if t.is_alive()], "events": events, "errors": errors}
if not report["hung"] and not errors:
    report["nodes"] = [jax.tree_util.tree_structure(C(1.0)).num_nodes == 2,
                       jax.tree_util.tree_structure(D(1.0)).num_nodes == 2]
print(json.dumps(report), flush=True)
os._exit(0)
"""


def test_a_registration_waits_for_an_activation_in_another_thread_without_deadlock() -> None:
    outcome = run_script(_LOCK_ORDER, timeout=TIMEOUT)
    assert not outcome.timed_out, outcome.describe()
    report: dict[str, Any] = outcome.report()
    assert report["hung"] == [], report
    assert report["errors"] == [], report
    assert report["events"] == ["activated", "registered"], report
    assert report["nodes"] == [True, True], report


# Warnings turned into errors (pytest's filterwarnings = ["error"], python -W error): a class
# jax refuses at activation must not break the user's `import jax`, nor stop the other classes
# from being registered; the refused one is retried by activate_backends().
_WARNINGS_AS_ERRORS = """
import importlib.abc, importlib.util, json, sys, warnings
warnings.simplefilter("error")
import treeclass as tc

@tc.pytree_dataclass(name="faults.werror.A")
class A:
    x: float

@tc.pytree_dataclass(name="faults.werror.B")
class B:
    x: float

broken = {"on": True}

class Wrap(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "jax.tree_util":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        real_exec = spec.loader.exec_module
        def exec_module(module):
            real_exec(module)
            real = module.register_pytree_with_keys
            def register_pytree_with_keys(cls, *a, **k):
                if broken["on"] and cls is A:
                    raise RuntimeError("injected fault")
                return real(cls, *a, **k)
            module.register_pytree_with_keys = register_pytree_with_keys
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Wrap())
report = {}
try:
    import jax
    report["import_jax"] = "ok"
except BaseException as e:
    report["import_jax"] = f"{type(e).__name__}: {e}"
import jax
report["active"] = list(tc.active_backends())
report["b_node"] = jax.tree_util.tree_structure(B(1.0)).num_nodes == 2
broken["on"] = False
report["activate"] = list(tc.activate_backends())
report["a_node"] = jax.tree_util.tree_structure(A(1.0)).num_nodes == 2
print(json.dumps(report))
"""


def test_warnings_as_errors_never_break_the_import_nor_skip_a_class() -> None:
    report: dict[str, Any] = run_script(_WARNINGS_AS_ERRORS, timeout=TIMEOUT).report()
    assert report["import_jax"] == "ok", report
    assert report["active"] == ["jax"], report
    assert report["b_node"] is True, report  # registered although A's warning was an error
    assert report["activate"] == ["jax"], report
    assert report["a_node"] is True, report


# treespec_loads(to="jax") when the jax backend cannot be set up (an adapter that fails to
# import, as with a jax version it cannot work with): a TreespecLoadError naming the cause,
# never the adapter's own exception, and never "jax cannot be imported" (it is imported).
_TO_BROKEN_ADAPTER = """
import importlib.abc, json, sys, warnings
warnings.simplefilter("ignore")
import treeclass as tc
error = {"ImportError": ImportError, "AttributeError": AttributeError}[sys.argv[1]]

class Fail(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "treeclass._backends.jax":
            raise error("injected fault in the adapter")
        return None

sys.meta_path.insert(0, Fail())
import jax
text = tc.treespec_dumps(tc.tree_structure([1, 2]))
try:
    tc.treespec_loads(text, to="jax")
    report = {"error": None}
except Exception as e:
    report = {"message": str(e), "load_error": isinstance(e, tc.TreespecLoadError)}
print(json.dumps(report))
"""


@pytest.mark.parametrize("error", ["ImportError", "AttributeError"])
def test_to_a_framework_whose_backend_cannot_be_set_up_is_a_load_error(error: str) -> None:
    report: dict[str, Any] = run_script(_TO_BROKEN_ADAPTER, error, timeout=TIMEOUT).report()
    assert report["load_error"] is True, report
    assert "cannot build a jax structure" in report["message"], report
    assert f"{error}: injected fault in the adapter" in report["message"], report
    assert "activate_backends" in report["message"], report


# A failed activation inside the framework's import never breaks that import, and is logged at
# ERROR on the "treeclass" logger (for services that watch logs, not warnings) -- even where
# warnings are errors (-W error), which must not skip the log. Both kinds: the backend fails to
# set up, or the backend sets up but refuses one class.
_LOGGED = """
import importlib.abc, importlib.util, json, logging, sys, warnings
warnings.simplefilter("error")  # as python -W error: the warning becomes an exception
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelname, record.getMessage()])
logging.getLogger("treeclass").addHandler(Keep())
import treeclass as tc

@tc.pytree_dataclass(name="faults.logged.C")
class C:
    x: float

class Fail(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "treeclass._backends.jax":
            raise ImportError("injected fault")
        return None

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "jax.tree_util":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        sys.meta_path.insert(0, self)
        real_exec = spec.loader.exec_module
        def exec_module(module):
            real_exec(module)
            real = module.register_pytree_with_keys
            def register_pytree_with_keys(cls, *a, **k):
                if cls is C:
                    raise RuntimeError("injected fault")
                return real(cls, *a, **k)
            module.register_pytree_with_keys = register_pytree_with_keys
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Fail() if sys.argv[1] == "backend" else Refuse())
import jax  # must not raise
print(json.dumps({
    "imported": "jax" in sys.modules and hasattr(jax, "numpy"),
    "active": list(tc.active_backends()),
    "records": records,
}))
"""


@pytest.mark.parametrize(
    ("fault", "logged"),
    [
        ("backend", "treeclass could not set up its jax backend (ImportError: injected fault)"),
        (
            "class",
            "treeclass could not register __main__.C with jax (RuntimeError: injected fault)",
        ),
    ],
)
def test_a_failed_activation_is_logged_at_error(fault: str, logged: str) -> None:
    report: dict[str, Any] = run_script(_LOGGED, fault, timeout=TIMEOUT).report()
    assert report["imported"] is True, report
    errors = [m for name, level, m in report["records"] if name == "treeclass" and level == "ERROR"]
    assert any(m.startswith(logged) and "activate_backends()" in m for m in errors), report
    if fault == "backend":
        assert "jax" not in report["active"], report


# What an adapter does beyond its main backend -- an ``extras=`` backend (torch_collate), or the
# adapter's ``activated()`` hook (optax names its states) -- may fail without taking the main
# backend down: it is reported (ERROR log + RuntimeWarning), the framework stays active (and
# listed), later registrations work, and tc.activate_backends() retries the part that failed
# (raising while it still fails).
_AFTER_MAIN = """
import importlib.abc, json, logging, sys, warnings
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelname, record.getMessage()])
logging.getLogger("treeclass").addHandler(Keep())
import treeclass as tc

fault = sys.argv[1]
broken = {"on": True}

class Fail(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if broken["on"] and name == "treeclass._backends.torch_collate":
            raise ImportError("injected fault")
        return None

if fault == "extra":
    sys.meta_path.insert(0, Fail())
    framework = "torch"
else:
    import treeclass._backends.optax as adapter
    real = adapter.activated
    def activated():
        if broken["on"]:
            raise RuntimeError("injected fault")
        real()
    adapter.activated = activated
    framework = "optax"

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if fault == "extra":
        import torch
    else:
        import optax
report = {
    "warnings": [str(w.message) for w in caught if w.category is RuntimeWarning],
    "errors": [m for name, level, m in records if name == "treeclass" and level == "ERROR"],
    "active": list(tc.active_backends()),
}
try:
    @tc.pytree_dataclass(name="faults.after.Later")
    class Later:
        x: float
        y: float
    report["later"] = "registered"
except Exception as e:
    report["later"] = f"{type(e).__name__}: {e}"
    print(json.dumps(report))
    sys.exit(0)
if fault == "extra":
    import torch.utils._pytree as pt
    from torch.utils.data._utils.collate import default_collate_fn_map as table
    report["node"] = pt.tree_leaves(Later(1.0, 2.0)) == [1.0, 2.0]
    def done():
        return Later in table
else:
    import jax
    report["node"] = jax.tree.leaves(Later(1.0, 2.0)) == [1.0, 2.0]
    def done():
        return tc.name_of(optax.ScaleByAdamState) == "optax.ScaleByAdamState"
report["done_before"] = done()
try:
    tc.activate_backends()
    report["retry_failing"] = "succeeded"
except Exception as e:
    report["retry_failing"] = f"{type(e).__name__}: {e}"
broken["on"] = False
report["retry_fixed"] = list(tc.activate_backends())
report["done_after"] = done()
print(json.dumps(report))
"""


@pytest.mark.parametrize(
    ("fault", "framework", "what"),
    [
        ("extra", "torch", "treeclass._backends.torch_collate (ImportError: injected fault)"),
        ("hook", "optax", "its activated() hook (RuntimeError: injected fault)"),
    ],
)
def test_a_fault_after_the_main_backend_leaves_it_active(
    fault: str, framework: str, what: str
) -> None:
    pytest.importorskip("optax")
    report: dict[str, Any] = run_script(_AFTER_MAIN, fault, timeout=TIMEOUT).report()
    message = f"treeclass set up its {framework} backend, but not {what}"
    assert [m for m in report["warnings"] if m.startswith(message)], report
    assert [m for m in report["errors"] if m.startswith(message)], report
    assert framework in report["active"], report
    assert report["later"] == "registered", report
    assert report["node"] is True, report
    assert report["done_before"] is False, report
    assert report["retry_failing"].startswith(f"RegistrationError: {message}"), report
    assert "activate_backends()" in report["retry_failing"], report
    assert framework in report["retry_fixed"], report
    assert report["done_after"] is True, report
