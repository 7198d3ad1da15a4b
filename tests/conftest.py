"""Shared test configuration.

Backend tests skip when their framework is not installed. In CI (``TREECLASS_REQUIRE_BACKENDS=1``,
set by ``.ci/run``) every skip is turned into a failure of the session, so a missing jax, torch,
optree, transformers or ray can never pass unnoticed.

CPython built for WebAssembly (Pyodide: CI's py314 job) starts no process and no thread: the
tests marked ``processes`` or ``threads`` are skipped there, with the reason, and so is every
test that runs a fresh Python (``tests/_subproc.py``, at its first run).

``TREECLASS_ALLOW_MISSING=torch`` (comma-separated top-level packages) lets that run skip the
tests of the listed frameworks only: a skip passes when it is ``pytest.importorskip``'s of a
module of a listed package *and* that package is not installed (CI's Python matrix, where torch
installs on one Python only). Every other skip still fails the run.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

import pytest
from _skips import allowed_missing, allowed_skip
from _subproc import CAN_START_PROCESSES, NO_PROCESSES

REQUIRE_BACKENDS = os.environ.get("TREECLASS_REQUIRE_BACKENDS") == "1"
ALLOW_MISSING = allowed_missing()

# The helper modules of the tests (``_subproc.py``, ``_ray_defs.py``...) have no doctests:
# not collected, they are imported only by the tests that use them (``_ray_defs`` imports
# ray, after test_ray's importorskip), not by every worker.
collect_ignore_glob = ["_*.py"]

_skipped: list[str] = []

#: Whether this interpreter can start a thread: not CPython on WebAssembly, unless built with
#: pthreads (Pyodide is not).
_wasm = getattr(sys, "_emscripten_info", None)
CAN_START_THREADS = sys.platform != "wasi" and (_wasm is None or bool(_wasm.pthreads))
NO_THREADS = f"starts a thread, which CPython on WebAssembly ({sys.platform}) cannot"

#: The markers of what some interpreters cannot do: (name, possible, skip reason).
_CAPABILITIES = (
    ("processes", CAN_START_PROCESSES, NO_PROCESSES),
    ("threads", CAN_START_THREADS, NO_THREADS),
)


def pytest_configure(config: pytest.Config) -> None:
    for name, _, _ in _CAPABILITIES:
        config.addinivalue_line(
            "markers", f"{name}: the test starts {name}; skipped where the interpreter cannot"
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the tests marked ``processes`` / ``threads`` where the interpreter cannot."""
    for name, possible, reason in _CAPABILITIES:
        if not possible:
            for item in items:
                if item.get_closest_marker(name) is not None:
                    item.add_marker(pytest.mark.skip(reason=reason))


def _record_skip(report: Any) -> None:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not allowed_skip(reason, ALLOW_MISSING):
            _skipped.append(f"{report.nodeid}: {reason}")


pytest_runtest_logreport = _record_skip
pytest_collectreport = _record_skip


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if REQUIRE_BACKENDS and _skipped:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line("")
            tr.write_line(
                f"TREECLASS_REQUIRE_BACKENDS=1 and {len(_skipped)} test(s) were skipped"
                + (
                    f" (allowed: {', '.join(sorted(ALLOW_MISSING))} missing)"
                    if ALLOW_MISSING
                    else ""
                )
                + ":",
                red=True,
            )
            for line in _skipped:
                tr.write_line(f"  {line}", red=True)
        session.exitstatus = 1


@pytest.fixture
def uname() -> str:
    """A serialized name no other test uses."""
    return f"tests.{uuid.uuid4().hex[:12]}"


#: The documents the schema accepted in this process (tests write the same ones again and again).
_schema_valid: set[str] = set()


@pytest.fixture(autouse=True)
def _every_written_document_matches_the_schema(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validate every document a test writes with ``tc.treespec_dumps`` against the schema.

    (The fuzz modules write tens of thousands; test_format_fuzz validates a sample itself.)
    """
    if request.module.__name__.endswith(("test_format_fuzz", "test_hostile_fuzz")):
        return
    from _treespec_schema import validate_document

    import treeclass

    real = treeclass.treespec_dumps

    def checked(spec: Any) -> str:
        text = real(spec)
        # Bigger ones (deep-tree tests) only cost time: same shapes. Each text once a process.
        if len(text) <= 100_000 and text not in _schema_valid:
            validate_document(text)
            _schema_valid.add(text)
        return text

    monkeypatch.setattr(treeclass, "treespec_dumps", checked)
