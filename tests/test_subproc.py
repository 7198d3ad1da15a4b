"""The zygote of ``_subproc`` (``preload=``): its children behave as fresh processes.

Each check runs the same script in a real fresh process and in a child of the zygote and
compares what a test can observe; the children start with the preloaded frameworks imported
and nothing of treeclass or of an earlier child.
"""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path

import pytest
from _subproc import FRAMEWORKS, run_module, run_script, write_modules

pytest.importorskip("jax")
pytest.importorskip("torch")
pytest.importorskip("numpy")

_OBSERVE = """
import json, os, sys
first = sorted(m for m in ("treeclass", "child_mod") if m in sys.modules)
import treeclass as tc
import child_mod

@tc.pytree_dataclass(name="tests.subproc.Point")  # a second child would conflict if it leaked
class Point:
    x: float

print("to stderr", file=sys.stderr)
print(json.dumps({
    "argv": sys.argv, "cwd": os.getcwd(), "path": sys.path[:3], "name": __name__,
    "first": first, "env": os.environ.get("HF_HUB_OFFLINE"), "stdin": sys.stdin.read(),
    "mod": child_mod.VALUE, "tc": tc.__file__, "registered": tc.is_registered(Point),
}))
"""


def _observe(folder: Path, preload: tuple[str, ...]) -> dict[str, object]:
    outcome = run_script(
        _OBSERVE, "a", "b c", timeout=300, cwd=folder, path=[folder], preload=preload
    )
    assert outcome.stderr == "to stderr\n"
    return outcome.report()  # type: ignore[no-any-return]


def test_a_child_sees_what_a_fresh_process_sees(tmp_path: Path) -> None:
    write_modules(tmp_path, {"child_mod": "VALUE = 1\n"})
    fresh = _observe(tmp_path, ())
    assert fresh["argv"] == ["-c", "a", "b c"] and fresh["first"] == []
    assert _observe(tmp_path, FRAMEWORKS) == fresh
    write_modules(tmp_path, {"child_mod": "VALUE = 2\n"})  # a module changed between children
    assert _observe(tmp_path, FRAMEWORKS) == {**fresh, "mod": 2}


_FRAMEWORKS_LOADED = """
import json, sys
print(json.dumps(sorted(m for m in ("jax", "torch", "numpy", "treeclass") if m in sys.modules)))
"""


def test_a_child_starts_with_the_frameworks_imported_and_treeclass_not() -> None:
    assert run_script(_FRAMEWORKS_LOADED, timeout=300).report() == []
    got = run_script(_FRAMEWORKS_LOADED, timeout=300, preload=FRAMEWORKS).report()
    assert got == ["jax", "numpy", "torch"]


_FAILS = """
import atexit, sys
atexit.register(lambda: print("atexit ran"))
print("partial", end="")
def inner():
    raise ValueError("boom")
inner()
"""


_HANGS = "import time\nprint('started', flush=True)\ntime.sleep(600)"

# The process ends when its last non-daemon thread does (the zygote's child joins them too).
_THREAD = """
import threading, time
def late():
    time.sleep(0.2)
    print("thread done")
threading.Thread(target=late).start()
print("main done")
"""


@pytest.mark.parametrize("preload", [(), FRAMEWORKS], ids=["fresh", "zygote"])
def test_exit_codes_tracebacks_signals_and_timeouts(preload: tuple[str, ...]) -> None:
    failed = run_script(_FAILS, timeout=300, preload=preload)
    assert failed.returncode == 1 and failed.stdout == "partialatexit ran\n"
    assert failed.stderr.startswith('Traceback (most recent call last):\n  File "<string>", line 7')
    assert failed.stderr.endswith("line 6, in inner\nValueError: boom\n"), failed.stderr
    assert run_script("import sys; sys.exit(3)", timeout=300, preload=preload).returncode == 3
    message = run_script("import sys; sys.exit('bye')", timeout=300, preload=preload)
    assert (message.returncode, message.stderr) == (1, "bye\n")
    thread = run_script(_THREAD, timeout=300, preload=preload)
    assert (thread.returncode, thread.stdout) == (0, "main done\nthread done\n")
    killed = run_script("import os; os.kill(os.getpid(), 9)", timeout=300, preload=preload)
    assert killed.crashed and killed.returncode == -9
    hung = run_script(_HANGS, timeout=1, preload=preload)
    assert hung.timed_out and hung.stdout == "started\n"


def test_run_module_in_a_child(tmp_path: Path) -> None:
    write_modules(
        tmp_path, {"clitool": "import json, sys\nprint(json.dumps([sys.argv, sys.path[0]]))\n"}
    )
    fresh = run_module("clitool", "x", timeout=300, cwd=tmp_path, path=[tmp_path]).report()
    child = run_module(
        "clitool", "x", timeout=300, cwd=tmp_path, path=[tmp_path], preload=FRAMEWORKS
    )
    assert child.report() == fresh == [[str(tmp_path / "clitool.py"), "x"], str(tmp_path)]
    assert json.loads(child.stdout) == fresh


# Each of two processes waits for a file the other one writes: they end only if both run at
# once (the processes of a distributed job); each reports what it saw of the environment.
_PAIR = """
import json, os, sys, time
folder, me, other = sys.argv[1:]
open(os.path.join(folder, me), "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(folder, other)):
    assert time.monotonic() < deadline, "the other process never ran"
    time.sleep(0.01)
print(json.dumps([me, os.environ.get("XLA_FLAGS"), "jax" in sys.modules]))
"""


@pytest.mark.parametrize(
    ("env", "forked"),
    [({"XLA_FLAGS": "--tests"}, True), ({"XLA_FLAGS": "--tests", "JAX_PLATFORMS": "cpu"}, False)],
    ids=["read-after-import", "read-at-import"],
)
def test_children_run_at_the_same_time_with_their_env(
    tmp_path: Path, env: dict[str, str], forked: bool
) -> None:
    """With only variables of ``READ_AFTER_IMPORT``, the processes fork from the zygote
    (jax already imported); with one a framework reads when imported, they run fresh."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(
                run_script,
                _PAIR,
                str(tmp_path),
                me,
                other,
                timeout=300,
                env=env,
                preload=FRAMEWORKS,
            )
            for me, other in (("a", "b"), ("b", "a"))
        ]
        reports = [f.result().report() for f in futures]
    assert reports == [["a", "--tests", forked], ["b", "--tests", forked]]
