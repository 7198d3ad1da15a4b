"""``torch.export`` save / load and treespec loading that name what is missing.

Importing this module imports torch. Nothing here is needed to *use* treeclass classes with
torch -- they are registered with torch's pytrees automatically -- but torch's own loaders hide
the reason a load failed: :func:`torch.export.load` only says "We ran into an error when
deserializing the saved file" (the cause goes to the warning log), and
:func:`torch.utils._pytree.treespec_loads` raises bare ``KeyError`` / ``JSONDecodeError``.
The functions here call torch's and raise treeclass errors that say what to do instead.

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

import logging
import os
import re
from typing import IO, Any, Final

import torch.export
import torch.utils._pytree as pytree

from ._errors import TreespecLoadError, UnregisteredNameError
from ._torch_state import StatefulTree, load_state_dict, state_dict

__all__ = ["StatefulTree", "load", "load_state_dict", "save", "state_dict", "treespec_loads"]

# torch 2.13.0 wording of the two "not registered" errors raised while loading a treespec
# (torch/utils/_pytree.py: _json_to_treespec and _namedtuple_deserialize).
_MISSING_NODE: Final = re.compile(r"^Deserializing (?P<name>.+) in pytree is not registered\.$")
_MISSING_NAMEDTUPLE: Final = re.compile(
    r"^Can't deserialize TreeSpec of namedtuple class (?P<name>.+) because we couldn't find"
)
# torch.export.load logs the real cause on this logger (torch 2.13.0: torch/export/__init__.py).
_EXPORT_LOGGER: Final = "torch.export"


def _missing_name(error: BaseException) -> str | None:
    """The serialized name a torch "not registered" error is about, or ``None``."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, UnregisteredNameError):
            return None
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


def treespec_loads(serialized: str) -> pytree.TreeSpec:
    """Load a treespec written by :func:`torch.utils._pytree.treespec_dumps`.

    The same as torch's ``treespec_loads`` (whose result is cached), with treeclass errors.

    Args:
        serialized: the JSON text.

    Returns:
        The :class:`torch.utils._pytree.TreeSpec`.

    Raises:
        UnregisteredNameError: the text names a node type that is not registered in this
            process; the message names it.
        TreespecLoadError: the text is not a treespec torch can read.
    """
    try:
        return pytree.treespec_loads(serialized)
    except UnregisteredNameError:
        raise
    except TreespecLoadError:
        raise
    except NotImplementedError as e:
        name = _missing_name(e)
        if name is None:
            raise TreespecLoadError(f"torch could not load this treespec: {e}") from e
        raise _unregistered(name, "this treespec") from e
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise TreespecLoadError(
            f"this text is not a torch treespec ({type(e).__name__}: {e}); pass what "
            "torch.utils._pytree.treespec_dumps wrote."
        ) from e


class _Capture(logging.Handler):
    """Keeps the exceptions torch logs (``exc_info=True``) while a load runs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


def load(
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
) -> torch.export.ExportedProgram:
    """:func:`torch.export.load`, raising an error that names a missing registration.

    Args:
        f: the file name or binary file object written by :func:`torch.export.save` (or
            :func:`save`).
        extra_files: as for :func:`torch.export.load`.
        expected_opset_version: as for :func:`torch.export.load`.

    Returns:
        The loaded :class:`torch.export.ExportedProgram`.

    Raises:
        UnregisteredNameError: the program's inputs or outputs use a serialized name that
            no class is registered under in this process; the message names it.
        RuntimeError: torch could not load the file for another reason; the real cause,
            which torch only logs, is chained as ``__cause__``.
    """
    logger = logging.getLogger(_EXPORT_LOGGER)
    capture = _Capture()
    logger.addHandler(capture)
    try:
        return torch.export.load(
            f, extra_files=extra_files, expected_opset_version=expected_opset_version
        )
    except RuntimeError as e:
        for cause in capture.errors:
            name = _missing_name(cause)
            if name is not None:
                raise _unregistered(name, "the saved program") from cause
        if capture.errors and e.__cause__ is None:
            raise e from capture.errors[-1]
        raise
    finally:
        logger.removeHandler(capture)


def save(
    ep: torch.export.ExportedProgram,
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    keep_example_inputs: bool = False,
) -> None:
    """:func:`torch.export.save`, leaving out the example inputs by default.

    torch pickles ``ep.example_inputs`` into the file. Instances of named treeclass classes
    pickle by their names (unless registered with ``pickle_by_name=False``), but anything else
    in them is pickled by module path, and the loading program unpickles it; the program
    itself only needs the stable serialized names. ``ep`` itself is not changed.

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
