"""Every ```python block of every documentation page runs, in page order.

The pages are every Markdown file of ``docs/`` (the site, mkdocs.yml) and ``README.md``. The
blocks of one page run one after another in one fresh module namespace (a page reads like a
notebook: later blocks use what earlier ones defined), in a fresh process (as a reader runs
the page), in a temporary working directory. Blocks of ``>>>`` examples are doctests instead:
pytest collects ``docs/`` with ``--doctest-glob=*.md`` (pyproject.toml), and ``README.md`` may
not have any. ``docs/index.md`` includes sections of the README (pymdownx.snippets); their
blocks run as the README's.

A block that cannot run is preceded, on the line just above its fence, by

    <!-- docs-test: skip: <why, in words> -->

with the reason required, and counted in ``SKIPPED`` below: a new skip fails
``test_the_skipped_blocks_are_the_listed_ones`` until it is listed there. A failing block
fails the test with the page, the block's first line and the error.

Each page's test first checks that what its blocks import is installed (``NEEDS``): if not, it
skips, which ``TREECLASS_REQUIRE_BACKENDS=1`` (CI) turns into a failure (``tests/conftest.py``).
"""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from _subproc import FRAMEWORKS, Outcome, run_script

from treeclass._backends.activation import module_installed

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Page (relative to the repository) -> the packages its blocks import. Every page with a
#: python block is listed (``test_every_page_is_listed``).
NEEDS: dict[str, tuple[str, ...]] = {
    "README.md": (),
    "docs/distributed.md": ("ray", "numpy"),
    "docs/files.md": ("numpy", "torch", "jax"),
    "docs/format.md": (),
    "docs/getting-started-jax.md": ("jax", "numpy", "flatbuffers"),
    "docs/getting-started-torch.md": ("torch", "numpy"),
    "docs/jax-ecosystem.md": ("jax", "equinox", "optax", "orbax.checkpoint", "flax", "chex"),
    "docs/jax.md": ("jax", "flatbuffers"),
    "docs/migrating/chex.md": ("jax", "chex"),
    "docs/migrating/equinox.md": ("jax", "equinox", "numpy"),
    "docs/migrating/flax-struct.md": ("jax", "flax"),
    "docs/migrating/register-dataclass.md": ("jax", "torch"),
    "docs/optree.md": ("optree",),
    "docs/parity.md": ("jax", "torch", "optree"),
    "docs/schema.md": ("jax", "torch"),  # its verdicts of compiled programs need them
    "docs/testing.md": ("hypothesis", "numpy"),
    "docs/torch.md": ("torch", "transformers"),
}

#: Page -> how many of its python blocks are marked ``docs-test: skip`` (each with its reason
#: on the page). Nothing else is left out.
SKIPPED: dict[str, int] = {
    "docs/distributed.md": 2,  # Ray workers import a module; a two-process JAX program
    "docs/jax.md": 1,  # the adapter's own call, with names it does not define
    "docs/torch.md": 1,  # the loading program of torch.export, importing another package
}

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
_SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip:\s*(?P<reason>.*?)\s*-->\s*$")
_MIN_REASON = 10


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    line: int  # 1-based line of its first code line
    lang: str
    code: str
    skip_reason: str | None


def blocks(page: pathlib.Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order (fences may be indented, as in lists)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        close = m["indent"] + "```"
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != close:
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page.name}:{i + 1}: a code fence is never closed")
        skip = _SKIP.match(lines[i - 1]) if i else None
        code = textwrap.dedent("\n".join(lines[i + 1 : j]) + "\n")
        found.append(Block(i + 2, m["lang"], code, skip and skip["reason"]))
        i = j + 1
    return found


def pages() -> list[str]:
    """Every documentation page: docs/**/*.md and README.md, relative to the repository."""
    found = [p.relative_to(ROOT).as_posix() for p in sorted(DOCS.rglob("*.md"))]
    return ["README.md", *found]


def python_blocks(page: str) -> list[Block]:
    """The page's python blocks that are not doctests (``>>>`` blocks are)."""
    return [
        b
        for b in blocks(ROOT / page)
        if b.lang in ("python", "py") and not b.code.lstrip().startswith(">>>")
    ]


def test_the_block_parser(tmp_path: pathlib.Path) -> None:
    page = "text\n<!-- docs-test: skip: needs a GPU to show anything -->\n```python\nx = 1\n```\n"
    page += "```text\nnot code\n```\n```python\ny = 2\n\nz = 3\n```\n"
    page += "- a list item:\n\n  ```python\n  if y:\n      w = 4\n  ```\n"
    path = tmp_path / "p.md"
    path.write_text(page)
    got = blocks(path)
    assert [(b.line, b.lang, b.skip_reason) for b in got] == [
        (4, "python", "needs a GPU to show anything"),
        (7, "text", None),
        (10, "python", None),
        (17, "python", None),
    ]
    assert got[2].code == "y = 2\n\nz = 3\n"
    assert got[3].code == "if y:\n    w = 4\n"
    path.write_text("```python\nx = 1\n")
    with pytest.raises(AssertionError, match="never closed"):
        blocks(path)


def test_every_page_is_listed() -> None:
    with_code = {p for p in pages() if python_blocks(p)}
    assert with_code == set(NEEDS), (
        "every page with a python block must be in NEEDS, and only those: "
        f"missing {sorted(with_code - set(NEEDS))}, extra {sorted(set(NEEDS) - with_code)}"
    )


def test_the_readme_has_no_doctests() -> None:
    # README.md is not under docs/, so --doctest-glob would not run a ">>>" block there.
    assert not [b for b in blocks(ROOT / "README.md") if b.code.lstrip().startswith(">>>")]


def test_the_skipped_blocks_are_the_listed_ones() -> None:
    counted: dict[str, int] = {}
    for page in pages():
        for b in python_blocks(page):
            if b.skip_reason is not None:
                assert len(b.skip_reason) >= _MIN_REASON, (
                    f"{page}:{b.line}: a skipped block needs a reason in words"
                )
                counted[page] = counted.get(page, 0) + 1
    assert counted == SKIPPED


# Runs the blocks given as JSON [[label, code], ...] in one fresh module; on the first failure
# prints the block's label and traceback to stderr and exits with 1.
_RUNNER = """
import json, sys, traceback, types
module = types.ModuleType("docs_page")
sys.modules[module.__name__] = module
for label, code in json.loads(sys.argv[1]):
    try:
        exec(compile(code, label, "exec"), vars(module))
    except BaseException:
        print(f"the python block at {label} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
print(json.dumps({"ran": len(json.loads(sys.argv[1]))}))
"""


_FRAMEWORK_USE = re.compile(r"^\s*(?:import|from)\s+(?:jax|torch|treeclass\.testing)\b", re.M)


def _uses_frameworks(page: str, code: str) -> bool:
    """Whether ``page`` uses jax or torch: imports them, needs them (``tc.load(to="torch")``
    imports torch), or imports ``treeclass.testing`` (whose ``assert_roundtrip`` imports every
    installed framework). Such a page runs with them preloaded (``_subproc``'s ``preload``):
    already imported, as in a program that imported them before treeclass. What treeclass
    does when a framework is imported after it is the point of the import-order tests
    (test_import.py, test_races.py, the "both import orders" tests), not of the pages."""
    return bool({"jax", "torch"} & set(NEEDS[page])) or bool(_FRAMEWORK_USE.search(code))


def test_which_pages_run_with_the_frameworks_preloaded() -> None:
    assert _uses_frameworks(
        "README.md", "import numpy as np\nimport treeclass as tc\nimport torch\n"
    )
    assert _uses_frameworks("README.md", "  from jax import numpy as jnp\n")
    assert _uses_frameworks("README.md", "from treeclass.testing import assert_roundtrip\n")
    assert not _uses_frameworks("README.md", "import treeclass as tc\nimport torchvision\n")
    assert _uses_frameworks("docs/files.md", "import treeclass as tc\n")
    assert not _uses_frameworks("docs/optree.md", "import optree\nimport treeclass as tc\n")


def _missing(page: str) -> str | None:
    """The first package ``page`` needs that is not installed, or ``None``."""
    return next((p for p in NEEDS[page] if not module_installed(p)), None)


def _run_page(page: str, cwd: pathlib.Path) -> Outcome:
    to_run = [b for b in python_blocks(page) if b.skip_reason is None]
    assert to_run, f"{page} has no python block to run"
    code = json.dumps([[f"<{page}:{b.line}>", b.code] for b in to_run])
    preload = FRAMEWORKS if _uses_frameworks(page, "".join(b.code for b in to_run)) else ()
    outcome = run_script(_RUNNER, code, timeout=600, cwd=cwd, preload=preload)
    if outcome.returncode == 0:
        assert outcome.report() == {"ran": len(to_run)}
    return outcome


@pytest.fixture(scope="module")
def page_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, concurrent.futures.Future[Outcome]]]:
    """The selected pages, started two at a time as soon as the first one is asked for.

    Each page is its own process, so two run at once: one page's waits (``ray.init``, a
    checkpoint's background threads) leave the core to the other instead of idling.
    """
    selected = [
        item.callspec.params["page"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_every_python_block_runs"
    ]
    with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="docs-page") as pool:
        yield {
            page: pool.submit(_run_page, page, tmp_path_factory.mktemp("page"))
            for page in selected
            if _missing(page) is None
        }


@pytest.mark.processes  # (each page in a fresh process, two at a time from threads)
@pytest.mark.parametrize("page", sorted(NEEDS))
def test_every_python_block_runs(
    page: str, page_runs: dict[str, concurrent.futures.Future[Outcome]]
) -> None:
    """Each page runs in a fresh process, as a reader runs it: nothing leaks between pages
    (two pages may define the same class under the same name), and no earlier test's
    imports or registrations can make a page pass. Only numpy, jax and torch may already be
    imported, for a page that uses jax or torch (``_uses_frameworks``)."""
    missing = _missing(page)
    if missing is not None:
        pytest.skip(f"could not import {missing!r}, which {page} needs")  # importorskip's words
    outcome = page_runs[page].result()
    if outcome.returncode != 0:
        pytest.fail(outcome.describe(), pytrace=False)
