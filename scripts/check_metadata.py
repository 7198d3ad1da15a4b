"""Check a built wheel's or sdist's core metadata against what pyproject.toml means.

    python scripts/check_metadata.py dist/stable_pytrees-*.whl dist/stable_pytrees-*.tar.gz

CI's min_versions job runs it on the wheel built by the build backend's floor, and the release
job on the wheel and sdist built by the pinned backend (``.ci/run``). It exits 1 naming every
difference:

- Metadata-Version 2.4 or newer, with the license as PEP 639 writes it: ``License-Expression``
  (pyproject's ``license``) and one ``License-File`` per ``license-files`` entry, the file
  itself in the archive, and no legacy ``License:`` field (older backends write
  Metadata 2.3 with ``License: MIT`` and no license file field);
- the name, ``Requires-Python``, the classifiers, the extras and every ``Project-URL`` exactly
  as pyproject.toml declares them (it declares no URL until the project has a home of its
  own: docs/contributing.md's release checklist).
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
OLDEST: tuple[int, int] = (2, 4)


def _pyproject(path: Path = ROOT / "pyproject.toml") -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest's dependency
        import tomli as tomllib
    return cast("dict[str, Any]", tomllib.loads(path.read_text())["project"])


def read(archive: Path) -> tuple[Message, set[str]]:
    """The archive's core metadata and the names of its files (relative to its top folder)."""
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as whl:
            names = whl.namelist()
            (meta,) = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            text = whl.read(meta).decode()
            dist_info = meta.rsplit("/", 1)[0]
            # PEP 639: license files are under .dist-info/licenses/.
            files = {n.removeprefix(f"{dist_info}/licenses/") for n in names}
    elif archive.name.endswith(".tar.gz"):
        with tarfile.open(archive) as sdist:
            names = sdist.getnames()
            top = names[0].split("/", 1)[0]
            member = sdist.extractfile(f"{top}/PKG-INFO")
            if member is None:
                raise SystemExit(f"{archive}: no PKG-INFO")
            text = member.read().decode()
            files = {n.removeprefix(f"{top}/") for n in names}
    else:
        raise SystemExit(f"{archive}: neither a wheel (.whl) nor an sdist (.tar.gz)")
    return HeaderParser().parsestr(text), files


def problems(meta: Message, files: set[str], project: dict[str, Any]) -> list[str]:
    """What differs between the metadata ``meta`` and pyproject's ``project`` table."""
    out = []
    version = str(meta.get("Metadata-Version", "0"))
    parts = tuple(int(p) for p in version.split(".")[:2])
    if parts < OLDEST:
        out.append(
            f"Metadata-Version is {version}, older than {OLDEST[0]}.{OLDEST[1]} (PEP 639: "
            "License-Expression and License-File): build with a newer backend"
        )
    if meta.get("License") is not None:
        out.append(f"a legacy License: field ({meta['License']!r}) instead of License-Expression")
    if meta.get("License-Expression") != project["license"]:
        out.append(
            f"License-Expression is {meta.get('License-Expression')!r}, "
            f"not pyproject's license {project['license']!r}"
        )
    license_files = meta.get_all("License-File") or []
    if sorted(license_files) != sorted(project["license-files"]):
        out.append(f"License-File is {license_files}, not {project['license-files']}")
    out.extend(f"License-File {f} is not in the archive" for f in license_files if f not in files)
    expected = {
        "Name": [project["name"]],
        "Requires-Python": [project["requires-python"]],
        "Classifier": project.get("classifiers", []),
        "Provides-Extra": list(project.get("optional-dependencies", {})),
        "Project-URL": [f"{k}, {v}" for k, v in project.get("urls", {}).items()],
    }
    for field, want in expected.items():
        got = meta.get_all(field) or []
        if sorted(got) != sorted(want):
            out.append(f"{field}: the metadata has {got}, pyproject.toml declares {want}")
    return out


def main(args: list[str]) -> int:
    """Check each archive named; print what is wrong and return 1 if anything is."""
    if not args:
        raise SystemExit("usage: check_metadata.py ARCHIVE...")
    project = _pyproject()
    failed = False
    for name in args:
        meta, files = read(Path(name))
        found = problems(meta, files, project)
        if found:
            failed = True
            print(f"{name}: the metadata is not what pyproject.toml means:", file=sys.stderr)
            for problem in found:
                print(f"  - {problem}", file=sys.stderr)
        else:
            print(
                f"{Path(name).name}: Metadata-Version {meta['Metadata-Version']}, "
                f"License-Expression {meta['License-Expression']}, "
                f"License-File {', '.join(meta.get_all('License-File') or [])}, "
                f"{len(meta.get_all('Project-URL') or [])} project URLs"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
