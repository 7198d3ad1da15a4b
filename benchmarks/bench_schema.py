"""``treeclass schema check`` of a module of 300 classes against its lock (issue 30).

The module is ``bench_register_module``'s zoo of 300 HuggingFace-style output classes. Its lock
is written once (``schema dump``, in a child process); then, round by round in fresh child
processes, two versions of the module are checked against it, alternating:

- **unchanged**: the module as locked (the common case of a pull request that does not touch
  the classes);
- **every class changed**: each class gained a data field ``extra`` with the default ``None``
  and renamed ``loss`` to ``total_loss`` (``aliases=("loss",)``), so every class is checked
  through every loader family (``jax.export`` and ``torch.export`` included).

Each child imports jax, torch and the module first (not timed: the issue's bound is "beyond
importing it"), then times ``schema.check`` in CPU time (``time.process_time``, garbage
collector on, as the command runs). Reported: the median and the 10th-90th percentiles of the
rounds. The target: under 1 s of CPU for the changed module.

Run: ``python benchmarks/bench_schema.py [--rounds N] [--classes N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_register_module import write_modules

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

_DUMP = """
import sys
import tc_zoo
from treeclass._io import schema
open(sys.argv[1], "w").write(schema.dumps_lock(schema.lock_of(["tc_zoo"])))
"""

_CHECK = """
import sys, time
import jax, jax.export, torch
import treeclass
import {module}
from treeclass._io import schema
lock = schema.read_lock_file(sys.argv[1])
t0 = time.process_time()
report = schema.check(lock, ["{module}"], "backward")
t1 = time.process_time()
assert report.compatible, report.text()
assert len(report.rows) == {rows}, len(report.rows)
print(t1 - t0)
"""


def _child(code: str, directory: Path, *args: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), str(directory)])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    run = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True
    )
    return run.stdout.strip()


def _changed(source: str) -> str:
    """Every class: ``loss`` renamed with an alias, a new ``extra`` field defaulting to None."""
    source = source.replace(
        "    loss: Optional[Any] = None",
        '    total_loss: Optional[Any] = tc.field(default=None, aliases=("loss",))\n'
        "    extra: Optional[Any] = None",
    )
    return source.replace("tc_zoo", "changed_zoo")


def _shown(times: list[float]) -> str:
    q = statistics.quantiles(times, n=10, method="inclusive") if len(times) > 1 else times * 2
    return (
        f"{statistics.median(times) * 1e3:7.1f} ms CPU (p10-p90 {q[0] * 1e3:.1f}-{q[-1] * 1e3:.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--classes", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_modules(directory, args.classes)
        source = (directory / "tc_zoo.py").read_text()
        (directory / "changed_zoo.py").write_text(_changed(source))
        lock = str(directory / "treeclass.lock.json")
        _child(_DUMP, directory, lock)
        unchanged: list[float] = []
        changed: list[float] = []
        for _ in range(args.rounds):
            code = _CHECK.format(module="tc_zoo", rows=0)
            unchanged.append(float(_child(code, directory, lock)))
            # The changed module registers under the same names: its rows are the 300 classes.
            code = _CHECK.format(module="changed_zoo", rows=args.classes)
            changed.append(float(_child(code, directory, lock)))
    print(f"schema check, {args.classes} classes, {args.rounds} rounds (fresh process each):")
    print(f"  unchanged module        {_shown(unchanged)}")
    verdict = "within" if statistics.median(changed) < 1.0 else "OVER"
    print(f"  every class changed     {_shown(changed)}  ({verdict} the 1 s target)")


if __name__ == "__main__":
    main()
