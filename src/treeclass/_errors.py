"""The exceptions treeclass raises, and the helpers that quote values in their messages.

Every error is a :class:`TreeclassError`; each also subclasses the built-in exception that
fits it (``ValueError`` for a bad value or name, ``TypeError`` for a bad type), so callers
that catch the built-in keep working.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DISTRIBUTION",
    "EXTRA_PYTHON",
    "FileLoadError",
    "FileSaveError",
    "MissingDependencyError",
    "NameConflictError",
    "NotAPytreeClassError",
    "RebuildError",
    "RegistrationError",
    "RegistrationTypeError",
    "SchemaLockError",
    "StructureMismatchError",
    "TreeclassError",
    "TreeclassTypeError",
    "TreespecLoadError",
    "UnhashableStaticError",
    "UnnamedClassError",
    "UnregisteredNameError",
    "UnserializableStaticError",
    "brief",
    "install_hint",
    "missing_framework",
    "qualname",
    "report_failures",
    "superseded_class",
    "unhashable_static",
    "unregistered_name",
]


def brief(value: Any, limit: int) -> str:
    """``repr(value)`` cut to about ``limit`` characters, safe for any value (for messages)."""
    try:
        text = repr(value)
    except Exception:  # an int too long for str(), a deep nesting, a repr that raises
        text = f"<a {type(value).__name__} that cannot be shown>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def report_failures(messages: list[str], *, stacklevel: int) -> None:
    """Report failures that must not raise (a framework's import is under way).

    Each is logged at ``ERROR`` on the ``treeclass`` logger (``logging.getLogger("treeclass")``),
    for services that watch their logs rather than warnings, then warned as a
    ``RuntimeWarning`` (``stacklevel`` as for :func:`warnings.warn`, counted from the caller).
    All are logged before the first warning, so that every one is logged even where warnings
    are errors (``-W error``), and the first warning then raises.
    """
    if not messages:
        return
    import logging  # only on failure: ``import treeclass`` does not import logging
    import warnings

    logger = logging.getLogger("treeclass")
    for message in messages:
        logger.error("%s", message)
    for message in messages:
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)


def qualname(cls: object) -> str:
    """``module.QualName`` of a class, for messages (safe for any object)."""
    module = getattr(cls, "__module__", None) or "?"
    name = getattr(cls, "__qualname__", None) or brief(cls, 60)
    return f"{module}.{name}"


class TreeclassError(Exception):
    """Base class of every error treeclass raises (each shown under ``treeclass``, its home)."""

    __module__ = "treeclass"

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if cls.__module__ == __name__:  # (a subclass defined elsewhere keeps its module)
            cls.__module__ = "treeclass"


class RegistrationError(TreeclassError, ValueError):
    """A class could not be registered (bad options, a conflict, a framework refused it)."""


class RegistrationTypeError(TreeclassError, TypeError):
    """A class of the wrong kind was given to a registration function."""


class NotAPytreeClassError(RegistrationTypeError):
    """``register_dataclass`` got something that is neither a dataclass nor an attrs class."""


class NameConflictError(RegistrationError):
    """A serialized name is already taken by another class (or the class by another name)."""


class UnnamedClassError(TreeclassError, ValueError):
    """A class registered without ``name=`` was asked to be serialized."""


class UnserializableStaticError(TreeclassError, TypeError):
    """A static field holds a value that has no JSON form."""


class UnhashableStaticError(TreeclassError, TypeError):
    """A static field holds an unhashable value, so the tree's structure cannot be hashed."""


class TreeclassTypeError(TreeclassError, TypeError):
    """A treeclass function got an argument of the wrong type."""


class RebuildError(TreeclassError, TypeError):
    """Unflatten could not rebuild an instance (its class's own ``__setattr__`` refused)."""


class StructureMismatchError(TreeclassError, ValueError):
    """Two trees (or a tree and a spec) do not have the same structure."""


class TreespecLoadError(TreeclassError, ValueError):
    """A serialized treespec or auxdata could not be loaded."""


class UnregisteredNameError(TreespecLoadError):
    """A serialized document names a class that is not registered in this process."""


class FileLoadError(TreespecLoadError):
    """A file given to :func:`treeclass.load` is malformed, hostile or not loadable as asked."""


class FileSaveError(TreeclassError, ValueError):
    """A tree could not be written by :func:`treeclass.save` (a value the file cannot hold)."""


class SchemaLockError(TreeclassError, ValueError):
    """A schema lock (``treeclass schema dump``) could not be read, or was asked the wrong way."""


class MissingDependencyError(TreeclassError, ImportError):
    """An optional dependency that a treeclass feature needs is not installed."""


#: The name treeclass is installed under (``pip install stable-pytrees``); it imports as
#: ``treeclass``.
DISTRIBUTION: Final = "stable-pytrees"


#: The oldest Python each extra installs on, where it is newer than the package's own
#: (``Requires-Python``): pyproject.toml declares these extras' requirements only for
#: ``python_version >= ...`` (tests/test_release.py holds the two in step), and the install
#: hint says so on an older Python.
EXTRA_PYTHON: Final[dict[str, tuple[int, int]]] = {
    # mkdocs-material 9.8 and mkdocstrings-python 2.0 (the documentation site) need 3.11.
    "docs": (3, 11),
}


def install_hint(extra: str, python: tuple[int, int] | None = None) -> str:
    """The install command of an extra, quoted for a shell: ``pip install 'NAME[extra]'``.

    On a Python older than the extra needs (``python``: this one), the command is given for
    that Python.

    Example:
        >>> install_hint("torch")
        "pip install 'stable-pytrees[torch]'"
        >>> install_hint("docs", python=(3, 10))
        "pip install 'stable-pytrees[docs]' on Python 3.11 or newer (this is Python 3.10)"
    """
    command = f"pip install '{DISTRIBUTION}[{extra}]'"
    oldest = EXTRA_PYTHON.get(extra)
    if python is None:
        python = (sys.version_info[0], sys.version_info[1])
    if oldest is not None and python < oldest:
        return (
            f"{command} on Python {oldest[0]}.{oldest[1]} or newer "
            f"(this is Python {python[0]}.{python[1]})"
        )
    return command


def missing_framework(
    feature: str, extra: str, error: ImportError, *, otherwise: str = ""
) -> MissingDependencyError:
    """The error of a treeclass feature used without the framework its extra installs.

    ``otherwise`` is what else works (``", or load with to=None"``), said after the command.

    Example:
        >>> missing_framework("treeclass.torch", "torch", ModuleNotFoundError("No module 'torch'"))
        MissingDependencyError("treeclass.torch needs torch, which is not installed (No module \
'torch'); install it with pip install 'stable-pytrees[torch]'.")
    """
    return MissingDependencyError(
        f"{feature} needs {extra}, which is not installed ({error}); "
        f"install it with {install_hint(extra)}{otherwise}."
    )


# --- one builder per condition: every raise site of that condition uses it --------------------

_NAMES_SHOWN: Final = 20


def unregistered_name(
    names: str | Sequence[str], holder: str, note: str = "", *, by_path: bool = False
) -> UnregisteredNameError:
    """``holder`` (``"this treespec"``...) names classes no class is registered as here.

    ``note`` says more, right after the names; ``by_path``: the loader also looked the class
    up by the module path the pickle also holds, which failed.
    """
    listed = [names] if isinstance(names, str) else list(names)
    shown = ", ".join(brief(n, 200) for n in listed[:_NAMES_SHOWN])
    if len(listed) > _NAMES_SHOWN:
        shown += f" and {len(listed) - _NAMES_SHOWN} more"
    many = len(listed) > 1
    return UnregisteredNameError(
        f"{holder} uses the serialized name{'s' * many} {shown}{note}, which no class is "
        f"registered under in this process; import the "
        f"{'modules that define the classes' if many else 'module that defines the class'} "
        "(registered with name=... by pytree_dataclass, register_dataclass or "
        "register_namedtuple) before loading"
        + ("." if by_path else ": treeclass's loaders never import anything by themselves.")
    )


def superseded_class(label: str, name: str | None, doing: str) -> UnnamedClassError:
    """An instance of ``label`` is asked to be written (``doing``) after a class re-run.

    The class statement ran again, and ``name`` now belongs to the new class.
    """
    return UnnamedClassError(
        f"{label} was defined again (its class statement ran a second time, as in a notebook "
        f"or after importlib.reload), and the name {name!r} now belongs to the new class; this "
        "object is an instance of the old class, so rebuild the object from the current class "
        f"before {doing} it (copy.deepcopy still works)."
    )


def unhashable_static(label: str, field: str, value: Any, why: str) -> UnhashableStaticError:
    """Static field ``field`` of class ``label`` holds the unhashable ``value``.

    ``why``: what hashes static values there (a clause, before "so they must be hashable").
    """
    return UnhashableStaticError(
        f"static field {field!r} of {label} holds an unhashable {type(value).__qualname__} "
        f"({brief(value, 60)}); {why}, so they must be hashable. Use a tuple or frozenset "
        "instead of a list or set, a tuple of pairs instead of a dict, or make "
        f"{field!r} a data field (a child) if it holds arrays."
    )
