"""Import races between treeclass and the frameworks, run many times (issue 13).

    python benchmarks/races.py [--runs 20] [--jobs 2] [--modes pause,pause_long,delay]
        [--races jax,torch,optree] [--baseline OTHER/src]

Not a timed benchmark: it counts the runs that failed. Each run is a fresh process in which
thread "fw" imports a framework while thread "tc" imports treeclass (or, with torch already
active, decorates a class) -- the races of ``tests/test_races.py``, which runs each 3 times:

- ``jax``: ``import treeclass`` while another thread is inside ``import jax``;
- ``torch``: the same with ``import torch``;
- ``optree``: decorating a class (torch active) during the first ``import optree``.

Three ways of hitting the window:

- ``pause``: a meta path finder pauses the framework's import at a fixed submodule (up to
  0.5 s) while the other thread imports or uses treeclass (the harness of the tests);
- ``pause_long``: a 1 s pause that the treeclass thread holds 0.3 s longer (the timing that
  made the torch race a segfault before the fix);
- ``delay``: no instrumentation; the treeclass thread starts after a random delay, uniform
  over the time the framework's import takes on this machine (measured first).

A run fails if anything raised, warned, crashed, hung (timeout), or a backend is not active /
the class is not a node afterwards. ``--baseline`` runs the same races (same delays) against
another checkout's ``src`` too, side by side.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")

SCRIPT = r"""
import importlib.abc, json, sys, threading, time, warnings
warnings.simplefilter("always")
seen = []
warnings.showwarning = lambda m, c, *a, **k: seen.append(f"{c.__name__}: {str(m)[:300]}")
framework, pause_at, action, preload, mode, delay = sys.argv[1:7]
delay = float(delay)
PAUSE = 1.0 if mode == "pause_long" else 0.5
HOLD = 0.3 if mode == "pause_long" else 0.0  # the treeclass thread keeps the other paused
for name in filter(None, preload.split(",")):
    __import__(name)
if action == "decorate":
    import treeclass as tc
paused = threading.Event()
resume = threading.Event()

class PauseInside(importlib.abc.MetaPathFinder):
    fired = False
    def find_spec(self, name, path, target=None):
        if name == pause_at and not PauseInside.fired and threading.current_thread().name == "fw":
            PauseInside.fired = True
            paused.set()
            resume.wait(PAUSE)
        return None

if mode.startswith("pause"):
    sys.meta_path.insert(0, PauseInside())
errors = []

def import_framework():
    try:
        __import__(framework)
    except BaseException as e:
        errors.append(f"import {framework}: {type(e).__name__}: {e}")

def use_treeclass():
    if mode.startswith("pause"):
        paused.wait(60)
    else:
        time.sleep(delay)
    try:
        import treeclass as tc
        if action == "decorate":
            @tc.pytree_dataclass(name="races.During")
            class During:
                x: float
    except BaseException as e:
        errors.append(f"{action}: {type(e).__name__}: {e}")
    time.sleep(HOLD)
    resume.set()

a = threading.Thread(target=import_framework, name="fw")
b = threading.Thread(target=use_treeclass, name="tc")
a.start(); b.start(); a.join(); b.join()
import treeclass as tc
@tc.pytree_dataclass(name="races.After")
class After:
    x: float
nodes = {}
if "jax" in sys.modules:
    import jax
    nodes["jax"] = jax.tree_util.tree_structure(After(1.0)).num_nodes == 2
if "torch" in sys.modules:
    import torch.utils._pytree as pt
    nodes["torch"] = pt.tree_structure(After(1.0)).num_nodes == 2
if "optree" in sys.modules:
    import optree
    nodes["optree"] = optree.tree_structure(After(1.0), namespace="").num_nodes == 2
print(json.dumps({"errors": errors, "warnings": seen, "active": sorted(tc.active_backends()),
                  "nodes": nodes}))
"""

RACES = {
    "jax": ("jax", "jax._src.tree_util", "import", ""),
    "torch": ("torch", "torch._tensor", "import", ""),
    "optree": ("optree", "optree.registry", "decorate", "torch"),
}


def import_time(module: str, preload: str) -> float:
    """Median time ``import module`` takes in a fresh process (after ``preload``)."""
    code = f"import time\nfor m in {preload!r}.split(','):\n    m and __import__(m)\n"
    code += f"t = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)"
    times = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        times.append(float(out.stdout.strip()))
    return sorted(times)[1]


def one_run(race: str, mode: str, src: str, timeout: float, delay: float) -> str:
    """One fresh process importing treeclass from ``src``; ``"ok"`` or what went wrong."""
    framework, pause_at, action, preload = RACES[race]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": src}
    args = [framework, pause_at, action, preload, mode, f"{delay:.4f}"]
    try:
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "hang"
    if proc.returncode < 0:
        return f"signal {-proc.returncode}"
    if proc.returncode != 0:
        return "exit " + proc.stderr.strip().splitlines()[-1][:120]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = sorted({framework, *filter(None, preload.split(","))})
    if report["errors"]:
        return report["errors"][0][:120]
    if report["warnings"]:
        return report["warnings"][0][:120]
    if report["active"] != expected:
        return f"active={report['active']}"
    if not all(report["nodes"].values()):
        return f"nodes={report['nodes']}"
    return "ok"


def main() -> None:
    """Run every race and mode (against this checkout, and the baseline); print failures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--modes", default="pause,pause_long,delay")
    parser.add_argument("--races", default="jax,torch,optree")
    parser.add_argument("--baseline", help="another checkout's src folder, run side by side")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    sources = {"this": SRC}
    if args.baseline:
        sources["baseline"] = str(Path(args.baseline).resolve())
    rng = random.Random(args.seed)
    results: dict[str, list[str]] = {}
    for race in args.races.split(","):
        framework, _, _, preload = RACES[race]
        window = import_time(framework, preload)
        print(f"[{race}] import {framework} takes {window:.2f} s here", flush=True)
        for mode in args.modes.split(","):
            delays = [rng.uniform(0.0, window) for _ in range(args.runs)]  # same for both
            for label, src in sources.items():
                start = time.perf_counter()
                with ThreadPoolExecutor(args.jobs) as pool:
                    run = functools.partial(one_run, race, mode, src, args.timeout)
                    outcomes = list(pool.map(run, delays))
                results[f"{race}/{mode}/{label}"] = outcomes
                failed = [o for o in outcomes if o != "ok"]
                kinds: dict[str, int] = {}
                for o in failed:
                    key = o.split(":")[0] if not o.startswith("RuntimeWarning") else o[:80]
                    kinds[key] = kinds.get(key, 0) + 1
                print(
                    f"  {race:6} {mode:10} {label:8}: {len(failed):3}/{len(outcomes)} failed "
                    f"({time.perf_counter() - start:.0f} s) {kinds}",
                    flush=True,
                )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
