"""Every ```python block of the documentation pages listed here runs, in page order.

The blocks of one page run one after another in one fresh module namespace (a page reads like
a notebook: later blocks use what earlier ones defined), in a temporary working directory. A
block that must not run is preceded, on the line just above its fence, by

    <!-- docs-test: skip: <why, in words> -->

and the reason is required. A failing block fails the test with the page, the block's first
line and the error.
"""

from __future__ import annotations

import pathlib
import re
import sys
import traceback
import types
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Page -> the packages its blocks import (each test skips without them; CI installs them).
PAGES: dict[str, tuple[str, ...]] = {
    "distributed.md": ("ray", "numpy"),  # the JAX program runs in tests/test_jax_distributed.py
    "format.md": (),
    "jax-ecosystem.md": ("jax", "equinox", "optax", "orbax.checkpoint", "flax", "chex"),
    "jax.md": ("jax", "flatbuffers"),
    "optree.md": ("optree",),
    "testing.md": ("hypothesis", "numpy"),
}

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
_SKIP = re.compile(r"^<!--\s*docs-test:\s*skip:\s*(?P<reason>.*?)\s*-->\s*$")
_MIN_REASON = 10


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    line: int  # 1-based line of its first code line
    lang: str
    code: str
    skip_reason: str | None


def blocks(page: pathlib.Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page.name}:{i + 1}: a code fence is never closed")
        skip = _SKIP.match(lines[i - 1]) if i else None
        found.append(
            Block(i + 2, m["lang"], "\n".join(lines[i + 1 : j]) + "\n", skip and skip["reason"])
        )
        i = j + 1
    return found


def test_the_block_parser(tmp_path: pathlib.Path) -> None:
    page = "text\n<!-- docs-test: skip: needs a GPU to show anything -->\n```python\nx = 1\n```\n"
    page += "```text\nnot code\n```\n```python\ny = 2\n\nz = 3\n```\n"
    path = tmp_path / "p.md"
    path.write_text(page)
    got = blocks(path)
    assert [(b.line, b.lang, b.skip_reason) for b in got] == [
        (4, "python", "needs a GPU to show anything"),
        (7, "text", None),
        (10, "python", None),
    ]
    assert got[2].code == "y = 2\n\nz = 3\n"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_python_block_runs(
    name: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for package in PAGES[name]:
        pytest.importorskip(package)
    page = DOCS / name
    # Blocks of ">>>" examples are doctests (pytest collects docs/ with --doctest-glob).
    python_blocks = [
        b for b in blocks(page) if b.lang == "python" and not b.code.lstrip().startswith(">>>")
    ]
    assert python_blocks, f"{name} has no python blocks"
    for b in python_blocks:
        if b.skip_reason is not None:
            assert len(b.skip_reason) >= _MIN_REASON, (
                f"{name}:{b.line}: a skipped block needs a reason in words"
            )
    module = types.ModuleType("docs_" + page.stem.replace("-", "_"))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.chdir(tmp_path)
    for b in python_blocks:
        if b.skip_reason is not None:
            continue
        try:
            exec(compile(b.code, f"<docs/{name}:{b.line}>", "exec"), vars(module))
        except Exception:
            pytest.fail(
                f"the python block at docs/{name}:{b.line} failed:\n{traceback.format_exc()}",
                pytrace=False,
            )
