"""The ``treeclass`` command line: ``inspect``, ``check``, ``demo`` and ``version``.

``treeclass inspect PATH ... [--import MODULE ...] [--json]`` shows the structure of each file
from :func:`treeclass.save`, a safetensors file, a ``torch.export`` archive (``.pt2``), a
``jax.export`` blob or a treespec document -- key paths, shapes, dtypes -- every class name it
needs, registered or not after importing the given modules (and whether it is registered as
an alias, an earlier name of a class), and whether it **loads** with the classes registered
here: its structure goes through the loader's own code
(:func:`treeclass._io.artifacts.load_problem`), which applies each class's evolution rule, so
"does not load" comes with the loader's reason. It exits with status 1 when a file does not
load or names a class that is not registered, 2 when one cannot be read. It never executes
anything from the artifact (:mod:`treeclass._io.artifacts`).

``treeclass check MODULE ...`` imports the modules and lists the classes they register (the
registration call made by code in one of them or a submodule, or the class defined in one;
``--all``: every registered class): its name, data and static fields, aliases; it flags
classes without a name and static defaults that cannot be serialized (status 1).

Colour and the progress line appear only on a terminal (and never with ``NO_COLOR`` set).
Text output escapes every character of the file's that is not printable (control characters,
ANSI escapes, CR/LF, bidirectional overrides, lone surrogates) as Python writes it in a
string literal: what the file holds can neither move the cursor nor fake a line.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import partialmethod
from typing import TYPE_CHECKING

from .._backends.activation import FRAMEWORKS, complete
from .._core.registry import class_for_name, name_of, registered_nodes
from .._core.state import encode_for
from .._core.statics import static_for_name
from .._errors import TreeclassError, UnserializableStaticError, qualname
from .._version import __version__
from . import schema
from .artifacts import Artifact, load_problem, needed_names, read_artifact
from .demo import run as run_demo

if TYPE_CHECKING:
    import argparse
    from collections.abc import Generator, Sequence
    from typing import IO, Any, Final, TypeAlias

    from .._core.nodes import NodeType


__all__ = ["main"]

#: Exit statuses.
OK: Final = 0
MISSING: Final = 1
ERROR: Final = 2

_DEPTH_SHOWN: Final = 32  # deeper nodes are indented no further
_PATH_LIMIT: Final = 1000  # longest key path written in --json output
_WHY_LIMIT: Final = 2000  # longest reason for "does not load" shown in text


def _terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class _Style:
    """ANSI colours, or nothing when the stream is not a terminal."""

    def __init__(self, stream: IO[str]) -> None:
        import os

        env = os.environ
        self.on = _terminal(stream) and not env.get("NO_COLOR") and env.get("TERM") != "dumb"

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text

    bold = partialmethod(_wrap, "1")
    dim = partialmethod(_wrap, "2")
    red = partialmethod(_wrap, "31;1")
    green = partialmethod(_wrap, "32")
    cyan = partialmethod(_wrap, "36")


@contextmanager
def _progress(message: str) -> Generator[None, None, None]:
    """A transient status line on stderr, only when stderr is a terminal."""
    on = _terminal(sys.stderr)
    if on:
        sys.stderr.write(f"{message}...")
        sys.stderr.flush()
    try:
        yield
    finally:
        if on:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _import_modules(modules: Sequence[str], err: IO[str]) -> bool:
    """Import the user's modules (found from the current directory too, as ``python -m``).

    Fails closed: a module that raises anything at import -- ``sys.exit()`` (``SystemExit``,
    even with status 0) or another ``BaseException`` -- is reported and the command exits
    with status 2. ``KeyboardInterrupt`` (the user's Ctrl-C) still stops the command.
    """
    import importlib
    import os

    if modules and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    ok = True
    for name in modules:
        try:
            importlib.import_module(name)
        except KeyboardInterrupt:
            raise
        except SystemExit as e:
            code = repr(e.code) if e.code is None or isinstance(e.code, int) else _describe(e)
            err.write(
                f"treeclass: cannot import {name!r}: it called sys.exit({code}) while being "
                "imported.\n"
            )
            ok = False
        except BaseException as e:  # the user's module: report whatever it raised
            err.write(f"treeclass: cannot import {name!r}: {type(e).__name__}: {_describe(e)}\n")
            ok = False
    return ok


def _describe(e: BaseException) -> str:
    """The message of the user's exception, escaped and elided (even if ``str`` raises)."""
    try:
        text = str(e)
    except Exception:  # the user's __str__
        text = "(its message cannot be shown)"
    return _safe(_elide(text, 500))


def _safe(text: str) -> str:
    r"""``text`` with every non-printable character escaped (``\x1b``, ``\n``, ``\ud800``).

    For anything that comes from a file: a control character, an ANSI escape, CR/LF or a
    bidirectional override could move the cursor, recolour or fake a line of the output, and
    a lone surrogate cannot be encoded at all.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# --- inspect ----------------------------------------------------------------------------------


def _resolve(kind: str, name: str) -> tuple[bool, str, str | None]:
    """Whether ``name`` is registered here, and where (for messages).

    The third item is the class's name when ``name`` is one of its aliases (earlier names).
    """
    if kind == "static":
        return static_for_name(name) is not None, "static type", None
    cls = class_for_name(name)
    if cls is not None:
        current = name_of(cls)
        where = qualname(cls)
        if current is not None and current != name:
            return True, f"{where}, as an alias of {current!r}", current
        return True, where, None
    for framework in FRAMEWORKS:  # a framework's own name for a class (never imports)
        lookup = getattr(complete(framework.adapter), "class_for_serialized_name", None)
        found = None if lookup is None else lookup(name)
        if found is not None:
            return True, f"{qualname(found)} (registered with {framework.name} only)", None
    return False, "", None


def _elide(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def _shown(text: str, limit: int) -> str:
    """``text`` elided to ``limit`` characters, then escaped (:func:`_safe`)."""
    return _safe(_elide(text, limit))


#: A needed name: ``(kind, name, registered, where, alias of)`` (see :func:`_resolve`).
_Needed: TypeAlias = "tuple[str, str, bool, str, str | None]"


def _render_text(
    art: Artifact, path: str, limit: int, names: list[_Needed], problem: str | None, out: IO[str]
) -> None:
    s = _Style(out)
    out.write(f"{s.bold(_safe(path))}: {art.kind}")
    if art.notes:
        out.write(f" ({_safe('; '.join(art.notes))})")
    out.write("\n")
    for tree in art.trees:
        out.write(f"\n{s.bold(_safe(tree.label))}:\n")
        for shown, node in enumerate(tree.nodes):
            if limit and shown >= limit:
                out.write(f"  ... {len(tree.nodes) - shown} more nodes (--limit 0 shows all)\n")
                break
            indent = "  " * min(node.depth, _DEPTH_SHOWN) + "  "
            key = s.cyan(_shown(node.key, 120)) if node.key else s.dim("(root)")
            if node.leaf:
                out.write(f"{indent}{key}  {_safe(node.detail)}\n")
            else:
                label = s.bold(_safe(node.type)) if node.name else _safe(node.type)
                detail = f"  {s.dim(_safe(node.detail))}" if node.detail else ""
                out.write(f"{indent}{key}  {label}{detail}\n")
    if names:
        out.write(f"\n{s.bold('names needed')}:\n")
    for kind, name, ok, where, _ in names:
        if ok:
            out.write(f"  {_safe(name)}  {s.green('registered')} ({_safe(where)})\n")
        else:
            what = "class" if kind == "class" else "static type"
            out.write(
                f"  {_safe(name)}  {s.red('MISSING')} ({what}: no registration in this process)\n"
            )
    if art.metadata:
        out.write(f"\n{s.bold('metadata')}:\n")
        for k, v in art.metadata.items():
            out.write(f"  {_safe(k)} = {_shown(v, 200)}\n")
    if problem is None:
        out.write(f"\n{s.green('loads')} ({art.loader}, with the classes registered here)\n")
    else:
        why = _shown(problem, _WHY_LIMIT)
        out.write(f"\n{s.red('does not load')} ({art.loader}): {why}\n")


def _document(art: Artifact, path: str, names: list[_Needed], problem: str | None) -> Any:
    """The ``--json`` document of one artifact."""
    trees: list[dict[str, Any]] = []
    for tree in art.trees:
        nodes: list[dict[str, Any]] = []
        # The keys from the root to the current node, and the running length of their text.
        parts: list[str] = []
        lengths: list[int] = [0]
        for node in tree.nodes:
            del parts[max(node.depth - 1, 0) :]
            del lengths[max(node.depth, 1) :]
            if node.depth:
                parts.append(node.key)
                lengths.append(lengths[-1] + len(node.key))
            entry: dict[str, Any] = {"depth": node.depth, "key": node.key, "leaf": node.leaf}
            if node.leaf:
                # As tc.keystr writes it (for tc.load(paths=...)); null past _PATH_LIMIT.
                entry["path"] = "".join(parts) if lengths[-1] <= _PATH_LIMIT else None
            else:
                entry["type"] = node.type
                entry["name"] = node.name
            entry["detail"] = node.detail
            nodes.append(entry)
        trees.append({"label": tree.label, "nodes": nodes})
    doc = {
        "path": path,
        "kind": art.kind,
        "notes": art.notes,
        "trees": trees,
        "names": [
            {"name": n, "kind": k, "registered": ok, "where": where or None, "alias_of": alias}
            for k, n, ok, where, alias in names
        ],
        "missing": [n for _, n, ok, _, _ in names if not ok],
        "metadata": art.metadata,
        "loader": art.loader,
        "loads": problem is None,
        "load_error": problem,
    }
    return doc


def _inspect(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    import json

    if not _import_modules(args.modules, err):
        return ERROR
    status = OK
    docs: list[Any] = []
    failed: list[str] = []
    for i, path in enumerate(args.paths):
        try:
            with _progress(f"reading {path}"):
                art = read_artifact(path)
        except (TreeclassError, OSError) as e:
            err.write(f"treeclass: {_safe(str(e))}\n")
            status = ERROR
            continue
        names = [(kind, name, *_resolve(kind, name)) for kind, name in needed_names(art)]
        with _progress(f"loading the structure of {path}"):
            problem = load_problem(art)
        if args.json:
            docs.append(_document(art, path, names, problem))
        else:
            if i:
                out.write("\n")
            _render_text(art, path, args.limit, names, problem, out)
        missing = [name for _, name, ok, _, _ in names if not ok]
        if missing:
            shown = _safe(", ".join(missing))
            err.write(
                f"treeclass: {len(missing)} name(s) not registered: {shown}; import the "
                "module(s) that register them (--import MODULE).\n"
            )
        if problem is not None or missing:
            failed.append(path)
    if args.json and docs:
        out.write(json.dumps(docs[0] if len(args.paths) == 1 else docs, indent=1) + "\n")
    if failed:
        err.write(f"treeclass: does not load: {_safe(', '.join(failed))}\n")
    return status if status != OK or not failed else MISSING


def _default_problem(node: NodeType, field: str, value: Any) -> str | None:
    """What saving ``value`` in static field ``field`` of ``node``'s class says, or ``None``.

    The writers' own check and encoding (``StateCodec.getstate``), for this one field.
    """
    check = None if node.codec is None else node.codec.check_statics
    if check is None:  # pragma: no cover - a class with static fields has one
        return None
    values = tuple(value if s == field else None for s in node.static_fields)
    try:
        check(values, frozenset((field,)), True)
        encode_for(node.qualname, f"static field {field!r}", value)
    except UnserializableStaticError as e:
        return str(e)
    return None


# --- check ------------------------------------------------------------------------------------


def _check(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    import json

    if not _import_modules(args.modules, err):
        return ERROR
    s = _Style(out)
    problems = 0
    rows: list[dict[str, Any]] = []
    for node in registered_nodes():
        if node.info is None:  # pragma: no cover - registered classes are described
            continue
        if not args.all and not schema.registered_by(node.origin, node.type, args.modules):
            continue
        flags: list[str] = []
        if node.name is None:
            flags.append(
                "has no name=, so it cannot be serialized (treespec_dumps, tc.save, jax.export, "
                "torch.export); give it a stable name"
            )
        statics: list[dict[str, Any]] = []
        for f in node.info.fields:
            if not f.static:
                continue
            problem = value = None
            if f.has_default:
                try:
                    value = f.make_default()
                except Exception as e:  # a default_factory that fails is worth showing
                    value = e
                    problem = f"its default factory raised {type(e).__name__}: {e}"
                else:
                    problem = _default_problem(node, f.name, value)
            if problem is not None:
                flags.append(f"the default of static field {f.name!r} cannot be used: {problem}")
            statics.append(
                {
                    "field": f.name,
                    "default": repr(value) if f.has_default else None,
                    "problem": problem,
                }
            )
        problems += len(flags)
        rows.append(
            {
                "name": node.name,
                "class": qualname(node.type),
                "kind": node.kind,
                "data": list(node.info.data_fields),
                "static": statics,
                "aliases": list(node.aliases),
                "problems": flags,
            }
        )
    if args.json:
        out.write(json.dumps({"classes": rows, "problems": problems}, indent=1) + "\n")
    else:
        if args.all:
            out.write(f"{len(rows)} registered class(es)\n")
        else:
            out.write(f"{len(rows)} class(es) registered by {', '.join(args.modules)}\n")
        for row in rows:
            name = s.bold(row["name"]) if row["name"] else s.red("(no name)")
            out.write(f"\n{name}  {row['class']} ({row['kind']})\n")
            out.write(f"  data:    {', '.join(row['data']) or '-'}\n")
            shown = [
                f"{st['field']}={st['default']}" if st["default"] is not None else st["field"]
                for st in row["static"]
            ]
            out.write(f"  static:  {', '.join(shown) or '-'}\n")
            out.write(f"  aliases: {', '.join(row['aliases']) or '-'}\n")
            for flag in row["problems"]:
                out.write(f"  {s.red('!')} {flag}\n")
    if not rows and not args.all:
        err.write(
            f"treeclass: {', '.join(args.modules)} register(s) no class (--all lists every "
            "registered class).\n"
        )
    if problems:
        err.write(f"treeclass: {problems} problem(s) found.\n")
        return MISSING
    return OK


# --- entry point ------------------------------------------------------------------------------


def _schema(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    lock = None
    if args.schema_command == "check":
        try:
            lock = schema.read_lock_file(args.against)
        except TreeclassError as e:
            err.write(f"treeclass: {_safe(str(e))}\n")
            return ERROR
    if not _import_modules(args.modules, err):
        return ERROR
    if lock is None:
        return schema.dump_command(args.modules, args.output, out)
    return schema.check_command(lock, args.modules, args.mode, args.json, out)


def _parser() -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m treeclass" if sys.argv[0].endswith("__main__.py") else "treeclass",
        description="Inspect saved pytree artifacts and check treeclass registrations.",
    )
    p.add_argument("--version", action="version", version=f"treeclass {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    ins = sub.add_parser(
        "inspect",
        help="show the structure of a saved file and the class names it needs",
        description=(
            "Show the structure of each file -- from treeclass.save, a safetensors file, a "
            "torch.export .pt2 archive, a jax.export blob or a treespec JSON document -- the "
            "class names it needs, and whether it loads with the classes registered here: its "
            "structure goes through the loader's own code (treeclass.load, "
            "treeclass.treespec_loads, torch.export.load's treespec loading, "
            "jax.export.deserialize's per-node callbacks), so a renamed field without "
            "aliases=, a removed one without removed_fields=, a new one without a default "
            "is reported as 'does not load' with the loader's reason. Nothing in the file is "
            "executed or imported; a .pt2 archive or a jax.export blob holding classes has "
            "its framework imported. Exit status: 0 every file loads, 1 one does not (or "
            "names a class that is not registered), 2 one cannot be read. With --json and "
            "several files, a list of documents."
        ),
    )
    ins.add_argument("paths", nargs="+", metavar="PATH")
    ins.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (it registers classes); may be repeated",
    )
    ins.add_argument("--json", action="store_true", help="write JSON instead of text")
    ins.add_argument(
        "--limit", type=int, default=2000, help="nodes shown per structure (0: all; text only)"
    )
    chk = sub.add_parser(
        "check",
        help="import modules and list the classes they register",
        description=(
            "Import the modules and list the classes they register with treeclass: name, "
            "data and static fields, aliases. A class counts when the registration call was "
            "made by code in one of the modules (or a submodule) -- a library's class "
            "registered there included -- or when the class is defined in one; classes "
            "registered by other code they import (treeclass's optax adapter, other "
            "libraries) are left out unless --all is given. Flags classes without a name and "
            "static defaults that cannot be serialized (exit status 1; 2 when a module cannot "
            "be imported)."
        ),
    )
    chk.add_argument("modules", nargs="+", metavar="MODULE")
    chk.add_argument("--json", action="store_true", help="write JSON instead of text")
    chk.add_argument(
        "--all",
        action="store_true",
        help="list every class registered in the process, whoever registered it",
    )
    sch = sub.add_parser(
        "schema",
        help="write a schema lock of the classes of modules, or check them against one",
        description=(
            "dump: write a lock (JSON) of every class the modules register. check: whether "
            "artifacts written by the locked classes still load (backward), whether the "
            "locked classes load what today's write (forward), or both (full), per loader "
            "family. Exit status: 0 compatible, 1 not, 2 the lock cannot be read."
        ),
    )
    schema_sub = sch.add_subparsers(dest="schema_command", metavar="SUBCOMMAND", required=True)
    dump = schema_sub.add_parser("dump", help="write the lock of the classes of modules")
    dump.add_argument("modules", nargs="+", metavar="MODULE")
    dump.add_argument("-o", "--output", metavar="PATH", help="write to PATH (default: stdout)")
    against = schema_sub.add_parser("check", help="check the classes of modules against a lock")
    against.add_argument("modules", nargs="+", metavar="MODULE")
    against.add_argument("--against", required=True, metavar="PATH", help="the lock file")
    against.add_argument("--mode", choices=("backward", "forward", "full"), default="backward")
    against.add_argument("--json", action="store_true", help="write JSON instead of text")
    sub.add_parser("demo", help="a short demonstration in a fresh interpreter")
    sub.add_parser("version", help="treeclass's version and the frameworks installed")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m treeclass`` and the ``treeclass`` script."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    out, err = sys.stdout, sys.stderr
    for stream in (out, err):
        # A character the terminal's encoding lacks is written escaped, never an error.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    if args.command == "inspect":
        return _inspect(args, out, err)
    if args.command == "check":
        return _check(args, out, err)
    if args.command == "schema":
        return _schema(args, out, err)
    if args.command == "demo":
        return run_demo()
    if args.command == "version":
        found = [f.name for f in FRAMEWORKS if f.installed()]
        names = ", ".join(found) or "none"
        out.write(f"treeclass {__version__}; frameworks installed: {names}\n")
        return OK
    _parser().print_usage(err)
    return ERROR
