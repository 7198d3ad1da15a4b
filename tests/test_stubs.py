"""The partial stubs in ``stubs/`` (what mypy and pyright check the adapters against, with or
without the frameworks installed) say nothing the installed frameworks contradict."""

from __future__ import annotations

from pathlib import Path

import pytest
from _subproc import FRAMEWORKS, run_module

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "stubs"

CASES = {
    "jax": ["jax.tree_util", "jax.export"],
    "torch": [
        "torch.utils._pytree",
        "torch.export",
        "torch.serialization",
        "torch._library.opaque_object",
        "torch.utils.data",
    ],
    "optree": ["optree"],
    "flax": ["flax.serialization"],
    "orbax.checkpoint": ["orbax.checkpoint"],
    "tensorstore": ["tensorstore"],
}


@pytest.mark.slow
@pytest.mark.checked_release  # stubs/ describes the releases scripts/constraints.txt pins
def test_stubs_agree_with_the_installed_frameworks(tmp_path: Path) -> None:
    """One stubtest run over every framework's modules (one mypy build instead of five)."""
    pytest.importorskip("mypy.stubtest")
    for framework in CASES:
        pytest.importorskip(framework)
    config = tmp_path / "stubtest.ini"
    # Not the project's config: stubtest checks the stubs alone.
    config.write_text(f"[mypy]\nmypy_path = {STUBS}\n")
    args = ["--mypy-config-file", str(config), "--ignore-missing-stub"]
    args += [module for modules in CASES.values() for module in modules]
    for framework in CASES:
        allowlist = STUBS / f"{framework}-stubtest-allowlist.txt"
        if allowlist.exists():
            args += ["--allowlist", str(allowlist)]
    # stubtest imports the modules it checks: forked with jax and torch already imported.
    outcome = run_module("mypy.stubtest", *args, cwd=tmp_path, timeout=600, preload=FRAMEWORKS)
    assert outcome.returncode == 0, outcome.stdout[-4000:] + outcome.stderr[-2000:]
