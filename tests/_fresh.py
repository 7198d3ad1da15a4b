"""Run a script in a fresh interpreter and read the JSON report it prints last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any


def run_fresh(script: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """Run ``script`` (dedented) with ``args`` in a new Python process; return its last line
    of output parsed as JSON. A failing process fails the test with the end of its stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=cwd,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
