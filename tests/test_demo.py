"""``python -m treeclass demo`` runs end to end and rebuilds in a fresh interpreter."""

from __future__ import annotations

from _subproc import run_module


def test_demo_runs_and_reloads_in_a_fresh_interpreter() -> None:
    out = run_module("treeclass", "demo", timeout=600).checked()
    assert "classes are the registered ones: True" in out.stdout
    assert "model_name='tiny-lm', layer_sizes=(4, 4)" in out.stdout
    assert '"treeclass.demo.CausalLMOutput"' in out.stdout


def test_cli_usage_and_version() -> None:
    bad = run_module("treeclass", "nope", timeout=300)
    assert bad.returncode == 2 and "usage: python -m treeclass" in bad.stderr
    ver = run_module("treeclass", "version", timeout=300).checked()
    assert ver.stdout.startswith("treeclass 0.1.0; frameworks installed:")
