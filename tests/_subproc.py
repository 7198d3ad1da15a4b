"""The one way tests run Python in a fresh process.

* ``run_script(script, *args, timeout=...)``: ``python -c SCRIPT ARGS`` (script dedented).
* ``run_module(module, *args, timeout=...)``: ``python -m MODULE ARGS`` (a CLI entry point).
* ``write_modules(folder, {"name": source})``: write module files for a fresh process to import.
* ``report_in(folder, script, *args)``: run ``script`` with ``folder`` as its working directory
  and first on its path; return the JSON it prints last. The "save with version 1 of a module,
  delete or replace the module, load in a fresh process" tests are two calls of it with
  ``write_modules`` (or ``Path.unlink``) between them.

Every run returns an ``Outcome`` and never raises on failure or timeout: ``Outcome.report()``
(the last stdout line as JSON) and ``Outcome.checked()`` fail the test with the process's stderr.
The fresh process imports this checkout's ``src`` (after the caller's ``path`` folders and an
explicit ``PYTHONPATH`` of the test process), runs with ``PYTHONWARNINGS=ignore`` unless ``env``
says otherwise, and never reaches the Hugging Face hub.

A timeout is never a time measurement: it is chosen so that a correct implementation finishes in
a small fraction of it even on a loaded machine, while what it guards against (a quadratic loop,
a deadlock) needs many times longer; a segfault or a memory blow-up (``memory_cap``) fails the
one test instead of the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC = str(Path(__file__).resolve().parent.parent / "src")


@dataclass
class Outcome:
    """What a fresh process did."""

    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def crashed(self) -> bool:
        """Killed by a signal (a segfault is -11)."""
        return self.returncode is not None and self.returncode < 0

    def checked(self) -> Outcome:
        """This outcome, after failing the test unless the process exited with 0."""
        assert self.returncode == 0, self.describe()
        return self

    def report(self) -> Any:
        """The last line of stdout, parsed as JSON (fails the test with the process's stderr)."""
        lines = self.checked().stdout.strip().splitlines()
        assert lines, self.describe()
        return json.loads(lines[-1])

    def describe(self) -> str:
        if self.timed_out:
            state = "was killed at its timeout"
        elif self.crashed:
            state = f"was killed by signal {-self.returncode}"  # type: ignore[operator]
        else:
            state = f"exited with {self.returncode}"
        return (
            f"the fresh process {state}:\n--- stdout (end) ---\n{self.stdout[-1500:]}\n"
            f"--- stderr (end) ---\n{self.stderr[-3000:]}"
        )


def run_script(
    script: str,
    *args: str,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    memory_cap: int | None = None,
    path: Sequence[Path | str] = (),
) -> Outcome:
    """Run ``script`` (dedented) as ``python -c`` with ``args`` in a new process.

    ``path``: folders put first on the process's module search path. ``env``: variables set
    on top of this process's environment. ``memory_cap`` (bytes) limits the address space of
    the process (``RLIMIT_AS``).
    """
    argv = ["-c", textwrap.dedent(script), *args]
    return _run(argv, timeout=timeout, cwd=cwd, env=env, memory_cap=memory_cap, path=path)


def run_module(
    module: str,
    *args: str,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    path: Sequence[Path | str] = (),
) -> Outcome:
    """Run ``python -m module args`` in a new process (e.g. ``run_module("treeclass", "demo")``)."""
    return _run(["-m", module, *args], timeout=timeout, cwd=cwd, env=env, path=path)


def write_modules(folder: Path, modules: Mapping[str, str]) -> Path:
    """Write each ``{"name": source}`` (dedented) as ``folder/name.py``, replacing any file
    of that name; return ``folder`` (created if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return folder


def report_in(
    folder: Path,
    script: str,
    *args: str,
    modules: Mapping[str, str] | None = None,
    path: Sequence[Path | str] = (),
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
) -> Any:
    """Write ``modules`` into ``folder``, run ``script`` there with ``folder`` (then ``path``)
    first on the path, and return the JSON it printed last (a failing process fails the test)."""
    write_modules(folder, modules or {})
    search = [folder, *path]
    return run_script(script, *args, timeout=timeout, cwd=folder, env=env, path=search).report()


def _run(
    argv: list[str],
    *,
    timeout: float,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    path: Sequence[Path | str],
    memory_cap: int | None = None,
) -> Outcome:
    assert "PYTHONPATH" not in (env or {}), "pass the folders to put on the path as path="
    # Search path: the caller's folders, then an explicit PYTHONPATH of this process (to run
    # these tests against another checkout's src), then this checkout's src.
    search = [*map(str, path), os.environ.get("PYTHONPATH", ""), SRC]
    full_env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": os.pathsep.join(filter(None, search)),
        "HF_HUB_OFFLINE": "1",
        **(env or {}),
    }

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))

    try:
        proc = subprocess.run(
            [sys.executable, *argv],
            cwd=cwd,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=cap if memory_cap else None,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Outcome(None, out, err)
    return Outcome(proc.returncode, proc.stdout, proc.stderr)
