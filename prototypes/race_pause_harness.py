"""The first harness of issue 13's races (kept: it reproduces the torch segfault exactly).

    python prototypes/race_pause_harness.py torch torch._tensor import
    TREECLASS_HOOKS_PROTOTYPE=prototypes/race_free_hooks.py \
        python prototypes/race_pause_harness.py torch torch._tensor import

Thread "fw" imports the framework and is paused (up to 1 s) when it looks up ``pause_at``;
thread "tc" then imports treeclass (``import``) or decorates a class (``decorate``), keeps the
other thread paused 0.3 s longer, and lets it go. With the current hooks and
``torch torch._tensor import`` the process dies with SIGSEGV (5 of 5 runs); ``run_races.py``
measures the other timings.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
import warnings
from typing import Any

warnings.simplefilter("always")
caught: list[str] = []


def _record(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    caught.append(f"{category.__name__}: {str(message)[:200]}")


warnings.showwarning = _record
proto = os.environ.get("TREECLASS_HOOKS_PROTOTYPE")
if proto:
    spec = importlib.util.spec_from_file_location("treeclass._hooks", proto)
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    sys.modules["treeclass._hooks"] = hooks
    spec.loader.exec_module(hooks)
fw, pause_at, action = sys.argv[1], sys.argv[2], sys.argv[3]
pre = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else []
for m in pre:
    __import__(m)
if action == "decorate":
    import treeclass as tc
go = threading.Event()
started = threading.Event()


class Pause:
    """Pauses the framework thread once, when it looks up ``pause_at``."""

    fired = False

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        """Never finds anything; only waits."""
        if name == pause_at and not Pause.fired and threading.current_thread().name == "fw":
            Pause.fired = True
            started.set()
            go.wait(1.0)


sys.meta_path.insert(0, Pause())  # type: ignore[arg-type]
errors: list[str] = []


def t_fw() -> None:
    """Import the framework."""
    try:
        __import__(fw)
    except BaseException as e:
        errors.append(f"import {fw}: {type(e).__name__}: {e}")


def t_tc() -> None:
    """Import treeclass (or decorate a class) while the framework is half-imported."""
    started.wait(10)
    try:
        if action == "import":
            import treeclass  # noqa: F401
        else:
            import treeclass as tc

            @tc.pytree_dataclass(name="r.D")
            class D:
                x: float
    except BaseException as e:
        errors.append(f"{action}: {type(e).__name__}: {e}")
    time.sleep(0.3)
    go.set()


a = threading.Thread(target=t_fw, name="fw")
b = threading.Thread(target=t_tc, name="tc")
a.start()
b.start()
a.join()
b.join()
import treeclass as tc  # noqa: E402


@tc.pytree_dataclass(name="r.P")
class P:
    """A class registered after both threads finished."""

    x: float


__import__(fw)
ok = {}
if "jax" in sys.modules:
    import jax

    ok["jax"] = jax.tree_util.tree_structure(P(1.0)).num_nodes == 2
if "torch" in sys.modules:
    import torch.utils._pytree as pt

    ok["torch"] = pt.tree_structure(P(1.0)).num_nodes == 2
print(
    json.dumps(
        {
            "fired": Pause.fired,
            "errors": errors,
            "warnings": caught,
            "active": list(tc.active_backends()),
            "node": ok,
        }
    )
)
