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

Every process runs its script through ``tests/_as_main.py`` (a fresh one as ``python -c`` of
that file's source), which runs it as ``python -c``/``-m`` would and ends it as the interpreter
does -- exit status, traceback, non-daemon threads joined, exit handlers run, streams flushed --
without tearing the modules down: that took a fresh process with torch a third of a second of
CPU, a few seconds of every run. So the objects alive at exit are not finalized: a script
closes what it writes. (That file lists the few differences from the interpreter.)

Where no process can be started (CPython on WebAssembly: ``CAN_START_PROCESSES``), every run
skips the test that asked for it.

``preload=FRAMEWORKS`` (run_script, run_module, report_in) starts the process by forking a
zygote (``tests/_zygote.py``, one per test process and preload list, started on first use)
that has imported those frameworks and nothing else: the child is the fresh process described
above -- its own cwd, environment, path, argv, stdout and stderr; treeclass and every module
of the test imported afresh -- except that the preloaded frameworks are already imported, it
shares the zygote's hash seed and numpy's global random state, and its ``__main__`` is a new
module (no ``__loader__``, ``__builtins__`` a dict). That saves the framework
imports (seconds of CPU per process). A test whose point is import order, a first import, or
what is not imported yet must not pass ``preload``, nor a script written to import treeclass
before the frameworks for what that order does. With ``memory_cap``, with an ``env`` that sets
a variable not in ``READ_AFTER_IMPORT`` (one the frameworks may read when imported), or with
``TREECLASS_TESTS_NO_ZYGOTE=1`` in the environment, ``preload`` is ignored: a real fresh
process runs. The zygote serves children at the same time (the processes of a distributed
job, each run from its own thread).

A timeout is never a time measurement: it is chosen so that a correct implementation finishes in
a small fraction of it even on a loaded machine, while what it guards against (a quadratic loop,
a deadlock) needs many times longer; a segfault or a memory blow-up (``memory_cap``) fails the
one test instead of the session.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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
    preload: Sequence[str] = (),
) -> Outcome:
    """Run ``script`` (dedented) as ``python -c`` with ``args`` in a new process.

    ``path``: folders put first on the process's module search path. ``env``: variables set
    on top of this process's environment. ``memory_cap`` (bytes) limits the address space of
    the process (``RLIMIT_AS``). ``preload``: frameworks already imported (module docstring).
    """
    argv = ["-c", textwrap.dedent(script), *args]
    return _run(
        argv, timeout=timeout, cwd=cwd, env=env, memory_cap=memory_cap, path=path, preload=preload
    )


def run_module(
    module: str,
    *args: str,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    path: Sequence[Path | str] = (),
    preload: Sequence[str] = (),
) -> Outcome:
    """Run ``python -m module args`` in a new process (e.g. ``run_module("treeclass", "demo")``)."""
    argv = ["-m", module, *args]
    return _run(argv, timeout=timeout, cwd=cwd, env=env, path=path, preload=preload)


def write_modules(folder: Path, modules: Mapping[str, str]) -> Path:
    """Write each ``{"name": source}`` (dedented) as ``folder/name.py``, replacing any file
    of that name; return ``folder`` (created if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        path = folder / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        # Its bytecode cached by an earlier process is stale: it would be loaded in its place
        # when both sources have the same size and modification second (bytecode is written
        # unless PYTHONDONTWRITEBYTECODE is set).
        Path(importlib.util.cache_from_source(str(path))).unlink(missing_ok=True)
    return folder


def report_in(
    folder: Path,
    script: str,
    *args: str,
    modules: Mapping[str, str] | None = None,
    path: Sequence[Path | str] = (),
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
    preload: Sequence[str] = (),
) -> Any:
    """Write ``modules`` into ``folder``, run ``script`` there with ``folder`` (then ``path``)
    first on the path, and return the JSON it printed last (a failing process fails the test)."""
    write_modules(folder, modules or {})
    search = [folder, *path]
    outcome = run_script(
        script, *args, timeout=timeout, cwd=folder, env=env, path=search, preload=preload
    )
    return outcome.report()


def _run(
    argv: list[str],
    *,
    timeout: float,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    path: Sequence[Path | str],
    memory_cap: int | None = None,
    preload: Sequence[str] = (),
) -> Outcome:
    assert "PYTHONPATH" not in (env or {}), "pass the folders to put on the path as path="
    if not CAN_START_PROCESSES:
        pytest.skip(NO_PROCESSES)
    full_env = _environment(path, env)
    # Only what is installed is preloaded (a run at minimum versions may lack torch): the
    # script imports the rest itself, or fails as it would in a fresh process.
    preload = tuple(name for name in preload if importlib.util.find_spec(name) is not None)
    if preload and set(env or ()) <= READ_AFTER_IMPORT and memory_cap is None and not _NO_ZYGOTE:
        return _zygote(preload).run(argv, timeout=timeout, cwd=cwd, env=full_env)

    def cap() -> None:
        assert memory_cap is not None
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))

    try:
        proc = subprocess.run(
            [sys.executable, "-c", _AS_MAIN, *argv],
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


def _environment(path: Sequence[Path | str], env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of a fresh process (module docstring)."""
    # Search path: the caller's folders, then an explicit PYTHONPATH of this process (to run
    # these tests against another checkout's src), then this checkout's src.
    search = [*map(str, path), os.environ.get("PYTHONPATH", ""), SRC]
    return {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": os.pathsep.join(filter(None, search)),
        "HF_HUB_OFFLINE": "1",
        **(env or {}),
    }


#: Whether this interpreter can start a process: not CPython built for WebAssembly (Pyodide, in
#: CI's py314 job). A test that runs one is skipped there at its first ``run_script``,
#: ``run_module`` or ``report_in`` (what it checked before ran); one that starts processes
#: otherwise is marked ``processes`` (``tests/conftest.py`` skips it with this reason).
CAN_START_PROCESSES = sys.platform not in ("emscripten", "wasi")
NO_PROCESSES = f"starts a process, which CPython on WebAssembly ({sys.platform}) cannot"

#: The frameworks a test usually preloads (one zygote per test process serves all their uses).
FRAMEWORKS = ("numpy", "jax", "torch")

#: Environment variables read only after the frameworks are imported: an ``env`` of these
#: alone leaves ``preload`` in effect (the forked child sets them before anything reads them).
#: Not here: ``OMP_NUM_THREADS`` (read when torch is imported: ``torch.set_num_threads``
#: instead), ``JAX_PLATFORMS`` and every ``JAX_*`` (read when jax is imported).
READ_AFTER_IMPORT = frozenset(
    (
        "GLOO_SOCKET_IFNAME",  # by gloo, when a process group is made
        "XLA_FLAGS",  # by XLA, when jax makes its first backend
        "TF_CPP_MIN_LOG_LEVEL",  # by XLA's logging, at its first message
    )
)

_NO_ZYGOTE = os.environ.get("TREECLASS_TESTS_NO_ZYGOTE") == "1"
_ZYGOTE_FILE = str(Path(__file__).resolve().parent / "_zygote.py")
#: What every process runs (module docstring): a fresh one as ``python -c _AS_MAIN -c SCRIPT
#: ARGS`` (or ``-m MODULE ARGS``), a zygote's child by executing it in its new ``__main__``.
_AS_MAIN = (Path(__file__).resolve().parent / "_as_main.py").read_text()


class _Zygote:
    """One ``tests/_zygote.py`` server of this test process (see the module docstring)."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="treeclass-zygote-")
        self._log = Path(self._folder.name) / "zygote.log"
        with self._log.open("w") as log:
            self._proc = subprocess.Popen(
                [sys.executable, _ZYGOTE_FILE, json.dumps(list(preload))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=_environment((), None),
                cwd=self._folder.name,
                start_new_session=True,
            )
        self._send = threading.Lock()  # one request at a time, until its child's pid
        self._cond = threading.Condition()  # guards the answers read so far
        self._reading = False  # whether a thread is reading the server's answers
        self._pids: list[int] = []
        self._exits: dict[int, int] = {}
        self._count = 0
        self._pending = b""

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._folder.cleanup()

    def _read(self, timeout: float | None) -> None:
        """Read what the server answered (``pid PID``, ``exit PID CODE`` lines) within
        ``timeout`` seconds; only one thread reads at a time."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return
        chunk = os.read(fd, 4096)
        if not chunk:
            raise RuntimeError(f"the zygote died:\n{self._log.read_text()[-3000:]}")
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        with self._cond:
            for line in lines:
                kind, *numbers = line.split()
                if kind == b"pid":
                    self._pids.append(int(numbers[0]))
                else:
                    self._exits[int(numbers[0])] = int(numbers[1])

    def _wait_for(self, take: Any, timeout: float | None) -> int | None:
        """``take()`` (an answer, removed from what was read) once it is not None; None if
        that takes more than ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                while True:
                    got: int | None = take()
                    if got is not None:
                        return got
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return None
                    if not self._reading:
                        self._reading = True
                        break
                    self._cond.wait(left)
            try:  # this thread reads, the others wait for what it read
                self._read(None if left is None else min(left, 1.0))
            finally:
                with self._cond:
                    self._reading = False
                    self._cond.notify_all()

    def run(
        self, argv: list[str], *, timeout: float, cwd: Path | None, env: dict[str, str]
    ) -> Outcome:
        with self._send:
            self._count += 1
            base = Path(self._folder.name) / str(self._count)
            out, err = base.with_suffix(".out"), base.with_suffix(".err")
            request = {
                "argv": argv,
                "cwd": str(cwd or os.getcwd()),
                "env": env,
                "stdout": str(out),
                "stderr": str(err),
            }
            base.with_suffix(".json").write_text(json.dumps(request))
            assert self._proc.stdin is not None
            self._proc.stdin.write(f"{base.with_suffix('.json')}\n".encode())
            self._proc.stdin.flush()
            # The server answers a fork at once, and forks in the order of the requests.
            pid = self._wait_for(lambda: self._pids.pop(0) if self._pids else None, 60)
        if pid is None or pid <= 0:
            raise RuntimeError(f"the zygote gave no child's pid (got {pid!r})")
        code = self._wait_for(lambda: self._exits.pop(pid, None), timeout)
        if code is None:  # the hang guard: kill it, as subprocess.run does
            # The child is not reaped (its pid not reused) until the server's waitpid,
            # which then writes its exit code: always read, so no answer is left over.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._wait_for(lambda: self._exits.pop(pid, None), None)
        outcome = Outcome(
            code,
            out.read_text(errors="replace") if out.exists() else "",
            err.read_text(errors="replace") if err.exists() else "",
        )
        for used in (out, err, base.with_suffix(".json")):
            used.unlink(missing_ok=True)
        return outcome


_zygotes: dict[tuple[str, ...], _Zygote] = {}
_zygotes_lock = threading.Lock()


def _zygote(preload: tuple[str, ...]) -> _Zygote:
    with _zygotes_lock:
        if preload not in _zygotes:
            if not _zygotes:
                atexit.register(lambda: [z.close() for z in _zygotes.values()])
            _zygotes[preload] = _Zygote(preload)
        return _zygotes[preload]
