"""``python -m treeclass demo`` runs end to end and rebuilds in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_and_reloads_in_a_fresh_interpreter() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "treeclass", "demo"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "classes are the registered ones: True" in out.stdout
    assert "model_name='tiny-lm', layer_sizes=(4, 4)" in out.stdout
    assert '"treeclass.demo.CausalLMOutput"' in out.stdout


def test_cli_usage_and_version() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "treeclass", "nope"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "usage: python -m treeclass" in bad.stderr
    ver = subprocess.run(
        [sys.executable, "-m", "treeclass", "version"], capture_output=True, text=True, check=True
    )
    assert ver.stdout.startswith("treeclass 0.1.0; frameworks installed:")
