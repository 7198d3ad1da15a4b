"""``torch.export`` save / load and treespec loading that are safe and name what is missing.

Importing this module imports torch. Nothing here is needed to *use* treeclass classes with
torch -- they are registered with torch's pytrees automatically -- but torch's own loaders are
neither safe on untrusted files nor clear when they fail:

- :func:`torch.export.load` unpickles parts of the archive without restriction, evaluates text
  from it as Python (symbolic sizes through ``sympy.sympify``; guards through ``exec`` when the
  program's module is built), and imports modules the archive names; when a class is not
  registered it only says "We ran into an error when deserializing the saved file" (the cause
  goes to the warning log). :func:`load` refuses such archives unless told ``trusted=True``,
  and raises a treeclass error naming what is missing, without torch's log.
- :func:`torch.utils._pytree.treespec_loads` imports the modules named by enum contexts and
  ``defaultdict`` factories (``os.system`` is a factory it accepts) and raises bare
  ``KeyError`` / ``AssertionError`` / ``ModuleNotFoundError``. :func:`treespec_loads` reads the
  same text itself, resolving only registered names, and raises only treeclass errors.

Example:
    >>> import treeclass.torch as tct
    >>> tct.treespec_loads(
    ...     '[1, {"type": "nowhere.Missing", "context": "{}", "children_spec": []}]'
    ... )  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    treeclass.UnregisteredNameError: this treespec uses the serialized name 'nowhere.Missing', ...
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from typing import IO, TYPE_CHECKING, Any, Final

import torch.export
import torch.utils._pytree as pytree

from ._errors import TreespecLoadError, UnregisteredNameError
from ._torch_archive import CHECKED_TORCH_VERSION, UnsafeArchiveError, check_archive
from ._torch_state import StatefulTree, load_state_dict, state_dict
from ._torch_treespec import treespec_from_json

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = [
    "CHECKED_TORCH_VERSION",
    "StatefulTree",
    "UnsafeArchiveError",
    "load",
    "load_state_dict",
    "save",
    "state_dict",
    "treespec_loads",
]

# torch 2.13.0 wording of the two "not registered" errors raised while loading a treespec
# (torch/utils/_pytree.py: _json_to_treespec and _namedtuple_deserialize).
_MISSING_NODE: Final = re.compile(r"^Deserializing (?P<name>.+) in pytree is not registered\.$")
_MISSING_NAMEDTUPLE: Final = re.compile(
    r"^Can't deserialize TreeSpec of namedtuple class (?P<name>.+) because we couldn't find"
)
# Loggers torch.export.load reports on (torch 2.13.0): the cause of a failed load goes to
# "torch.export" (torch/export/__init__.py), fallbacks to the other two.
_TORCH_LOGGERS: Final = (
    "torch.export",
    "torch.export.pt2_archive._package",
    "torch._export.serde.serialize",
)


def _missing_name(error: BaseException) -> str | None:
    """The serialized name a torch "not registered" error is about, or ``None``."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, NotImplementedError) and e.args:
            text = str(e.args[0])
            m = _MISSING_NODE.match(text) or _MISSING_NAMEDTUPLE.match(text)
            if m is not None:
                return m.group("name")
        e = e.__cause__ or e.__context__
    return None


def _unregistered(name: str, what: str) -> UnregisteredNameError:
    return UnregisteredNameError(
        f"{what} uses the serialized name {name!r}, but no class is registered under it in "
        f"this process; import the module that defines the class registered as {name!r} "
        "(with treeclass: name=... on pytree_dataclass / register_dataclass / "
        "register_namedtuple) before loading."
    )


def treespec_loads(serialized: str | bytes) -> pytree.TreeSpec:
    """Load a treespec written by :func:`torch.utils._pytree.treespec_dumps`, safely.

    Gives the spec torch's ``treespec_loads`` gives for the same text, but never imports a
    module or resolves anything by module path: node types are looked up among the names
    registered with torch's pytree in this process (treeclass registers its classes under
    their ``name=``) and torch's built-in containers. A ``defaultdict`` factory must be a
    built-in type (``list``, ``dict``, ``int``, ...); an enum in a context, which torch writes
    by module path, is refused. Unlike torch's, the result is not cached.

    Args:
        serialized: the JSON text (``str``, or UTF-8 ``bytes``).

    Returns:
        The :class:`torch.utils._pytree.TreeSpec`.

    Raises:
        UnregisteredNameError: the text names a node type (or namedtuple) that is not
            registered in this process; the message names it.
        TreespecLoadError: anything else wrong with the text (not JSON, duplicate keys, a
            wrong shape, a factory or enum that would need an import, a wrong number of
            children).

    Example:
        >>> import torch.utils._pytree as pt
        >>> import treeclass.torch as tct
        >>> spec = pt.tree_structure({"a": [1, 2], "b": (3,)})
        >>> tct.treespec_loads(pt.treespec_dumps(spec)) == spec
        True

    .. versionchanged:: 0.1.0 Reads the text itself instead of calling torch's loader.
    """
    return treespec_from_json(serialized)


class _ThisThreadOnly(logging.Filter):
    """Drops the records one thread logs (while it runs a load); other threads log as usual."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.errors: list[BaseException] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread:
            return True
        if record.exc_info is not None and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])
        return False


@contextlib.contextmanager
def _quiet_torch() -> Generator[_ThisThreadOnly, None, None]:
    """Keep torch's load-time warnings (with tracebacks) out of the log; collect their errors.

    Filters sit on the loggers themselves, so they work whatever handlers and levels are set
    up. Under ``logging.disable`` nothing is logged at all, and nothing is collected.
    """
    quiet = _ThisThreadOnly()
    loggers = [logging.getLogger(name) for name in _TORCH_LOGGERS]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield quiet
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


def _source(f: str | os.PathLike[str] | IO[bytes]) -> str:
    if isinstance(f, (str, os.PathLike)):
        return repr(os.fspath(f))
    name: object = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"this {type(f).__name__}"


def load(
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
    trusted: bool = False,
) -> torch.export.ExportedProgram:
    """:func:`torch.export.load`, safe on files you do not trust, with errors that say why.

    Before torch reads the archive, everything in it that torch would *run* is checked (see
    ``docs/torch.md``): pickled parts (the example inputs, pickled weights and constants) must
    load with ``torch.load(weights_only=True)``; opaque and TorchScript objects and
    AOTInductor-compiled code are refused; the symbolic sizes (which torch evaluates with
    ``sympy.sympify``) and guards (which ``ExportedProgram.module()`` runs with ``exec``) must
    be plain expressions; the input and output treespecs are read with :func:`treespec_loads`,
    which never imports. Only then does torch load it.

    An archive written by :func:`save` (no example inputs) passes when its classes are
    registered. One written by plain :func:`torch.export.save` whose example inputs hold
    instances of your classes is refused (their pickle names treeclass's rebuild function,
    which torch's weights-only unpickler does not allow); load it with ``trusted=True`` if you
    trust it, or save it again with :func:`save`.

    torch's own warning log about the load is kept out of the log (only while this thread
    loads); the treeclass error is raised alone.

    Args:
        f: the file name or binary file object written by :func:`torch.export.save` (or
            :func:`save`); a file object must be seekable.
        extra_files: as for :func:`torch.export.load`.
        expected_opset_version: as for :func:`torch.export.load`.
        trusted: skip the checks and let torch load the file as it does (only for files from
            a source you trust: torch may run code stored in the file).

    Returns:
        The loaded :class:`torch.export.ExportedProgram`.

    Raises:
        UnsafeArchiveError: the archive holds something torch would run to load it (the
            message says what, and how to load it if you trust it).
        UnregisteredNameError: the program's inputs or outputs use a serialized name that
            no class is registered under in this process; the message names it.
        TreespecLoadError: the archive is not one treeclass can check (another format
            version, malformed parts).
        RuntimeError: torch could not load the file for another reason; the cause torch
            logged is chained as ``__cause__``.

    Example:
        >>> import treeclass.torch as tct
        >>> tct.load("model.pt2")  # doctest: +SKIP
        >>> tct.load("my_own_model.pt2", trusted=True)  # doctest: +SKIP

    .. versionchanged:: 0.1.0 Checks the archive first; ``trusted=``.
    """
    if not trusted:
        if isinstance(f, (str, os.PathLike)):
            with open(f, "rb"):  # a missing file is a FileNotFoundError, as with torch
                pass
        with _quiet_torch():
            check_archive(f, _source(f))
    with _quiet_torch() as quiet:
        try:
            return torch.export.load(
                f, extra_files=extra_files, expected_opset_version=expected_opset_version
            )
        except RuntimeError as e:
            for cause in (e, *quiet.errors):
                name = _missing_name(cause)
                if name is not None:
                    raise _unregistered(name, "the saved program") from None
            if trusted:
                # torch only logged the cause, and the log may be off (logging.disable):
                # read the program's treespecs again to name a missing class.
                try:
                    check_archive(f, _source(f), treespecs_only=True)
                except UnregisteredNameError:
                    raise
                except TreespecLoadError:
                    pass  # not about a missing name: torch's own error says more
            if quiet.errors and e.__cause__ is None:
                raise e from quiet.errors[-1]
            raise


def save(
    ep: torch.export.ExportedProgram,
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    keep_example_inputs: bool = False,
) -> None:
    """:func:`torch.export.save`, leaving out the example inputs by default.

    torch pickles ``ep.example_inputs`` into the file; the program itself only needs the
    stable serialized names. Instances of named treeclass classes pickle by their names
    (unless registered with ``pickle_by_name=False``), which :func:`load` and torch's
    weights-only unpickler accept; anything else in them that weights-only loading refuses
    makes :func:`load` refuse the file unless ``trusted=True``. Leaving them out keeps the
    file loadable from untrusted sources, and smaller. ``ep`` itself is not changed.

    Args:
        ep: the exported program.
        f: a file name or a binary file object.
        extra_files: as for :func:`torch.export.save`.
        keep_example_inputs: save ``ep.example_inputs`` as well, as torch does.
    """
    if keep_example_inputs or ep.example_inputs is None:
        torch.export.save(ep, f, extra_files=extra_files)
        return
    kept = ep.example_inputs
    ep.example_inputs = None
    try:
        torch.export.save(ep, f, extra_files=extra_files)
    finally:
        ep.example_inputs = kept
