"""``torch.export`` save / load and treespec loading that name what is missing.

Importing this module imports torch. Nothing here is needed to *use* treeclass classes with
torch -- they are registered with torch's pytrees automatically -- but torch's own loaders are
not clear when a class is missing:

- :func:`torch.export.load`, when a class is not registered, only says "We ran into an error
  when deserializing the saved file" (the cause goes to the warning log). :func:`load` is
  :func:`torch.export.load` raising :class:`~treeclass.UnregisteredNameError` naming the
  missing name instead. It adds no safety: a ``.pt2`` archive can run code when torch
  loads it (torch unpickles parts of it and evaluates text from it as Python); load only
  archives you trust. For data from elsewhere use :func:`treeclass.save` /
  :func:`treeclass.load` (safetensors, no code) and the treespec loaders.
- :func:`torch.utils._pytree.treespec_loads` imports the modules named by enum contexts and
  ``defaultdict`` factories (``os.system`` is a factory it accepts) and raises bare
  ``KeyError`` / ``AssertionError`` / ``ModuleNotFoundError``. :func:`treespec_loads` reads the
  same text itself, resolving only registered names, and raises only treeclass errors.

Also :func:`allow_weights_only`, the switch for ``torch.load(weights_only=True)`` of treeclass
instances pickled by name (on by default; see ``docs/torch.md``).

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

import collections
import contextlib
import logging
import os
import threading
from typing import IO, TYPE_CHECKING, Any, Final

from .._errors import TreespecLoadError, UnregisteredNameError, missing_framework, unregistered_name

try:
    import torch.export
    import torch.utils._pytree as pytree
except ModuleNotFoundError as e:
    raise missing_framework("treeclass.torch", "torch", e) from e

from .._backends.torch import (
    NOT_KEPT,
    child_count,
    class_for_serialized_name,
    kept_context,
    serialization_of,
)
from .._io.torchspec import Where, arity, json_context, parse_json, read, where
from ._state import StatefulTree, load_state_dict, state_dict

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = [
    "StatefulTree",
    "allow_weights_only",
    "load",
    "load_state_dict",
    "save",
    "state_dict",
    "treespec_loads",
]

# Loggers torch.export.load reports a failed load's cause and fallbacks on (torch 2.13.0).
_TORCH_LOGGERS: Final = (
    "torch.export",
    "torch.export.pt2_archive._package",
    "torch._export.serde.serialize",
)


#: The type torch's TreeSpec holds for a container of :data:`treeclass._io.torchspec.CONTAINERS`.
_TYPES: Final[dict[str, Any]] = {
    "builtins.tuple": tuple,
    "builtins.list": list,
    "builtins.dict": dict,
    "collections.OrderedDict": collections.OrderedDict,
    "collections.defaultdict": collections.defaultdict,
    "collections.deque": collections.deque,
}


def _unregistered(name: str) -> UnregisteredNameError:
    return unregistered_name(name, "this treespec")


def _resolve(name: str, context: Any, at: Where, k: int) -> tuple[Any, Any]:
    """``(type, context)`` of a node as torch's TreeSpec holds it."""
    typ = _TYPES.get(name)
    if typ is not None:
        return typ, context
    if name == "collections.namedtuple":
        cls = class_for_serialized_name(context)
        fields: Any = getattr(cls, "_fields", None)
        if cls is None or fields.__class__ is not tuple:
            raise _unregistered(context)
        arity(f"{where(at)} ({context!r})", len(fields), k)
        return collections.namedtuple, cls
    cls = class_for_serialized_name(name)
    serialize = None if cls is None else serialization_of(cls)
    if cls is None or serialize is None:
        raise _unregistered(name)
    label = f"{where(at)} ({name!r})"
    if serialize.from_dumpable_context is None:
        # torch would json.loads it with its enum hook (which imports); we parse it strictly.
        return cls, json_context(context, label)
    if context.__class__ is str:
        parse_json(context, f"the context of {label}")  # duplicate keys, bad numbers
    try:
        value = serialize.from_dumpable_context(context)
    except TreespecLoadError:
        raise
    except Exception as e:
        raise TreespecLoadError(
            f"the context of {label} was refused by the from_dumpable_context registered for "
            f"{cls.__module__}.{cls.__qualname__}: {type(e).__name__}: {str(e)[:200]}"
        ) from None
    expected = child_count(cls, value)
    if expected is not None:
        arity(label, expected, k)
    return cls, value


def _leaf() -> pytree.TreeSpec:
    # torch's one leaf spec (public from torch 2.10; the floor has it). A TreeSpec(None, None,
    # []) is no leaf: it counts 0 leaves (torch 2.7 to 2.9 had a LeafSpec class instead).
    return pytree.treespec_leaf()


def treespec_loads(serialized: str | bytes) -> pytree.TreeSpec:
    """Load a treespec written by :func:`torch.utils._pytree.treespec_dumps`, safely.

    Gives the spec torch's ``treespec_loads`` gives for the same text, but never imports a
    module or resolves anything by module path: node types are looked up among the names
    registered with torch's pytree in this process (treeclass registers its classes under
    their ``name=``) and torch's built-in containers. A ``defaultdict`` factory must be a
    built-in type (``list``, ``dict``, ``int``, ...); an enum in a context, which torch writes
    by module path, is refused. Unlike torch's, the result is not cached; nodes of one type
    and one immutable context whose children are all leaves may share one (frozen) ``TreeSpec``
    object, as all of torch's leaves share one.

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
    entries = read(serialized)
    leaf = _leaf()
    # (name, context text, arity) -> [type, context, copy?, spec]: a context nodes may share
    # (kept_context), with the frozen spec of such a node whose children are all leaves.
    known: dict[tuple[str, str, int], list[Any]] = {}
    built: list[pytree.TreeSpec] = []
    for name, context, k, flat, at in reversed(entries):
        if name is None:
            built.append(leaf)
            continue
        memo = None
        if context.__class__ is str:
            key = (name, context, k)
            memo = known.get(key)
            if memo is None:
                typ, value = _resolve(name, context, at, k)
                kept = kept_context(value)
                if kept is not NOT_KEPT:
                    memo = known[key] = [typ, kept, kept.__class__ is list, None]
            else:
                typ, value = memo[0], memo[1]
                if memo[2]:
                    value = value.copy()
        else:
            typ, value = _resolve(name, context, at, k)
        if flat:
            if memo is None or memo[2]:
                built.append(pytree.TreeSpec(typ, value, [leaf] * k))
            else:
                if memo[3] is None:
                    memo[3] = pytree.TreeSpec(typ, value, [leaf] * k)
                built.append(memo[3])
            continue
        kids = built[len(built) - k :] if k else []
        if k:
            del built[len(built) - k :]
            kids.reverse()
        built.append(pytree.TreeSpec(typ, value, kids))
    return built[0]


class _HeldLog(logging.Filter):
    """Holds back the records one thread logs while it runs a load (logged after, or discarded)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.records: list[logging.LogRecord] = []
        self.errors: list[BaseException] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread:
            return True
        self.records.append(record)
        if record.exc_info is not None and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])
        return False


@contextlib.contextmanager
def _hold_torch_log() -> Generator[_HeldLog, None, None]:
    """Hold back torch's load-time log, collecting its errors (filters on the loggers)."""
    held = _HeldLog()
    loggers = [logging.getLogger(name) for name in _TORCH_LOGGERS]
    for logger in loggers:
        logger.addFilter(held)
    try:
        yield held
    finally:
        for logger in loggers:
            logger.removeFilter(held)
        for record in held.records:
            logging.getLogger(record.name).handle(record)


def _missing_in_archive(
    f: str | os.PathLike[str] | IO[bytes], start: int | None
) -> UnregisteredNameError | None:
    """The error naming a class the archive's program uses that is not registered, if any.

    Reads the in/out treespecs of each program record (``models/``, torch 2.13.0) without
    importing; anything else wrong gives ``None`` (torch's error says more). A file object is
    put back at ``start``.
    """
    from torch.export.pt2_archive import PT2ArchiveReader

    # torch's reader takes a str or a file object (a Path would be taken for a file object).
    target: Any = os.fspath(f) if isinstance(f, (str, os.PathLike)) else f
    try:
        if start is not None:
            target.seek(start)
        with PT2ArchiveReader(target) as reader:
            for record in reader.get_file_names():
                if not record.startswith("models/"):
                    continue
                doc: Any = parse_json(reader.read_bytes(record), record)
                for call in doc["graph_module"]["module_call_graph"]:
                    signature: Any = call.get("signature") or {}
                    for key in ("in_spec", "out_spec"):
                        if signature.get(key) is None:
                            continue
                        try:
                            treespec_loads(signature[key])
                        except UnregisteredNameError as e:
                            return e
                        except TreespecLoadError:
                            continue  # torch may read what treeclass refuses; look further
    except Exception:
        return None
    finally:
        if start is not None:
            with contextlib.suppress(Exception):
                target.seek(start)
    return None


def load(
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
) -> torch.export.ExportedProgram:
    """:func:`torch.export.load`, raising an error that names a class that is not registered.

    A ``.pt2`` archive can run code when torch loads it: torch unpickles parts of it
    (falling back to unrestricted unpickling for the example inputs), evaluates text from it
    as Python and imports modules it names; running the loaded program runs more of it. This
    function loads exactly as :func:`torch.export.load` does and adds no safety, so load only
    archives you trust. For data from elsewhere, use :func:`treeclass.save` /
    :func:`treeclass.load` (safetensors, no code) and :func:`treespec_loads`.

    When a class the program's inputs or outputs use is not registered in this process,
    torch fails with "We ran into an error when deserializing the saved file" (the cause goes
    to its warning log), or with the ``ModuleNotFoundError`` of unpickling an example input
    by module path. This function then reads the program's treespecs itself (never
    importing) and raises :class:`~treeclass.UnregisteredNameError` naming the name, without
    torch's log about that load and whatever the logging configuration. An example input of
    a missing class pickled by name raises the ``UnregisteredNameError`` of unpickling, which
    names it too. Otherwise torch's log about the load is logged after it, and torch's errors
    are raised as torch raises them.

    Args:
        f: the file name or binary file object written by :func:`torch.export.save` (or
            :func:`save`); a file object must be seekable.
        extra_files: as for :func:`torch.export.load`.
        expected_opset_version: as for :func:`torch.export.load`.

    Returns:
        The loaded :class:`torch.export.ExportedProgram`.

    Raises:
        UnregisteredNameError: the program's inputs or outputs use a serialized name that
            no class is registered under in this process; the message names it.
        RuntimeError: torch could not load the file for another reason; the cause torch
            logged is chained as ``__cause__``.

    Example:
        >>> import treeclass.torch as tct
        >>> tct.load("my_own_model.pt2")  # doctest: +SKIP

    .. versionadded:: 0.1.0
    """
    start = None if isinstance(f, (str, os.PathLike)) else f.tell()
    with _hold_torch_log() as held:
        try:
            return torch.export.load(
                f, extra_files=extra_files, expected_opset_version=expected_opset_version
            )
        except UnregisteredNameError:
            held.records.clear()  # unpickling an example input of a missing class: it is named
            raise
        except Exception as e:
            missing = _missing_in_archive(f, start)
            if missing is not None:
                held.records.clear()
                # torch's "error when deserializing" says nothing more; an import error does.
                raise missing from (None if isinstance(e, RuntimeError) else e)
            if isinstance(e, RuntimeError) and held.errors and e.__cause__ is None:
                raise e from held.errors[-1]
            raise


def save(
    ep: torch.export.ExportedProgram,
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    keep_example_inputs: bool = False,
) -> None:
    """:func:`torch.export.save`, leaving out the pickled example inputs by default.

    torch pickles ``ep.example_inputs`` into the file; running the program does not need
    them. Leaving them out keeps the file smaller and means loading it unpickles no inputs
    (a program loaded from it has ``example_inputs`` ``None``). It does not make the file
    safe to load from an untrusted source: a ``.pt2`` archive can run code when torch loads
    it. ``ep`` itself is not changed.

    Args:
        ep: the exported program.
        f: a file name or a binary file object.
        extra_files: as for :func:`torch.export.save`.
        keep_example_inputs: save ``ep.example_inputs`` as well, as torch does.

    Example:
        >>> import treeclass.torch as tct
        >>> tct.save(ep, "model.pt2")  # doctest: +SKIP
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


def allow_weights_only(allow: bool) -> bool:
    """Switch whether ``torch.load(weights_only=True)`` rebuilds treeclass instances by name.

    An instance of a class registered with a ``name=`` (and ``pickle_by_name=True``, the
    default) pickles as a call of ``treeclass._pickle.rebuild_by_name``. With treeclass and
    torch both imported, that global is on torch's weights-only allow-list for the whole
    process (as if by :func:`torch.serialization.add_safe_globals`), standing for a function
    that builds only a class registered under the pickled name in this process, without
    ``__init__``, and never imports: registering a named class declares it constructible from
    a weights-only pickle. ``allow_weights_only(False)`` takes the entry off the allow-list,
    so that such pickles are refused by ``torch.load(weights_only=True)`` (and
    :func:`torch.export.load` falls back to full unpickling for example inputs holding
    them); ``allow_weights_only(True)`` puts it back. To keep one class out, register it with
    ``pickle_by_name=False``.

    Args:
        allow: whether weights-only loading may rebuild instances pickled by name.

    Returns:
        Whether it was allowed before the call.

    Example:
        >>> import treeclass.torch as tct
        >>> tct.allow_weights_only(False)  # doctest: +SKIP
        True

    .. versionadded:: 0.1.0
    """
    from .._backends.torch import allow_pickled_instances

    return allow_pickled_instances(allow)
