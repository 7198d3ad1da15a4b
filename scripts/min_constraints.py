"""Write pip constraints that pin the declared lower bounds of pyproject.toml exactly.

    python scripts/min_constraints.py --sets             # the sets, one a line: jax orbax
    python scripts/min_constraints.py SET > min.txt      # the constraints of one set
    pip install -c min.txt -e ".[$(python scripts/min_constraints.py SET --extras)]"
    python scripts/min_constraints.py SET --names        # its pinned names, as a regex
    python scripts/min_constraints.py --build            # the build backend's floor
    python scripts/min_constraints.py --torch            # the torch extra's floor: torch==N.N

The minimum-versions CI job (``.ci/run``) makes one venv per set, installs it with these
constraints and runs the test suite, so the bounds users read in pyproject.toml and the
versions the job tests cannot drift apart. A set is a group of extras (``SETS``; together they
cover every extra); within a set every ``>=`` bound of the dependencies and of its extras
becomes ``==`` (the highest, where two extras bound one package). Two sets, because the floors
cannot share one venv: the ``[orbax]`` extra needs jax>=0.7.1 (and so numpy>=1.26), while
the ``[jax]`` extra's floor is 0.4.36 with numpy 1.24. Not pinned at their floor:

- the ``dev`` extra's tools (pytest, mypy, ...; and ruff, which the ``docs`` extra also
  names: mkdocstrings formats signatures with it), which the job takes at the versions of
  ``scripts/constraints.txt`` (the test suite's expected mypy/pyright errors are those
  versions'); ``safetensors`` in ``dev`` is a framework the tests interoperate with, so its
  floor is pinned;
- torch (no set has the ``[torch]`` extra): its floor (``--torch``) is CI's ``torch_floor``
  job's, which installs it alone with the torch suite (the registry's build of an older torch
  is a CUDA build of several GB); the adapter refuses an older torch naming the version
  (``treeclass._backends.torch.MIN_TORCH_VERSION``).

``CAPS`` below adds bounds on packages the floors pull in, only where the resolver's choice
breaks the floors (each with its reason).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent

# Pinned from scripts/constraints.txt instead of at their floor (test tools, see above).
TOOLS = frozenset({"pytest", "pytest-xdist", "hypothesis", "mypy", "pyright", "ruff", "jsonschema"})
# Bounds on transitive dependencies the floors need (package -> (spec, reason)).
CAPS: dict[str, tuple[str, str]] = {}
# The venvs of the minimum-versions job, by the extras they install (see the docstring).
SETS: dict[str, tuple[str, ...]] = {
    "jax": ("attrs", "jax", "optree", "files"),
    "orbax": ("attrs", "jax", "optree", "orbax", "flax", "docs"),
}

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _load(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest's dependency
        import tomli as tomllib
    return cast("dict[str, Any]", tomllib.loads(pyproject.read_text()))


def _release(version: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise SystemExit(f"floor {version!r} is not a plain release number (N.N.N)")
    return tuple(int(part) for part in version.split("."))


#: The Python the minimum-versions job runs (.ci/run min_versions): a requirement whose
#: environment marker excludes it (a Python 3.10-only line) is not that job's to pin.
JOB_PYTHON = "3.11"


def applies(marker: str | None) -> bool:
    """Whether a requirement with this environment marker is installed on the job's Python.

    ``marker``: what follows the requirement's ``;`` (``"python_version < '3.11'"``), or None.
    """
    if not marker:
        return True
    from packaging.markers import Marker

    return Marker(marker.lstrip(";").strip()).evaluate(
        {"python_version": JOB_PYTHON, "python_full_version": f"{JOB_PYTHON}.0"}
    )


def floors(
    extras: tuple[str, ...] | None = None, pyproject: Path = ROOT / "pyproject.toml"
) -> dict[str, str]:
    """The lower bound of each package of the dependencies and ``extras`` (all: None), by name.

    A package two extras bound gets the higher floor: the one the two extras both allow.
    """
    project = _load(pyproject)["project"]
    declared = project.get("optional-dependencies", {})
    groups = {"": project.get("dependencies", [])}
    groups |= {g: r for g, r in declared.items() if extras is None or g in extras}
    out: dict[str, str] = {}
    for group, requirements in groups.items():
        for requirement in requirements:
            match = _REQ.match(requirement)
            if match is None:
                raise SystemExit(f"cannot read requirement {requirement!r} of extra {group!r}")
            name = _canonical(match.group(1))
            if not applies(match.group(4)):
                continue
            if name in TOOLS:  # dev's tools, and the docs extra's ruff
                continue
            bounds = re.findall(r">=\s*([^,\s]+)", match.group(3))
            if not bounds:
                raise SystemExit(
                    f"{requirement!r} (extra {group!r}) declares no lower bound (>=): "
                    "every dependency needs one, which the minimum-versions job installs"
                )
            out[name] = max(out.get(name, bounds[0]), bounds[0], key=_release)
    return out


def tool_pins(constraints: Path = ROOT / "scripts" / "constraints.txt") -> list[str]:
    """The test tools' lines of scripts/constraints.txt (markers included)."""
    lines = []
    for line in constraints.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
        if match and _canonical(match.group(1)) in TOOLS:
            lines.append(line.split("#", 1)[0].rstrip())
    return lines


def render(set_name: str) -> str:
    """The constraints file's text for the set ``set_name``."""
    extras = SETS[set_name]
    out = ["# Generated by scripts/min_constraints.py from pyproject.toml: do not edit."]
    out.append(f"# Set {set_name!r}: the lower bounds of the extras {', '.join(extras)}, exactly.")
    out.extend(f"{name}=={version}" for name, version in sorted(floors(("dev", *extras)).items()))
    if CAPS:
        out.append("# Bounds on what the floors pull in (the resolver's choice breaks them).")
        for name, (spec, reason) in sorted(CAPS.items()):
            out.append(f"{name}{spec}  # {reason}")
    out.append("# Test tools, as scripts/constraints.txt pins them.")
    out.extend(tool_pins())
    return "\n".join(out) + "\n"


def build_floors() -> list[str]:
    """``[build-system] requires``, each pinned at its floor."""
    out = []
    for requirement in _load()["build-system"]["requires"]:
        match = _REQ.match(requirement)
        bounds = re.findall(r">=\s*([^,\s]+)", match.group(3)) if match else []
        if match is None or not bounds:
            raise SystemExit(f"build requirement {requirement!r} declares no lower bound (>=)")
        out.append(f"{_canonical(match.group(1))}=={bounds[0]}")
    return out


def main(args: list[str]) -> str:
    """The command line's output (see the module docstring)."""
    if args == ["--sets"]:
        return "\n".join(SETS)
    if args == ["--build"]:
        return "\n".join(build_floors())
    if args == ["--torch"]:
        return f"torch=={floors(('torch',))['torch']}"
    if args and args[0] in SETS and len(args) <= 2:
        set_name, option = args[0], (args[1:] or [None])[0]
        if option is None:
            return render(set_name).rstrip("\n")
        if option == "--extras":
            return ",".join(SETS[set_name])
        if option == "--names":
            names = floors(("dev", *SETS[set_name]))
            return "|".join(n.replace("-", "[-_.]") for n in sorted(names))
    raise SystemExit(
        f"usage: min_constraints.py (--sets | --build | --torch | SET [--extras | --names]), "
        f"SET one of {', '.join(SETS)}; got {args}"
    )


if __name__ == "__main__":
    print(main(sys.argv[1:]))
