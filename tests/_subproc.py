"""Run a script in a fresh interpreter with a timeout (and optionally a memory cap).

For tests of promises that a broken implementation breaks by hanging, crashing or running out
of memory: the script runs in its own process, so a quadratic loop, a deadlock or a segfault
fails the one test instead of the session. Never used to measure time: a timeout is chosen so
that a linear implementation finishes in a small fraction of it even on a loaded machine, while
the implementation it guards against needs many times longer (see each test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC = str(Path(__file__).resolve().parent.parent / "src")

_PRELUDE = """\
import resource as _resource, sys as _sys
_cap = {cap!r}
if _cap:
    _resource.setrlimit(_resource.RLIMIT_AS, (_cap, _cap))
"""


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

    def report(self) -> Any:
        """The last line of stdout, parsed as JSON (fails the test with the process's stderr)."""
        assert self.returncode == 0, self.describe()
        lines = self.stdout.strip().splitlines()
        assert lines, self.describe()
        return json.loads(lines[-1])

    def describe(self) -> str:
        if self.timed_out:
            state = "was killed at its timeout"
        elif self.crashed:
            state = f"was killed by signal {-self.returncode}"  # type: ignore[operator]
        else:
            state = f"exited with {self.returncode}"
        return f"the fresh process {state}:\n--- stderr (end) ---\n{self.stderr[-3000:]}"


def run_script(
    script: str,
    *args: str,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    memory_cap: int | None = None,
) -> Outcome:
    """Run ``script`` (dedented) in a new Python process; never raises on failure or timeout.

    ``memory_cap`` (bytes) limits the address space of the process (``RLIMIT_AS``).
    """
    code = _PRELUDE.format(cap=memory_cap) + textwrap.dedent(script)
    extra = dict(env or {})
    # Search path: the caller's extra folders, then an explicit PYTHONPATH of this process (to
    # run these tests against another checkout's src), then this checkout's src.
    path = [extra.pop("PYTHONPATH", ""), os.environ.get("PYTHONPATH", ""), SRC]
    full_env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": os.pathsep.join(filter(None, path)),
        "HF_HUB_OFFLINE": "1",
        **extra,
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=cwd,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Outcome(None, out, err)
    return Outcome(proc.returncode, proc.stdout, proc.stderr)
