"""Faults during registration and activation (issue 13, "Faults").

After any fault the state is either exactly the previous one or the new one, in treeclass, torch
and ``jax.export``; a failed activation can be retried and is reported as an error. Faults are
injected with monkeypatching inside fresh processes (a fault that leaves JAX half-registered
cannot be undone in the test process).

Retrying, as these tests assume it (see the notes of issue 13 for the API question):

- registering a class again with the same options retries every backend that lacks it;
- a backend whose activation failed is activated again at the next registration.
"""

from __future__ import annotations

from typing import Any

import pytest
from _subproc import run_script

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
    outcome = run_script(_RERUN_FAULT, framework, timeout=TIMEOUT)
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
