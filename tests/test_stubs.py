"""The partial stubs in ``stubs/`` (what mypy and pyright check the adapters against, with or
without the frameworks installed) say nothing the installed frameworks contradict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    config.write_text("[mypy]\n")  # not the project's config: stubtest checks the stubs alone
    command = [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config)]
    command += [
        "--ignore-missing-stub",
        *(module for modules in CASES.values() for module in modules),
    ]
    for framework in CASES:
        allowlist = STUBS / f"{framework}-stubtest-allowlist.txt"
        if allowlist.exists():
            command += ["--allowlist", str(allowlist)]
    proc = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(STUBS)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
